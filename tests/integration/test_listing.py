"""Concurrent listing against MinIO: every key exactly once, in key order, whatever the key shape;
and `ls` output as users read it."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from conftest import Endpoint, put_objects, run_cli

from s3bulk._config import AwsSettings
from s3bulk._sources.listing import list_prefix, list_sequential
from s3bulk._stores.storage import Storage


def put_empty(endpoint: Endpoint, bucket: str, keys: list[str]) -> None:
    """Objects of one byte at `keys`, in one request (conftest's put_objects): boto3 one PUT at a
    time took 29 s of `make test` for 11,000 of them, s3bulk's cp of a tree of files 17 s of CPU."""
    put_objects(endpoint, bucket, dict.fromkeys(keys, b"x"))


async def _list_all(endpoint: Endpoint, bucket: str, prefix: str, **options: int) -> tuple[list[str], int]:
    settings = AwsSettings.from_env(endpoint_url=endpoint.server.endpoint)
    client = Storage(settings)
    try:
        keys = [info.key async for page in list_prefix(client, bucket, prefix, **options) for info in page]
        return keys, client.meter.requests["LIST"]
    finally:
        await client.close()


@pytest.fixture(scope="module")
def shaped_keys(minio: Endpoint) -> tuple[str, list[str]]:
    from conftest import new_bucket

    bucket = new_bucket(minio, "shapes")
    rng = random.Random(7)
    keys = (
        [f"num/{i:06d}.txt" for i in range(3500)]
        + [f"hex/{rng.getrandbits(64):016x}" for i in range(2500)]
        + [f"nested/{d}/{i:04d}" for d in ("a", "b", "c") for i in range(700)]
        + ["uni/é", "uni/日本/x", "uni/a b+c%20", "uni/z"]
        # keys that are themselves the boundaries of ranges listed under a narrowed Prefix
        + ["edge/~", *(f"edge/{d}" for d in "0123456789")]
        + [f"edge/{d}{tail}/{i:03d}" for d in "0123456789" for tail in "05" for i in range(130)]
    )
    put_empty(minio, bucket, keys)
    return bucket, sorted(keys)


def test_a_listing_abandoned_midway_stops_its_ranges(
    minio: Endpoint, aws_env: dict[str, str], shaped_keys: tuple[str, list[str]]
) -> None:
    """The reader takes one page and leaves (as a sync does when the other side's listing
    fails): every range task must end, though their queues are full. They used to wait on
    them forever, which hung the process at exit."""

    async def first_page_then_leave() -> int:
        settings = AwsSettings.from_env(endpoint_url=minio.server.endpoint)
        client = Storage(settings)
        try:
            pages = list_prefix(client, shaped_keys[0], "", concurrency=8, max_ranges=8)
            first = await anext(pages)
            await asyncio.sleep(0.5)  # let the other ranges fill their queues and wait
            await asyncio.wait_for(pages.aclose(), timeout=30)
            return len(first)
        finally:
            await client.close()

    assert asyncio.run(first_page_then_leave()) > 0


@pytest.mark.parametrize("prefix", ["num/", "hex/", "nested/", "uni/", "edge/", ""])
def test_partitioned_listing_returns_every_key_once_in_order(
    minio: Endpoint, aws_env: dict[str, str], shaped_keys: tuple[str, list[str]], prefix: str
) -> None:
    bucket, keys = shaped_keys
    expected = [key for key in keys if key.startswith(prefix)]
    listed, requests = asyncio.run(_list_all(minio, bucket, prefix, concurrency=8))
    assert listed == expected
    if len(expected) > 2000:  # big enough to split: more requests than a paginator's pages
        assert requests > len(expected) // 1000 + 1


def test_sequential_listing_matches(minio: Endpoint, aws_env: dict[str, str], shaped_keys: tuple) -> None:
    bucket, keys = shaped_keys

    async def run() -> list[str]:
        client = Storage(AwsSettings.from_env())
        try:
            return [i.key async for page in list_sequential(client, bucket, "") for i in page.objects]
        finally:
            await client.close()

    assert asyncio.run(run()) == keys


def test_ls_prints_like_aws_s3_ls(minio: Endpoint, bucket: str) -> None:
    client = minio.client()
    client.put_object(Bucket=bucket, Key="top/a.txt", Body=b"12345")
    client.put_object(Bucket=bucket, Key="top/sub/b.txt", Body=b"123")
    result = run_cli(minio.env, "ls", f"s3://{bucket}/top/", "--summarize")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["PRE", "sub/"]
    assert lines[1].split()[2:] == ["5", "a.txt"]
    assert "Total Objects: 1" in result.stdout and "Total Size: 5" in result.stdout


def test_ls_recursive_json_and_summary(minio: Endpoint, bucket: str) -> None:
    put_empty(minio, bucket, [f"p/{i:04d}" for i in range(1234)])
    result = run_cli(
        minio.env, "ls", "-r", "--json", "--summarize", "--list-ranges", "on", f"s3://{bucket}/p/"
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["key"] for r in records[:-1]] == [f"p/{i:04d}" for i in range(1234)]
    assert records[-1] == {"summary": {"objects": 1234, "bytes": 1234}}


def test_ls_missing_bucket_is_one_clear_line(minio: Endpoint) -> None:
    result = run_cli(minio.env, "ls", "s3://no-such-bucket-here/")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "NoSuchBucket" in result.stderr


def test_a_server_listing_out_of_order_never_makes_sync_act_wrongly(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """A server whose pages are not in key order (S3 Express directory buckets): cp, rm and ls
    do not need the order and work; sync and check, which merge two sorted listings, sort it
    first (issue 66: an external sort) and act rightly: what the source lacks is deleted, what it
    holds never, a second sync has nothing to do, check says equal."""
    from s3bulk.testing.throttle import S3ThrottlingProxy

    keys = [f"p/{n:04d}" for n in range(1500)]  # two pages, each reversed
    put_empty(minio, bucket, keys)
    local = tmp_path / "local"
    (local / "extra").mkdir(parents=True)
    (local / "extra" / "keep.txt").write_bytes(b"not in the source")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        proxy.unordered_listings = True
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        for ranges in ("auto", "on", "off"):
            listed = run_cli(env, "ls", "-r", f"s3://{bucket}/p/", "--json", "--list-ranges", ranges)
            assert listed.returncode == 0, listed.stderr
            printed = [json.loads(line)["key"] for line in listed.stdout.splitlines()]
            assert sorted(printed) == keys and printed != keys, ranges  # all of them, as listed
        copied = run_cli(env, "cp", f"s3://{bucket}/p/", f"s3://{bucket}/q/", "--list-ranges", "on")
        assert copied.returncode == 0, copied.stderr
        down = run_cli(env, "sync", f"s3://{bucket}/p/", f"{local}/", "--delete")
        assert down.returncode == 0, down.stderr
        files = sorted(path.relative_to(local).as_posix() for path in local.rglob("*") if path.is_file())
        assert files == [key[2:] for key in keys]  # the extra file deleted, every key there
        for args in (
            ["sync", f"{local}/", f"s3://{bucket}/p/", "--delete", "--json"],
            ["sync", f"s3://{bucket}/p/", f"{local}/", "--delete", "--json"],
        ):
            again = run_cli(env, *args)
            assert again.returncode == 0, again.stderr
            summary = json.loads(next(line for line in again.stdout.splitlines() if '"summary"' in line))
            assert (summary["summary"]["objects_done"], summary["summary"]["objects_deleted"]) == (0, 0)
        checked = run_cli(env, "check", f"{local}/", f"s3://{bucket}/p/")
        assert checked.returncode == 0, checked.stderr
    client = minio.client()
    stored = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    ]
    assert stored == sorted(keys + [key.replace("p/", "q/") for key in keys])  # none gone, none added
