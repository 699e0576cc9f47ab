"""restore (`s3bulk restore`)."""

from __future__ import annotations

import os

from s3bulk._api.base import Patterns, Progress, Records, run_spec, sync_twin
from s3bulk._commands.restore import ENGINE as RESTORE
from s3bulk._commands.restore import RestoreSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def restore_async(
    target: str,
    *,
    days: int,
    tier: str = "Standard",
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = RESTORE.engine,
    workers: int | None = None,
    concurrency: int = RESTORE.concurrency,
    max_attempts: int | None = RESTORE.max_attempts,
    tpslimit: float | None = None,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    files_from: str | os.PathLike[str] | None = None,
    inventory: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Ask for a restored copy, kept `days`, of every object in S3 Glacier Flexible Retrieval or
    Deep Archive under `target` (a key, or a prefix ending in '/'), at `tier` (Bulk, Standard or
    Expedited). Objects being restored, restored already, or not archived are counted in
    `report.outcomes` and not asked again; `dry_run` counts what would be asked and prices it
    (`report.retrieval_usd`)."""
    return await run_spec(
        RestoreSpec,
        RESTORE,
        {
            "target": target,
            "days": days,
            "tier": tier,
            "include": include,
            "exclude": exclude,
            "dry_run": dry_run,
            "engine": engine,
            "workers": workers,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "tpslimit": tpslimit,
            "ray_address": ray_address,
            "journal_url": journal_url,
            "partitioned_listing": partitioned_listing,
            "files_from": files_from,
            "inventory": inventory,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
            "on_records": on_records,
        },
    )


restore = sync_twin(restore_async)
