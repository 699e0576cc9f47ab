"""s3bulk: bulk work on object storage that saturates the service, not the Python interpreter.

The public surface is small: `ls`/`ls_async`, `copy`/`copy_async`, and the `Report` they return.
"""

from s3bulk.api import Listing, copy, copy_async, ls, ls_async
from s3bulk.config import AwsSettings
from s3bulk.errors import ItemError, S3BulkError, UsageError
from s3bulk.report import Failure, Report
from s3bulk.stores.s3xml import ObjectInfo

__version__ = "0.1.0"

__all__ = [
    "AwsSettings",
    "Failure",
    "ItemError",
    "Listing",
    "ObjectInfo",
    "Report",
    "S3BulkError",
    "UsageError",
    "copy",
    "copy_async",
    "ls",
    "ls_async",
]
