"""sync (`s3bulk sync`)."""

from __future__ import annotations

import datetime
import os

from s3bulk._api.base import Location, Patterns, Progress, Records, run_spec, sync_twin
from s3bulk._api.copy import COPY
from s3bulk._commands.sync import SyncSpec
from s3bulk._commands.transfer import TransferSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes


async def sync_async(
    source: Location,
    destination: Location,
    *,
    mode: str = SyncSpec.mode,
    delete: bool = False,
    allow_empty_source: bool = False,
    max_delete: int | None = None,
    exact_timestamps: bool = False,
    files_from: str | os.PathLike[str] | None = None,
    inventory: str | None = None,
    destination_inventory: str | None = None,
    verify: bool = True,
    restored_only: bool = False,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = COPY.engine,
    workers: int | None = None,
    concurrency: int = COPY.concurrency,
    max_in_flight_bytes: int = COPY.max_in_flight_bytes,
    max_memory: int | None = None,
    part_size: int = TransferSpec.part_size,
    multipart_threshold: int = TransferSpec.multipart_threshold,
    copy_multipart_threshold: int = TransferSpec.copy_multipart_threshold,
    max_attempts: int | None = COPY.max_attempts,
    bwlimit: int | None = None,
    tpslimit: float | None = None,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: datetime.datetime | float | None = None,
    older_than: datetime.datetime | float | None = None,
    follow_symlinks: bool = False,
    allow_control_chars: bool = False,
    guess_mime_type: bool = True,
    attributes: Attributes = NO_ATTRIBUTES,
    show_attributes: bool = False,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Make `destination` hold what `source` holds (both are prefixes/directories), copying only
    what differs. `mode` is "mtime" (sizes differ or the source is newer), "size" or "checksum";
    `delete` removes what the source lacks (refused when the source is empty or missing, unless
    `allow_empty_source`). `exact_timestamps` (downloads, "mtime" mode): a file whose time differs
    from its object's at all is fetched again, not only one older than its object.
    `inventory` and `destination_inventory` (S3 Inventories) are read in place of the source's
    and the destination's listings; with `delete`, a name the source's inventory lacks is looked
    up at the source before its destination object is deleted (the inventory may be days old).
    Every other option is `copy_async`'s."""
    return await run_spec(
        SyncSpec,
        COPY,
        {
            "source": source,
            "destination": destination,
            "mode": mode,
            "delete": delete,
            "allow_empty_source": allow_empty_source,
            "max_delete": max_delete,
            "exact_timestamps": exact_timestamps,
            "files_from": files_from,
            "inventory": inventory,
            "destination_inventory": destination_inventory,
            "verify": verify,
            "restored_only": restored_only,
            "include": include,
            "exclude": exclude,
            "dry_run": dry_run,
            "engine": engine,
            "workers": workers,
            "concurrency": concurrency,
            "max_in_flight_bytes": max_in_flight_bytes,
            "max_memory": max_memory,
            "part_size": part_size,
            "multipart_threshold": multipart_threshold,
            "copy_multipart_threshold": copy_multipart_threshold,
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
            "follow_symlinks": follow_symlinks,
            "allow_control_chars": allow_control_chars,
            "guess_mime_type": guess_mime_type,
            "attributes": attributes,
            "show_attributes": show_attributes,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
            "on_records": on_records,
        },
    )


sync = sync_twin(sync_async)
