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


def test_a_ca_bundle_is_aws_ca_bundle_then_the_profile_s_and_reaches_every_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore's order: AWS_CA_BUNDLE, then the profile's `ca_bundle`; --no-verify-ssl wins
    over both. The native part gets its path, obstore its certificates, aiohttp a context that
    trusts them alone."""
    from s3bulk._config import AwsSettings
    from s3bulk._errors import UsageError
    from s3bulk._stores.http import tls_context
    from s3bulk._stores.objects import client_options, store_options
    from s3bulk.testing.servers import _self_signed_certificate

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    mine, theirs = (_self_signed_certificate("127.0.0.1") / "public.crt" for _ in range(2))
    config = tmp_path / "config"
    config.write_text(
        f"[default]\nregion = us-east-1\nca_bundle = {mine}\n[profile plain]\nregion = us-east-1\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    assert AwsSettings.from_env().ca_bundle == str(mine)
    assert AwsSettings.from_env(profile="plain").ca_bundle is None
    monkeypatch.setenv("AWS_CA_BUNDLE", str(theirs))
    settings = AwsSettings.from_env()
    assert settings.ca_bundle == str(theirs)
    assert client_options(settings, 8, allow_http=False)["ca_bundle"] == str(theirs)
    assert store_options(settings, "b", max_connections=8)[1]["root_certificate"] == theirs.read_bytes()
    context = tls_context(settings, "https://s3vectors.us-east-1.api.aws")
    assert not isinstance(context, bool) and context.cert_store_stats()["x509"] == 1  # that one alone
    insecure = AwsSettings.from_env(verify_ssl=False)
    assert "ca_bundle" not in client_options(insecure, 8, allow_http=False)
    assert tls_context(insecure, "https://s3vectors.us-east-1.api.aws") is False
    plain = AwsSettings.from_env(endpoint_url="http://127.0.0.1:9000")  # no TLS: no bundle, no file read
    assert "ca_bundle" not in client_options(plain, 8, allow_http=True) and "ca_bundle" not in plain.__dict__
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(UsageError, match="is not a file"):
        AwsSettings.from_env().check_profile()
