"""copy and move (`s3bulk cp`, `s3bulk mv`)."""

from __future__ import annotations

import datetime
import os

from s3bulk._api.base import Location, Patterns, Progress, Records, run_spec, sync_twin
from s3bulk._commands.copy import CopySpec, MoveSpec
from s3bulk._config import AwsSettings
from s3bulk._engine.spec import EngineSpec
from s3bulk._report import Report
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes

COPY = EngineSpec()  # the engine defaults of cp, mv and sync


async def copy_async(
    source: Location,
    destination: Location,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = COPY.engine,
    workers: int | None = None,
    concurrency: int = COPY.concurrency,
    max_in_flight_bytes: int = COPY.max_in_flight_bytes,
    max_memory: int | None = None,
    part_size: int = CopySpec.part_size,
    multipart_threshold: int = CopySpec.multipart_threshold,
    copy_multipart_threshold: int = CopySpec.copy_multipart_threshold,
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
    files_from: str | os.PathLike[str] | None = None,
    inventory: str | None = None,
    no_clobber: bool = False,
    verify: bool = True,
    restored_only: bool = False,
    if_size_differ: bool = False,
    if_newer: bool = False,
    if_match: str | None = None,
    if_none_match: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Copy between local paths and S3 (upload, download, or server-side S3 → S3 copy).

    A trailing '/' on the source means everything under that prefix or directory. `include` and
    `exclude` take one glob or a sequence of them. The job is journaled (see `resume_async`)
    unless `journal` is False or it is a dry run. `engine` is one of s3bulk.ENGINES (serial,
    threads, async, processes, hybrid, auto, ray). With engine="ray", `ray_address` names the
    cluster (default: a local Ray instance) and `journal_url` where the object-store journal
    goes (default: beside the data). Symbolic links in an uploaded tree are skipped unless
    `follow_symlinks`. A key holding ESC or another control character is not downloaded (its
    name would rewrite a terminal that lists the directory) unless `allow_control_chars`.
    `min_size`/`max_size` (bytes, inclusive) and `newer_than`/`older_than`
    (datetimes or seconds since the epoch) select by size and modification time (listings'
    LastModified, files' mtime). Uploads get a Content-Type guessed from the file name unless
    `guess_mime_type` is False or `attributes` names one; `attributes` (s3bulk.Attributes: the
    Content-* headers, metadata, storage class, encryption, ACL, tags) is set on every upload and
    copy (copies keep the source's Content-* and metadata unless it sets some). Downloads with
    `show_attributes` HEAD each object and put what it says in its record (`on_records`).
    `no_clobber`, `if_size_differ`, `if_newer` (s5cmd's -n, -s, -u) leave an existing destination
    alone unless every one given says to write over it; a missing one is always written (a bare
    `no_clobber` onto a store that honours If-None-Match asks nothing first: the write is refused
    where an object is). One object written to S3 with `if_match=ETAG` replaces only that
    version, with `if_none_match="*"` only nothing (else its item fails: PreconditionFailed).
    `bwlimit` (bytes/s) and `tpslimit` (requests/s) cap the whole job, all workers together.
    `files_from`: a file of names (one per line, relative to `source`) to copy instead of all.
    `inventory`: an S3 Inventory of the source bucket (its manifest.json's s3:// URL, or the
    prefix its configuration writes to: the newest) to take the objects from, with no listing.
    Downloads are checked against the object's ETag (its MD5, or the MD5 of its parts) and
    fetched again on a mismatch; `verify=False` skips that. An object in Glacier or Deep Archive
    with no restored copy fails with a line naming `s3bulk restore`; with `restored_only` it is
    counted as skipped and the restored ones are copied."""
    return await run_spec(
        CopySpec,
        COPY,
        {
            "source": source,
            "destination": destination,
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
            "files_from": files_from,
            "inventory": inventory,
            "no_clobber": no_clobber,
            "verify": verify,
            "restored_only": restored_only,
            "if_size_differ": if_size_differ,
            "if_newer": if_newer,
            "if_match": if_match,
            "if_none_match": if_none_match,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
            "on_records": on_records,
        },
    )


async def move_async(
    source: Location,
    destination: Location,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = COPY.engine,
    workers: int | None = None,
    concurrency: int = COPY.concurrency,
    max_in_flight_bytes: int = COPY.max_in_flight_bytes,
    max_memory: int | None = None,
    part_size: int = CopySpec.part_size,
    multipart_threshold: int = CopySpec.multipart_threshold,
    copy_multipart_threshold: int = CopySpec.copy_multipart_threshold,
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
    files_from: str | os.PathLike[str] | None = None,
    no_clobber: bool = False,
    verify: bool = True,
    restored_only: bool = False,
    if_size_differ: bool = False,
    if_newer: bool = False,
    max_delete: int | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Copy, then delete each source whose copy succeeded (a failed copy keeps its source).
    The options are `copy_async`'s, and `max_delete`: the job stops (one line, non-zero exit)
    before deleting more sources than that."""
    return await run_spec(
        MoveSpec,
        COPY,
        {
            "source": source,
            "destination": destination,
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
            "files_from": files_from,
            "no_clobber": no_clobber,
            "verify": verify,
            "restored_only": restored_only,
            "if_size_differ": if_size_differ,
            "if_newer": if_newer,
            "max_delete": max_delete,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
            "on_records": on_records,
        },
    )


copy = sync_twin(copy_async)


move = sync_twin(move_async)
