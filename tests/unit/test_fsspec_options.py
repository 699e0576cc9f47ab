"""s3fs's storage options as s3bulk.fsspec takes them (issue 64): credentials given in code stay
in their process, write keywords become attributes, an unknown option is one line naming it."""

from __future__ import annotations

import pickle

import pytest

from s3bulk._errors import UsageError
from s3bulk.fsspec import _options


def test_keys_given_in_code_sign_here_and_are_withheld_from_a_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    settings, _ = _options(
        {"key": "AKIDGIVEN", "secret": "s3cr3t-given", "endpoint_url": "http://127.0.0.1:9"}
    )
    assert settings.credentials().access_key == "AKIDGIVEN"  # type: ignore[union-attr]

    elsewhere = pickle.loads(pickle.dumps(settings))

    assert "s3cr3t-given" not in repr(pickle.dumps(settings))
    with pytest.raises(UsageError, match="stay in the process"):
        elsewhere.credentials()


def test_client_kwargs_keys_and_s3_additional_kwargs_are_read_as_s3fs_names_them() -> None:
    settings, options = _options(
        {
            "client_kwargs": {
                "endpoint_url": "http://127.0.0.1:9",
                "aws_access_key_id": "AKID",
                "aws_secret_access_key": "secret",
                "region_name": "eu-central-1",
            },
            "s3_additional_kwargs": {
                "ServerSideEncryption": "AES256",
                "ACL": "public-read",
                "RequestPayer": "requester",
            },
            "version_aware": True,
            "default_block_size": 6 * 2**20,
        }
    )
    assert (settings.given_keys, settings.region, settings.request_payer) == (
        ("AKID", "secret", None),
        "eu-central-1",
        True,
    )
    assert options.attributes == {"sse": "AES256", "acl": "public-read"}
    assert (options.version_aware, options.default_block_size) == (True, 6 * 2**20)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"colour": "blue"}, "colour"),
        ({"s3_additional_kwargs": {"WebsiteRedirectLocation": "/"}}, "WebsiteRedirectLocation"),
        ({"key": "AKID"}, "go together"),
    ],
)
def test_an_option_s3bulk_does_not_take_is_one_line_naming_it(given: dict, named: str) -> None:
    with pytest.raises(UsageError, match=named):
        _options(given)
