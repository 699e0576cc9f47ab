"""--min-size, --max-size, --newer-than, --older-than, --min-age, --max-age on cp, sync and rm,
against MinIO: what is transferred or deleted is exactly what the window selects."""

from __future__ import annotations

import json
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
    listed = run_cli(minio.env, "ls", "-r", "--json", "--summarize", "--min-size", "500", f"s3://{sized}/p/")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [row["key"] for row in rows[:-1]] == ["p/large", "p/medium"]
    assert rows[-1] == {"summary": {"objects": 2, "bytes": 101_000}}
    none = run_cli(minio.env, "ls", "-r", "--summarize", "--min-age", "1d", f"s3://{sized}/p/")
    assert none.returncode == 0 and "Total Objects: 0" in none.stdout and "p/small" not in none.stdout


# ---- a window is a scope on names, never a side's attribute (issue 62, item 1) -------------------
# Each side used to be filtered by its own sizes and times: a destination entry whose source was
# outside the window lost its counterpart, looked extra, and was deleted though the source held it.
OLD = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
CUT = "2025-01-01"


def _aged(tree: Path, files: dict[str, bytes], old: set[str]) -> Path:
    """A tree of `files`, those named in `old` last modified in 2020, the others now."""
    for name, data in files.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if name in old:
            os.utime(path, (OLD, OLD))
    return tree


def _files(tree: Path) -> list[str]:
    return sorted(path.relative_to(tree).as_posix() for path in tree.rglob("*") if path.is_file())


@pytest.mark.parametrize("window", [["--newer-than", CUT], ["--max-age", "30d"]])
def test_sync_delete_with_a_time_window_keeps_the_objects_of_old_files(
    minio: Endpoint, tmp_path: Path, window: list[str]
) -> None:
    """`touch -d 2020 old*; cp src/ s3://b/w/; sync --delete --newer-than 2025-01-01 src/ s3://b/w/`
    deleted the old files' objects though the files are there; and check called them extra."""
    bucket = new_bucket(minio)
    names = {"old1.txt": b"1", "old2.txt": b"2", "d/old3.txt": b"3", "new.txt": b"n"}
    tree = _aged(tmp_path / "src", names, {"old1.txt", "old2.txt", "d/old3.txt"})
    assert run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/w/").returncode == 0
    minio.client().put_object(Bucket=bucket, Key="w/gone.txt", Body=b"its file was removed")
    (tree / "new.txt").write_bytes(b"new, and longer")

    synced = run_cli(minio.env, "sync", "--delete", *window, f"{tree}/", f"s3://{bucket}/w/")
    assert synced.returncode == 0, synced.stderr
    assert keys(minio, bucket, "w/") == ["d/old3.txt", "new.txt", "old1.txt", "old2.txt"]
    assert minio.client().get_object(Bucket=bucket, Key="w/new.txt")["Body"].read() == b"new, and longer"
    checked = run_cli(minio.env, "check", *window, f"{tree}/", f"s3://{bucket}/w/")
    assert checked.returncode == 0 and "extra" not in checked.stdout, checked.stdout + checked.stderr


def test_sync_delete_with_max_size_keeps_the_object_of_a_file_that_grew(
    minio: Endpoint, tmp_path: Path
) -> None:
    """`--max-size 1MiB` deleted the object of a file that had grown past 1 MiB."""
    bucket = new_bucket(minio)
    tree = _aged(tmp_path / "src", {"grows.bin": b"small", "stays.txt": b"s"}, set())
    assert run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/w/").returncode == 0
    (tree / "grows.bin").write_bytes(os.urandom(1024**2 + 1))

    synced = run_cli(minio.env, "sync", "--delete", "--max-size", "1MiB", f"{tree}/", f"s3://{bucket}/w/")
    assert synced.returncode == 0, synced.stderr
    assert keys(minio, bucket, "w/") == ["grows.bin", "stays.txt"]  # the grown file is outside: left be


def test_a_download_with_older_than_keeps_local_files_the_bucket_holds(
    minio: Endpoint, tmp_path: Path
) -> None:
    """A download with --older-than deleted local files S3 still holds: the objects (written now)
    are outside the window, the files (of 2020) inside it, so each looked extra to the other."""
    bucket = new_bucket(minio)
    for name in ("a.txt", "d/b.txt"):
        minio.client().put_object(Bucket=bucket, Key=f"p/{name}", Body=b"in the bucket")
    local = _aged(
        tmp_path / "mirror",
        {"a.txt": b"an older copy", "d/b.txt": b"older", "only-here.txt": b"x", "only-new.txt": b"y"},
        {"a.txt", "d/b.txt", "only-here.txt"},
    )
    synced = run_cli(minio.env, "sync", "--delete", "--older-than", CUT, f"s3://{bucket}/p/", f"{local}/")
    assert synced.returncode == 0, synced.stderr
    # the bucket holds a.txt and d/b.txt; only-here.txt is old (in the window) and not there: it goes;
    # only-new.txt is outside the window: nothing is done to it
    assert _files(local) == ["a.txt", "d/b.txt", "only-new.txt"]
    assert (local / "a.txt").read_bytes() == b"an older copy"
    checked = run_cli(minio.env, "check", "--older-than", CUT, f"s3://{bucket}/p/", f"{local}/")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_sync_delete_between_prefixes_with_a_size_window_keeps_what_the_source_holds(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for key, body in {"s/grew": b"x" * 2000, "s/small": b"s", "d/grew": b"x" * 10, "d/small": b"s"}.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    client.put_object(Bucket=bucket, Key="d/extra", Body=b"e")
    client.put_object(Bucket=bucket, Key="d/extra-big", Body=b"e" * 5000)  # not at the source, outside

    synced = run_cli(
        minio.env, "sync", "--delete", "--max-size", "1000", f"s3://{bucket}/s/", f"s3://{bucket}/d/"
    )
    assert synced.returncode == 0, synced.stderr
    assert keys(minio, bucket, "d/") == ["extra-big", "grew", "small"]
    checked = run_cli(
        minio.env, "check", "--json", "--min-size", "100", f"s3://{bucket}/s/", f"s3://{bucket}/d/"
    )
    named = {json.loads(line).get("name", "").rsplit("/", 1)[-1] for line in checked.stdout.splitlines()}
    assert checked.returncode == 1 and named >= {"grew", "extra-big"} and "small" not in named, checked.stdout


def test_a_link_outside_the_window_keeps_its_object(minio: Endpoint, tmp_path: Path) -> None:
    """A symbolic link at the source is skipped, not followed; outside the window it was left out
    of the walk altogether, and the object uploaded from it earlier deleted."""
    bucket = new_bucket(minio)
    tree = _aged(tmp_path / "src", {"real.txt": b"r"}, set())
    (tree / "link.txt").symlink_to(tree / "real.txt")
    assert run_cli(minio.env, "cp", "--follow-symlinks", f"{tree}/", f"s3://{bucket}/w/").returncode == 0

    synced = run_cli(minio.env, "sync", "--delete", "--newer-than", CUT, f"{tree}/", f"s3://{bucket}/w/")
    assert synced.returncode == 0, synced.stderr
    assert keys(minio, bucket, "w/") == ["link.txt", "real.txt"]
