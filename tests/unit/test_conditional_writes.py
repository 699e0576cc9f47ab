"""Conditional writes (issue 66) without a server: cp -n as If-None-Match: * (no HEAD where the
store honours it, a 412 counted as unchanged), sync's overwrites under If-Match of the ETag listed
and its new keys under If-None-Match: *, so another writer's object written after the listing is
never replaced; and the checksum settings botocore reads (`request_checksum_calculation`,
`response_checksum_validation`) with the one line a store's refusal of checksums becomes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from memory import MemoryS3, _etag
from test_commands_transfers import PLAN, copy_job, run

from s3bulk._commands.sync import SyncJob, SyncSpec
from s3bulk._commands.transfer import transfer_options
from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error, UsageError
from s3bulk._stores.conditional import NOTHING, WriteConditions, asked_replaces, write_condition
from s3bulk._stores.native_http import FileRange
from s3bulk._stores.s3 import refused_checks
from s3bulk._urls import parse_location

HONOURED = WriteConditions(none_match=True, match=True, copy=True)


def sync_job(source: str, destination: str, **choices: Any) -> SyncJob:
    spec = SyncSpec(source=source, destination=destination, partitioned_listing=False, **choices)
    options = transfer_options(spec, AwsSettings(), PLAN)
    return SyncJob(parse_location(source), parse_location(destination), AwsSettings(), options)


def test_the_header_each_write_carries() -> None:
    assert write_condition(None, HONOURED) == {}
    assert write_condition(NOTHING, HONOURED) == {"If-None-Match": "*"}
    assert write_condition('"abc"', HONOURED) == {"If-Match": '"abc"'}
    assert write_condition("abc", WriteConditions()) == {}  # ignored: nothing sent
    assert write_condition("abc", WriteConditions(True, True, False), copy=True) == {}
    assert asked_replaces(None, "*") == NOTHING and asked_replaces('"e1"', None) == "e1"
    for asked in (("e", "*"), (None, "e"), ("  ", None)):
        with pytest.raises(UsageError):
            asked_replaces(*asked)


def test_cp_n_asks_nothing_first_where_if_none_match_is_honoured() -> None:
    s3 = MemoryS3()
    s3.conditional_writes = HONOURED
    for name in "abcd":
        s3.put("src", f"p/{name}", b"new " + name.encode())
    s3.put("dst", "q/a", b"old")
    s3.put("dst", "q/c", b"old")
    report = run(copy_job("s3://src/p/", "s3://dst/q/", no_clobber=True), s3)
    assert (report.objects_done, report.objects_unchanged, report.objects_failed) == (2, 2, 0)
    assert s3.buckets["dst"] == {"q/a": b"old", "q/b": b"new b", "q/c": b"old", "q/d": b"new d"}
    assert not [request for request in s3.requests if request[0] == "HEAD"]
    assert sum(1 for request in s3.requests if request[0] == "COPY") == 4  # one request each


def test_cp_n_asks_first_where_the_store_ignores_if_none_match() -> None:
    s3 = MemoryS3()  # conditions ignored, as the probe finds on such a server
    s3.put("src", "p/a", b"new")
    s3.put("dst", "q/a", b"old")
    report = run(copy_job("s3://src/p/", "s3://dst/q/", no_clobber=True), s3)
    assert (report.objects_done, report.objects_unchanged) == (0, 1)
    assert ("HEAD", "dst", "q/a") in s3.requests and ("COPY", "dst", "q/a") not in s3.requests
    assert s3.buckets["dst"] == {"q/a": b"old"}


def test_sync_never_replaces_what_another_writer_wrote_after_the_listing(tmp_path: Path) -> None:
    """Between the listing and the writes, another writer changes q/a (listed) and writes q/b
    (listed as missing): sync's writes of both are refused and fail by name; the rest is done."""
    s3 = MemoryS3()
    s3.conditional_writes = HONOURED
    for name in "abc":
        s3.put("src", f"p/{name}", b"source " + name.encode())
    s3.put("dst", "q/a", b"old a")

    def meanwhile(verb: str, bucket: str, key: str) -> None:
        if verb == "COPY" and not s3.buckets["dst"].get("q/b"):  # before the first write
            s3.written("dst", "q/a", b"theirs a")
            s3.written("dst", "q/b", b"theirs b")

    s3.before = meanwhile
    report = run(sync_job("s3://src/p/", "s3://dst/q/"), s3)
    assert s3.buckets["dst"] == {"q/a": b"theirs a", "q/b": b"theirs b", "q/c": b"source c"}
    assert (report.objects_done, report.objects_failed) == (1, 2)
    reasons = sorted(failure.reason for failure in report.failures)
    assert all("changed since it was listed" in reason for reason in reasons), reasons
    assert any("another writer wrote an object there" in reason for reason in reasons)


def test_sync_writes_under_the_etag_listed(tmp_path: Path) -> None:
    s3 = MemoryS3()
    s3.conditional_writes = HONOURED
    s3.put("src", "p/a", b"new a")
    s3.put("dst", "q/a", b"old")
    conditions: list[Any] = []
    storage_copy = type(s3.storage()(AwsSettings())).copy

    async def spy(self: Any, *args: Any, condition: Any = None, **kwargs: Any) -> Any:
        conditions.append(condition)
        return await storage_copy(self, *args, condition=condition, **kwargs)

    type(s3.storage()(AwsSettings())).copy = spy  # type: ignore[method-assign]
    try:
        report = run(sync_job("s3://src/p/", "s3://dst/q/", mode="size"), s3)
    finally:
        type(s3.storage()(AwsSettings())).copy = storage_copy  # type: ignore[method-assign]
    assert report.objects_done == 1 and s3.buckets["dst"]["q/a"] == b"new a"
    assert conditions == [{"If-Match": _etag(b"old")}]


def _settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, config: str, **env: str) -> AwsSettings:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    (tmp_path / "config").write_text(config)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return AwsSettings.from_env()


def test_the_checksum_settings_come_from_the_environment_then_the_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plain = _settings(monkeypatch, tmp_path, "[default]\nregion = us-east-1\n")
    assert plain.upload_checksum == "CRC64NVME" and plain.asks_checksums
    assert plain.payload_unsigned("https://s3.example/b/k")
    profile = (
        "[default]\nrequest_checksum_calculation = WHEN_REQUIRED\n"
        "response_checksum_validation = when_required\n"
    )
    required = _settings(monkeypatch, tmp_path, profile)
    assert required.upload_checksum == "none" and not required.asks_checksums
    assert not required.payload_unsigned("https://s3.example/b/k")  # signed, as botocore does
    chosen = AwsSettings(checksum_algorithm="CRC32C")  # an algorithm given is sent whatever the setting
    assert chosen.upload_checksum == "CRC32C"
    env = _settings(
        monkeypatch, tmp_path, profile, AWS_REQUEST_CHECKSUM_CALCULATION="when_supported"
    )  # the environment first
    assert env.upload_checksum == "CRC64NVME" and not env.asks_checksums
    bad = _settings(monkeypatch, tmp_path, "[default]\nresponse_checksum_validation = never\n")
    with pytest.raises(UsageError, match="response_checksum_validation in the AWS config file = 'never'"):
        bad.check_profile()


def test_a_store_s_refusal_of_checksums_is_one_line_naming_the_setting() -> None:
    settings = AwsSettings()
    refused = S3Error(
        400, "InvalidArgument", "Unsupported header 'x-amz-checksum-crc64nvme' received", "put k"
    )
    sent = {"x-amz-checksum-crc64nvme": "AAAA"}
    error = refused_checks(refused, settings, sent, b"x", True, "put s3://b/k")
    assert error is not None and error.job_wide and not error.retryable
    assert "AWS_REQUEST_CHECKSUM_CALCULATION=when_required" in str(error)
    part = FileRange("/nonexistent", 0, 10, "CRC32")  # a file's part: the header the native part adds
    assert "x-amz-checksum-crc32" in str(refused_checks(refused, settings, {}, part, True, "put"))
    not_implemented = S3Error(501, "NotImplemented", "A header you provided implies functionality", "put")
    assert refused_checks(not_implemented, settings, sent, b"x", True, "put") is not None
    mode = refused_checks(refused, settings, {"x-amz-checksum-mode": "ENABLED"}, b"", True, "get")
    assert mode is not None and "response_checksum_validation" in str(mode)
    other = S3Error(400, "InvalidArgument", "Invalid storage class", "put")
    assert refused_checks(other, settings, sent, b"x", True, "put") is None  # its own line
    assert refused_checks(refused, settings, {}, b"x", True, "put") is None  # nothing sent: not about it
    mismatch = S3Error(400, "XAmzContentChecksumMismatch", "checksum mismatch", "put")
    assert refused_checks(mismatch, settings, sent, b"x", True, "put") is None  # a retry


def test_the_report_names_ignored_conditions_and_a_probe_key_left_behind() -> None:
    assert HONOURED.note() == ""
    assert "ignores If-None-Match and If-Match" in WriteConditions().note()
    left = WriteConditions(True, True, False, "s3://b/p/.s3bulk-probe-1").note()
    assert (
        left
        == "the probe of conditional writes could not delete s3://b/p/.s3bulk-probe-1: delete it (s3bulk rm)"
    )
