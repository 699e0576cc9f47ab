"""The lean reference for `vectors put`: one process, the same body technique as s3bulk (orjson
straight from numpy), botocore's SigV4 signer, aiohttp, 8 requests in flight; no engine, no
journal, no retries, no rate control.

    python bench/vectors_lean.py DIR_OF_PARQUET BUCKET INDEX ENDPOINT
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import aiohttp
import orjson
import pyarrow.parquet as pq
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

IN_FLIGHT = 8
BATCH = 500


async def load(directory: str, bucket: str, index: str, endpoint: str) -> None:
    credentials = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    signer = SigV4Auth(credentials, "s3vectors", os.environ.get("AWS_REGION", "us-east-1"))
    slots = asyncio.Semaphore(IN_FLIGHT)
    url = f"{endpoint}/PutVectors"
    async with aiohttp.ClientSession() as session:

        async def send(body: bytes) -> None:
            try:
                request = AWSRequest("POST", url, data=body, headers={"Content-Type": "application/json"})
                signer.add_auth(request)
                async with session.post(url, data=body, headers=dict(request.headers)) as reply:
                    await reply.read()
                    reply.raise_for_status()
            finally:
                slots.release()

        sent = []
        for path in sorted(Path(directory).glob("*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH):
                keys = batch.column("key").to_pylist()
                column = batch.column("vector")
                vectors = column.flatten().to_numpy().reshape(len(keys), column.type.list_size)
                entries = [
                    {"key": key, "data": {"float32": row}} for key, row in zip(keys, vectors, strict=True)
                ]
                body = {"vectorBucketName": bucket, "indexName": index, "vectors": entries}
                await slots.acquire()
                sent.append(asyncio.create_task(send(orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY))))
        await asyncio.gather(*sent)


if __name__ == "__main__":
    asyncio.run(load(*sys.argv[1:5]))
