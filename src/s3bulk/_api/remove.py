"""remove (`s3bulk rm`)."""

from __future__ import annotations

import datetime
import os

from s3bulk._api.base import Patterns, Progress, Records, run_spec, sync_twin
from s3bulk._commands.remove import ENGINE as REMOVE
from s3bulk._commands.remove import RemoveSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def remove_async(
    target: str,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = REMOVE.engine,
    workers: int | None = None,
    concurrency: int = REMOVE.concurrency,
    max_attempts: int | None = REMOVE.max_attempts,
    bwlimit: int | None = None,
    tpslimit: float | None = None,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: datetime.datetime | float | None = None,
    older_than: datetime.datetime | float | None = None,
    max_delete: int | None = None,
    files_from: str | os.PathLike[str] | None = None,
    inventory: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Delete one object, a prefix (ending in '/') or the keys matching a glob (`*`, `?`, `[...]`),
    1,000 keys per DeleteObjects request. `include`/`exclude`: one glob or a sequence of them.
    `max_delete`: delete at most that many, then stop the job (the report says why)."""
    return await run_spec(
        RemoveSpec,
        REMOVE,
        {
            "target": target,
            "include": include,
            "exclude": exclude,
            "dry_run": dry_run,
            "engine": engine,
            "workers": workers,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "bwlimit": bwlimit,
            "tpslimit": tpslimit,
            "ray_address": ray_address,
            "journal_url": journal_url,
            "partitioned_listing": partitioned_listing,
            "min_size": min_size,
            "max_size": max_size,
            "newer_than": newer_than,
            "older_than": older_than,
            "max_delete": max_delete,
            "files_from": files_from,
            "inventory": inventory,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
            "on_records": on_records,
        },
    )


remove = sync_twin(remove_async)
