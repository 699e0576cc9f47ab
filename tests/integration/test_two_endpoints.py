"""Two endpoints or accounts in one job (issue 21, item 7), against two MinIO servers with
different credentials: the source side gets --source-profile (or --source-endpoint-url,
--source-region, --source-no-sign-request), the destination the usual options. No server-side
copy reaches across, so the bytes pass through s3bulk (a large object a part at a time), and the
copies keep the source's attributes; cp, sync (twice: nothing the second time; --delete) and mv
(sources deleted on the source server), downloads, and one line when the source side is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli

from s3bulk._config import NO_KEYS, AwsSettings
from s3bulk._runner import restored_settings, settings_spec

MiB = 1024 * 1024
SMALL = ["--multipart-threshold", "8MiB", "--part-size", "5MiB"]


@pytest.fixture
def env(minio: Endpoint, minio_other: Endpoint, tmp_path: Path) -> dict[str, str]:
    """A person with two profiles: `here` (the destination's MinIO) and `there` (the other)."""
    aws = tmp_path / "home" / ".aws"
    aws.mkdir(parents=True)
    config, credentials = [], []
    for name, endpoint in (("here", minio), ("there", minio_other)):
        server = endpoint.server
        config.append(f"[profile {name}]\nregion = us-east-1\nendpoint_url = {server.endpoint}\n")
        credentials.append(
            f"[{name}]\naws_access_key_id = {server.access_key}\n"
            f"aws_secret_access_key = {server.secret_key}\n"
        )
    (aws / "config").write_text("\n".join(config))
    (aws / "credentials").write_text("\n".join(credentials))
    clean = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    return clean | {"HOME": str(tmp_path / "home"), "AWS_PROFILE": "here"}


@pytest.fixture
def there(minio_other: Endpoint) -> tuple[str, dict[str, bytes]]:
    bucket = new_bucket(minio_other)
    client = minio_other.client()
    bodies = {"a.txt": b"alpha", "dir/b.json": b"{}", "big.bin": os.urandom(20 * MiB + 3)}
    for key, body in bodies.items():
        client.put_object(
            Bucket=bucket,
            Key=f"d/{key}",
            Body=body,
            Metadata={"team": "x"},
            Tagging="k=v",
            ContentType="application/x-test"
            if key == "big.bin"
            else ("application/json" if key.endswith("json") else "text/plain"),
        )
    return bucket, bodies


def objects(endpoint: Endpoint, bucket: str, prefix: str) -> dict[str, bytes]:
    client = endpoint.client()
    found = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {
        item["Key"][len(prefix) :]: client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        for item in found
    }


def test_cp_between_two_servers_keeps_bytes_and_attributes(
    minio: Endpoint, minio_other: Endpoint, env: dict[str, str], there: tuple[str, dict[str, bytes]]
) -> None:
    source, bodies = there
    bucket = new_bucket(minio)
    done = run_cli(
        env, "cp", *SMALL, f"s3://{source}/d/", f"s3://{bucket}/copy/", "--source-profile", "there"
    )
    assert done.returncode == 0, done.stderr
    assert objects(minio, bucket, "copy/") == bodies
    client = minio.client()
    big = client.head_object(Bucket=bucket, Key="copy/big.bin")
    assert "-" in big["ETag"] and big["ContentType"] == "application/x-test"  # in parts, attributes kept
    assert big["Metadata"] == {"team": "x"}
    assert client.get_object_tagging(Bucket=bucket, Key="copy/a.txt")["TagSet"] == [
        {"Key": "k", "Value": "v"}
    ]
    replaced = run_cli(
        env,
        "cp",
        f"s3://{source}/d/a.txt",
        f"s3://{bucket}/one.txt",
        "--source-profile",
        "there",
        "--content-type",
        "text/x-new",
    )
    assert replaced.returncode == 0, replaced.stderr
    stored = client.head_object(Bucket=bucket, Key="one.txt")
    assert stored["ContentType"] == "text/x-new" and stored["Metadata"] == {}  # REPLACE, as a copy


def test_sync_and_mv_between_two_servers(
    minio: Endpoint, minio_other: Endpoint, env: dict[str, str], there: tuple[str, dict[str, bytes]]
) -> None:
    source, bodies = there
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="s/stale", Body=b"old")
    args = ["sync", "--delete", f"s3://{source}/d/", f"s3://{bucket}/s/", "--source-profile", "there"]
    first = run_cli(env, *args)
    assert first.returncode == 0, first.stderr
    assert objects(minio, bucket, "s/") == bodies
    second = run_cli(env, *args)
    assert second.returncode == 0 and "3 unchanged" in second.stdout, second.stdout
    moved = run_cli(env, "mv", f"s3://{source}/d/dir/", f"s3://{bucket}/m/", "--source-profile", "there")
    assert moved.returncode == 0, moved.stderr
    assert objects(minio, bucket, "m/") == {"b.json": b"{}"}
    assert "dir/b.json" not in objects(minio_other, source, "d/")  # deleted where it was


def test_downloads_read_with_the_source_profile_and_a_missing_side_is_one_line(
    minio: Endpoint, env: dict[str, str], there: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    source, bodies = there
    down = run_cli(env, "cp", f"s3://{source}/d/a.txt", f"{tmp_path}/a.txt", "--source-profile", "there")
    assert down.returncode == 0 and (tmp_path / "a.txt").read_bytes() == bodies["a.txt"], down.stderr
    bucket = new_bucket(minio)
    lost = run_cli(env, "cp", f"s3://{source}/d/", f"s3://{bucket}/x/")  # the source is not on `here`
    assert lost.returncode == 1 and "NoSuchBucket" in lost.stderr
    assert len([line for line in lost.stderr.splitlines() if "NoSuchBucket" in line]) == 1
    assert objects(minio, bucket, "x/") == {}
    unknown = run_cli(env, "cp", f"s3://{source}/d/", f"s3://{bucket}/x/", "--source-profile", "nobody")
    assert unknown.returncode == 2 and "AWS profile 'nobody' not found" in unknown.stderr


def test_the_journal_keeps_the_source_side_without_its_secrets(minio_other: Endpoint) -> None:
    source = AwsSettings(profile="there", region="eu-west-1", endpoint_url=minio_other.server.endpoint)
    settings = AwsSettings(endpoint_url="http://127.0.0.1:1", source=source)
    saved = settings_spec(settings)
    assert (
        saved["source"]["profile"] == "there"
        and saved["source"]["endpoint_url"] == minio_other.server.endpoint
    )
    again = restored_settings(saved, NO_KEYS)
    assert again.source is not None and (again.source.profile, again.source.region) == ("there", "eu-west-1")
    assert again.relays and not AwsSettings(endpoint_url="http://127.0.0.1:1").relays
