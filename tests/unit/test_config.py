"""Settings without a server: endpoint variables and the addressing style follow botocore."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_endpoint_variables_and_addressing_style_follow_botocore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3bulk._config import AwsSettings
    from s3bulk._stores.s3 import S3Client

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    config = tmp_path / "config"
    config.write_text(
        "[profile virtual]\nregion = eu-west-1\nendpoint_url = https://objects.example.test\n"
        "s3 =\n  addressing_style = virtual\n"
        "[profile path]\nregion = eu-west-1\ns3 =\n  addressing_style = path\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    virtual = S3Client(AwsSettings.from_env(profile="virtual"))
    path = S3Client(AwsSettings.from_env(profile="path"))
    assert virtual.url("bucket", "k") == "https://bucket.objects.example.test/k"
    assert path.url("bucket", "k") == "https://s3.eu-west-1.amazonaws.com/bucket/k"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    assert AwsSettings.from_env(profile="virtual").resolved_endpoint == "http://127.0.0.1:2"
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    assert AwsSettings.from_env(profile="virtual").resolved_endpoint == "http://127.0.0.1:1"
