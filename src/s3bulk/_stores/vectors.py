"""A small client for S3 Vectors' REST-JSON API over signed HTTP (`stores.http`, service
`s3vectors`) and orjson.

Every operation is a POST of a JSON body to `/{Operation}` (botocore's model,
`botocore/data/s3vectors/*/service-2.json`, is the reference for shapes and errors). The body of
a PutVectors is built by the caller (`s3bulk._vectors.payload`) as bytes: building it is the CPU
cost the seed measured (boto3 spends 0.6-0.7 s per 500 x 1024 batch), so it must never pass
through botocore's serialiser. Errors become S3Error with the service's exception name, and each
call is retried by the one retry policy (`stores.retry`): 429 TooManyRequests and 503
ServiceUnavailable count as throttling, which the caller's token buckets hear of too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import orjson

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, S3Error
from s3bulk._stores.http import SignedHttp
from s3bulk._stores.retry import Meter, Retrier, RetryPolicy

T = TypeVar("T")

MAX_LIST_RESULTS = 1000  # vectors in one ListVectors page
MAX_SEGMENTS = 16  # parallel ListVectors segments of one index


def vectors_endpoint(settings: AwsSettings) -> str:
    """The configured one (variables, the profile), else AWS's regional endpoint."""
    return settings.resolved_vectors_endpoint


class VectorsClient(SignedHttp):
    """One per process and event loop; requests counted by operation, signing time as "build"."""

    service: ClassVar[str] = "s3vectors"

    def __init__(
        self,
        settings: AwsSettings,
        *,
        max_connections: int = 64,
        meter: Meter | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        super().__init__(settings, vectors_endpoint(settings), max_connections=max_connections, meter=meter)
        self.retry = Retrier(policy or RetryPolicy(), self.meter)

    @classmethod
    def for_worker(cls, settings: AwsSettings, retrier: Retrier, connections: int) -> VectorsClient:
        """A job worker's client: its requests counted, and retried, as the worker's retrier says."""
        return cls(settings, max_connections=connections, meter=retrier.meter, policy=retrier.policy)

    def error(self, status: int, headers: dict[str, str], payload: bytes, what: str) -> S3Error:
        error_type = next(
            (value for name, value in headers.items() if name.lower() == "x-amzn-errortype"), ""
        )
        return _error(what, status, error_type, payload)

    async def call_once(
        self,
        operation: str,
        body: bytes | bytearray | memoryview | dict[str, Any],
        body_sha256: str | None = None,
    ) -> dict[str, Any]:
        """POST one operation, once: error answers raise S3Error (retryable, throttled as the
        service says). For a caller whose every attempt must pass its own rate limits first;
        `body_sha256`, when the caller hashed the body already."""
        reply = await self.post_once(operation, body, body_sha256)
        return orjson.loads(reply) if reply else {}

    async def post_once(
        self,
        operation: str,
        body: bytes | bytearray | memoryview | dict[str, Any],
        body_sha256: str | None = None,
    ) -> bytes:
        """POST one operation, once; its answer's JSON as it came."""
        payload = orjson.dumps(body) if isinstance(body, dict) else body
        url = f"{self.endpoint}/{operation}"
        headers = {"Content-Type": "application/json"}
        _, _, reply = await self.send(
            operation, "POST", url, headers=headers, body=payload, body_sha256=body_sha256
        )
        if b'"__type"' in reply[:256]:  # an error's body in a 200: no answer at all
            raise _error_in_ok(operation, reply)
        return reply

    async def call(self, operation: str, body: bytes | bytearray | dict[str, Any]) -> dict[str, Any]:
        """POST one operation, retried by the one policy."""
        result: dict[str, Any] = await self.retry(lambda: self.call_once(operation, body), operation)
        return result

    async def post(self, operation: str, body: bytes | bytearray | dict[str, Any]) -> bytes:
        """POST one operation, retried by the one policy; its answer's JSON as it came."""
        result: bytes = await self.retry(lambda: self.post_once(operation, body), operation)
        return result

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

    async def put_vectors(self, body: bytes | bytearray) -> None:
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

    async def list_pages(
        self,
        bucket: str,
        index: str,
        *,
        segments: int = 1,
        segment: int = 0,
        token: str | None = None,
        data: bool = False,
        metadata: bool = False,
        page: int = MAX_LIST_RESULTS,
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str | None]]:
        """One segment of an index's ListVectors, page by page from `token` on: (vectors, the
        token that goes on after them; None at the end). A token the service gave before in
        this walk raises: the same page again would loop forever (or count twice)."""

        async def read(reply: bytes) -> tuple[list[dict[str, Any]], str | None]:
            found = orjson.loads(reply) if reply else {}
            if not isinstance(found.get("vectors"), list):
                raise _not_a_page(reply)
            return found["vectors"], found.get("nextToken") or None

        walk = self._walk(bucket, index, segments, segment, token, data, metadata, page, read)
        async for vectors, following in walk:
            yield vectors, following

    async def list_rows(
        self,
        bucket: str,
        index: str,
        dimension: int,
        *,
        segments: int = 1,
        segment: int = 0,
        token: str | None = None,
        metadata: bool = True,
    ) -> AsyncIterator[tuple[ListedRows, str | None]]:
        """As `list_pages` with data, each page read natively (s3bulk_native.list_vectors_page,
        in a thread without the GIL, the floats straight to float32: 66 ms a page of 1,000 x
        1024 where orjson and numpy took 103 ms under it): keys, the vectors as float32 bytes
        and each vector's metadata as the JSON text it came as. What export, copy and query's
        recall list with."""
        import s3bulk_native

        async def read(reply: bytes) -> tuple[ListedRows, str | None]:
            # in a thread, the GIL released: another segment's page is read on the other core
            try:
                page = await asyncio.to_thread(s3bulk_native.list_vectors_page, reply, dimension)
            except ValueError:
                raise _not_a_page(reply) from None
            keys, data, texts, following = page
            return ListedRows(keys, data or b"", texts), following

        walk = self._walk(bucket, index, segments, segment, token, True, metadata, MAX_LIST_RESULTS, read)
        async for rows, following in walk:
            yield rows, following

    async def _walk(
        self,
        bucket: str,
        index: str,
        segments: int,
        segment: int,
        token: str | None,
        data: bool,
        metadata: bool,
        page: int,
        read: Callable[[bytes], Awaitable[tuple[T, str | None]]],
    ) -> AsyncIterator[tuple[T, str | None]]:
        seen: set[str] = set()
        while True:
            body: dict[str, Any] = {"vectorBucketName": bucket, "indexName": index, "maxResults": page}
            if segments > 1:
                body |= {"segmentCount": segments, "segmentIndex": segment}
            if data:
                body["returnData"] = True
            if metadata:
                body["returnMetadata"] = True
            if token:
                body["nextToken"] = token
            found, token = await read(await self.post("ListVectors", body))
            if token is not None:
                if token in seen:
                    raise S3Error(
                        200,
                        "RepeatedToken",
                        f"ListVectors of {bucket}/{index} (segment {segment} of {segments}) gave a "
                        "continuation token it had given before: the listing would never end",
                        "ListVectors",
                    )
                seen.add(token)
            yield found, token
            if token is None:
                return


@dataclass
class ListedRows:
    """A ListVectors page read natively: keys, their float32 rows (bytes, row after row) and
    each one's metadata as JSON text (None without)."""

    keys: list[str]
    data: bytes
    metadata: list[str | None]


def _error_in_ok(operation: str, reply: bytes) -> ItemError:
    """A 200 whose body is an error's (`__type`, as S3 Vectors' errors carry it): taken as an
    answer, a ListVectors page of it was the segment's end (an export marked finished with part
    of the index, a count short). Retryable, as the answer of a service in trouble."""
    error = _error(operation, 200, "", reply)
    return ItemError(f"{error}: the service answered 200 with an error's body", retryable=True)


def _not_a_page(reply: bytes) -> ItemError:
    """A 200 to ListVectors that is not a page (no `vectors`, which every page has)."""
    seen = reply[:80].decode(errors="replace").strip() or "an empty body"
    return ItemError(f"ListVectors: the service answered 200 with {seen!r}, not a page", retryable=True)


def _error(operation: str, status: int, error_type: str, reply: bytes) -> S3Error:
    try:
        data = orjson.loads(reply) if reply else {}
    except orjson.JSONDecodeError:
        data = {}
    code = (error_type or str(data.get("__type", "")) or str(data.get("code", ""))).split(":")[0]
    code = code.rsplit("#", 1)[-1]
    message = str(data.get("message") or data.get("Message") or "")
    return S3Error(status, code, message, operation)
