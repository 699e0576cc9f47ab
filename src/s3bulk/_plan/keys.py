"""Where each object or file of a transfer lands: pure functions of the two places and what was
listed or walked, with no request and no state, so that they can be tested alone. The item they
make is `TransferItem`; a listed object that cannot be moved is `Refused` (named in the report,
failed or skipped), never silently dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple

from s3bulk._plan.filters import Filters
from s3bulk._stores.s3xml import ObjectInfo, epoch_seconds, listing_problem
from s3bulk._text import NOT_UTF8
from s3bulk._urls import LocalLocation, Location, S3Location, basename, local_target_path, relative_key

MARKER_DATA = (
    "its key ends in '/', which names a directory locally, yet it holds %d bytes: not downloaded "
    "(copy it to a key without the '/' first)"
)


class TransferItem(NamedTuple):
    source: str  # key or local path
    destination: str  # key or local path
    size: int
    mtime: float = 0.0  # the source's modification time (seconds); downloads give it to the file
    etag: str = ""  # the source object's ETag, when listed (copies keep a multipart layout by it)
    # what the write may replace at the destination (conditional writes, issue 66): None, whatever
    # is there; "" (conditional.NOTHING), no object (sync listed none there); else that ETag
    replaces: str | None = None


class Refused(NamedTuple):
    """A listed object that is not moved, and why: a failure, or with `skipped` a skip."""

    url: str
    reason: str
    item_id: str = ""
    skipped: bool = False


def destination_key(destination: S3Location, relative: str, many: bool) -> str:
    """Where `relative` lands in S3. Many objects always go below the destination as a prefix,
    with or without its trailing '/': they can never collapse onto one key."""
    if destination.is_prefix:
        return destination.key + relative
    if many:
        return f"{destination.key}/{relative}"
    return destination.key


def plan_objects(
    objects: Iterable[ObjectInfo],
    source: S3Location,
    destination: Location,
    filters: Filters,
    *,
    many: bool,
    allow_control_chars: bool = False,
) -> tuple[list[TransferItem], list[Refused]]:
    """The listed objects the filters take, each with its destination (a key, or a local path
    that stays under the destination directory), and those refused: a listing's bad entry, a
    "directory marker" holding data (skipped), a key no local file can be named by."""
    single = not source.is_prefix
    root = str(destination.path) if isinstance(destination, LocalLocation) else ""
    items: list[TransferItem] = []
    refused: list[Refused] = []
    for info in objects:
        url = f"s3://{source.bucket}/{info.key}"
        relative = basename(info.key) if single else relative_key(info.key, source.key)
        problem = listing_problem(info)
        if problem:
            refused.append(Refused(url, problem, item_id=info.key))
            continue
        if filters and not filters.accepts(relative, info.size, _listed_time(info, filters)):
            continue
        if isinstance(destination, S3Location):
            target = destination_key(destination, relative, many)
        elif info.key.endswith("/"):  # a "directory marker": a directory locally, no file
            if info.size:  # it holds data nothing local can hold under that name: say so
                refused.append(Refused(url, MARKER_DATA % info.size, skipped=True))
            continue
        elif single and not destination.is_prefix:
            target = root
        else:
            try:
                target = local_target_path(root, relative, allow_control_chars)
            except ValueError as exc:
                refused.append(Refused(url, f"refused key: {exc}"))
                continue
        items.append(TransferItem(info.key, target, info.size, epoch_seconds(info.modified), info.etag))
    return items, refused


def plan_files(
    entries: Iterable[tuple[str, int, str, bool]],
    root: str,
    destination: S3Location,
    filters: Filters,
    *,
    many: bool,
) -> tuple[list[TransferItem], list[Refused]]:
    """Walked files (name under `root`, size, problem or "", refused) the filters take, each
    with its key, and those that cannot be uploaded: refused (a failure, journaled by name so
    that --retry-failed tries it again: a manifest's missing file), or skipped. A name that is
    not UTF-8 is named by path alone: it cannot be journaled, nor ever uploaded under it."""
    items: list[TransferItem] = []
    refused: list[Refused] = []
    for relative, size, problem, unreadable in entries:
        path = os.path.join(root, relative)
        if problem:
            item_id = relative if unreadable and problem != NOT_UTF8 else ""
            refused.append(Refused(path, problem, item_id=item_id, skipped=not unreadable))
        elif filters.accepts(relative):
            items.append(TransferItem(path, destination_key(destination, relative, many), size))
    return items, refused


def _listed_time(info: ObjectInfo, filters: Filters) -> float | None:
    """The object's time when the window needs it (a retry's descriptors carry none: they were
    selected when first listed)."""
    return epoch_seconds(info.modified) if filters.windowed and info.modified else None
