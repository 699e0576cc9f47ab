"""S3 Inventory as a source (issue 67) on MinIO: an inventory in AWS's format (CSV gzip, ORC,
Parquet; written by s3bulk.testing.write_inventory) drives cp, rm, ls, du, head, map, sync and
check with no LIST request on the inventoried bucket (counted by a proxy in front of MinIO),
takes the same objects a listing takes, filters by the inventory's columns, and a killed job
resumes exactly; sync --delete from inventories days old deletes nothing written since."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mapfns
import pytest
from conftest import Endpoint, held_at, new_bucket, run_cli, wait_for_journaled_items

from s3bulk.testing import write_inventory
from s3bulk.testing.inventory import listed_rows
from s3bulk.testing.throttle import S3ThrottlingProxy

TESTS = Path(__file__).resolve().parent
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
            wait_for_journaled_items(job, state)  # copies answered and held are flushed a few times a second
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


def test_head_and_map_read_an_inventory_and_list_nothing(
    minio: Endpoint, inventoried: tuple[str, str], tmp_path: Path
) -> None:
    source, inventories = inventoried
    wanted = sorted(key for key in KEYS if key.startswith("data/"))
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint, "PYTHONPATH": str(TESTS)}
        headed = run_cli(
            env, "head", "--json", "--inventory", _manifest(inventories, "ORC"), f"s3://{source}/data/"
        )
        rows = tmp_path / "rows.jsonl"
        mapped = run_cli(
            env,
            "map",
            "--inventory",
            _manifest(inventories, "CSV"),
            "--exclude",
            "*.bin",
            "--output",
            str(rows),
            "mapfns:digest",
            f"s3://{source}/data/",
        )
        assert proxy.log.bucket_reads[source] == 0
    assert headed.returncode == 0, headed.stderr
    found = {json.loads(line)["key"]: json.loads(line)["size"] for line in headed.stdout.splitlines()}
    assert found == {key: len(_body(key)) for key in wanted}
    assert mapped.returncode == 0, mapped.stderr
    results = sorted(json.loads(line)["result"] for line in rows.read_text().splitlines())
    assert results == sorted(
        mapfns.digest(type("O", (), {"key": key})(), _body(key)) for key in wanted if not key.endswith(".bin")
    )


def _put(client: Any, bucket: str, bodies: dict[str, bytes]) -> None:
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)


SOURCE = {f"s/{n:02d}": b"s%d" % n for n in range(40)}  # the source's objects
# the destination before the sync: some the same, some other bytes, some the source lacks
DESTINATION = {f"s/{n:02d}": (b"s%d" % n if n % 3 else b"old") for n in range(0, 40, 2)} | {
    f"s/extra{n}": b"x" for n in range(5)
}


def test_sync_from_both_sides_inventories_lists_neither_and_does_what_a_listed_sync_does(
    minio: Endpoint,
) -> None:
    """Each side's inventory in place of its listing; the source's files hold keys in no order
    (AWS promises none), so they are sorted on the way: the outcome is a listed sync's."""
    client = minio.client()
    source, inventories = new_bucket(minio, "sync-src"), new_bucket(minio, "sync-invs")
    listed, inventoried = new_bucket(minio, "sync-listed"), new_bucket(minio, "sync-inv")
    _put(client, source, SOURCE)
    for bucket in (listed, inventoried):
        _put(client, bucket, {"d/" + key: body for key, body in DESTINATION.items()})
    shuffled = sorted(listed_rows(client, source), key=lambda row: hashlib.md5(row[0].encode()).digest())
    of_source = write_inventory(client, source, inventories, kind="CSV", rows=shuffled, rows_per_file=7)
    of_destination = write_inventory(client, inventoried, inventories, kind="Parquet", rows_per_file=9)
    done = run_cli(minio.env, "sync", "--delete", "--size-only", f"s3://{source}/s/", f"s3://{listed}/d/s/")
    assert done.returncode == 0, done.stderr
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        done = run_cli(
            env,
            "sync",
            "--delete",
            "--size-only",
            "--inventory",
            of_source,
            "--destination-inventory",
            of_destination,
            f"s3://{source}/s/",
            f"s3://{inventoried}/d/s/",
        )
        assert done.returncode == 0, done.stderr
        assert proxy.log.bucket_reads[source] == 0
        assert proxy.log.bucket_reads[inventoried] == 1  # the written bucket's probe (max-keys 1), no listing
    assert _copied(minio, inventoried, "") == _copied(minio, listed, "")
    assert _copied(minio, inventoried, "d/") == SOURCE | {f"s/{n}": b"old" for n in (12, 18, 24, 30, 36)}


def test_check_compares_two_inventories_as_it_compares_two_listings(minio: Endpoint) -> None:
    client = minio.client()
    source, destination, inventories = (
        new_bucket(minio, name) for name in ("chk-src", "chk-dst", "chk-invs")
    )
    _put(client, source, SOURCE)
    _put(client, destination, DESTINATION)
    of_source = write_inventory(client, source, inventories, kind="ORC", rows_per_file=11)
    of_destination = write_inventory(client, destination, inventories, kind="CSV", rows_per_file=6)
    listed = run_cli(minio.env, "check", "--json", f"s3://{source}/s/", f"s3://{destination}/s/")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        read = run_cli(
            env,
            "check",
            "--json",
            "--inventory",
            of_source,
            "--destination-inventory",
            of_destination,
            f"s3://{source}/s/",
            f"s3://{destination}/s/",
        )
        assert proxy.log.bucket_reads[source] == proxy.log.bucket_reads[destination] == 0
    assert read.returncode == listed.returncode == 1
    assert sorted(read.stdout.splitlines()) == sorted(listed.stdout.splitlines())
    summary = json.loads(read.stdout.splitlines()[-1])["summary"]
    assert summary == {"same": 13, "missing": 20, "extra": 5, "differs": 7}


def test_sync_delete_from_stale_inventories_deletes_nothing_written_since(minio: Endpoint) -> None:
    """An inventory is a listing of a day or more ago. A name the source gained since is not in
    its inventory, so its copy at the destination looks extra: it is looked up at the source
    and kept. An object the destination's inventory lists but that was written over since is
    kept too; what is extra on both counts is deleted. An inventory listing nothing under the
    source prefix is refused as an empty source."""
    client = minio.client()
    source, destination, inventories = (new_bucket(minio, name) for name in ("st-src", "st-dst", "st-invs"))
    _put(client, source, {"p/a": b"a", "p/b": b"b"})
    _put(client, destination, {"p/a": b"a", "p/b": b"b", "p/gone": b"g", "p/rewritten": b"r"})
    of_source = write_inventory(client, source, inventories, kind="Parquet", prefix="src")
    _put(client, source, {"p/new": b"written after the inventory"})  # and copied since, as a sync would
    _put(client, destination, {"p/new": b"written after the inventory"})
    of_destination = write_inventory(client, destination, inventories, kind="CSV", prefix="dst")  # a day on
    _put(client, destination, {"p/rewritten": b"another writer's"})
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        done = run_cli(
            env,
            "sync",
            "--delete",
            "--inventory",
            of_source,
            "--destination-inventory",
            of_destination,
            f"s3://{source}/p/",
            f"s3://{destination}/p/",
        )
        empty = run_cli(
            env, "sync", "--delete", "--inventory", of_source, f"s3://{source}/q/", f"s3://{destination}/p/"
        )
        assert proxy.log.bucket_reads[source] == 0
    assert done.returncode == 1, done.stderr  # the two kept are named
    assert "the source holds this name now" in done.stdout + done.stderr
    assert "changed after it was listed" in done.stdout + done.stderr
    assert _copied(minio, destination, "p/") == {
        "a": b"a",
        "b": b"b",
        "new": b"written after the inventory",
        "rewritten": b"another writer's",
    }
    assert empty.returncode != 0
    assert "the source's inventory lists nothing under" in empty.stderr
    assert len(_copied(minio, destination, "p/")) == 4
