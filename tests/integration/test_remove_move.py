"""`rm` and `mv` against a real MinIO: batching, per-key errors, globs, and mv never deleting a
source whose copy failed."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from conftest import Endpoint, bucket_digests, make_tree, new_bucket, run_cli, sha256, tree_digests

import s3bulk
from s3bulk._config import AwsSettings
from s3bulk._stores.retry import Retrier, RetryPolicy
from s3bulk._stores.storage import Storage


def _upload_many(minio: Endpoint, tmp_path: Path, bucket: str, count: int, prefix: str) -> None:
    tree = make_tree(tmp_path / "many", {f"k{i:05d}.txt": str(i).encode() for i in range(count)})
    report = s3bulk.copy(f"{tree}/", f"s3://{bucket}/{prefix}", journal=False)
    assert report.ok and report.objects_done == count, report.failures


def test_rm_2500_keys_in_three_requests(minio: Endpoint, aws_env: dict, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    _upload_many(minio, tmp_path, bucket, 2500, "many/")
    minio.client().put_object(Bucket=bucket, Key="manyother.txt", Body=b"next to the prefix: kept")

    result = run_cli(minio.env, "rm", "--json", f"s3://{bucket}/many/")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    summary = lines[-1]["summary"]
    assert summary["objects_done"] == 2500 and summary["objects_failed"] == 0
    assert summary["requests"]["DELETE"] == 3  # 1,000 + 1,000 + 500 keys
    listed = summary["requests"]["LIST"]
    assert summary["request_cost_usd"] == round(listed * 0.005 / 1000, 6)  # DELETE is free, LIST is not
    assert len(lines) == 2501 and lines[0]["source"].startswith(f"s3://{bucket}/many/k")
    assert list(bucket_digests(minio, bucket)) == ["manyother.txt"]


def test_rm_glob_single_key_and_refusals(minio: Endpoint, aws_env: dict) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for key in ("logs/a.gz", "logs/b.gz", "logs/c.txt", "logs/sub/d.gz", "top.gz"):
        client.put_object(Bucket=bucket, Key=key, Body=b"x")

    glob = s3bulk.remove(f"s3://{bucket}/logs/*.gz")
    assert glob.ok and glob.objects_done == 3, glob.failures  # '*' crosses '/', like s5cmd
    assert sorted(bucket_digests(minio, bucket)) == ["logs/c.txt", "top.gz"]

    single = run_cli(minio.env, "rm", f"s3://{bucket}/top.gz")
    assert single.returncode == 0, single.stderr
    missing = run_cli(minio.env, "rm", f"s3://{bucket}/top.gz")
    assert missing.returncode == 1 and "no such object" in missing.stderr
    everything = run_cli(minio.env, "rm", f"s3://{bucket}")
    assert everything.returncode == 2 and f"say s3://{bucket}/" in everything.stderr
    assert list(bucket_digests(minio, bucket)) == ["logs/c.txt"]


def test_delete_objects_reports_each_failed_key(minio: Endpoint, aws_env: dict) -> None:
    """A DeleteObjects answer can be 200 OK and still refuse keys: each is reported by name."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="fine.txt", Body=b"x")

    async def delete() -> dict[str, str]:
        client = Storage(AwsSettings.from_env(), retry=Retrier(RetryPolicy(max_attempts=2)))
        try:
            return await client.delete_many(bucket, ["fine.txt", "a/../escape"])
        finally:
            await client.close()

    failed = asyncio.run(delete())
    assert list(failed) == ["a/../escape"]
    assert "XMinioInvalidObjectName" in failed["a/../escape"]
    assert bucket_digests(minio, bucket) == {}


def test_mv_upload_and_between_buckets(minio: Endpoint, aws_env: dict, tmp_path: Path) -> None:
    files = {"a.txt": b"a", "d/b.bin": b"b" * 5000}
    source = make_tree(tmp_path / "src", files)
    expected = tree_digests(source)
    bucket, other = new_bucket(minio), new_bucket(minio)

    up = s3bulk.move(f"{source}/", f"s3://{bucket}/m/")
    assert up.ok and up.objects_done == 2 and up.objects_deleted == 2, up.failures
    assert bucket_digests(minio, bucket, "m/") == expected
    assert not [p for p in source.rglob("*") if p.is_file()]

    across = run_cli(minio.env, "mv", f"s3://{bucket}/m/", f"s3://{other}/n/")
    assert across.returncode == 0, across.stderr
    assert bucket_digests(minio, other, "n/") == expected
    assert bucket_digests(minio, bucket) == {}


def test_mv_keeps_sources_whose_copy_failed(minio: Endpoint, aws_env: dict, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for key, data in {"s/a.txt": b"a", "s/b.txt": b"b", "s/c.txt": b"c"}.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)
    target = tmp_path / "out"
    (target / "b.txt").mkdir(parents=True)  # a directory where one file must land: that download fails

    result = run_cli(minio.env, "mv", f"s3://{bucket}/s/", f"{target}/")
    assert result.returncode == 1
    assert "b.txt" in result.stderr
    assert sorted(bucket_digests(minio, bucket)) == ["s/b.txt"]  # only the failed one stays
    assert (target / "a.txt").read_bytes() == b"a" and (target / "c.txt").read_bytes() == b"c"

    broken = run_cli(minio.env, "mv", f"s3://{bucket}/s/", "s3://no-such-bucket-here/x/")
    assert broken.returncode == 1 and "NoSuchBucket" in broken.stderr
    assert bucket_digests(minio, bucket) == {"s/b.txt": sha256(b"b")}


def test_max_memory_fits_the_job_or_says_what_it_needs(
    minio: Endpoint, aws_env: dict, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    source = make_tree(tmp_path / "src", {f"f{i:03d}.txt": b"x" * i for i in range(50)})
    report = s3bulk.copy(f"{source}/", f"s3://{bucket}/m/", engine="processes", max_memory=128 * 1000**2)
    assert report.ok and report.objects_done == 50, report.failures
    # a second interpreter does not fit in 128 MB: the one worker runs in the driver's process
    assert (report.engine, report.workers, report.inline) == ("processes", 1, True)

    too_small = run_cli(minio.env, "cp", "--max-memory", "50MB", f"{source}/", f"s3://{bucket}/n/")
    assert too_small.returncode == 2
    assert "--max-memory 47.7 MiB is below the 92.0 MiB a job needs" in too_small.stderr
    assert bucket_digests(minio, bucket, "n/") == {}


def test_rm_and_mv_of_a_manifest_take_only_what_the_filters_select(minio: Endpoint, tmp_path: Path) -> None:
    """--files-from names the candidates; --include/--exclude and the window still select among
    them (rm sent every named key to DeleteObjects, --exclude '*.keep' or not; mv of named files
    moved, and so deleted, files outside the window)."""
    bucket = new_bucket(minio)
    client = minio.client()
    for key in ("p/a.txt", "p/b.keep", "p/c.txt"):
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    names = tmp_path / "names.txt"
    names.write_text("a.txt\nb.keep\n")
    removed = run_cli(minio.env, "rm", "--files-from", str(names), "--exclude", "*.keep", f"s3://{bucket}/p/")
    assert removed.returncode == 0, removed.stderr
    assert sorted(bucket_digests(minio, bucket)) == ["p/b.keep", "p/c.txt"]
    client.put_object(Bucket=bucket, Key="p/big.txt", Body=b"x" * 100)
    names.write_text("b.keep\nbig.txt\nnot-there.txt\n")  # a window: each named key is looked up
    sized = run_cli(minio.env, "rm", "--files-from", str(names), "--min-size", "10", f"s3://{bucket}/p/")
    assert sized.returncode == 0, sized.stderr
    assert sorted(bucket_digests(minio, bucket)) == ["p/b.keep", "p/c.txt"]

    tree = make_tree(tmp_path / "src", {"old.txt": b"old", "new.txt": b"new"})
    os.utime(tree / "old.txt", (1_577_836_800, 1_577_836_800))  # 2020-01-01
    names.write_text("old.txt\nnew.txt\n")
    moved = run_cli(
        minio.env,
        "mv",
        "--files-from",
        str(names),
        "--newer-than",
        "2025-01-01",
        f"{tree}/",
        f"s3://{bucket}/m/",
    )
    assert moved.returncode == 0, moved.stderr
    assert sorted(bucket_digests(minio, bucket, "m/")) == ["new.txt"]
    assert sorted(path.name for path in tree.iterdir()) == ["old.txt"]
