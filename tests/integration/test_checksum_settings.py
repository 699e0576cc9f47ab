"""botocore's checksum settings (issue 66): `request_checksum_calculation` and
`response_checksum_validation`, from the profile or AWS_REQUEST_CHECKSUM_CALCULATION /
AWS_RESPONSE_CHECKSUM_VALIDATION. `when_required` sends no x-amz-checksum-* and signs the
payload, so a store that refuses those headers (the proxy's `RefusesChecksums`, as B2, OVH and
Hetzner answer) works; without it, the refusal is one line that names the setting, and nothing
is stored."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import Endpoint, Hostile, bucket_digests, run_cli, sha256, tree_digests

from s3bulk.testing.hostile import RefusesChecksums

MiB = 1024 * 1024


def _tree(root: Path) -> Path:
    root.mkdir()
    (root / "small.txt").write_bytes(b"small body\n" * 100)
    (root / "big.bin").write_bytes(os.urandom(6 * MiB))  # in two parts at --multipart-threshold 5MiB
    (root / "sub").mkdir()
    (root / "sub" / "zero").write_bytes(b"")
    return root


def _stored(minio: Endpoint, bucket: str) -> list[str]:
    listed = minio.client().list_objects_v2(Bucket=bucket).get("Contents", [])
    return [entry["Key"] for entry in listed]


def test_when_required_cp_up_down_and_sync_work_where_checksums_are_refused(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    refusing = RefusesChecksums(mode=True)
    hostile.misbehave(refusing)
    env = hostile.env | {
        "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",  # botocore takes any case
    }
    source = _tree(tmp_path / "src")
    parts = ("--multipart-threshold", "5MiB")
    up = run_cli(env, "cp", *parts, f"{source}/", f"s3://{bucket}/t/")
    assert up.returncode == 0, up.stderr
    assert bucket_digests(minio, bucket, "t/") == tree_digests(source)
    head = minio.client().head_object(Bucket=bucket, Key="t/small.txt", ChecksumMode="ENABLED")
    assert not any(name.startswith("Checksum") and name != "ChecksumType" for name in head)  # none sent

    down = run_cli(env, "cp", *parts, f"s3://{bucket}/t/", f"{tmp_path / 'down'}/")
    assert down.returncode == 0, down.stderr
    assert tree_digests(tmp_path / "down") == tree_digests(source)

    (source / "small.txt").write_bytes(b"changed\n")
    (source / "new.txt").write_bytes(b"new\n")
    synced = run_cli(env, "sync", *parts, "--delete", f"{source}/", f"s3://{bucket}/t/")
    assert synced.returncode == 0, synced.stderr
    assert bucket_digests(minio, bucket, "t/") == tree_digests(source)
    assert refusing.refusals == 0  # no request carried a checksum for the store to refuse


def test_without_the_setting_a_refusing_store_is_one_line_naming_it_and_nothing_is_stored(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    hostile.misbehave(RefusesChecksums())
    source = _tree(tmp_path / "src")
    for args in (["cp"], ["cp", "--multipart-threshold", "5MiB"], ["sync"]):
        result = run_cli(hostile.env, *args, f"{source}/", f"s3://{bucket}/t/")
        assert result.returncode in (1, 2), result.stderr
        assert "Traceback" not in result.stderr
        lines = [line for line in result.stderr.splitlines() if "request_checksum_calculation" in line]
        assert len(lines) == 1, result.stderr
        assert "AWS_REQUEST_CHECKSUM_CALCULATION=when_required" in lines[0]
        assert "the store refused the checksum header x-amz-checksum-" in lines[0]
        assert _stored(minio, bucket) == []


def test_checksum_mode_refused_is_one_line_naming_response_checksum_validation(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    minio.client().put_object(Bucket=bucket, Key="k/a.txt", Body=b"a" * 40_000)
    hostile.misbehave(RefusesChecksums(mode=True))
    result = run_cli(hostile.env, "cp", f"s3://{bucket}/k/", f"{tmp_path / 'down'}/")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "AWS_RESPONSE_CHECKSUM_VALIDATION=when_required" in result.stderr
    assert not (tmp_path / "down" / "a.txt").exists()

    env = hostile.env | {"AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}
    result = run_cli(env, "cp", f"s3://{bucket}/k/", f"{tmp_path / 'down'}/")
    assert result.returncode == 0, result.stderr
    assert sha256((tmp_path / "down" / "a.txt").read_bytes()) == sha256(b"a" * 40_000)


def test_the_profile_sets_it_as_botocore_reads_it(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """~/.aws/config and ~/.aws/credentials, no AWS_* variable: as a person sets it up."""
    hostile.misbehave(RefusesChecksums())
    settings = minio.server.client_env()
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "config").write_text(
        f"[default]\nregion = us-east-1\nendpoint_url = {hostile.server.endpoint}\n"
        "request_checksum_calculation = when_required\n"
    )
    (home / ".aws" / "credentials").write_text(
        f"[default]\naws_access_key_id = {settings['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {settings['AWS_SECRET_ACCESS_KEY']}\n"
    )
    env = {name: value for name, value in minio.env.items() if not name.startswith("AWS_")} | {
        "HOME": str(home)
    }
    source = _tree(tmp_path / "src")
    result = run_cli(env, "cp", f"{source}/", f"s3://{bucket}/t/", "--multipart-threshold", "5MiB")
    assert result.returncode == 0, result.stderr
    assert bucket_digests(minio, bucket, "t/") == tree_digests(source)


def test_a_value_botocore_does_not_know_is_one_line(minio: Endpoint, bucket: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    env = minio.env | {"AWS_REQUEST_CHECKSUM_CALCULATION": "sometimes"}
    result = run_cli(env, "cp", str(tmp_path / "f"), f"s3://{bucket}/f")
    assert result.returncode == 2, result.stderr
    assert (
        "AWS_REQUEST_CHECKSUM_CALCULATION = 'sometimes': use when_supported or when_required" in result.stderr
    )
    assert _stored(minio, bucket) == []
