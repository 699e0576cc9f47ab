"""The native batch GETs (`_stores/gets.py`, native/src/gets.rs), against a real MinIO: each
caller gets its own object's bytes, file, time and MD5 whatever the key; a failed GET reads as
the signed client's does; a whole object is checked by the checksum its answer carries; a right
file lands without waiting for the event loop, a wrong one or one that
would replace someone else's does not; credentials botocore refreshed reach the next requests;
and a cancelled GET leaves no file behind, even when its body lands after the cancel."""

from __future__ import annotations

import asyncio
import hashlib
import os
import select
import subprocess
import time
from pathlib import Path

import awscrt.checksums
import boto3
import pytest
from botocore.config import Config
from botocore.credentials import ReadOnlyCredentials
from conftest import S3BULK, Endpoint, Hostile

from s3bulk._benchmark.network import ToxiproxyServer
from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, S3Error, classify
from s3bulk._stores.gets import Gets, Landing, Outcome
from s3bulk._stores.s3 import S3Client
from s3bulk.testing.hostile import FlipByte


def native_gets(bucket: str, max_connections: int, settings: AwsSettings | None = None) -> Gets:
    return Gets(S3Client(settings or AwsSettings.from_env()), bucket, max_connections=max_connections)


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
    bytes with the time asked for, and its MD5 when asked (bodies from 16 KiB are hashed side by
    side on the writer thread, some of them asked for none); a missing key fails as not found,
    final."""
    client = minio.client()
    bodies = {f"k{n:03d}": os.urandom(n * 37 * (1 if n % 4 else 997)) for n in range(1, 120)}
    bodies |= {f"e{n:02d}": os.urandom(300_000) for n in range(20)}  # as long as each other, in lanes
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)

    async def main() -> tuple[list[Outcome], BaseException]:
        gets = native_gets(bucket, 8)
        try:
            results = await asyncio.gather(
                *(
                    gets.get_into(
                        key, len(body) + 1, str(tmp_path / key), 1_000_000 + n, hash=n % 3 > 0, check=False
                    )
                    for n, (key, body) in enumerate(bodies.items())
                )
            )
            with pytest.raises(S3Error) as missing:
                await gets.get_into("absent", 10, str(tmp_path / "absent"), 0, hash=True, check=True)
            return results, missing.value
        finally:
            gets.close()

    results, missing = asyncio.run(main())
    for n, ((key, body), got) in enumerate(zip(bodies.items(), results, strict=True)):
        assert got.written == len(body) and not got.landed  # no landing asked for
        assert got.md5 == (hashlib.md5(body).digest() if n % 3 else None)
        assert (tmp_path / key).read_bytes() == body
        assert os.stat(tmp_path / key).st_mtime == 1_000_000 + n
    error = classify(missing)
    assert (
        isinstance(error, S3Error)
        and (error.status, error.code) == (404, "NoSuchKey")
        and not error.retryable
    )


@pytest.mark.parametrize("size", [3000, 1024**2 + 7], ids=["small", "writer-thread"])
def test_a_right_file_lands_without_waiting_for_the_event_loop(
    aws_env: dict[str, str], bucket: str, minio: Endpoint, tmp_path: Path, size: int
) -> None:
    """A process killed between writing a file and landing it leaves its temporary file behind,
    so the native thread lands a file whose size and MD5 are right at once: with the event loop
    blocked, the target is there and the temporary file gone. A file that is not right, or whose
    target appeared meanwhile, stays where it was written, for the storage seam to say why; one
    that replaces the file that was there before replaces it."""
    body = os.urandom(size)
    minio.client().put_object(Bucket=bucket, Key="k", Body=body)
    md5 = hashlib.md5(body).digest()
    (tmp_path / "theirs").write_bytes(b"someone else's")
    (tmp_path / "old").write_bytes(b"the version before")
    asked = {
        "new": Landing(str(tmp_path / "new"), False, len(body), md5),
        "unchecked": Landing(str(tmp_path / "unchecked"), False, len(body), None),
        "wrong": Landing(str(tmp_path / "wrong"), False, len(body), bytes(16)),
        "short": Landing(str(tmp_path / "short"), False, len(body) + 1, md5),
        "theirs": Landing(str(tmp_path / "theirs"), False, len(body), md5),
        "old": Landing(str(tmp_path / "old"), True, len(body), md5),
    }

    async def main() -> dict[str, bool]:
        gets = native_gets(bucket, 4)
        try:
            calls = {
                name: asyncio.ensure_future(
                    gets.get_into(
                        "k",
                        len(body) + 1,
                        str(tmp_path / f"{name}.part"),
                        0,
                        hash=True,
                        check=False,
                        landing=landing,
                    )
                )
                for name, landing in asked.items()
            }
            await asyncio.sleep(0)  # queued
            await asyncio.sleep(0)  # handed over
            for _ in range(2000):  # the loop blocked: no outcome is taken meanwhile
                if (tmp_path / "new").exists() and (tmp_path / "old").read_bytes() == body:
                    break
                time.sleep(0.005)
            assert (tmp_path / "new").read_bytes() == body and not (tmp_path / "new.part").exists()
            return {name: (await call).landed for name, call in calls.items()}
        finally:
            gets.close()

    landed = asyncio.run(main())
    assert landed == {
        "new": True,
        "unchecked": True,
        "wrong": False,
        "short": False,
        "theirs": False,
        "old": True,
    }
    for name in ("new", "unchecked", "old"):
        assert (tmp_path / name).read_bytes() == body and not (tmp_path / f"{name}.part").exists()
    for name in ("wrong", "short"):
        assert not (tmp_path / name).exists() and (tmp_path / f"{name}.part").read_bytes() == body
    assert (tmp_path / "theirs").read_bytes() == b"someone else's"
    assert (tmp_path / "theirs.part").read_bytes() == body


def test_a_body_cut_short_fails_and_leaves_no_file(
    aws_env: dict[str, str], bucket: str, minio: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body streamed to the writer thread whose connection is cut after its first chunks were
    written fails as a retryable GET, and the part written is removed: the item is fetched again,
    maybe into the same path, and a job that stops leaves nothing half-written."""
    body = os.urandom(2 * 1024**2)
    minio.client().put_object(Bucket=bucket, Key="k", Body=body)
    with ToxiproxyServer() as proxy:
        port = proxy.proxy("cut", f"127.0.0.1:{minio.server.port}")
        proxy.toxic("cut", "limit_data", "downstream", bytes=600_000)  # headers, then part of the body
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")

        async def main() -> BaseException:
            gets = native_gets(bucket, 2)
            try:
                with pytest.raises(ItemError) as cut:
                    await gets.get_into(
                        "k", len(body) + 1, str(tmp_path / "k.part"), 0, hash=True, check=True
                    )
                return cut.value
            finally:
                gets.close()

        cut = asyncio.run(main())
    assert classify(cut).retryable
    assert list(tmp_path.iterdir()) == []


def test_ranges_are_written_at_their_offsets_into_the_callers_file(
    aws_env: dict[str, str], bucket: str, minio: Endpoint, tmp_path: Path
) -> None:
    """A large object's ranges, fetched at once, each land at their own offset in the one file
    the caller made, and the file is the object. A range of a file the caller has removed (a
    download stopped) fails as the missing file and does not make it again: nothing is left
    behind."""
    body = os.urandom(5 * 1024**2 + 12_345)
    minio.client().put_object(Bucket=bucket, Key="big", Body=body)
    path = tmp_path / "big.part"
    path.write_bytes(b"")
    step = 1024**2

    async def main() -> tuple[list[Outcome], OSError]:
        gets = native_gets(bucket, 8)
        try:
            ranges = [(start, min(start + step, len(body))) for start in range(0, len(body), step)]
            written = await asyncio.gather(
                *(gets.get_range_into("big", start, end, str(path)) for start, end in reversed(ranges))
            )
            with pytest.raises(OSError) as gone:
                await gets.get_range_into("big", 0, step, str(tmp_path / "removed.part"))
            return written, gone.value
        finally:
            gets.close()

    written, gone = asyncio.run(main())
    assert sum(got.written for got in written) == len(body) and path.read_bytes() == body
    assert gone.filename == str(tmp_path / "removed.part") and not (tmp_path / "removed.part").exists()


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

    async def main() -> tuple[BaseException, Outcome]:
        gets = native_gets(bucket, 2, settings)
        try:
            with pytest.raises(S3Error) as refused:
                await gets.get_into("k", 5, str(tmp_path / "first"), 0, hash=False, check=False)
            answers.append(right)
            return refused.value, await gets.get_into(
                "k", 5, str(tmp_path / "second"), 0, hash=False, check=False
            )
        finally:
            gets.close()

    refused, outcome = asyncio.run(main())
    error = classify(refused)
    assert isinstance(error, S3Error) and error.status == 403
    assert outcome == (4, None, None, False, None)
    assert (tmp_path / "second").read_bytes() == b"body"


@pytest.mark.parametrize("size", [5000, 1024**2], ids=["small", "writer-thread"])
def test_a_cancelled_get_leaves_no_file(
    aws_env: dict[str, str], bucket: str, minio: Endpoint, tmp_path: Path, size: int
) -> None:
    """A GET cancelled after it was handed over writes no file from then on, so none is left
    when its outcome comes back (a worker whose driver was killed exits right after cancelling
    its items, GETs still running); and `close` removes the files of GETs whose outcome never came."""
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"x" * size)

    async def main() -> None:
        gets = native_gets(bucket, 2)
        try:
            late = asyncio.ensure_future(
                gets.get_into("k", size + 1, str(tmp_path / "late"), 0, hash=False, check=False)
            )
            await asyncio.sleep(0)  # the caller's turn: queued
            await asyncio.sleep(0)  # the next turn: handed over
            # Outcomes are this test's to see from here: the loop's reader would take one that
            # came before the cancel's turn ended (a GET that finished while the loop was busy).
            asyncio.get_running_loop().remove_reader(gets._native.fileno())
            late.cancel()
            await asyncio.wait([late])
            # the loop blocked from here: the outcome of the cancelled GET comes, after any write
            readable, _, _ = select.select([gets._native.fileno()], [], [], 30)
            assert readable
            assert not (tmp_path / "late").exists()
            never = asyncio.ensure_future(
                gets.get_into("k", size + 1, str(tmp_path / "never"), 0, hash=False, check=False)
            )
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


def test_a_get_cancelled_after_its_outcome_came_is_cancelled(
    aws_env: dict[str, str], bucket: str, minio: Endpoint, tmp_path: Path
) -> None:
    """A cancel that comes in the turn an outcome was handed over, before the caller resumed,
    ends the caller cancelled, not with another error: the worker of a killed driver cancels
    every item, and an item that swallowed its cancel went on taking work, so that worker never
    exited (tests/integration/test_journal.py, one run in four on a 2-core machine)."""
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"x" * 5000)

    async def main() -> None:
        gets = native_gets(bucket, 2)
        try:
            caller = asyncio.ensure_future(
                gets.get_into("k", 5001, str(tmp_path / "k"), 0, hash=False, check=False)
            )
            await asyncio.sleep(0)  # queued
            await asyncio.sleep(0)  # handed over
            readable, _, _ = select.select([gets._native.fileno()], [], [], 30)  # the outcome waits
            assert readable
            gets._hand_over()  # what the loop's reader does: the caller's future gets its outcome
            caller.cancel()  # and then, before the caller resumed, the cancel
            with pytest.raises(asyncio.CancelledError):
                await caller
        finally:
            gets.close()

    asyncio.run(main())


@pytest.mark.parametrize("size", [3000, 1024**2 + 7], ids=["small", "writer-thread"])
def test_a_whole_object_is_checked_by_the_checksum_its_answer_carries(
    aws_env: dict[str, str], hostile: Hostile, bucket: str, tmp_path: Path, size: int
) -> None:
    """Asked for in checksum mode, an object that carries a full-object checksum is checked by
    it, and not hashed with MD5 as well: it lands when its bytes match, and not when a byte was
    flipped on the way, though its size is right. An object that carries none (put without one)
    is hashed with MD5 for its ETag, as before; nor does a composite checksum (of the parts'
    values) check a multipart object's bytes."""
    body = os.urandom(size)
    md5 = hashlib.md5(body).digest()
    plain = boto3.client(
        "s3",
        endpoint_url=aws_env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        config=Config(request_checksum_calculation="when_required"),
    )
    plain.put_object(Bucket=bucket, Key="crc64", Body=body, ChecksumAlgorithm="CRC64NVME")
    plain.put_object(Bucket=bucket, Key="sha1", Body=body, ChecksumAlgorithm="SHA1")
    plain.put_object(Bucket=bucket, Key="none", Body=body)
    assert "ChecksumCRC32" not in plain.head_object(Bucket=bucket, Key="none", ChecksumMode="ENABLED")
    hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket, key="flipped")
    plain.put_object(Bucket=bucket, Key="flipped", Body=body, ChecksumAlgorithm="CRC64NVME")
    settings = AwsSettings.from_env(endpoint_url=hostile.server.endpoint)

    async def main() -> dict[str, Outcome]:
        gets = native_gets(bucket, 4, settings)
        try:
            asked = {
                name: gets.get_into(
                    name,
                    size + 1,
                    str(tmp_path / f"{name}.part"),
                    0,
                    hash=True,
                    check=True,
                    landing=Landing(str(tmp_path / name), False, size, md5),
                )
                for name in ("crc64", "sha1", "none", "flipped")
            }
            return dict(zip(asked, await asyncio.gather(*asked.values()), strict=True))
        finally:
            gets.close()

    got = asyncio.run(main())
    assert {name: outcome[:4] for name, outcome in got.items()} == {
        "crc64": (size, None, True, True),
        "sha1": (size, None, True, True),
        "none": (size, md5, None, True),
        "flipped": (size, None, False, False),
    }
    assert got["crc64"].checksum == awscrt.checksums.crc64nvme(body).to_bytes(8, "big")
    for name in ("crc64", "sha1", "none"):
        assert (tmp_path / name).read_bytes() == body
    assert not (tmp_path / "flipped").exists()


def test_a_composite_checksum_leaves_the_check_to_the_etag(
    aws_env: dict[str, str], minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """A multipart object uploaded with SHA-256 carries the SHA of its parts' SHAs ("…-2"),
    which its bytes cannot be checked by: no verdict, and the file is hashed in its parts as it
    is written, for the ETag."""
    client = minio.client()
    parts = [os.urandom(5 * 1024**2), os.urandom(1000)]
    upload = client.create_multipart_upload(Bucket=bucket, Key="k", ChecksumAlgorithm="SHA256")
    done = [
        {"PartNumber": n, **{k: v for k, v in answer.items() if k in ("ETag", "ChecksumSHA256")}}
        for n, part in enumerate(parts, 1)
        for answer in [
            client.upload_part(
                Bucket=bucket,
                Key="k",
                UploadId=upload["UploadId"],
                PartNumber=n,
                Body=part,
                ChecksumAlgorithm="SHA256",
            )
        ]
    ]
    client.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=upload["UploadId"], MultipartUpload={"Parts": done}
    )
    assert client.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")["ChecksumSHA256"].endswith("-2")
    size = sum(map(len, parts))
    path = tmp_path / "k.part"
    path.write_bytes(b"")

    async def main() -> tuple[Outcome, list[bytes] | None]:
        gets = native_gets(bucket, 2)
        try:
            hashed = gets.hash_parts(str(path), size, len(parts[0]))
            got = await gets.get_into("k", size + 1, str(path), 0, hash=False, check=True, hashed=hashed)
            return got, await gets.part_digests(hashed)
        finally:
            gets.close()

    got, digests = asyncio.run(main())
    assert (got.written, got.checked) == (size, None)
    assert digests == [hashlib.md5(part).digest() for part in parts]
    assert path.read_bytes() == b"".join(parts)


def test_each_range_gives_the_crc_of_its_bytes(
    aws_env: dict[str, str], minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """A range asked for with a checksum algorithm gives the CRC of its own bytes (as the AWS
    CRT computes it), which the storage seam combines into the whole object's."""
    body = os.urandom(3 * 1024**2 + 5)
    minio.client().put_object(Bucket=bucket, Key="big", Body=body)
    path = tmp_path / "big.part"
    path.write_bytes(b"")
    step = 1024**2
    ranges = [(start, min(start + step, len(body))) for start in range(0, len(body), step)]

    async def main() -> list[Outcome]:
        gets = native_gets(bucket, 4)
        try:
            return await asyncio.gather(
                *(
                    gets.get_range_into("big", start, end, str(path), checksum="CRC64NVME")
                    for start, end in ranges
                )
            )
        finally:
            gets.close()

    got = asyncio.run(main())
    assert [outcome.checksum for outcome in got] == [
        awscrt.checksums.crc64nvme(body[start:end]).to_bytes(8, "big") for start, end in ranges
    ]
    assert [outcome.checked for outcome in got] == [None] * len(ranges)  # nothing to compare with
    assert path.read_bytes() == body
