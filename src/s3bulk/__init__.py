"""s3bulk: bulk work on object storage that saturates the service, not the Python interpreter.

    report = s3bulk.copy("s3://src/data/", "s3://dst/data/")
    assert report.ok, report.failures

The public surface is what `__all__` names: the verbs `copy`, `move`, `sync`, `check`, `remove`,
`restore`, `resume`, `retry_failed`, `put_vectors`, `verify_vectors`, `count_vectors`, `export_vectors`,
`delete_vectors`, `query_vectors`, `sync_vectors`, `copy_vectors`, `gather`, `gather_to_file`,
`doctor` (each with an `_async` twin), `ls`, `ls_async` and `ls_table` (a pyarrow reader),
`list_jobs`; the `Report` they return and its `Failure`s; the errors they raise; `AwsSettings`
to say where and as whom. Every module is private (`s3bulk._*`), but `s3bulk.testing`: real
servers on loopback for users' own tests (and `write_inventory`), and `s3bulk.fsspec`: the
`s3bulk://` filesystem for fsspec's users. Names load on first use (PEP 562), so `import s3bulk`
and the CLI start fast.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

__version__ = importlib.metadata.version("s3bulk")

_EXPORTS = {
    "copy": "s3bulk._api.copy",
    "copy_async": "s3bulk._api.copy",
    "move": "s3bulk._api.copy",
    "move_async": "s3bulk._api.copy",
    "sync": "s3bulk._api.sync",
    "sync_async": "s3bulk._api.sync",
    "map": "s3bulk._api.map",
    "map_async": "s3bulk._api.map",
    "MapResults": "s3bulk._api.map",
    "check": "s3bulk._api.check",
    "check_async": "s3bulk._api.check",
    "remove": "s3bulk._api.remove",
    "remove_async": "s3bulk._api.remove",
    "restore": "s3bulk._api.restore",
    "restore_async": "s3bulk._api.restore",
    "resume": "s3bulk._api.jobs",
    "resume_async": "s3bulk._api.jobs",
    "retry_failed": "s3bulk._api.jobs",
    "retry_failed_async": "s3bulk._api.jobs",
    "ls": "s3bulk._ls",
    "ls_async": "s3bulk._ls",
    "ls_table": "s3bulk._ls",
    "Listing": "s3bulk._ls",
    "put_vectors": "s3bulk._api.put_vectors",
    "put_vectors_async": "s3bulk._api.put_vectors",
    "query_vectors": "s3bulk._api.query_vectors",
    "query_vectors_async": "s3bulk._api.query_vectors",
    "sync_vectors": "s3bulk._api.sync_vectors",
    "sync_vectors_async": "s3bulk._api.sync_vectors",
    "copy_vectors": "s3bulk._api.copy_vectors",
    "copy_vectors_async": "s3bulk._api.copy_vectors",
    "verify_vectors": "s3bulk._api.vectors",
    "verify_vectors_async": "s3bulk._api.vectors",
    "count_vectors": "s3bulk._api.vectors",
    "count_vectors_async": "s3bulk._api.vectors",
    "delete_vectors": "s3bulk._api.delete_vectors",
    "delete_vectors_async": "s3bulk._api.delete_vectors",
    "export_vectors": "s3bulk._api.export_vectors",
    "export_vectors_async": "s3bulk._api.export_vectors",
    "get": "s3bulk._api.objects",
    "get_async": "s3bulk._api.objects",
    "get_to_file": "s3bulk._api.objects",
    "head": "s3bulk._api.objects",
    "head_async": "s3bulk._api.objects",
    "get_to_file_async": "s3bulk._api.objects",
    "put": "s3bulk._api.objects",
    "put_async": "s3bulk._api.objects",
    "presign": "s3bulk._api.objects",
    "open": "s3bulk._api.objects",
    "list_buckets": "s3bulk._api.objects",
    "list_buckets_async": "s3bulk._api.objects",
    "make_bucket": "s3bulk._api.objects",
    "make_bucket_async": "s3bulk._api.objects",
    "versioning": "s3bulk._api.objects",
    "versioning_async": "s3bulk._api.objects",
    "copy_version": "s3bulk._api.objects",
    "copy_version_async": "s3bulk._api.objects",
    "remove_bucket": "s3bulk._api.objects",
    "remove_bucket_async": "s3bulk._api.objects",
    "remove_versions": "s3bulk._api.objects",
    "remove_versions_async": "s3bulk._api.objects",
    "gather": "s3bulk._api.gather",
    "gather_async": "s3bulk._api.gather",
    "gather_to_file": "s3bulk._api.gather",
    "gather_to_file_async": "s3bulk._api.gather",
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
    "copy_vectors",
    "copy_vectors_async",
    "copy_version",
    "copy_version_async",
    "count_vectors",
    "count_vectors_async",
    "delete_vectors",
    "delete_vectors_async",
    "doctor",
    "doctor_async",
    "export_vectors",
    "export_vectors_async",
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
    "ls_table",
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
    "query_vectors",
    "query_vectors_async",
    "remove",
    "remove_async",
    "remove_bucket",
    "remove_bucket_async",
    "remove_versions",
    "remove_versions_async",
    "restore",
    "restore_async",
    "resume",
    "resume_async",
    "retry_failed",
    "retry_failed_async",
    "sync",
    "sync_async",
    "sync_vectors",
    "sync_vectors_async",
    "verify_vectors",
    "verify_vectors_async",
    "versioning",
    "versioning_async",
]

if TYPE_CHECKING:
    from s3bulk._api.check import check, check_async
    from s3bulk._api.copy import copy, copy_async, move, move_async
    from s3bulk._api.copy_vectors import copy_vectors, copy_vectors_async
    from s3bulk._api.delete_vectors import delete_vectors, delete_vectors_async
    from s3bulk._api.export_vectors import export_vectors, export_vectors_async
    from s3bulk._api.gather import gather, gather_async, gather_to_file, gather_to_file_async
    from s3bulk._api.jobs import resume, resume_async, retry_failed, retry_failed_async
    from s3bulk._api.map import MapResults, map, map_async
    from s3bulk._api.objects import (
        copy_version,
        copy_version_async,
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
        open,
        presign,
        put,
        put_async,
        remove_bucket,
        remove_bucket_async,
        remove_versions,
        remove_versions_async,
        versioning,
        versioning_async,
    )
    from s3bulk._api.put_vectors import put_vectors, put_vectors_async
    from s3bulk._api.query_vectors import query_vectors, query_vectors_async
    from s3bulk._api.remove import remove, remove_async
    from s3bulk._api.restore import restore, restore_async
    from s3bulk._api.sync import sync, sync_async
    from s3bulk._api.sync_vectors import sync_vectors, sync_vectors_async
    from s3bulk._api.vectors import (
        count_vectors,
        count_vectors_async,
        verify_vectors,
        verify_vectors_async,
    )
    from s3bulk._config import AwsSettings
    from s3bulk._doctor import Diagnosis, doctor, doctor_async
    from s3bulk._engine.strategies import ENGINES
    from s3bulk._errors import ItemError, JobInterrupted, S3BulkError, S3Error, UsageError
    from s3bulk._journal.local import list_jobs
    from s3bulk._ls import Listing, ls, ls_async, ls_table
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
