"""s3bulk: bulk work on object storage that saturates the service, not the Python interpreter.

    report = s3bulk.copy("s3://src/data/", "s3://dst/data/")
    assert report.ok, report.failures

The public surface is what `__all__` names: the verbs `copy`, `move`, `sync`, `check`, `remove`, `resume`,
`retry_failed`, `put_vectors`, `verify_vectors`, `count_vectors`, `gather`, `gather_to_file`,
`doctor` (each with an `_async` twin), `ls` and `ls_async`, `list_jobs`; the `Report` they
return and its `Failure`s; the errors they raise; `AwsSettings` to say where and as whom. Every
module is private (`s3bulk._*`), but `s3bulk.testing`: real servers on loopback for users' own
tests. Names load on first use (PEP 562), so `import s3bulk` and the CLI start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "copy": "s3bulk._api",
    "copy_async": "s3bulk._api",
    "move": "s3bulk._api",
    "move_async": "s3bulk._api",
    "sync": "s3bulk._api",
    "sync_async": "s3bulk._api",
    "map": "s3bulk._map",
    "map_async": "s3bulk._map",
    "MapResults": "s3bulk._map",
    "check": "s3bulk._api",
    "check_async": "s3bulk._api",
    "remove": "s3bulk._api",
    "remove_async": "s3bulk._api",
    "resume": "s3bulk._api",
    "resume_async": "s3bulk._api",
    "retry_failed": "s3bulk._api",
    "retry_failed_async": "s3bulk._api",
    "ls": "s3bulk._ls",
    "ls_async": "s3bulk._ls",
    "Listing": "s3bulk._ls",
    "put_vectors": "s3bulk._api",
    "put_vectors_async": "s3bulk._api",
    "verify_vectors": "s3bulk._api",
    "verify_vectors_async": "s3bulk._api",
    "count_vectors": "s3bulk._api",
    "count_vectors_async": "s3bulk._api",
    "get": "s3bulk._api",
    "get_async": "s3bulk._api",
    "get_to_file": "s3bulk._api",
    "head": "s3bulk._api",
    "head_async": "s3bulk._api",
    "get_to_file_async": "s3bulk._api",
    "put": "s3bulk._api",
    "put_async": "s3bulk._api",
    "presign": "s3bulk._api",
    "open": "s3bulk._api",
    "list_buckets": "s3bulk._api",
    "list_buckets_async": "s3bulk._api",
    "make_bucket": "s3bulk._api",
    "make_bucket_async": "s3bulk._api",
    "remove_bucket": "s3bulk._api",
    "remove_bucket_async": "s3bulk._api",
    "gather": "s3bulk._api",
    "gather_async": "s3bulk._api",
    "gather_to_file": "s3bulk._api",
    "gather_to_file_async": "s3bulk._api",
    "doctor": "s3bulk._doctor",
    "doctor_async": "s3bulk._doctor",
    "Diagnosis": "s3bulk._doctor",
    "list_jobs": "s3bulk._journal.local",
    "Report": "s3bulk._report",
    "Failure": "s3bulk._report",
    "ObjectInfo": "s3bulk._stores.s3xml",
    "BucketInfo": "s3bulk._stores.s3xml",
    "Attributes": "s3bulk._stores.attributes",
    "AwsSettings": "s3bulk._config",
    "ENGINES": "s3bulk._engine.strategies",
    "S3BulkError": "s3bulk._errors",
    "UsageError": "s3bulk._errors",
    "ItemError": "s3bulk._errors",
    "S3Error": "s3bulk._errors",
    "JobInterrupted": "s3bulk._errors",
}

__all__ = [
    "ENGINES",
    "Attributes",
    "AwsSettings",
    "BucketInfo",
    "Diagnosis",
    "Failure",
    "ItemError",
    "JobInterrupted",
    "Listing",
    "MapResults",
    "ObjectInfo",
    "Report",
    "S3BulkError",
    "S3Error",
    "UsageError",
    "check",
    "check_async",
    "copy",
    "copy_async",
    "count_vectors",
    "count_vectors_async",
    "doctor",
    "doctor_async",
    "gather",
    "gather_async",
    "gather_to_file",
    "gather_to_file_async",
    "get",
    "get_async",
    "get_to_file",
    "get_to_file_async",
    "head",
    "head_async",
    "list_buckets",
    "list_buckets_async",
    "list_jobs",
    "ls",
    "ls_async",
    "make_bucket",
    "make_bucket_async",
    "map",
    "map_async",
    "move",
    "move_async",
    "open",
    "presign",
    "put",
    "put_async",
    "put_vectors",
    "put_vectors_async",
    "remove",
    "remove_async",
    "remove_bucket",
    "remove_bucket_async",
    "resume",
    "resume_async",
    "retry_failed",
    "retry_failed_async",
    "sync",
    "sync_async",
    "verify_vectors",
    "verify_vectors_async",
]

if TYPE_CHECKING:
    from s3bulk._api import (
        check,
        check_async,
        copy,
        copy_async,
        count_vectors,
        count_vectors_async,
        gather,
        gather_async,
        gather_to_file,
        gather_to_file_async,
        get,
        get_async,
        get_to_file,
        get_to_file_async,
        head,
        head_async,
        list_buckets,
        list_buckets_async,
        make_bucket,
        make_bucket_async,
        move,
        move_async,
        open,
        presign,
        put,
        put_async,
        put_vectors,
        put_vectors_async,
        remove,
        remove_async,
        remove_bucket,
        remove_bucket_async,
        resume,
        resume_async,
        retry_failed,
        retry_failed_async,
        sync,
        sync_async,
        verify_vectors,
        verify_vectors_async,
    )
    from s3bulk._config import AwsSettings
    from s3bulk._doctor import Diagnosis, doctor, doctor_async
    from s3bulk._engine.strategies import ENGINES
    from s3bulk._errors import ItemError, JobInterrupted, S3BulkError, S3Error, UsageError
    from s3bulk._journal.local import list_jobs
    from s3bulk._ls import Listing, ls, ls_async
    from s3bulk._map import MapResults, map, map_async
    from s3bulk._report import Failure, Report
    from s3bulk._stores.attributes import Attributes
    from s3bulk._stores.s3xml import BucketInfo, ObjectInfo


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 's3bulk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, found directly
    return value


def __dir__() -> list[str]:
    """What an IDE or `dir(s3bulk)` should show: the API, not the private modules loaded so far."""
    return [*__all__, "__version__", "testing"]
