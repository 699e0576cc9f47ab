"""Caps on a whole job (issue 21, item 3), against MinIO: --bwlimit (bytes/s) and --tpslimit
(requests/s) hold a job to at most its rate, all workers together. Only the lower bound is
checked (a cap can make a job slower, never faster): the job cannot finish before the cap's
arithmetic allows, whatever the machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli

MiB = 1024 * 1024


def timed(env: dict[str, str], *args: str) -> float:
    began = time.monotonic()
    done = run_cli(env, *args)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - began


def test_bwlimit_holds_uploads_and_downloads_to_the_rate(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    tree = tmp_path / "up"
    tree.mkdir()
    for number in range(6):
        (tree / f"f{number}").write_bytes(bytes([number]) * (2 * MiB))
    (tree / "big").write_bytes(b"b" * (12 * MiB))  # multipart: each part waits for its bytes
    small = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]
    # 24 MiB at 8 MiB/s, one second's worth going at once: at least 2 s
    assert timed(minio.env, "cp", *small, "--bwlimit", "8MiB", f"{tree}/", f"s3://{bucket}/b/") >= 2.0
    assert (
        timed(minio.env, "cp", *small, "--bwlimit", "8MiB", f"s3://{bucket}/b/", f"{tmp_path}/down/") >= 2.0
    )
    for path in tree.iterdir():
        assert (tmp_path / "down" / path.name).read_bytes() == path.read_bytes()


def test_tpslimit_holds_requests_to_the_rate(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for number in range(30):
        client.put_object(Bucket=bucket, Key=f"s/{number:02d}", Body=b"x")
    # 30 CopyObject requests and a listing at 10 requests/s, 10 at once: at least 2.1 s
    assert timed(minio.env, "cp", "--tpslimit", "10", f"s3://{bucket}/s/", f"s3://{bucket}/d/") >= 2.1
    assert client.list_objects_v2(Bucket=bucket, Prefix="d/")["KeyCount"] == 30


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--bwlimit", "0"], "--bwlimit must be at least 1 byte/s"),
        (["--bwlimit", "fast"], "--bwlimit: cannot read size 'fast'"),
        (["--tpslimit", "0"], "--tpslimit must be more than 0 requests/s"),
    ],
)
def test_bad_caps_are_one_line(minio: Endpoint, tmp_path: Path, flags: list[str], message: str) -> None:
    bucket = new_bucket(minio)
    (tmp_path / "f").write_text("x")
    done = run_cli(minio.env, "cp", *flags, f"{tmp_path}/", f"s3://{bucket}/x/")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert minio.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
