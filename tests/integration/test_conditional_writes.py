"""Conditional writes on MinIO (issue 66): cp -n is one PUT with If-None-Match: * per object and no
HEAD (a 412 counts as unchanged), sync writes over what it listed with If-Match of the ETag listed
and where nothing was listed with If-None-Match: *, so another writer's object written between the
listing and the write is never replaced; pipe, cp and the API take --if-match / --if-none-match
for one object. Requests are counted by the proxy in front of MinIO (`HostileS3.log`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Endpoint, Hostile, new_bucket, run_cli

import s3bulk
from s3bulk.testing.hostile import LostAnswer, Meanwhile

PROBE = ".s3bulk-probe-"


def _bodies(minio: Endpoint, bucket: str, prefix: str = "") -> dict[str, bytes]:
    client = minio.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {
        entry["Key"]: client.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read() for entry in listed
    }


def _cp_n_sends_one_put_each_and_no_head(hostile: Hostile, minio: Endpoint, count: int, root: Path) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    root.mkdir()
    for n in range(count):
        (root / f"k{n:05d}").write_bytes(f"new {n}".encode())
        if n % 2 == 0:
            client.put_object(Bucket=bucket, Key=f"dst/k{n:05d}", Body=b"old")
    hostile.server.reset()
    result = run_cli(hostile.env, "cp", "-n", f"{root}/", f"s3://{bucket}/dst/")
    assert result.returncode == 0, result.stderr
    assert f"{count // 2:,} unchanged" in result.stdout, result.stdout
    log = hostile.server.log
    written = [seen for seen in log.seen if seen.operation == "PutObject" and PROBE not in seen.key]
    assert len(written) == count  # one request per object, refused (412) where one is there
    assert log.count("HeadObject") == 0
    bodies = _bodies(minio, bucket, "dst/")
    assert len(bodies) == count
    for key, body in bodies.items():
        number = int(key[-5:])
        assert body == (b"old" if number % 2 == 0 else f"new {number}".encode())
    assert not [key for key in _bodies(minio, bucket) if PROBE in key]  # the probe is gone


def test_cp_n_is_one_conditional_write_per_object_and_no_head(
    hostile: Hostile, minio: Endpoint, tmp_path: Path
) -> None:
    _cp_n_sends_one_put_each_and_no_head(hostile, minio, 40, tmp_path / "src")


@pytest.mark.campaign
def test_cp_n_of_10000_objects_onto_half_of_them(hostile: Hostile, minio: Endpoint, tmp_path: Path) -> None:
    _cp_n_sends_one_put_each_and_no_head(hostile, minio, 10_000, tmp_path / "src")


def test_cp_n_of_files_counts_what_is_there_unchanged(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    for name in "abcd":
        (tmp_path / "src" / name).write_bytes(b"new " + name.encode())
    minio.client().put_object(Bucket=bucket, Key="t/a", Body=b"old")
    result = run_cli(hostile.env, "cp", "-n", f"{tmp_path / 'src'}/", f"s3://{bucket}/t/")
    assert result.returncode == 0, result.stderr
    assert "1 unchanged" in result.stdout, result.stdout
    assert _bodies(minio, bucket, "t/") == {"t/a": b"old", "t/b": b"new b", "t/c": b"new c", "t/d": b"new d"}
    assert hostile.server.log.count("HeadObject") == 0


def test_sync_never_replaces_an_object_written_after_its_listing(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """Another writer replaces t/a (listed) and writes t/b (not listed) just before sync's
    writes of them reach the server: both stay the writer's, each item fails by name, the rest
    is synced, and the job's failures run again (the writer done) copy over them."""
    source = tmp_path / "src"
    source.mkdir()
    for name in "abc":
        (source / name).write_bytes(b"source " + name.encode())
    client = minio.client()
    client.put_object(Bucket=bucket, Key="t/a", Body=b"old a")
    direct = minio.client()
    hostile.misbehave(
        Meanwhile(lambda: direct.put_object(Bucket=bucket, Key="t/a", Body=b"theirs a")),
        operation="PutObject",
        key="t/a",
        times=1,
    )
    hostile.misbehave(
        Meanwhile(lambda: direct.put_object(Bucket=bucket, Key="t/b", Body=b"theirs b")),
        operation="PutObject",
        key="t/b",
        times=1,
    )
    result = run_cli(hostile.env, "sync", f"{source}/", f"s3://{bucket}/t/")
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("changed since it was listed") == 2, result.stderr
    assert "another writer wrote an object there" in result.stderr
    assert _bodies(minio, bucket, "t/") == {"t/a": b"theirs a", "t/b": b"theirs b", "t/c": b"source c"}
    job = result.stderr.split("--retry-failed ")[1].split()[0]
    again = run_cli(hostile.env, "sync", "--retry-failed", job)  # as the line says
    assert again.returncode == 0, again.stderr
    assert _bodies(minio, bucket, "t/") == {f"t/{name}": b"source " + name.encode() for name in "abc"}


@pytest.mark.parametrize("operation", ["PutObject", "CompleteMultipartUpload"])
def test_a_conditional_write_whose_answer_was_lost_is_done_not_refused(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, operation: str
) -> None:
    """The service stores sync's write of t/a (If-Match of the listed ETag) and of t/b (If-None-Match:
    nothing was listed), and the connection resets before its answer: the retry finds its own
    object there and is refused (412). That is the write done, not another writer's: exit 0, every
    object the source's (make reliability's resets found 1% of a sync's writes failed so)."""
    size = 6 * 1024 * 1024 if operation == "CompleteMultipartUpload" else 100
    source = tmp_path / "src"
    source.mkdir()
    for name in "abc":
        (source / name).write_bytes(name.encode() * size)
    minio.client().put_object(Bucket=bucket, Key="t/a", Body=b"old a")
    for key in ("t/a", "t/b"):
        hostile.misbehave(LostAnswer(), operation=operation, key=key, times=1)
    result = run_cli(
        hostile.env,
        "sync",
        "--part-size",
        "5MiB",
        "--multipart-threshold",
        "5MiB",
        f"{source}/",
        f"s3://{bucket}/t/",
    )
    assert result.returncode == 0, result.stderr
    assert "changed since it was listed" not in result.stderr
    assert _bodies(minio, bucket, "t/") == {f"t/{name}": name.encode() * size for name in "abc"}
    assert [seen.fault for seen in hostile.server.log.seen if seen.fault] == ["LostAnswer"] * 2


@pytest.mark.parametrize("size", [100, 6 * 1024 * 1024], ids=["put", "parts"])
def test_fsspec_create_whose_answer_was_lost_writes_and_raises_nothing(
    hostile: Hostile, minio: Endpoint, bucket: str, aws_env: dict[str, str], size: int
) -> None:
    """open(..., "xb") through s3bulk:// (If-None-Match: *), its PutObject or completion stored
    and its answer lost: the retry's 412 is its own object, not FileExistsError."""
    from s3bulk.fsspec import S3BulkFileSystem

    fs = S3BulkFileSystem(endpoint_url=hostile.server.endpoint, skip_instance_cache=True)
    operation = "PutObject" if size < 5 * 1024 * 1024 else "CompleteMultipartUpload"
    hostile.misbehave(LostAnswer(), operation=operation, key="x/new", times=1)
    with fs.open(f"{bucket}/x/new", "xb", block_size=5 * 1024 * 1024) as out:
        out.write(b"n" * size)
    assert _bodies(minio, bucket, "x/") == {"x/new": b"n" * size}
    assert [seen.fault for seen in hostile.server.log.seen if seen.fault] == ["LostAnswer"]
    with pytest.raises(FileExistsError), fs.open(f"{bucket}/x/new", "xb") as again:
        again.write(b"second")


def test_pipe_n_and_if_match_for_one_object(minio: Endpoint, bucket: str) -> None:
    env = minio.env
    url = f"s3://{bucket}/one"
    assert run_cli_input(env, b"first", "pipe", "-n", url).returncode == 0
    kept = run_cli_input(env, b"second", "pipe", "-n", url)
    assert kept.returncode == 0 and "unchanged" in kept.stderr
    assert _bodies(minio, bucket) == {"one": b"first"}
    refused = run_cli_input(env, b"third", "pipe", "--if-match", '"0123456789abcdef0123456789abcdef"', url)
    assert (
        refused.returncode == 1
        and "PreconditionFailed" in refused.stderr
        and "Traceback" not in refused.stderr
    )
    etag = minio.client().head_object(Bucket=bucket, Key="one")["ETag"]
    assert run_cli_input(env, b"fourth", "pipe", "--if-match", etag, url).returncode == 0
    assert _bodies(minio, bucket) == {"one": b"fourth"}
    bad = run_cli_input(env, b"x", "pipe", "--if-none-match", "abc", url)
    assert bad.returncode == 2 and "--if-none-match 'abc'" in bad.stderr


def test_cp_and_the_api_take_if_none_match_and_if_match(
    minio: Endpoint, bucket: str, tmp_path: Path, aws_env: dict[str, str]
) -> None:
    (tmp_path / "f").write_bytes(b"file bytes")
    url = f"s3://{bucket}/k"
    assert run_cli(minio.env, "cp", "--if-none-match", "*", str(tmp_path / "f"), url).returncode == 0
    again = run_cli(minio.env, "cp", "--if-none-match", "*", str(tmp_path / "f"), url)
    assert again.returncode == 1 and "PreconditionFailed: an object is there" in again.stderr
    many = run_cli(minio.env, "cp", "--if-match", "e", f"{tmp_path}/", f"s3://{bucket}/p/")
    assert many.returncode == 2 and "for one object" in many.stderr
    with pytest.raises(s3bulk.S3BulkError, match="PreconditionFailed"):
        s3bulk.put(url, b"api bytes", if_none_match="*")
    etag = minio.client().head_object(Bucket=bucket, Key="k")["ETag"]
    assert s3bulk.put(url, b"api bytes", if_match=etag) == 9
    assert _bodies(minio, bucket) == {"k": b"api bytes"}


def run_cli_input(env: dict[str, str], data: bytes, *args: str) -> Any:
    import subprocess

    from conftest import S3BULK

    result = subprocess.run([*S3BULK, *args], env=env, input=data, capture_output=True, timeout=300)
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )
