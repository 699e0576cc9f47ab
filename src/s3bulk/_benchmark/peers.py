"""The Python peers the seed articles used, written the way their users write them, so `bench`
can measure them next to s3bulk's engines in the same run:

    python -m s3bulk._benchmark.peers boto3-threads download BUCKET PREFIX DEST

- boto3-threads:   one client, ThreadPoolExecutor() with its default size (cores + 4)
- boto3-processes: ProcessPoolExecutor() (one process per core), a client per process
- aioboto3:        asyncio with a semaphore of 64
- paginator:       boto3's ListObjectsV2 paginator, one page after another (listing only)
Downloads use download_file and uploads upload_file (boto3's managed transfers, as users call
them); copies use copy_object. Endpoint and credentials come from the standard AWS variables.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

PEERS = ("boto3-threads", "boto3-processes", "aioboto3", "paginator")
_client: Any = None


def _boto3_client() -> Any:
    global _client
    if _client is None:
        import boto3
        from botocore.config import Config

        _client = boto3.client("s3", config=Config(max_pool_connections=64))
    return _client


def _keys(bucket: str, prefix: str) -> list[str]:
    paginator = _boto3_client().get_paginator("list_objects_v2")
    return [
        entry["Key"]
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
        for entry in page.get("Contents", [])
    ]


def _download(bucket: str, prefix: str, destination: str, key: str) -> None:
    target = os.path.join(destination, key[len(prefix) :])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    _boto3_client().download_file(bucket, key, target)


def _upload(bucket: str, prefix: str, source: str, name: str) -> None:
    _boto3_client().upload_file(os.path.join(source, name), bucket, prefix + name)


def _copy(bucket: str, prefix: str, destination: str, key: str) -> None:
    target = destination + key[len(prefix) :]
    _boto3_client().copy_object(Bucket=bucket, Key=target, CopySource={"Bucket": bucket, "Key": key})


def _pool(kind: str) -> Executor:
    return ThreadPoolExecutor() if kind == "boto3-threads" else ProcessPoolExecutor()


def run_boto3(kind: str, workload: str, bucket: str, prefix: str, other: str) -> int:
    if workload == "list":
        return len(_keys(bucket, prefix))
    names = sorted(os.listdir(other)) if workload == "upload" else _keys(bucket, prefix)
    action: Callable[..., None] = {"download": _download, "upload": _upload, "copy": _copy}[workload]
    with _pool(kind) as pool:
        for _ in pool.map(
            action,
            [bucket] * len(names),
            [prefix] * len(names),
            [other] * len(names),
            names,
            chunksize=16 if kind == "boto3-processes" else 1,
        ):
            pass
    return len(names)


async def run_aioboto3(workload: str, bucket: str, prefix: str, other: str) -> int:
    import aioboto3

    limit = asyncio.Semaphore(64)
    async with aioboto3.Session().client("s3") as client:
        if workload == "upload":
            names = sorted(os.listdir(other))
        else:
            names = []
            async for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                names.extend(entry["Key"] for entry in page.get("Contents", []))
        if workload == "list":
            return len(names)

        async def one(name: str) -> None:
            async with limit:
                if workload == "download":
                    target = os.path.join(other, name[len(prefix) :])
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    await client.download_file(bucket, name, target)
                elif workload == "upload":
                    await client.upload_file(os.path.join(other, name), bucket, prefix + name)
                else:
                    source = {"Bucket": bucket, "Key": name}
                    await client.copy_object(
                        Bucket=bucket, Key=other + name[len(prefix) :], CopySource=source
                    )

        await asyncio.gather(*(one(name) for name in names))
        return len(names)


def main(argv: list[str]) -> int:
    kind, workload, bucket, prefix = argv[:4]
    other = argv[4] if len(argv) > 4 else ""
    if kind == "aioboto3":
        count = asyncio.run(run_aioboto3(workload, bucket, prefix, other))
    else:
        count = run_boto3(kind, workload, bucket, prefix, other)
    print(count)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
