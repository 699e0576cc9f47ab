"""Public data (issue 21, item 8), against MinIO: behind a proxy that acts as a requester-pays
bucket (S3 answers 403 to a request without `x-amz-request-payer: requester`), every command
that reads sends the header with `--request-payer requester`, and without it fails in one line;
a bucket in another region than the one configured (a MinIO in eu-west-1, the user's region
us-east-1) is found from the service's answer, not failed; a versioned bucket's versions and
delete markers are listed, and each version read by its id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from conftest import Endpoint, new_bucket, run_cli

from s3bulk.testing import MinioServer
from s3bulk.testing.throttle import S3ThrottlingProxy


@pytest.fixture
def payer(minio: Endpoint) -> Iterator[S3ThrottlingProxy]:
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        proxy.requester_pays = True
        yield proxy


def test_requester_pays_reads_with_the_header_and_fails_in_one_line_without(
    minio: Endpoint, payer: S3ThrottlingProxy, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for key in ("d/a.txt", "d/b.txt"):
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    env = minio.env | {"AWS_ENDPOINT_URL": payer.endpoint}
    pay = ["--request-payer", "requester"]
    for args in (
        ["ls", "-r", f"s3://{bucket}/d/"],
        ["cp", f"s3://{bucket}/d/", f"{tmp_path}/down/"],
        ["cat", f"s3://{bucket}/d/a.txt"],
        ["head", f"s3://{bucket}/d/a.txt"],
        ["du", f"s3://{bucket}/d/"],
        ["cp", f"s3://{bucket}/d/", f"s3://{bucket}/copy/"],
    ):
        refused = run_cli(env, *args)
        assert refused.returncode != 0 and "AccessDenied" in refused.stderr, (args, refused.stderr)
        assert len([line for line in refused.stderr.splitlines() if "AccessDenied" in line]) == 1, args
        paid = run_cli(env, *args, *pay)
        assert paid.returncode == 0, (args, paid.stderr)
    assert (tmp_path / "down" / "b.txt").read_bytes() == b"d/b.txt"
    assert run_cli(env, "cat", f"s3://{bucket}/d/a.txt", *pay).stdout == "d/a.txt"
    assert sorted(
        item["Key"] for item in client.list_objects_v2(Bucket=bucket, Prefix="copy/")["Contents"]
    ) == [
        "copy/a.txt",
        "copy/b.txt",
    ]
    bad = run_cli(env, "ls", f"s3://{bucket}/", "--request-payer", "me")
    assert bad.returncode == 2 and "--request-payer 'me': the one value is 'requester'" in bad.stderr


@pytest.fixture(scope="module")
def minio_eu() -> Iterator[Endpoint]:
    """A MinIO in eu-west-1: a request signed for another region is refused, naming the right one."""
    with MinioServer(region="eu-west-1") as server:
        yield Endpoint(server)


def test_a_bucket_in_another_region_is_found_not_failed(minio_eu: Endpoint, tmp_path: Path) -> None:
    client = boto3.client(
        "s3", endpoint_url=minio_eu.server.endpoint, region_name="eu-west-1",
        aws_access_key_id=minio_eu.server.access_key, aws_secret_access_key=minio_eu.server.secret_key,
    )  # fmt: skip
    bucket = "far-away-data"
    client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    client.put_object(Bucket=bucket, Key="d/a.txt", Body=b"alpha")
    env = minio_eu.env | {"AWS_REGION": "us-east-1"}  # what the user has: the wrong region
    listed = run_cli(env, "ls", "-r", f"s3://{bucket}/d/")
    assert listed.returncode == 0 and "d/a.txt" in listed.stdout, listed.stderr
    cat = run_cli(env, "cat", f"s3://{bucket}/d/a.txt")
    assert cat.returncode == 0 and cat.stdout == "alpha", cat.stderr
    (tmp_path / "up").mkdir()
    for number in range(20):
        (tmp_path / "up" / f"f{number}").write_text(str(number))
    for engine in (["--engine", "async"], ["--workers", "2"]):  # learned in the driver, known by workers
        up = run_cli(env, "cp", *engine, f"{tmp_path}/up/", f"s3://{bucket}/up/")
        assert up.returncode == 0, up.stderr
    down = run_cli(env, "cp", f"s3://{bucket}/up/", f"{tmp_path}/down/")
    assert down.returncode == 0 and (tmp_path / "down" / "f7").read_text() == "7", down.stderr
    assert len(client.list_objects_v2(Bucket=bucket, Prefix="up/")["Contents"]) == 20


def test_versions_are_listed_and_each_can_be_read(
    minio: Endpoint, tmp_path: Path, aws_env: dict[str, str]
) -> None:
    import json

    import s3bulk

    bucket = new_bucket(minio)
    client = minio.client()
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    ids = [
        client.put_object(Bucket=bucket, Key="doc.txt", Body=f"version {n}".encode())["VersionId"]
        for n in range(3)
    ]
    client.put_object(Bucket=bucket, Key="gone.txt", Body=b"x")
    client.delete_object(Bucket=bucket, Key="gone.txt")  # a delete marker on top
    listed = run_cli(minio.env, "ls", "--all-versions", "--json", f"s3://{bucket}/")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(row["key"], row["version_id"], row["is_latest"]) for row in rows if row["key"] == "doc.txt"] == [
        ("doc.txt", ids[2], True),
        ("doc.txt", ids[1], False),
        ("doc.txt", ids[0], False),
    ]
    gone = [row for row in rows if row["key"] == "gone.txt"]
    assert [(row["delete_marker"], row["is_latest"]) for row in gone] == [(True, True), (False, False)]
    text = run_cli(minio.env, "ls", "--all-versions", f"s3://{bucket}/gone")
    assert "DELETED gone.txt" in text.stdout and "(latest)" in text.stdout

    cat = run_cli(minio.env, "cat", "--version-id", ids[0], f"s3://{bucket}/doc.txt")
    assert cat.returncode == 0 and cat.stdout == "version 0", cat.stderr
    down = run_cli(minio.env, "cp", "--version-id", ids[1], f"s3://{bucket}/doc.txt", f"{tmp_path}/")
    assert down.returncode == 0 and (tmp_path / "doc.txt").read_text() == "version 1", down.stderr
    head = run_cli(minio.env, "head", "--json", "--version-id", ids[0], f"s3://{bucket}/doc.txt")
    assert json.loads(head.stdout)["version_id"] == ids[0]
    assert s3bulk.get(f"s3://{bucket}/doc.txt", version_id=ids[1]) == b"version 1"
    assert s3bulk.head(f"s3://{bucket}/doc.txt", version_id=ids[0])["version_id"] == ids[0]
    wrong = run_cli(minio.env, "cat", "--version-id", "no-such-version", f"s3://{bucket}/doc.txt")
    assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1 and "NoSuchVersion" in wrong.stderr
    prefix = run_cli(minio.env, "cp", "--version-id", ids[0], f"s3://{bucket}/", f"{tmp_path}/x/")
    assert prefix.returncode == 2 and "--version-id reads one version of one object" in prefix.stderr
