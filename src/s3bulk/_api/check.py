"""check (`s3bulk check`): two trees compared, nothing copied."""

from __future__ import annotations

import datetime
import os

from s3bulk._api.base import Location, Patterns, Progress, run_spec, sync_twin
from s3bulk._api.copy import COPY
from s3bulk._commands.check import CheckSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def check_async(
    source: Location,
    destination: Location,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    files_from: str | os.PathLike[str] | None = None,
    inventory: str | None = None,
    destination_inventory: str | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: datetime.datetime | float | None = None,
    older_than: datetime.datetime | float | None = None,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Compare two trees (prefixes or directories) without copying: the report's failures name
    each difference ("missing: ...", "extra: ...", "differs: ...") and `objects_unchanged` counts
    what is the same; `report.ok` is True when they hold the same. The names compared are those
    sync would act on with the same options: `include`/`exclude` and `files_from` choose names
    on both sides; the window compares only source entries inside it, and calls extra only
    destination entries inside it whose name the source lacks altogether. `inventory` and
    `destination_inventory` (S3 Inventories: a manifest.json's s3:// URL, or its configuration's
    prefix) are read in place of the source's and the destination's listings."""
    return await run_spec(
        CheckSpec,
        COPY,
        {
            "source": source,
            "destination": destination,
            "include": include,
            "exclude": exclude,
            "files_from": files_from,
            "inventory": inventory,
            "destination_inventory": destination_inventory,
            "min_size": min_size,
            "max_size": max_size,
            "newer_than": newer_than,
            "older_than": older_than,
            "settings": settings,
            "on_progress": on_progress,
            "journal": False,
        },
    )


check = sync_twin(check_async)
