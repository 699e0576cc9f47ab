"""The sync plan: a streaming merge-join of two listings in key order, and what to do per key.

Both sides arrive sorted (S3 lists in UTF-8 byte order, which is code-point order; local walks
are sorted the same way), so one pass over both streams pairs every name with its counterpart
while holding only the current page of each. Memory does not grow with the object count, and the
first transfers start as soon as the first pages are compared.

What "changed" means (`SyncMode`):
- ``mtime`` (default, like ``aws s3 sync``): sizes differ, or the source is newer than the
  destination. Downloads give the file the object's LastModified time, uploads and copies leave a
  destination newer than its source, so a second sync of an unchanged tree transfers nothing.
- ``size``: sizes differ.
- ``checksum``: sizes differ, or the contents differ. S3 to S3 compares ETags. Against a local file
  the file's MD5 is computed (by a worker, off the driver) and compared with the object's ETag; a
  multipart ETag (``md5-of-part-md5s-N``) is recomputed with each part size that gives N parts
  (ours, then the common 8/16/5/64 MiB and size/N rounded to 1 MiB). Objects whose ETag is not an
  MD5 at all (SSE-KMS, SSE-C) are copied, since nothing can prove them equal without reading them.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Literal, NamedTuple

from s3bulk._errors import S3BulkError

SyncMode = Literal["mtime", "size", "checksum"]
Decision = Literal["copy", "check", "same"]
MiB = 1024**2


class Entry(NamedTuple):
    relative: str  # the name below the synced prefix or directory
    size: int
    mtime: float  # seconds since the epoch
    etag: str  # "" for local files
    name: str  # the full key or local path
    problem: str = ""  # a local source entry that cannot be uploaded (symlink, unreadable, ...)
    refused: bool = False  # the problem fails the item (a name that is not UTF-8), not just skips it
    unlisted: bool = False  # what the source holds at this name and under it is not known (Unlisted)
    checksum: str = ""  # the full-object checksum's algorithm, when the listing names it
    outside: bool = False  # outside the size/time window: nothing is done to it, yet its name is held


class Unlisted:
    """Names the source could not list: under a source entry marked `unlisted` (a directory that
    could not be read, an entry that could not be stat'ed, a link not followed), the source may
    hold anything. What the destination holds there is never deleted, nor called extra.

    The merge comes in key order, so the names under an entry `d` (`d` itself, then `d/...`)
    come after it, and once a name beyond ``d/`` (not under it) has come, none will again:
    only the entries still ahead are kept."""

    __slots__ = ("_bases",)

    def __init__(self) -> None:
        self._bases: list[str] = []

    def saw(self, source: Entry) -> None:
        """Called for every source entry, in the merge's order."""
        if self._bases:
            self._forget_before(source.relative)
        if source.unlisted:
            self._bases.append(source.relative.rstrip("/"))

    def covers(self, name: str) -> bool:
        """Whether the destination's `name` lies under a source entry that could not be listed."""
        if not self._bases:
            return False
        self._forget_before(name)
        return any(name == base or name.startswith(base + "/") for base in self._bases)

    def _forget_before(self, name: str) -> None:
        self._bases = [base for base in self._bases if not _past(name, base)]


def _past(name: str, base: str) -> bool:
    return name > base + "/" and not name.startswith(base + "/")


class ListingOrderError(S3BulkError):
    """A listing came out of key order: merging it could delete what exists, so stop."""


async def merge_join(
    source: AsyncIterator[list[Entry]], destination: AsyncIterator[list[Entry]], chunk: int = 1000
) -> AsyncIterator[list[tuple[Entry | None, Entry | None]]]:
    """Pairs (source, destination) by name, in order; a side without the name gives None."""
    sides = (source, destination)
    pages: list[list[Entry] | None] = [[], []]
    index = [0, 0]
    last = ["", ""]

    async def refill(side: int) -> None:
        while True:
            page = await anext(sides[side], None)
            if page is None:
                pages[side] = None
                return
            if page:
                _check_order(page, last[side], side)
                last[side] = page[-1].relative
                pages[side], index[side] = page, 0
                return

    out: list[tuple[Entry | None, Entry | None]] = []
    await refill(0)
    await refill(1)
    while True:
        src_page, dst_page = pages
        if src_page is None and dst_page is None:
            break
        if src_page is None:
            assert dst_page is not None
            out.extend((None, entry) for entry in dst_page[index[1] :])
            await refill(1)
        elif dst_page is None:
            out.extend((entry, None) for entry in src_page[index[0] :])
            await refill(0)
        else:
            i, j = index
            while i < len(src_page) and j < len(dst_page):
                a, b = src_page[i], dst_page[j]
                if a.relative == b.relative:
                    out.append((a, b))
                    i += 1
                    j += 1
                elif a.relative < b.relative:
                    out.append((a, None))
                    i += 1
                else:
                    out.append((None, b))
                    j += 1
            index[0], index[1] = i, j
            if i == len(src_page):
                await refill(0)
            if j == len(dst_page):
                await refill(1)
        if len(out) >= chunk:
            yield out
            out = []
    if out:
        yield out


def _check_order(page: list[Entry], previous: str, side: int) -> None:
    for entry in page:
        if entry.relative <= previous:
            which = ("source", "destination")[side]
            raise ListingOrderError(
                f"the {which} listing is not in key order ({previous!r} then {entry.relative!r}); "
                "refusing to sync against it (is the endpoint S3-compatible?)"
            )
        previous = entry.relative


def newer(mtime: float, than: float) -> bool:
    """Whether a time is later than another, in whole seconds: S3 keeps LastModified to the
    second, so a file changed at 10.7 s and uploaded at 10.9 s is not newer than its object."""
    return math.floor(mtime) > math.floor(than)


def decide(
    source: Entry, destination: Entry | None, mode: SyncMode, local_side: bool, exact: bool = False
) -> Decision:
    """Whether `source` must be copied over `destination`; "check" asks a worker to compare the
    two first (only in checksum mode): a local file's checksum with the object's, or, where two
    objects' ETags differ but their bytes may not (`checksums_may_tell`), the full-object
    checksums both keep. `exact` (times only): copy when the times differ at all, not only when
    the source's is later."""
    if destination is None or source.size != destination.size:
        return "copy"
    if mode == "size":
        return "same"
    if mode == "mtime" and exact:
        return "copy" if math.floor(source.mtime) != math.floor(destination.mtime) else "same"
    if mode == "mtime":
        return "copy" if newer(source.mtime, destination.mtime) else "same"
    if local_side:
        return "check"
    if source.etag and source.etag == destination.etag:
        return "same"
    return "check" if checksums_may_tell(source, destination) else "copy"


def checksums_may_tell(source: Entry, destination: Entry) -> bool:
    """Whether two objects of the same size whose ETags differ may still hold the same bytes, and
    their full-object checksums (a HEAD of each) can say: a multipart ETag depends on the part
    size, and an SSE-KMS or SSE-C object's is no MD5 at all; where a listing names the algorithm
    (S3 lists it for every object it keeps one for), both must keep the same one. Otherwise the
    ETags' difference is taken as the bytes' (the HEADs would cost more than they save)."""
    if source.checksum or destination.checksum:
        return source.checksum == destination.checksum
    return "-" in source.etag or "-" in destination.etag
