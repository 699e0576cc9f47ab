"""Findings of the second hostile run of issue 62 (the run itself is kept apart from the tests:
its log is in the helper's report). Each test is a minimal reproduction of what broke."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import pytest
from conftest import Endpoint, run_cli

import s3bulk.fsspec  # noqa: F401  (registers the s3bulk protocol)


@pytest.mark.parametrize("key", ["p//x", "p/./x", "p/../x"])
def test_a_key_the_store_refuses_is_not_blamed_on_checksum_mode(
    minio: Endpoint, bucket: str, key: str
) -> None:
    minio.client().put_object(Bucket=bucket, Key="p/x", Body=b"x")
    for verb in ("head", "cat"):
        result = run_cli(minio.env, verb, f"s3://{bucket}/{key}")
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"s3://{bucket}/{key}" in result.stderr, result.stderr
        assert "response_checksum_validation" not in result.stderr, result.stderr
        assert "refused checksum mode" not in result.stderr, result.stderr


@pytest.mark.parametrize("count", [2, 20])
def test_fs_get_writes_nothing_through_a_link_to_outside_the_destination(
    minio: Endpoint, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """fsspec's get followed a link in the destination to a directory outside it (os.makedirs
    and the pairs' paths, one by one for 2 files and as a job for 20 alike), where `s3bulk cp`
    of the same tree refuses it. The lead's decision: fsspec keeps cp's rule and its line (s3fs
    follows such links: docs/fsspec.md), and writes nothing, not even a directory, outside."""
    client = minio.client()
    for index in range(count):
        client.put_object(Bucket=bucket, Key=f"p/sub/deeper/f{index}", Body=b"from s3")
    client.put_object(Bucket=bucket, Key="p/top", Body=b"top")
    outside = tmp_path / "outside"
    outside.mkdir()
    destination = tmp_path / "d"
    destination.mkdir()
    os.symlink(outside, destination / "sub")
    os.symlink(destination / "inner", destination / "alias")  # a link inside: followed, as cp does
    refused = run_cli(minio.env, "cp", "-r", f"s3://{bucket}/p/", f"{destination}/")
    assert "resolves outside the destination directory" in refused.stderr, refused.stderr
    assert not list(outside.iterdir())
    (destination / "top").unlink()  # what cp wrote beside what it refused
    for name, value in minio.env.items():
        monkeypatch.setenv(name, value)
    fs = fsspec.filesystem("s3bulk", skip_instance_cache=True)
    with pytest.raises(PermissionError, match="resolves outside the destination directory") as raised:
        fs.get(f"{bucket}/p/", f"{destination}/", recursive=True)
    assert str(raised.value).count("\n") == 0 and f"{destination}/sub resolves" in str(raised.value)
    assert sorted(path.name for path in outside.iterdir()) == []
    assert not (destination / "top").exists()  # refused before anything was written
    (destination / "inner").mkdir()
    client.put_object(Bucket=bucket, Key="q/alias/f", Body=b"through a link inside")
    fs.get(f"{bucket}/q/", f"{destination}/", recursive=True)
    assert (destination / "inner" / "f").read_bytes() == b"through a link inside"
