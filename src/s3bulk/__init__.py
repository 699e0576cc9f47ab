"""s3bulk: bulk work on object storage that saturates the service, not the Python interpreter.

The public surface is small: `ls`, `copy`, `move`, `sync`, `remove`, `resume`, `retry_failed`,
`doctor`, `put_vectors`, `gather`, `gather_to_file` (each with an `_async` twin), `verify_vectors`,
`count_vectors`,
`list_jobs`, `ENGINES`, and the `Report` they return.
Names load on first use (PEP 562) so `import s3bulk` and the CLI start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AwsSettings": "s3bulk.config",
    "Failure": "s3bulk.report",
    "ItemError": "s3bulk.errors",
    "Listing": "s3bulk.api",
    "ObjectInfo": "s3bulk.stores.s3xml",
    "Report": "s3bulk.report",
    "S3BulkError": "s3bulk.errors",
    "UsageError": "s3bulk.errors",
    "copy": "s3bulk.api",
    "copy_async": "s3bulk.api",
    "ls": "s3bulk.api",
    "ls_async": "s3bulk.api",
    "move": "s3bulk.api",
    "move_async": "s3bulk.api",
    "sync": "s3bulk.api",
    "sync_async": "s3bulk.api",
    "remove": "s3bulk.api",
    "remove_async": "s3bulk.api",
    "resume": "s3bulk.api",
    "resume_async": "s3bulk.api",
    "retry_failed": "s3bulk.api",
    "retry_failed_async": "s3bulk.api",
    "list_jobs": "s3bulk.journal",
    "ENGINES": "s3bulk.engine.strategies",
    "Diagnosis": "s3bulk.doctor",
    "doctor": "s3bulk.doctor",
    "doctor_async": "s3bulk.doctor",
    "put_vectors": "s3bulk.api",
    "put_vectors_async": "s3bulk.api",
    "verify_vectors": "s3bulk.api",
    "verify_vectors_async": "s3bulk.api",
    "count_vectors_async": "s3bulk.api",
    "gather": "s3bulk.api",
    "gather_async": "s3bulk.api",
    "gather_to_file": "s3bulk.api",
    "gather_to_file_async": "s3bulk.api",
    "count_vectors": "s3bulk.api",
}

__all__ = [
    "ENGINES",
    "AwsSettings",
    "Diagnosis",
    "Failure",
    "ItemError",
    "Listing",
    "ObjectInfo",
    "Report",
    "S3BulkError",
    "UsageError",
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
    "list_jobs",
    "ls",
    "ls_async",
    "move",
    "move_async",
    "put_vectors",
    "put_vectors_async",
    "remove",
    "remove_async",
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
    from s3bulk.api import (
        Listing,
        copy,
        copy_async,
        count_vectors,
        count_vectors_async,
        gather,
        gather_async,
        gather_to_file,
        gather_to_file_async,
        ls,
        ls_async,
        move,
        move_async,
        put_vectors,
        put_vectors_async,
        remove,
        remove_async,
        resume,
        resume_async,
        retry_failed,
        retry_failed_async,
        sync,
        sync_async,
        verify_vectors,
        verify_vectors_async,
    )
    from s3bulk.config import AwsSettings
    from s3bulk.doctor import Diagnosis, doctor, doctor_async
    from s3bulk.engine.strategies import ENGINES
    from s3bulk.errors import ItemError, S3BulkError, UsageError
    from s3bulk.journal import list_jobs
    from s3bulk.report import Failure, Report
    from s3bulk.stores.s3xml import ObjectInfo


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 's3bulk' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
