"""The yardstick of what s3bulk's engine costs: the smallest honest program that does the same
transfer with the same transport. A 20-line asyncio loop over obstore, 64 requests in flight, no
journal, no progress, no atomic landing, no retries, no key mapping beyond the prefix.

    python bench/obstore_loop.py download s3://bucket/prefix/ DIR
    python bench/obstore_loop.py upload DIR s3://bucket/prefix/
    python bench/obstore_loop.py copy s3://bucket/prefix/ s3://bucket/other/
    python bench/obstore_loop.py list s3://bucket/prefix/

Endpoint and credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
"""

from __future__ import annotations

import asyncio
import os
import sys

import obstore
from obstore.store import S3Store

IN_FLIGHT = 64


def store(bucket: str) -> S3Store:
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    return S3Store(
        bucket,
        endpoint=endpoint,
        region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True, "pool_max_idle_per_host": str(IN_FLIGHT)},
    )


def split(url: str) -> tuple[str, str]:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return bucket, prefix


async def bounded(jobs: list) -> None:
    semaphore = asyncio.Semaphore(IN_FLIGHT)

    async def one(job) -> None:
        async with semaphore:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


async def keys(source: S3Store, prefix: str) -> list[str]:
    return [meta["path"] for batch in obstore.list(source, prefix) for meta in batch]


async def download(url: str, directory: str) -> None:
    bucket, prefix = split(url)
    source = store(bucket)
    os.makedirs(directory, exist_ok=True)

    def job(key: str):
        async def run() -> None:
            data = await (await obstore.get_async(source, key)).bytes_async()
            with open(os.path.join(directory, key[len(prefix) :]), "wb") as handle:
                handle.write(data)

        return run

    await bounded([job(key) for key in await keys(source, prefix)])


async def upload(directory: str, url: str) -> None:
    bucket, prefix = split(url)
    target = store(bucket)
    names = sorted(os.listdir(directory))

    def job(name: str):
        async def run() -> None:
            with open(os.path.join(directory, name), "rb") as handle:
                await obstore.put_async(target, prefix + name, handle.read(), use_multipart=False)

        return run

    await bounded([job(name) for name in names])


async def copy(source_url: str, url: str) -> None:
    bucket, prefix = split(source_url)
    _, target = split(url)
    source = store(bucket)

    def job(key: str):
        return lambda: obstore.copy_async(source, key, target + key[len(prefix) :])

    await bounded([job(key) for key in await keys(source, prefix)])


def listing(url: str) -> None:
    bucket, prefix = split(url)
    out = sys.stdout
    for batch in obstore.list(store(bucket), prefix):
        out.write("".join(f"{meta['size']:>12} {meta['path']}\n" for meta in batch))


if __name__ == "__main__":
    verb, *places = sys.argv[1:]
    if verb == "list":
        listing(*places)
    else:
        asyncio.run({"download": download, "upload": upload, "copy": copy}[verb](*places))
    sys.stdout.flush()
    os._exit(0)  # obstore's runtime threads can abort a normal shutdown (docs/architecture.md)
