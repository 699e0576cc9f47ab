"""The native batch GETs (`_stores/gets.py`, native/src/gets.rs), against a real MinIO: each
caller gets its own object's bytes, file, time and MD5 whatever the key; a failed GET reads as
obstore's does; credentials botocore refreshed reach the next requests; and a cancelled GET
leaves no file behind, even when its body lands after the cancel."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest
from botocore.credentials import ReadOnlyCredentials
from conftest import S3BULK, Endpoint

from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error, classify
from s3bulk._stores.gets import GetError, Gets

ODD_KEYS = ["a b", "a%20b", "a+b", "q?x=1&y=2", "hash#tag", "[br]{ce}", "tilde~'quote'", "ünï/cödé", "x/y/z"]


def test_odd_keys_download_byte_for_byte(minio: Endpoint, bucket: str, tmp_path: Path) -> None:
    """Keys S3 allows but URLs and object_store's paths treat specially go through the batch GETs
    (bodies under 16 KiB) and land as the bytes stored under exactly that key."""
    client = minio.client()
    bodies = {key: os.urandom(100 + n) for n, key in enumerate(ODD_KEYS)}
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=f"odd/{key}", Body=body)
    done = subprocess.run(
        [*S3BULK, "cp", "-q", f"s3://{bucket}/odd/", "here/"],
        env=minio.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    landed = {
        str(path.relative_to(tmp_path / "here")): path.read_bytes()
        for path in (tmp_path / "here").rglob("*")
        if path.is_file()
    }
    assert landed == bodies


def test_each_caller_gets_its_own_outcome(
    aws_env: dict[str, str], minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """Many GETs at once, handed over in batches: each caller's file holds its own object's
    bytes with the time asked for, and its MD5; a missing key fails as not found, final."""
    client = minio.client()
    bodies = {f"k{n:03d}": os.urandom(n * 37) for n in range(1, 120)}
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)

    async def main() -> tuple[list[tuple[int, bytes | None]], BaseException]:
        gets = Gets(AwsSettings.from_env(), bucket, max_connections=8)
        try:
            results = await asyncio.gather(
                *(
                    gets.get_into(key, len(body) + 1, str(tmp_path / key), 1_000_000 + n, True)
                    for n, (key, body) in enumerate(bodies.items())
                )
            )
            with pytest.raises(GetError) as missing:
                await gets.get_into("absent", 10, str(tmp_path / "absent"), 0, True)
            return results, missing.value
        finally:
            gets.close()

    results, missing = asyncio.run(main())
    for n, ((key, body), (written, md5)) in enumerate(zip(bodies.items(), results, strict=True)):
        assert written == len(body)
        assert md5 == hashlib.md5(body).digest()
        assert (tmp_path / key).read_bytes() == body
        assert os.stat(tmp_path / key).st_mtime == 1_000_000 + n
    error = classify(missing)  # as obstore's FileNotFoundError for the same GET reads
    assert (
        isinstance(error, S3Error)
        and (error.status, error.code) == (404, "NoSuchKey")
        and not error.retryable
    )


def test_refreshed_credentials_reach_the_next_requests(
    aws_env: dict[str, str], bucket: str, minio: Endpoint, tmp_path: Path
) -> None:
    """The GETs sign with what `settings.credentials()` says when they are handed over: wrong
    credentials fail, and once botocore's chain answers with the right ones the next GET works."""
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"body")
    right = AwsSettings.from_env().credentials()
    assert right is not None
    answers = [ReadOnlyCredentials(right.access_key, "not-the-secret", None)]

    class Refreshing(AwsSettings):
        def credentials(self) -> ReadOnlyCredentials:
            return answers[-1]

    settings = Refreshing.from_env()

    async def main() -> tuple[BaseException, tuple[int, bytes | None]]:
        gets = Gets(settings, bucket, max_connections=2)
        try:
            with pytest.raises(GetError) as refused:
                await gets.get_into("k", 5, str(tmp_path / "first"), 0, False)
            answers.append(right)
            return refused.value, await gets.get_into("k", 5, str(tmp_path / "second"), 0, False)
        finally:
            gets.close()

    refused, outcome = asyncio.run(main())
    error = classify(refused)
    assert isinstance(error, S3Error) and error.status == 403
    assert outcome == (4, None)
    assert (tmp_path / "second").read_bytes() == b"body"


def test_a_cancelled_get_leaves_no_file(
    aws_env: dict[str, str], bucket: str, minio: Endpoint, tmp_path: Path
) -> None:
    """Cancelled after it was handed over, a GET still writes its file; that file is removed
    when its outcome comes back, and `close` removes those whose outcome never came."""
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"x" * 5000)

    async def main() -> None:
        gets = Gets(AwsSettings.from_env(), bucket, max_connections=2)
        try:
            late = asyncio.ensure_future(gets.get_into("k", 5001, str(tmp_path / "late"), 0, False))
            await asyncio.sleep(0)  # the caller's turn: queued
            await asyncio.sleep(0)  # the next turn: handed over
            late.cancel()
            while gets._waiting:  # the outcome of the cancelled GET comes back
                await asyncio.sleep(0.005)
            assert not (tmp_path / "late").exists()
            never = asyncio.ensure_future(gets.get_into("k", 5001, str(tmp_path / "never"), 0, False))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            never.cancel()
            for _ in range(2000):  # the loop blocked, so its outcome is not taken: written, not handed back
                if (tmp_path / "never").exists():
                    break
                time.sleep(0.005)
            assert (tmp_path / "never").exists()
        finally:
            gets.close()
        assert not (tmp_path / "never").exists()

    asyncio.run(main())
