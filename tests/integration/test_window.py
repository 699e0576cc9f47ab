"""--min-size, --max-size, --newer-than, --older-than, --min-age, --max-age on cp, sync and rm,
against MinIO: what is transferred or deleted is exactly what the window selects."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli

DAY = 86400


def keys(endpoint: Endpoint, bucket: str, prefix: str) -> list[str]:
    found = endpoint.client().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(entry["Key"][len(prefix) :] for entry in found)


@pytest.fixture
def sized(minio: Endpoint) -> str:
    bucket = new_bucket(minio)
    for name, size in (("small", 10), ("medium", 1000), ("large", 100_000)):
        minio.client().put_object(Bucket=bucket, Key=f"p/{name}", Body=b"x" * size)
    return bucket


def test_sizes_select_downloads_copies_and_deletes(minio: Endpoint, sized: str, tmp_path: Path) -> None:
    done = run_cli(
        minio.env, "cp", "--min-size", "500", "--max-size", "50KB", f"s3://{sized}/p/", f"{tmp_path}/d/"
    )
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(tmp_path / "d")) == ["medium"]
    copied = run_cli(minio.env, "cp", "--min-size", "1000", f"s3://{sized}/p/", f"s3://{sized}/big/")
    assert copied.returncode == 0 and keys(minio, sized, "big/") == ["large", "medium"]
    synced = run_cli(minio.env, "sync", "--max-size", "999", f"s3://{sized}/p/", f"s3://{sized}/tiny/")
    assert synced.returncode == 0 and keys(minio, sized, "tiny/") == ["small"]
    removed = run_cli(minio.env, "rm", "--max-size", "1000", f"s3://{sized}/p/")
    assert removed.returncode == 0 and keys(minio, sized, "p/") == ["large"]


def test_ages_and_times_select_uploads_and_listed_objects(
    minio: Endpoint, sized: str, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    now = time.time()
    for name, age in (("old.log", 10 * DAY), ("recent.log", 2 * DAY), ("new.log", 60)):
        (tree / name).write_text(name)
        os.utime(tree / name, (now - age, now - age))
    old = run_cli(minio.env, "cp", "--min-age", "7d", f"{tree}/", f"s3://{sized}/old/")
    assert old.returncode == 0 and keys(minio, sized, "old/") == ["old.log"]
    since = (datetime.now(UTC) - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fresh = run_cli(minio.env, "cp", "--newer-than", since, f"{tree}/", f"s3://{sized}/fresh/")
    assert fresh.returncode == 0 and keys(minio, sized, "fresh/") == ["new.log", "recent.log"]
    # the objects were all written a moment ago: --max-age 1h takes them all, --min-age 1h none
    young = run_cli(minio.env, "cp", "--max-age", "1h", f"s3://{sized}/p/", f"s3://{sized}/young/")
    assert young.returncode == 0 and keys(minio, sized, "young/") == ["large", "medium", "small"]
    aged = run_cli(minio.env, "rm", "--min-age", "1h", f"s3://{sized}/p/")
    assert aged.returncode == 0 and keys(minio, sized, "p/") == ["large", "medium", "small"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--min-age", "soon"], "--min-age 'soon': give a duration such as 45s"),
        (["--newer-than", "yesterday"], "--newer-than 'yesterday': give a time such as 2026-01-31"),
        (["--min-size", "10KB", "--max-size", "5KB"], "--min-size 10000 is above --max-size 5000"),
        (["--max-age", "1d", "--newer-than", "2026-01-01"], "say the same thing: give one"),
        (["--max-age", "1d", "--min-age", "2d"], "is not before --older-than (or --min-age)"),
    ],
)
def test_bad_windows_are_one_line_and_nothing_happens(
    minio: Endpoint, sized: str, flags: list[str], message: str
) -> None:
    done = run_cli(minio.env, "rm", *flags, f"s3://{sized}/p/")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert keys(minio, sized, "p/") == ["large", "medium", "small"]


def test_ls_shows_and_counts_only_what_the_window_selects(minio: Endpoint, sized: str) -> None:
    import json

    listed = run_cli(minio.env, "ls", "-r", "--json", "--summarize", "--min-size", "500", f"s3://{sized}/p/")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [row["key"] for row in rows[:-1]] == ["p/large", "p/medium"]
    assert rows[-1] == {"summary": {"objects": 2, "bytes": 101_000}}
    none = run_cli(minio.env, "ls", "-r", "--summarize", "--min-age", "1d", f"s3://{sized}/p/")
    assert none.returncode == 0 and "Total Objects: 0" in none.stdout and "p/small" not in none.stdout
