"""Object attributes on every write, checked with HEAD on what MinIO stored: Content-Type guessed
and given, Content-* headers, metadata, storage class, SSE-S3 and SSE-KMS, tags; for single-part
and multipart uploads and copies, sync, and the Python API; bad values refused before anything
is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli

import s3bulk
from s3bulk.testing.servers import KMS_KEY_ID

MiB = 1024 * 1024
TYPES = {
    "index.html": "text/html",
    "site.css": "text/css",
    "app.js": "text/javascript",
    "data.json": "application/json",
    "logo.png": "image/png",
    "icon.svg": "image/svg+xml",
    "module.wasm": "application/wasm",
}
SMALL = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]


def head(endpoint: Endpoint, bucket: str, key: str) -> dict:
    return endpoint.client().head_object(Bucket=bucket, Key=key)


def tags(endpoint: Endpoint, bucket: str, key: str) -> dict[str, str]:
    found = endpoint.client().get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    return {tag["Key"]: tag["Value"] for tag in found}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    for name in TYPES:
        (root / name).write_bytes(b"x" * 100)
    (root / "big.json").write_bytes(b"y" * (6 * MiB))  # above the 5 MiB threshold: multipart
    return root


def test_uploads_get_the_content_type_of_their_name_single_and_multipart(minio: Endpoint, tree: Path) -> None:
    bucket = new_bucket(minio)
    done = run_cli(minio.env, "cp", *SMALL, f"{tree}/", f"s3://{bucket}/site/")
    assert done.returncode == 0, done.stderr
    for name, kind in TYPES.items():
        assert head(minio, bucket, f"site/{name}")["ContentType"] == kind, name
    big = head(minio, bucket, "site/big.json")
    assert big["ContentType"] == "application/json" and "-" in big["ETag"]  # multipart


@pytest.mark.parametrize("name", ["index.html", "big.json"], ids=["single-part", "multipart"])
def test_every_content_header_and_metadata_are_stored(minio: Endpoint, tree: Path, name: str) -> None:
    bucket = new_bucket(minio)
    done = run_cli(
        minio.env,
        "cp",
        *SMALL,
        str(tree / name),
        f"s3://{bucket}/{name}",
        "--content-type", "text/plain; charset=utf-8",
        "--content-encoding", "identity",
        "--content-disposition", "attachment; filename=x.txt",
        "--content-language", "en-GB",
        "--cache-control", "max-age=60",
        "--expires", "2030-01-02T03:04:05Z",
        "--metadata", "team=search",
        "--metadata", "run-id=42",
        "--storage-class", "REDUCED_REDUNDANCY",
        "--tags", "owner=ann&tier=hot",
        "--acl", "private",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = head(minio, bucket, name)
    assert stored["ContentType"] == "text/plain; charset=utf-8"
    assert stored["ContentEncoding"] == "identity"
    assert stored["ContentDisposition"] == "attachment; filename=x.txt"
    assert stored["ContentLanguage"] == "en-GB"
    assert stored["CacheControl"] == "max-age=60"
    assert stored["ResponseMetadata"]["HTTPHeaders"]["expires"] == "Wed, 02 Jan 2030 03:04:05 GMT"
    assert stored["Metadata"] == {"team": "search", "run-id": "42"}
    assert stored["StorageClass"] == "REDUCED_REDUNDANCY"
    assert tags(minio, bucket, name) == {"owner": "ann", "tier": "hot"}


@pytest.mark.parametrize("name", ["index.html", "big.json"], ids=["single-part", "multipart"])
def test_server_side_encryption_s3_and_kms(minio: Endpoint, tree: Path, name: str) -> None:
    bucket = new_bucket(minio)
    sse_s3 = run_cli(minio.env, "cp", *SMALL, str(tree / name), f"s3://{bucket}/s3-{name}", "--sse", "AES256")
    assert sse_s3.returncode == 0, sse_s3.stderr
    assert head(minio, bucket, f"s3-{name}")["ServerSideEncryption"] == "AES256"
    kms = run_cli(
        minio.env, "cp", *SMALL, str(tree / name), f"s3://{bucket}/kms-{name}",
        "--sse", "aws:kms", "--sse-kms-key-id", KMS_KEY_ID,
    )  # fmt: skip
    assert kms.returncode == 0, kms.stderr
    stored = head(minio, bucket, f"kms-{name}")
    assert stored["ServerSideEncryption"] == "aws:kms"
    assert stored["SSEKMSKeyId"].endswith(KMS_KEY_ID)
    got = minio.client().get_object(Bucket=bucket, Key=f"kms-{name}")["Body"].read()
    assert got == (tree / name).read_bytes()


@pytest.mark.parametrize("threshold", ["5GiB", "5MiB"], ids=["CopyObject", "UploadPartCopy"])
def test_copies_keep_the_source_attributes_unless_told(minio: Endpoint, tree: Path, threshold: str) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    body = (tree / "big.json").read_bytes()
    client.put_object(
        Bucket=bucket, Key="src/a.json", Body=body, ContentType="application/x-mine",
        CacheControl="no-cache", Metadata={"origin": "lab"}, Tagging="keep=yes",
    )  # fmt: skip
    copy = ["cp", "--copy-multipart-threshold", threshold, "--part-size", "5MiB"]
    kept = run_cli(minio.env, *copy, f"s3://{bucket}/src/", f"s3://{bucket}/kept/")
    assert kept.returncode == 0, kept.stderr
    stored = head(minio, bucket, "kept/a.json")
    assert (stored["ContentType"], stored["CacheControl"]) == ("application/x-mine", "no-cache")
    assert stored["Metadata"] == {"origin": "lab"} and tags(minio, bucket, "kept/a.json") == {"keep": "yes"}

    replaced = run_cli(
        minio.env, *copy, f"s3://{bucket}/src/", f"s3://{bucket}/new/",
        "--metadata", "origin=prod", "--tags", "keep=no", "--storage-class", "REDUCED_REDUNDANCY",
    )  # fmt: skip
    assert replaced.returncode == 0, replaced.stderr
    stored = head(minio, bucket, "new/a.json")
    assert stored["Metadata"] == {"origin": "prod"}
    assert "CacheControl" not in stored  # REPLACE: what was not given is not kept
    assert stored["StorageClass"] == "REDUCED_REDUNDANCY"
    assert tags(minio, bucket, "new/a.json") == {"keep": "no"}
    assert client.get_object(Bucket=bucket, Key="new/a.json")["Body"].read() == body

    only_class = run_cli(
        minio.env,
        *copy,
        f"s3://{bucket}/src/",
        f"s3://{bucket}/rrs/",
        "--storage-class",
        "REDUCED_REDUNDANCY",
    )
    assert only_class.returncode == 0, only_class.stderr
    stored = head(minio, bucket, "rrs/a.json")  # the storage class alone leaves the metadata as it was
    assert stored["StorageClass"] == "REDUCED_REDUNDANCY" and stored["Metadata"] == {"origin": "lab"}
    assert stored["ContentType"] == "application/x-mine"


def test_sync_and_the_python_api_set_attributes(minio: Endpoint, tree: Path, aws_env: dict[str, str]) -> None:
    bucket = new_bucket(minio)
    done = run_cli(minio.env, "sync", f"{tree}/", f"s3://{bucket}/s/", "--cache-control", "max-age=5")
    assert done.returncode == 0, done.stderr
    assert head(minio, bucket, "s/app.js")["CacheControl"] == "max-age=5"
    assert head(minio, bucket, "s/app.js")["ContentType"] == "text/javascript"

    attributes = s3bulk.Attributes(metadata={"k": "v"}, content_type="application/octet-stream")
    report = s3bulk.copy(str(tree / "logo.png"), f"s3://{bucket}/api/logo.png", attributes=attributes)
    assert report.objects_done == 1
    stored = head(minio, bucket, "api/logo.png")
    assert stored["ContentType"] == "application/octet-stream" and stored["Metadata"] == {"k": "v"}

    listed = run_cli(minio.env, "ls", "--json", "--attributes", f"s3://{bucket}/api")
    assert listed.returncode == 0, listed.stderr
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["url"] == f"s3://{bucket}/api/logo.png" and row["metadata"] == {"k": "v"}
    assert row["content_type"] == "application/octet-stream"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--storage-class", "COLD"], "--storage-class 'COLD': use one of STANDARD"),
        (["--sse", "rot13"], "--sse 'rot13': use one of AES256"),
        (["--sse-kms-key-id", "k"], "--sse-kms-key-id needs --sse aws:kms"),
        (["--acl", "everyone"], "--acl 'everyone': use one of private"),
        (["--metadata", "novalue"], "--metadata 'novalue': write it as KEY=VALUE"),
        (["--metadata", "a b=1"], "a metadata key is letters, digits"),
        (["--tags", "a=1", "--tags", "a=2"], "--tags: each key once"),
        (["--expires", "soon"], "--expires 'soon': give a date"),
        (["--metadata-directive", "COPY", "--cache-control", "x"], "--metadata-directive COPY keeps"),
    ],
)
def test_bad_attributes_are_one_line_and_nothing_is_sent(
    minio: Endpoint, tree: Path, flags: list[str], message: str
) -> None:
    bucket = new_bucket(minio)
    done = run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/x/", *flags)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert minio.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_downloads_show_each_objects_attributes_in_json(minio: Endpoint, tree: Path, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    flags = [
        "--metadata",
        "team=search",
        "--cache-control",
        "max-age=60",
        "--storage-class",
        "REDUCED_REDUNDANCY",
    ]
    up = run_cli(minio.env, "cp", *SMALL, f"{tree}/", f"s3://{bucket}/site/", *flags)
    assert up.returncode == 0, up.stderr
    down = run_cli(minio.env, "cp", f"s3://{bucket}/site/", f"{tmp_path}/out/", "--json", "--attributes")
    assert down.returncode == 0, down.stderr
    records = [row for line in down.stdout.splitlines() if "destination" in (row := json.loads(line))]
    assert sorted(record["source"].rsplit("/", 1)[1] for record in records) == sorted([*TYPES, "big.json"])
    for record in records:
        name = record["source"].rsplit("/", 1)[1]
        shown = record["attributes"]
        assert shown["content_type"] == TYPES.get(name, "application/json"), name
        assert shown["metadata"] == {"team": "search"} and shown["cache_control"] == "max-age=60"
        assert shown["storage_class"] == "REDUCED_REDUNDANCY" and shown["size"] == record["size"]
        assert (tmp_path / "out" / name).read_bytes() == (tree / name).read_bytes()
    for wrong, message in [
        (["--attributes"], "--attributes adds to each --json record: add --json"),
        (["--attributes", "--json", f"{tree}/", f"s3://{bucket}/again/"], "--attributes is for downloads"),
    ]:
        args = wrong if len(wrong) > 2 else [*wrong, f"s3://{bucket}/site/", f"{tmp_path}/other/"]
        refused = run_cli(minio.env, "cp", *args)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and message in refused.stderr
    assert not (tmp_path / "other").exists()
    assert minio.client().list_objects_v2(Bucket=bucket, Prefix="again/").get("KeyCount", 0) == 0
