"""S3 Express One Zone directory buckets (issue 66), against the stand-in (`s3bulk.testing.express`:
MinIO's objects behind listings in no order, no StartAfter, directory-bucket names): sync --delete
both ways between it and MinIO, check, and cp -n work, each listing sorted on s3bulk's side (an
external sort), and a re-run does nothing. The 100,000-key goal is `-m campaign` (and its figure
in bench/RESULTS.md)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Endpoint, new_bucket, peak_group_rss, run_cli

from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error
from s3bulk._stores.s3 import S3Client
from s3bulk.testing.express import ExpressStandIn

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def express(minio: Endpoint) -> Iterator[ExpressStandIn]:
    server = minio.server
    with ExpressStandIn(server.endpoint, (server.access_key, server.secret_key), seed=66) as standin:
        yield standin


_numbers = iter(range(10_000))


def _directory_bucket(minio: Endpoint) -> str:
    name = f"x{next(_numbers)}p{os.getpid()}--use1-az4--x-s3"

    async def made() -> None:
        client = S3Client(_direct(minio))
        try:
            await client.create_bucket(name, "us-east-1")
        finally:
            await client.close()

    asyncio.run(made())
    return name


def _direct(minio: Endpoint) -> AwsSettings:
    """MinIO itself, through s3bulk's client: boto3 signs a directory bucket's requests for
    S3 Express (CreateSession, service s3express), which MinIO does not take; s3bulk is told
    this bucket named as a directory bucket is MinIO's general purpose one (no sessions)."""
    return AwsSettings(endpoint_url=minio.server.endpoint, region="us-east-1", express_sessions=False)


def _keys(minio: Endpoint, bucket: str, prefix: str) -> dict[str, int]:
    async def listed() -> dict[str, int]:
        client = S3Client(_direct(minio))
        try:
            found, token = {}, None
            while True:
                page = await client.list_objects_v2(bucket, prefix, continuation_token=token)
                found |= {info.key[len(prefix) :]: info.size for info in page.objects}
                if not page.is_truncated:
                    return found
                token = page.next_token
        finally:
            await client.close()

    return asyncio.run(listed())


def _fill(minio: Endpoint, bucket: str, prefix: str, names: range, body: bytes = b"") -> None:
    async def put() -> None:
        client = S3Client(_direct(minio))
        try:
            for n in names:
                await client.put_object(bucket, f"{prefix}k{n:06d}", body or f"object {n}".encode())
        finally:
            await client.close()

    asyncio.run(put())


def _summary(stdout: str) -> dict[str, Any]:
    """The --json output's summary line."""
    line = next(line for line in stdout.splitlines() if line.startswith('{"summary"'))
    summary: dict[str, Any] = json.loads(line)["summary"]
    return summary


def _env(express: ExpressStandIn, minio: Endpoint) -> dict[str, str]:
    return minio.env | {"AWS_ENDPOINT_URL": express.endpoint}


def test_the_stand_in_lists_in_no_order_and_refuses_what_directory_buckets_refuse(
    express: ExpressStandIn, minio: Endpoint, aws_env: dict[str, str]
) -> None:
    bucket = _directory_bucket(minio)
    _fill(minio, bucket, "p/", range(30))
    settings = AwsSettings(endpoint_url=express.endpoint, region="us-east-1")

    async def listed() -> tuple[list[int], list[str]]:
        client = S3Client(settings)
        try:
            sizes, keys, token = [], [], None
            while True:
                page = await client.list_objects_v2(bucket, "p/", continuation_token=token, max_keys=7)
                sizes.append(len(page.objects))
                keys += [info.key for info in page.objects]
                if not page.is_truncated:
                    return sizes, keys
                token = page.next_token
        finally:
            await client.close()

    sizes, keys = asyncio.run(listed())
    assert (
        sizes == [7, 7, 7, 7, 2]
        and sorted(keys) == [f"p/k{n:06d}" for n in range(30)]
        and keys != sorted(keys)
    )

    async def refused(bucket: str, **asked: str) -> S3Error:
        client = S3Client(settings)
        try:
            with pytest.raises(S3Error) as raised:
                await client.list_objects_v2(bucket, "p/", **asked)
            return raised.value
        finally:
            await client.close()

    assert asyncio.run(refused(bucket, start_after="p/k000003")).code == "InvalidArgument"
    assert asyncio.run(refused(new_bucket(minio))).code == "InvalidBucketName"


def test_sync_delete_both_ways_with_minio_check_and_cp_n(
    express: ExpressStandIn, minio: Endpoint, tmp_path: Path, aws_env: dict[str, str]
) -> None:
    """MinIO's general purpose bucket (the source profile) to the directory bucket and back:
    each side equal afterwards, extra keys deleted, nothing the source holds deleted, a re-run
    does nothing, and check says equal."""
    general, directory = new_bucket(minio), _directory_bucket(minio)
    _fill(minio, general, "g/", range(0, 260))
    _fill(minio, directory, "d/", range(200, 400), b"older")  # 60 in both (other bytes), 140 extra
    env = _env(express, minio)
    there = ("--source-endpoint-url", minio.server.endpoint)
    refused_before = express.refused.get("InvalidArgument", 0)

    into = run_cli(
        env, "sync", "--delete", "--size-only", f"s3://{general}/g/", f"s3://{directory}/d/", *there
    )
    assert into.returncode == 0, into.stderr
    assert _keys(minio, directory, "d/") == _keys(minio, general, "g/")
    again = run_cli(
        env, "sync", "--delete", "--size-only", "--json", f"s3://{general}/g/", f"s3://{directory}/d/", *there
    )
    assert again.returncode == 0, again.stderr
    done = _summary(again.stdout)
    assert (done["objects_done"], done["objects_deleted"]) == (0, 0), done

    _fill(minio, general, "back/", range(500, 520))  # MinIO's side of the way back: 20 extra
    back = run_cli(
        minio.env,
        "sync",
        "--delete",
        f"s3://{directory}/d/",
        f"s3://{general}/back/",
        "--source-endpoint-url",
        express.endpoint,
    )
    assert back.returncode == 0, back.stderr
    assert _keys(minio, general, "back/") == _keys(minio, directory, "d/")
    checked = run_cli(env, "check", f"s3://{general}/g/", f"s3://{directory}/d/", *there)
    assert checked.returncode == 0, checked.stderr

    local = tmp_path / "local"
    down = run_cli(env, "sync", "--delete", f"s3://{directory}/d/", f"{local}/")
    assert down.returncode == 0, down.stderr
    assert len(list(local.iterdir())) == 260
    (local / "k000000").unlink()
    cp_n = run_cli(env, "cp", "-n", f"s3://{directory}/d/", f"{local}/")
    assert cp_n.returncode == 0, cp_n.stderr
    assert len(list(local.iterdir())) == 260
    assert express.refused.get("InvalidArgument", 0) == refused_before  # no StartAfter was sent


@pytest.mark.campaign
@pytest.mark.timeout(3600)
def test_sync_delete_100000_keys_in_no_order_both_ways(
    express: ExpressStandIn, minio: Endpoint, tmp_path: Path, aws_env: dict[str, str]
) -> None:
    """The goal's scale: 100,000 keys listed in random order, sync --delete into the directory
    bucket from a local tree and back: equal, peak RSS of the job within 256 MiB, a re-run does
    nothing."""
    count = 100_000
    source = tmp_path / "src"
    source.mkdir()
    for n in range(count):
        (source / f"k{n:06d}").write_bytes(b"x")
    directory = _directory_bucket(minio)
    env = _env(express, minio)
    code, peak, errors = peak_group_rss(env, ["sync", "--delete", f"{source}/", f"s3://{directory}/d/"])
    assert code == 0, errors
    assert peak <= 256 * MiB, peak
    code, peak_back, errors = peak_group_rss(
        env, ["sync", "--delete", f"s3://{directory}/d/", f"{tmp_path / 'back'}/"]
    )
    assert code == 0, errors
    assert peak_back <= 256 * MiB, peak_back
    again = run_cli(env, "sync", "--delete", "--json", f"{source}/", f"s3://{directory}/d/")
    assert again.returncode == 0 and _summary(again.stdout)["objects_done"] == 0
    print(f"100,000 keys in no order: peak RSS {peak / MiB:.0f} MiB up, {peak_back / MiB:.0f} MiB down")


@pytest.fixture(scope="module")
def express_sessions(minio: Endpoint) -> Iterator[ExpressStandIn]:
    """The stand-in requiring a session: a request without a valid x-amz-s3session-token is refused."""
    server = minio.server
    with ExpressStandIn(
        server.endpoint, (server.access_key, server.secret_key), seed=67, sessions=True
    ) as standin:
        yield standin


def test_jobs_on_a_directory_bucket_run_in_its_session(
    express_sessions: ExpressStandIn, minio: Endpoint, tmp_path: Path, aws_env: dict[str, str]
) -> None:
    """Uploads, listings, downloads (the native GETs), HEADs and deletes carry the session's
    token (CreateSession), none is refused; a request without one is."""
    import urllib.error
    import urllib.request

    bucket = _directory_bucket(minio)
    source = tmp_path / "src"
    source.mkdir()
    for n in range(30):
        (source / f"f{n:02d}").write_bytes(f"file {n}".encode() * (n + 1))
    env = _env(express_sessions, minio)
    made_before = len(express_sessions.tokens)
    up = run_cli(env, "sync", "--delete", f"{source}/", f"s3://{bucket}/d/")
    assert up.returncode == 0, up.stderr
    down = run_cli(env, "cp", f"s3://{bucket}/d/", f"{tmp_path / 'down'}/")
    assert down.returncode == 0, down.stderr
    assert {path.name: path.read_bytes() for path in (tmp_path / "down").iterdir()} == {
        path.name: path.read_bytes() for path in source.iterdir()
    }
    head = run_cli(env, "head", f"s3://{bucket}/d/f03")
    assert head.returncode == 0 and "size" in head.stdout, head.stderr
    removed = run_cli(env, "rm", f"s3://{bucket}/d/")
    assert removed.returncode == 0, removed.stderr
    assert _keys(minio, bucket, "d/") == {}
    assert express_sessions.refused.get("AccessDenied", 0) == 0
    assert express_sessions.refused.get("ExpiredToken", 0) == 0
    assert len(express_sessions.tokens) > made_before  # sessions were asked for
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{express_sessions.endpoint}/{bucket}/?list-type=2", timeout=30)
    assert refused.value.code == 403


def test_an_expired_session_is_replaced_and_the_request_sent_again(
    express_sessions: ExpressStandIn, minio: Endpoint, aws_env: dict[str, str]
) -> None:
    """A session the service says expired (a clock that differs from the service's) is asked for
    again, once, and the request that was refused goes through: listings, HEADs and GETs alike."""
    from s3bulk._stores.storage import Storage

    bucket = _directory_bucket(minio)
    _fill(minio, bucket, "p/", range(5))
    settings = AwsSettings(endpoint_url=express_sessions.endpoint, region="us-east-1")

    async def steps() -> tuple[int, str, bytes]:
        storage = Storage(settings)
        try:
            page = await storage.list_objects_v2(bucket, "p/")
            express_sessions.expire_sessions()
            again = await storage.list_objects_v2(bucket, "p/")
            express_sessions.expire_sessions()
            headers = await storage.head(bucket, "p/k000001")
            express_sessions.expire_sessions()
            body = await storage.get_object(bucket, "p/k000002")
            assert len(page.objects) == len(again.objects)
            return len(again.objects), headers["content-length"], body
        finally:
            await storage.close()

    made_before = len(express_sessions.tokens)
    expired_before = express_sessions.refused.get("ExpiredToken", 0)
    assert asyncio.run(steps()) == (5, str(len(b"object 1")), b"object 2")
    assert express_sessions.refused.get("ExpiredToken", 0) - expired_before == 3
    assert len(express_sessions.tokens) - made_before == 4  # the first, and one after each expiry


def test_reads_of_a_directory_bucket_through_open_and_fsspec_carry_the_session(
    express_sessions: ExpressStandIn, minio: Endpoint, aws_env: dict[str, str]
) -> None:
    """`s3bulk.open(url, "rb")` (whole, and seeks into a larger object read a block at a time),
    fsspec's cat, ranges, open and ls, and `s3bulk.open(url, "wb")`: each request signed in the
    bucket's session (the stand-in refuses one without its token, 403)."""
    import fsspec

    import s3bulk

    bucket = _directory_bucket(minio)
    big = bytes(range(256)) * 4096  # 1 MiB, read in 256 KiB blocks
    _fill(minio, bucket, "r/", range(2))
    _fill(minio, bucket, "big/", range(1), body=big)
    settings = AwsSettings(endpoint_url=express_sessions.endpoint, region="us-east-1")
    refused_before = dict(express_sessions.refused)
    with s3bulk.open(f"s3://{bucket}/r/k000001", "rb", settings=settings) as reader:
        assert reader.read() == b"object 1"
    with s3bulk.open(f"s3://{bucket}/big/k000000", "rb", buffer_size=256 * 1024, settings=settings) as reader:
        reader.seek(700_000)
        assert reader.read(1000) == big[700_000:701_000]
        reader.seek(10)
        assert reader.read(20) == big[10:30]
    fs = fsspec.filesystem("s3bulk", endpoint_url=express_sessions.endpoint, region="us-east-1")
    assert fs.cat_file(f"{bucket}/r/k000000") == b"object 0"
    assert fs.cat_file(f"{bucket}/big/k000000", start=5, end=9) == big[5:9]
    with fs.open(f"{bucket}/big/k000000", "rb", block_size=128 * 1024) as handle:
        handle.seek(900_000)
        assert handle.read(64) == big[900_000:900_064]
    assert sorted(fs.ls(f"{bucket}/r/", detail=False)) == [f"{bucket}/r/k000000", f"{bucket}/r/k000001"]
    with s3bulk.open(f"s3://{bucket}/w/new", "wb", settings=settings) as writer:  # and a write
        writer.write(b"written in the session")
    with s3bulk.open(f"s3://{bucket}/w/new", "rb", settings=settings) as reader:
        assert reader.read() == b"written in the session"
    assert express_sessions.refused == refused_before  # no request refused for want of a session


def test_ls_json_of_a_directory_bucket_asks_no_restore_states(
    express: ExpressStandIn, minio: Endpoint, aws_env: dict[str, str]
) -> None:
    """S3 Express keeps no archive and its ListObjectsV2 does not support RestoreStatus: `ls
    --json` of a directory bucket never sends the header that asks for it (the stand-in counts
    the listings that carry it)."""
    bucket = _directory_bucket(minio)
    _fill(minio, bucket, "j/", range(3))
    asked_before = express.asked_attributes
    listed = run_cli(_env(express, minio), "ls", "-r", "--json", f"s3://{bucket}/j/")
    assert listed.returncode == 0, listed.stderr
    assert sorted(json.loads(line)["key"] for line in listed.stdout.splitlines()) == [
        f"j/k{n:06d}" for n in range(3)
    ]
    assert express.asked_attributes == asked_before
