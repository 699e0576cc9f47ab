"""Another writer changes the objects a job is copying, moving or reading (issue 62, item 3):
whatever lands is exactly one version of its source, and `mv` deletes a source only while it is
still the version it copied, so no writer's latest version is ever lost.

The writer is `s3bulk.testing.hostile.Meanwhile`: a PUT or DELETE sent straight to MinIO just
before (or just after) a chosen request of the job, so each race is run at its exact point; the
property at the end races a writer thread against real jobs, as a user's other program would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from conftest import Endpoint, Hostile, run_cli

from s3bulk.testing.hostile import Meanwhile
from s3bulk.testing.servers import KMS_KEY_ID

MiB = 1024 * 1024
PARTS = ["--part-size", "5MiB", "--multipart-threshold", "5MiB", "--copy-multipart-threshold", "5MiB"]


def plain_client(minio: Endpoint) -> Any:
    """boto3 sending no checksum of its own: an object it writes carries only what is asked."""
    settings = minio.server.client_env()
    return boto3.client(
        "s3",
        endpoint_url=settings["AWS_ENDPOINT_URL"],
        aws_access_key_id=settings["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=settings["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
        config=Config(request_checksum_calculation="when_required"),
    )


def writer(minio: Endpoint, bucket: str, key: str, body: bytes | None, **extra: Any) -> Callable[[], None]:
    """What another program does to s3://bucket/key: writes `body` there (None: deletes it)."""
    client = plain_client(minio)

    def change() -> None:
        if body is None:
            client.delete_object(Bucket=bucket, Key=key)
        else:
            client.put_object(Bucket=bucket, Key=key, Body=body, **extra)

    return change


def stored(minio: Endpoint, bucket: str, key: str) -> bytes | None:
    try:
        return bytes(minio.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    except minio.client().exceptions.NoSuchKey:
        return None


def named(body: bytes | None, versions: dict[str, bytes]) -> str:
    """Which version `body` is ("torn" for none of them, "absent" for no object)."""
    if body is None:
        return "absent"
    return next((name for name, each in versions.items() if each == body), "torn")


# ---- a copy in parts whose source is overwritten midway ------------------------------------------
@pytest.mark.parametrize("verb", ["cp", "mv"])
def test_a_source_overwritten_during_a_copy_in_parts_lands_whole(
    hostile: Hostile, minio: Endpoint, bucket: str, verb: str
) -> None:
    versions = {"v1": b"1" * (20 * MiB), "v2": b"2" * (20 * MiB)}  # four parts of 5 MiB
    minio.client().put_object(Bucket=bucket, Key="src", Body=versions["v1"])
    overwrite = Meanwhile(writer(minio, bucket, "src", versions["v2"]))
    hostile.misbehave(overwrite, operation="UploadPartCopy", bucket=bucket, after=1, times=1)
    result = run_cli(hostile.env, verb, *PARTS, f"s3://{bucket}/src", f"s3://{bucket}/dst")
    assert result.returncode == 0, result.stdout + result.stderr
    # the parts copied after the overwrite were refused (412); the copy began again, of v2 whole
    assert named(stored(minio, bucket, "dst"), versions) == "v2"
    assert named(stored(minio, bucket, "src"), versions) == ("v2" if verb == "cp" else "absent")
    assert minio.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# ---- mv: a source overwritten after it was copied is kept -------------------------------------------
@pytest.mark.parametrize(
    ("direction", "operation"),
    [("s3->s3", "CopyObject"), ("s3->s3 in parts", "CompleteMultipartUpload"), ("s3->local", "GetObject")],
)
def test_mv_keeps_a_source_overwritten_after_it_was_copied(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, direction: str, operation: str
) -> None:
    size = 12 * MiB if "parts" in direction else 1000
    versions = {"v1": b"1" * size, "v2": b"2" * size}
    minio.client().put_object(Bucket=bucket, Key="src", Body=versions["v1"])
    overwrite = Meanwhile(writer(minio, bucket, "src", versions["v2"]), after=True)
    hostile.misbehave(overwrite, operation=operation, bucket=bucket, times=1)
    local = direction == "s3->local"
    target = str(tmp_path / "dst") if local else f"s3://{bucket}/dst"
    result = run_cli(hostile.env, "mv", *PARTS, f"s3://{bucket}/src", target)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "changed after it was copied" in output, output
    assert named(stored(minio, bucket, "src"), versions) == "v2"  # the writer's version, kept
    copied = (tmp_path / "dst").read_bytes() if local else stored(minio, bucket, "dst")
    assert named(copied, versions) == "v1"


def test_mv_of_a_source_deleted_after_it_was_copied_keeps_the_copy(
    hostile: Hostile, minio: Endpoint, bucket: str
) -> None:
    minio.client().put_object(Bucket=bucket, Key="src", Body=b"v1")
    hostile.misbehave(
        Meanwhile(writer(minio, bucket, "src", None), after=True), operation="CopyObject", bucket=bucket
    )
    result = run_cli(hostile.env, "mv", f"s3://{bucket}/src", f"s3://{bucket}/dst")
    assert result.returncode == 0, result.stdout + result.stderr
    assert stored(minio, bucket, "dst") == b"v1" and stored(minio, bucket, "src") is None


# ---- a download in ranges of an object replaced midway -----------------------------------------------
def test_a_download_in_ranges_of_an_object_replaced_midway_never_lands_torn(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """SSE-KMS without a checksum: its ETag is no MD5, so nothing could tell a torn file; only
    If-Match on each range keeps it whole."""
    kms = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KMS_KEY_ID}
    versions = {"v1": b"1" * (12 * MiB), "v2": b"2" * (12 * MiB)}
    writer(minio, bucket, "obj", versions["v1"], **kms)()
    overwrite = Meanwhile(writer(minio, bucket, "obj", versions["v2"], **kms))
    hostile.misbehave(overwrite, operation="GetObject", bucket=bucket, after=1, times=1)
    result = run_cli(hostile.env, "cp", *PARTS, f"s3://{bucket}/obj", str(tmp_path / "obj"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert named((tmp_path / "obj").read_bytes(), versions) == "v2"
    assert [path.name for path in tmp_path.iterdir()] == ["obj"]  # no temporary left
