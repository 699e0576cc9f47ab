"""Public data (issue 21, item 8), against MinIO behind a proxy that acts as a requester-pays
bucket (S3 answers 403 to a request without `x-amz-request-payer: requester`): every command
that reads sends the header with `--request-payer requester`, and without it fails in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli

from s3bulk.testing.throttle import S3ThrottlingProxy


@pytest.fixture
def payer(minio: Endpoint) -> S3ThrottlingProxy:
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
