"""s3fs's own test suite (`test_s3fs.py` of the installed release, unchanged: s3fs_release.py)
run against `s3bulk://`, as a person who switches `s3://` from s3fs to s3bulk sees it: its
`S3FileSystem` is `S3BulkFileSystem`, on the suite's own moto server. The tests of s3fs's
private parts (its boto client, its constructor's internals, calls fsspec does not define) are
set aside by name, each with why (SET_ASIDE); every other test runs with its assertions as
they are."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import s3fs_release
from _pytest.fixtures import FixtureFunctionDefinition

import s3bulk.fsspec
from s3bulk.fsspec import S3BulkFileSystem

# minutes of moto: `make test-servers` runs it, `make test` leaves it out
pytestmark = pytest.mark.servers

suite = s3fs_release.load()

# What a switch from s3fs gives: `s3://` served by s3bulk, the suite's class name bound to ours.
s3bulk.fsspec.register(as_s3=True)
suite.S3FileSystem = S3BulkFileSystem


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# The suite's moto server on a free port rather than its fixed 5555 (another run may hold it).
suite.port = _free_port()
suite.endpoint_uri = f"http://127.0.0.1:{suite.port}/"

# The tests of what fsspec's API does not define: s3fs's boto client (`s3.s3`, `connect`,
# `set_session`, `_call_s3`), its constructor's internals, its own calls and classes.
_CLIENT = "reads s3fs's aiobotocore client (s3.s3 / connect() / _call_s3)"
_SESSION = "tests s3fs's aiobotocore session handling (set_session, _connect, session=)"
SET_ASIDE: dict[str, str] = {
    "test_ssl_off": _CLIENT,
    "test_client_kwargs": _CLIENT,
    "test_config_kwargs": _CLIENT,
    "test_config_kwargs_class_attributes_default": _CLIENT,
    "test_config_kwargs_class_attributes_override": _CLIENT,
    "test_idempotent_connect": _CLIENT,
    "test_multiple_objects": _SESSION,
    "test_user_session_is_preserved": _SESSION,
    "test_checksum": "arranges its objects with s3fs's client (s3.s3.put_object, upload_part)",
    "test_multi_checksum": "checks with s3fs's client (s3.s3.head_object)",
    "test_xattr": "s3fs's getxattr/setxattr/metadata calls, arranged with its client",
    "test_xattr_setxattr_in_write_mode": "s3fs's setxattr call",
    "test_delegate": "s3fs's get_delegated_s3pars (an xfail there too)",
    "test_not_delegate": "s3fs's get_delegated_s3pars",
    "test_copy_managed": "s3fs's private _copy_managed",
    "test_errors_cause_preservings": "botocore's exception classes as causes, and s3fs's client patched",
    "test_listing_retries_transient_errors": "patches s3fs's client class (list_objects_v2)",
    "test_write_small_with_acl": "checks the ACL with s3fs's client (s3.s3.get_object_acl)",
    "test_write_small_secure": "checks with s3fs's client (s3.s3.head_object)",
    "test_append": "ends by reading headers with s3fs's f._call_s3 (and WebsiteRedirectLocation)",
    "test_no_connection_sharing_among_processes": _CLIENT,
    "test_tags": "s3fs's put_tags/get_tags calls",
    "test_versions": "s3fs's object_version_info call",
    "test_list_versions_many": "s3fs's object_version_info call",
    "test_versioned_file_fullpath": "s3fs's object_version_info call",
    "test_touch_versions": "s3fs's object_version_info call",
    "test_requester_pays": "s3fs's req_kw and _get_s3_method_kwargs",
    "test_requester_pays_per_file_override": "s3fs's S3File class and _get_s3_method_kwargs",
    "test_requester_pays_makedirs_uses_object_listing": "overrides s3fs's _call_s3",
    "test_credentials": "reads s3fs's client's request signer",
    "test_async_s3": _SESSION,
    "test_async_s3_old": _SESSION,
    "test_async_close": _SESSION,
    "test_raise_exception_when_file_has_changed_during_reading": "expects s3fs's own FileExpired class",
    "test_s3fs_etag_preserving_multipart_copy": "patches s3fs.core.MANAGED_COPY_THRESHOLD; preserve_etag",
    "test_split_path": "s3fs's split_path call",
    "test_bucket_versioning": "s3fs's is_bucket_versioned/make_bucket_versioned calls",
    "test_invalidate_cache": "arranges with s3fs's _call_s3",
    "test_session_close": _SESSION,
    "test_set_session_sessions_none": _SESSION,
    "test_set_session_concurrent_no_leak": _SESSION,
    "test_set_session_preserves_injected_session": _SESSION,
    "test_set_session_closed_sessions_rebuilds_once": _SESSION,
    "test_calculate_chunksize": "tests s3fs.core.calculate_chunksize, no filesystem",
    "test_merge": "s3fs's merge call",
    "test_url": "s3fs's url (a presigned URL) call",
}


# Public-API tests that s3bulk fails on purpose, each with why (the README's fsspec section says
# so): both rely on `find` of names keeping every entry it listed as `ls`'s, which s3bulk does
# not (100,000 names in memory, not 100,000 entries).
DIFFERS: dict[str, str] = {
    "test_s3_file_info": "info's Size from what a find of names kept",
    "test_versions_dircached": "dircache filled by a find of names, with VersionId",
}


def _exported(name: str, value: Any) -> Any:
    reason = SET_ASIDE.get(name)
    if reason:
        return pytest.mark.skip(reason=f"s3fs-private: {reason}")(value)
    if name in DIFFERS:
        return pytest.mark.xfail(reason=f"s3bulk differs: {DIFFERS[name]}", strict=True)(value)
    return value


globals().update(
    {
        name: _exported(name, value)
        for name, value in vars(suite).items()
        if name.startswith("test_") or isinstance(value, FixtureFunctionDefinition)
    }
)
