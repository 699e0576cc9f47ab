"""S3 Inventory as a source (issue 67) on MinIO: an inventory in AWS's format (CSV gzip, ORC,
Parquet; written by s3bulk.testing.write_inventory) drives cp, rm, ls and du with no LIST request
on the inventoried bucket (counted by a proxy in front of MinIO), takes the same objects a
listing takes, filters by the inventory's columns, and a killed job resumes exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Endpoint, held_at, new_bucket, run_cli

from s3bulk.testing import write_inventory
from s3bulk.testing.throttle import S3ThrottlingProxy

KEYS = [f"data/{n:03d}.bin" for n in range(60)] + [
    "data/with space+plus%41.txt",
    "data/日本/x.txt",
    'data/comma,"quote".txt',
    "other/outside.txt",
]


def _body(key: str) -> bytes:
    return key.encode() * (1 + len(key) % 7)


@pytest.fixture(scope="module")
def inventoried(minio: Endpoint) -> tuple[str, str]:
    """A bucket of KEYS and a bucket holding its inventories (one of each kind, 25 rows a file)."""
    source, inventories = new_bucket(minio, "inventoried"), new_bucket(minio, "inventories")
    client = minio.client()
    for key in KEYS:
        client.put_object(Bucket=source, Key=key, Body=_body(key))
    for kind in ("CSV", "ORC", "Parquet"):
        write_inventory(client, source, inventories, kind=kind, prefix=kind.lower(), rows_per_file=25)
    return source, inventories


def _manifest(inventories: str, kind: str) -> str:
    return f"s3://{inventories}/{kind.lower()}/"  # the configuration's prefix: its newest manifest


def _copied(minio: Endpoint, bucket: str, prefix: str) -> dict[str, bytes]:
    client = minio.client()
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for entry in page.get("Contents", []):
            found[entry["Key"][len(prefix) :]] = client.get_object(Bucket=bucket, Key=entry["Key"])[
                "Body"
            ].read()
    return found


@pytest.fixture(scope="module")
def copied_from_a_listing(minio: Endpoint, inventoried: tuple[str, str]) -> dict[str, bytes]:
    """What cp from a listing of the bucket copies (the proxy sees its LIST: the count works)."""
    source, _ = inventoried
    destination = new_bucket(minio, "from-listing")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        done = run_cli(
            minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint},
            "cp",
            f"s3://{source}/data/",
            f"s3://{destination}/",
        )
        assert done.returncode == 0, done.stderr
        assert proxy.log.bucket_reads[source] > 0
    return _copied(minio, destination, "")


@pytest.mark.parametrize("kind", ["CSV", "ORC", "Parquet"])
def test_cp_from_an_inventory_lists_nothing_and_copies_what_a_listing_copies(
    minio: Endpoint, inventoried: tuple[str, str], copied_from_a_listing: dict[str, bytes], kind: str
) -> None:
    source, inventories = inventoried
    destination = new_bucket(minio, f"from-{kind.lower()}")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:  # it only counts
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        done = run_cli(
            env,
            "cp",
            "--inventory",
            _manifest(inventories, kind),
            f"s3://{source}/data/",
            f"s3://{destination}/",
        )
        assert done.returncode == 0, done.stderr
        assert proxy.log.bucket_reads[source] == 0  # no LIST of the inventoried bucket
    from_inventory = _copied(minio, destination, "")
    assert from_inventory == copied_from_a_listing
    assert sorted(from_inventory) == sorted(key[len("data/") :] for key in KEYS if key.startswith("data/"))
    assert from_inventory["with space+plus%41.txt"] == _body("data/with space+plus%41.txt")


def test_filters_select_by_the_inventorys_columns_without_a_head(
    minio: Endpoint, inventoried: tuple[str, str]
) -> None:
    source, inventories = inventoried
    destination = new_bucket(minio, "filtered")
    smallest = min(len(_body(key)) for key in KEYS)
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        done = run_cli(
            env,
            "cp",
            "--inventory",
            _manifest(inventories, "Parquet"),
            "--include",
            "*.bin",
            "--min-size",
            str(smallest + 1),
            "--newer-than",
            "2020-01-01",
            f"s3://{source}/data/",
            f"s3://{destination}/",
        )
        assert done.returncode == 0, done.stderr
        assert proxy.log.accepted["HEAD"] == 0
        assert proxy.log.bucket_reads[source] == 0
    expected = {
        key[len("data/") :]
        for key in KEYS
        if key.startswith("data/") and key.endswith(".bin") and len(_body(key)) > smallest
    }
    assert set(_copied(minio, destination, "")) == expected


def test_ls_and_du_read_an_inventory(minio: Endpoint, inventoried: tuple[str, str], tmp_path: Path) -> None:
    source, inventories = inventoried
    done = run_cli(
        minio.env, "ls", "--json", "--inventory", _manifest(inventories, "CSV"), f"s3://{source}/data/"
    )
    assert done.returncode == 0, done.stderr
    listed = sorted(json.loads(line)["key"] for line in done.stdout.splitlines())
    assert listed == sorted(key for key in KEYS if key.startswith("data/"))
    done = run_cli(minio.env, "du", "--json", "--inventory", _manifest(inventories, "ORC"), f"s3://{source}/")
    assert done.returncode == 0, done.stderr
    total = json.loads(done.stdout)
    assert (total["objects"], total["bytes"]) == (len(KEYS), sum(len(_body(key)) for key in KEYS))


def test_an_inventory_of_another_bucket_is_refused_in_one_line(
    minio: Endpoint, inventoried: tuple[str, str]
) -> None:
    _, inventories = inventoried
    other, elsewhere = new_bucket(minio, "not-inventoried"), new_bucket(minio, "elsewhere")
    done = run_cli(
        minio.env, "cp", "--inventory", _manifest(inventories, "CSV"), f"s3://{other}/", f"s3://{elsewhere}/"
    )
    assert done.returncode == 2
    assert f"not {other!r}: give that bucket's inventory" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_rm_deletes_what_the_inventory_lists_and_keeps_what_changed_since(
    minio: Endpoint, tmp_path: Path
) -> None:
    bucket, inventories = new_bucket(minio, "rm-inv"), new_bucket(minio, "rm-invs")
    client = minio.client()
    for n in range(30):
        client.put_object(Bucket=bucket, Key=f"logs/{n:02d}.log", Body=b"x" * n)
    client.put_object(Bucket=bucket, Key="keep/me", Body=b"k")
    manifest = write_inventory(client, bucket, inventories, kind="Parquet", rows_per_file=10)
    client.put_object(Bucket=bucket, Key="logs/07.log", Body=b"written after the inventory")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        done = run_cli(env, "rm", "--inventory", manifest, f"s3://{bucket}/logs/")
        assert proxy.log.bucket_reads[bucket] == 0
    assert done.returncode == 1, done.stderr  # the changed one is named, and kept
    assert "changed after it was listed" in done.stdout + done.stderr
    left = sorted(entry["Key"] for entry in client.list_objects_v2(Bucket=bucket)["Contents"])
    assert left == ["keep/me", "logs/07.log"]


def test_cp_from_an_inventory_killed_and_resumed_is_exact(minio: Endpoint, tmp_path: Path) -> None:
    bucket, inventories, destination = (
        new_bucket(minio, name) for name in ("kill-src", "kill-inv", "kill-dst")
    )
    client = minio.client()
    keys = [f"k/{n:04d}" for n in range(400)]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    manifest = write_inventory(client, bucket, inventories, kind="CSV", rows_per_file=100)
    state = tmp_path / "state"
    from conftest import S3BULK

    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint, "S3BULK_STATE_DIR": str(state)}
        command = ["cp", "--inventory", manifest, "--workers", "2", f"s3://{bucket}/", f"s3://{destination}/"]
        with held_at(proxy, 150, [*S3BULK, *command], env, tmp_path / "killed.log") as job:
            job.kill_group()
            job.wait()
        jobs = run_cli(env, "jobs", "--json")
        job_id = json.loads(jobs.stdout.splitlines()[0])["job_id"]
        done = run_cli(env, "cp", "--resume", job_id, "--json")
        assert done.returncode == 0, done.stderr + done.stdout
        assert proxy.log.bucket_reads[bucket] == 0
    summary = json.loads(done.stdout.splitlines()[-1])["summary"]
    assert _copied(minio, destination, "") == {key: key.encode() for key in keys}
    assert summary["objects_already_done"] > 0  # done before the kill, and not again
    assert summary["objects_done"] + summary["objects_already_done"] == len(keys)
