"""A small client for S3 Vectors' REST-JSON API: botocore's SigV4 signer (service `s3vectors`),
aiohttp and orjson.

Every operation is a POST of a JSON body to `/{Operation}` (botocore's model,
`botocore/data/s3vectors/*/service-2.json`, is the reference for shapes and errors). The body of
a PutVectors is built by the caller (`s3bulk.vectors.payload`) as bytes: building it is the CPU
cost the seed measured (boto3 spends 0.6-0.7 s per 500 x 1024 batch), so it must never pass
through botocore's serialiser. Errors become S3Error with the service's exception name, so the
engine's retries and adaptive limit treat 429 TooManyRequests / 503 ServiceUnavailable as
throttling.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import aiohttp
import orjson
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from s3bulk.config import AwsSettings, read_timeout_seconds
from s3bulk.errors import ItemError, S3Error


def vectors_endpoint(settings: AwsSettings) -> str:
    """The configured one (variables, the profile), else AWS's regional endpoint."""
    return settings.resolved_vectors_endpoint


class VectorsClient:
    """One per process and event loop; requests counted by operation, signing time as "build"."""

    def __init__(self, settings: AwsSettings, *, max_connections: int = 64) -> None:
        self.settings = settings
        self.endpoint = vectors_endpoint(settings)
        self.max_connections = max_connections
        self.requests: collections.Counter[str] = collections.Counter()
        self.stage_seconds: collections.Counter[str] = collections.Counter()
        self._session: aiohttp.ClientSession | None = None

    def count_into(self, stats: Any) -> None:
        self.requests = stats.requests
        self.stage_seconds = stats.stage_seconds

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.max_connections, ssl=None if self.settings.verify_ssl else False
            )
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=read_timeout_seconds())
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._session

    def _sign(self, url: str, body: bytes) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        credentials = self.settings.credentials()
        if credentials is None:
            return headers
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(credentials, "s3vectors", self.settings.resolved_region).add_auth(request)
        return dict(request.headers.items())

    async def call(self, operation: str, body: bytes | dict[str, Any]) -> dict[str, Any]:
        """POST one operation; error answers raise S3Error (retryable/throttled as the service says)."""
        began = time.perf_counter()
        payload = body if isinstance(body, bytes) else orjson.dumps(body)
        url = f"{self.endpoint}/{operation}"
        headers = self._sign(url, payload)
        self.stage_seconds["build"] += time.perf_counter() - began
        self.requests[operation] += 1
        try:
            async with self._http().post(url, data=payload, headers=headers) as response:
                reply = await response.read()
                status = response.status
                error_type = response.headers.get("x-amzn-ErrorType", "")
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            raise ItemError(f"{operation}: {type(exc).__name__}: {exc}", retryable=True) from None
        if status >= 300:
            raise _error(operation, status, error_type, reply)
        return orjson.loads(reply) if reply else {}

    async def create_vector_bucket(self, bucket: str) -> None:
        await self.call("CreateVectorBucket", {"vectorBucketName": bucket})

    async def create_index(
        self,
        bucket: str,
        index: str,
        dimension: int,
        metric: str = "cosine",
        non_filterable: tuple[str, ...] = (),
    ) -> None:
        body: dict[str, Any] = {
            "vectorBucketName": bucket,
            "indexName": index,
            "dataType": "float32",
            "dimension": dimension,
            "distanceMetric": metric,
        }
        if non_filterable:
            body["metadataConfiguration"] = {"nonFilterableMetadataKeys": list(non_filterable)}
        await self.call("CreateIndex", body)

    async def get_index(self, bucket: str, index: str) -> dict[str, Any]:
        reply = await self.call("GetIndex", {"vectorBucketName": bucket, "indexName": index})
        found: dict[str, Any] = reply.get("index", reply)
        return found

    async def put_vectors(self, body: bytes) -> None:
        await self.call("PutVectors", body)

    async def get_vectors(self, bucket: str, index: str, keys: list[str]) -> list[dict[str, Any]]:
        body = {
            "vectorBucketName": bucket,
            "indexName": index,
            "keys": keys,
            "returnData": True,
            "returnMetadata": True,
        }
        vectors: list[dict[str, Any]] = (await self.call("GetVectors", body)).get("vectors", [])
        return vectors


def _error(operation: str, status: int, error_type: str, reply: bytes) -> S3Error:
    try:
        data = orjson.loads(reply) if reply else {}
    except orjson.JSONDecodeError:
        data = {}
    code = (error_type or str(data.get("__type", "")) or str(data.get("code", ""))).split(":")[0]
    code = code.rsplit("#", 1)[-1]
    message = str(data.get("message") or data.get("Message") or "")
    return S3Error(status, code, message, operation)
