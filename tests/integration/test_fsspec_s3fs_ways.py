"""s3bulk.fsspec used as code written for s3fs uses it (issue 64), against MinIO: the calls that
were silently wrong (did nothing, overwrote, left objects, returned the whole bucket), each
checked by the objects it leaves; its files as fsspec's buffered files; s3fs's storage options.
s3fs's own suite runs against s3bulk:// too (test_s3fs_release.py)."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import pytest
from conftest import Endpoint, new_bucket

from s3bulk.fsspec import S3BulkFileSystem


@pytest.fixture
def fs(minio: Endpoint, aws_env: dict[str, str]) -> S3BulkFileSystem:
    return fsspec.filesystem("s3bulk", endpoint_url=aws_env["AWS_ENDPOINT_URL"], skip_instance_cache=True)


def _keys(minio: Endpoint, bucket: str) -> dict[str, bytes]:
    client = minio.client()
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])  # type: ignore[attr-defined]
    return {
        each["Key"]: client.get_object(Bucket=bucket, Key=each["Key"])["Body"].read()  # type: ignore[attr-defined]
        for each in listed
    }


def _buckets(minio: Endpoint) -> set[str]:
    return {each["Name"] for each in minio.client().list_buckets()["Buckets"]}  # type: ignore[attr-defined]


def test_rmdir_removes_an_empty_bucket_and_touch_writes_an_empty_object(
    fs: S3BulkFileSystem, minio: Endpoint
) -> None:
    bucket = new_bucket(minio)
    fs.touch(f"{bucket}/empty")
    assert _keys(minio, bucket) == {"empty": b""}
    with pytest.raises(OSError):  # a bucket holding objects stays
        fs.rmdir(bucket)
    fs.rm(f"{bucket}/empty")

    fs.rmdir(bucket)

    assert bucket not in _buckets(minio)


def test_put_with_mode_create_never_overwrites_one_file_or_many(
    fs: S3BulkFileSystem, minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="kept", Body=b"theirs")  # type: ignore[attr-defined]
    (tmp_path / "mine").write_bytes(b"mine")
    for i in range(20):
        (tmp_path / "many" / "sub").mkdir(parents=True, exist_ok=True)
        (tmp_path / "many" / "sub" / f"f{i}").write_bytes(b"new")
    minio.client().put_object(Bucket=bucket, Key="tree/sub/f7", Body=b"theirs")  # type: ignore[attr-defined]

    with pytest.raises(FileExistsError):
        fs.put(str(tmp_path / "mine"), f"{bucket}/kept", mode="create")
    with pytest.raises(FileExistsError):
        fs.put(str(tmp_path / "many") + "/", f"{bucket}/tree", recursive=True, mode="create")
    fs.put(str(tmp_path / "mine"), f"{bucket}/fresh", mode="create")

    stored = _keys(minio, bucket)
    assert stored["kept"] == b"theirs" and stored["tree/sub/f7"] == b"theirs" and stored["fresh"] == b"mine"


def test_recursive_rm_deletes_folder_markers_and_a_bucket_named_alone(
    fs: S3BulkFileSystem, minio: Endpoint
) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    # the folder markers last: boto3 sends each PUT with `Expect: 100-continue`, and MinIO leaves
    # the connection of an empty "x/" PUT so that the client's next PUT on it waits 30 s for an answer
    for key in ("logs/a/x", "other/y", "logs/", "logs/a/"):
        client.put_object(Bucket=bucket, Key=key, Body=b"" if key.endswith("/") else b"1")  # type: ignore[attr-defined]

    deleted = fs.rm(f"{bucket}/logs", recursive=True)

    assert sorted(_keys(minio, bucket)) == ["other/y"]
    assert f"{bucket}/logs/a/x" in deleted and not fs.isdir(f"{bucket}/logs")
    fs.rm(bucket, recursive=True)
    assert bucket not in _buckets(minio)


def test_find_with_a_prefix_returns_only_the_names_that_start_with_it(
    fs: S3BulkFileSystem, minio: Endpoint
) -> None:
    bucket = new_bucket(minio)
    fs.pipe(
        {f"{bucket}/d/train-{i}": b"t" for i in range(3)} | {f"{bucket}/d/test-{i}": b"s" for i in range(2)}
    )

    assert fs.find(f"{bucket}/d", prefix="train-") == [f"{bucket}/d/train-{i}" for i in range(3)]
    assert fs.find(bucket, prefix="d/te") == [f"{bucket}/d/test-{i}" for i in range(2)]
    assert len(fs.ls(f"{bucket}/d")) == 5  # the prefixed find kept no partial listing


def test_rm_of_what_is_not_there_raises_file_not_found(fs: S3BulkFileSystem, minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    with pytest.raises(FileNotFoundError):
        fs.rm(f"{bucket}-missing")
    with pytest.raises(FileNotFoundError):
        fs.rm(f"{bucket}/nothing", recursive=True)
    with pytest.raises(FileNotFoundError):
        fs.rm([f"{bucket}-missing/file"])


def test_files_are_fsspecs_buffered_files_with_size_read_block_and_append(
    fs: S3BulkFileSystem, minio: Endpoint
) -> None:
    bucket, mib = new_bucket(minio), 1024 * 1024
    fs.pipe(f"{bucket}/lines", b"one\ntwo\nthree\n")

    with fs.open(f"{bucket}/lines") as handle:
        assert (handle.size, handle.details["size"]) == (14, 14)
    assert fs.read_block(f"{bucket}/lines", 1, 5, b"\n") == b"two\n"
    with fs.open(f"{bucket}/lines", "ab") as handle:
        handle.write(b"four\n")
    big = os.urandom(6 * mib)
    fs.pipe(f"{bucket}/big", big)
    with fs.open(f"{bucket}/big", "ab", block_size=5 * mib) as handle:  # copied as the first part
        handle.write(b"tail")
    with pytest.raises(ValueError):
        fs.open(f"{bucket}/small-parts", "wb", block_size=1024)

    stored = _keys(minio, bucket)
    assert stored["lines"] == b"one\ntwo\nthree\nfour\n" and stored["big"] == big + b"tail"
    assert "small-parts" not in stored


def test_s3fs_storage_options_are_taken(
    minio: Endpoint, aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = new_bucket(minio)
    client_env = minio.server.client_env()
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")  # the keys given are the only ones
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    fs = S3BulkFileSystem(
        key=client_env["AWS_ACCESS_KEY_ID"],
        secret=client_env["AWS_SECRET_ACCESS_KEY"],
        client_kwargs={"endpoint_url": aws_env["AWS_ENDPOINT_URL"]},
        config_kwargs={"connect_timeout": 5},
        s3_additional_kwargs={"ContentType": "text/csv", "Metadata": {"origin": "s3fs"}},
        default_block_size=5 * 1024 * 1024,
        skip_instance_cache=True,
    )
    with fs.open(f"{bucket}/table.csv", "wb") as handle:
        handle.write(b"a,b\n")

    head = minio.client().head_object(Bucket=bucket, Key="table.csv")  # type: ignore[attr-defined]
    assert (head["ContentType"], head["Metadata"]) == ("text/csv", {"origin": "s3fs"})
    assert fs.info(f"{bucket}/table.csv")["ContentType"] == "text/csv"
