"""What `sync` and `check` share, so that neither imports the other: the two sides listed in key
order and merge-joined (`Sides.chunks`, the driver's), the name each side gives a relative key
(`Sides.transfer`), the batches of items the diff decided (`DiffBatch`, counted in by
`Sides.expand`), and the question a listing cannot settle, whether two sides hold the same bytes
(`sides_match`, the worker's).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from s3bulk._commands.deletes import DeleteBatch, LocalDelete
from s3bulk._commands.mover import Stores
from s3bulk._commands.transfer import (
    Direction,
    TransferOptions,
    TransferSpec,
    check_places,
    check_source,
    direction_of,
)
from s3bulk._config import AwsSettings
from s3bulk._engine.job import WorkerContext
from s3bulk._errors import JobAborted, UsageError
from s3bulk._flags import DESTINATION_INVENTORY, INVENTORY
from s3bulk._plan.diff import Entry, Unlisted, merge_join
from s3bulk._plan.keys import MARKER_DATA, TransferItem
from s3bulk._report import Failure, WorkerStats
from s3bulk._sources.inventory import Manifest, check_inventory, inventory_pages, load_inventory
from s3bulk._sources.listing import (
    in_order_or_sorted,
    list_prefix,
    list_sequential,
    sorted_listing,
    sorted_pages,
)
from s3bulk._sources.local import walk
from s3bulk._sources.manifest import sorted_names
from s3bulk._stores import checksums
from s3bulk._stores.retry import Meter, Retrier, RetryPolicy
from s3bulk._stores.s3xml import ObjectInfo, epoch_seconds, listing_problem
from s3bulk._stores.storage import Storage
from s3bulk._text import NOT_UTF8
from s3bulk._urls import LocalLocation, Location, S3Location, is_directory_bucket, local_target_path

# An Entry from a tuple of all its fields, without NamedTuple's __new__ (keywords, defaults): the
# per-key cost of a listing entry halved
_new_entry = functools.partial(tuple.__new__, Entry)
assert Entry._fields[5:] == ("problem", "refused", "unlisted", "checksum", "outside"), (
    "as _entries makes them"
)

ACTIONS_PER_BATCH = 1000
LISTING_CONCURRENCY = 16  # list requests in flight per side, when key ranges are listed in parallel
MERGE_NEEDS_ORDER = (
    "sync and check walk two sorted listings side by side, and this one came in order at first, so "
    "they stop here rather than copy or delete the wrong objects (cp and rm do not need the order)"
)


@dataclass(frozen=True, kw_only=True)
class SidesSpec(TransferSpec):
    """What sync and check take beyond a transfer's options: each side's S3 Inventory, read in
    place of its listing (`Sides.read_inventories`)."""

    inventory: str | None = field(default=None, metadata=INVENTORY)  # the source's
    destination_inventory: str | None = field(default=None, metadata=DESTINATION_INVENTORY)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_inventory(self.inventory, _as_prefix(self.source), self.files_from)
        check_inventory(
            self.destination_inventory,
            _as_prefix(self.destination),
            self.files_from,
            flag="--destination-inventory",
        )


def _as_prefix(place: str) -> str:
    """sync and check read SRC and DST as prefixes, '/' or not (`as_directory`)."""
    return place if not isinstance(place, str) or place.endswith("/") else place + "/"


class CheckItem(NamedTuple):
    """Copy `transfer` unless its two sides already hold the same bytes (checksum mode): the local
    side's MD5 matches `etag`, or checksum does; or the two objects keep the same checksum."""

    transfer: TransferItem
    etag: str


@dataclass(frozen=True)
class DiffBatch:
    """A descriptor: items the driver's diff decided, plus what it found needs nothing."""

    items: tuple[Any, ...] = ()
    unchanged: int = 0
    problems: tuple[Failure, ...] = ()
    listing: str = ""  # the run whose listing decided it: only that run deletes what it names

    def __str__(self) -> str:
        return f"{len(self.items)} items of the diff"


def as_directory(location: Location) -> Location:
    """sync and check always work on prefixes and directories, with or without the trailing '/'."""
    if isinstance(location, S3Location):
        key = location.key
        return S3Location(location.bucket, key if not key or key.endswith("/") else key + "/")
    return LocalLocation(location.path, trailing_slash=True)


def transfer_of(item: Any) -> TransferItem:
    """The transfer an item of the diff is about (a CheckItem's, or itself)."""
    return item.transfer if isinstance(item, CheckItem) else item


@dataclass
class Sides:
    """The two trees a sync or check compares, as directories and prefixes, and the driver's
    listing of both (`unlisted`: what the source could not list, whose destination is kept)."""

    source: Location
    destination: Location
    settings: AwsSettings
    options: TransferOptions
    direction: Direction = field(init=False)
    unlisted: Unlisted = field(default_factory=Unlisted, init=False)
    make: Callable[..., Storage] = field(default=Storage, init=False)  # as `Stores.make`
    # each side's inventory (`read_inventories`), read in place of its listing
    inventories: tuple[Manifest | None, Manifest | None] = field(default=(None, None), init=False)
    # sync --delete: why an inventory that lists nothing under the source prefix stops the job
    refuse_empty_source: str = field(default="", init=False)

    def __post_init__(self) -> None:
        source = self.source
        if isinstance(source, LocalLocation) and source.path.exists() and not source.path.is_dir():
            raise UsageError(
                f"sync works on directories and prefixes, and {str(source.path)!r} is a file: "
                "use s3bulk cp for one file"
            )
        # s3://b/name without '/' is read as the prefix name/, unless it names an object (sync's preflight)
        self.maybe_object = source.key if isinstance(source, S3Location) and not source.is_prefix else ""
        self.source = as_directory(source)
        self.destination = as_directory(self.destination)
        self.direction = direction_of(self.source, self.destination)
        check_source(self.source)
        check_places(self.source, self.destination, many=True)

    @property
    def local_side(self) -> bool:
        """Whether one side is a directory: its files have no ETags, and "dir/" markers no files."""
        return self.direction != "copy"

    @property
    def source_inventoried(self) -> bool:
        """Whether the source's entries come from an inventory, a listing of a day or more ago."""
        return self.inventories[0] is not None

    async def read_inventories(self) -> None:
        """The manifests --inventory and --destination-inventory name, read and checked (each
        must list its side's bucket) before the job starts."""
        spec = self.options.spec
        if not isinstance(spec, SidesSpec):
            return
        found: list[Manifest | None] = []
        for url, location, settings in (
            (spec.inventory, self.source, self.settings.reading),
            (spec.destination_inventory, self.destination, self.settings),
        ):
            if url is None:
                found.append(None)
                continue
            assert isinstance(location, S3Location)
            found.append(await load_inventory(settings, url, location.bucket))
        self.inventories = (found[0], found[1])

    # ---- driver side: list both sides, merge them ------------------------------------------
    async def chunks(self, stats: WorkerStats) -> AsyncIterator[list[tuple[Entry | None, Entry | None]]]:
        """Both sides' entries, paired by name in key order, `ACTIONS_PER_BATCH` pairs at a time;
        the listings' requests and retries counted in `stats`."""
        policy = self.options.retry
        client = self.make(
            self.settings, connections=LISTING_CONCURRENCY * 2, retry=_counted_in(stats, policy)
        )
        reader = client
        if self.settings.source is not None:
            reader = self.make(
                self.settings.source, connections=LISTING_CONCURRENCY * 2, retry=_counted_in(stats, policy)
            )
        try:
            sides = [
                self._entries(self.source, reader, is_source=True),
                self._entries(self.destination, client, is_source=False),
            ]
            if self.options.spec.files_from is not None:  # only what the manifest names, on both sides
                sides = [_only_named(side, sorted_names(self.options.spec.files_from)) for side in sides]
            async with (
                contextlib.aclosing(prefetch(sides[0])) as source_pages,
                contextlib.aclosing(prefetch(sides[1])) as destination_pages,
            ):  # closed when the merge ends, failed or not: their listers stop
                async for chunk in merge_join(source_pages, destination_pages, chunk=ACTIONS_PER_BATCH):
                    yield chunk
        finally:
            await client.close()
            if reader is not client:
                await reader.close()

    def in_scope(
        self, chunk: list[tuple[Entry | None, Entry | None]]
    ) -> Iterator[tuple[Entry | None, Entry | None]]:
        """The merge's pairs the job acts on, in order. Both sides were listed whole, less the
        names the globs or a manifest leave out; the window says only what is done to an entry.
        A source entry outside it is passed over, and its name keeps what the destination holds
        there: filtered out or not, a name the source holds is never extra. A destination entry
        alone (its source None) is extra, and comes, only inside the window and where the source
        could be listed (`Unlisted`): nothing outside the source's listing in full is a reason
        to delete."""
        unlisted = self.unlisted
        for source, destination in chunk:
            if source is None:
                assert destination is not None
                if not destination.outside and not unlisted.covers(destination.relative):
                    yield None, destination
                continue
            unlisted.saw(source)
            if not source.outside:
                yield source, destination

    async def batches(
        self, stats: WorkerStats, plan: Callable[[list[tuple[Entry | None, Entry | None]]], DiffBatch]
    ) -> AsyncIterator[DiffBatch]:
        """The driver's descriptors: each chunk of the merge as the job's `plan` decides it
        (timed as planning), those with anything in them."""
        async for chunk in self.chunks(stats):
            with stats.timed("plan"):
                batch = plan(chunk)
            if batch.items or batch.unchanged or batch.problems:
                yield batch

    async def _entries(
        self, location: Location, client: Storage, is_source: bool
    ) -> AsyncIterator[list[Entry]]:
        if isinstance(location, LocalLocation):
            async for page in self._local_entries(location, is_source):
                yield page
            return
        filters = self.options.filters
        names, windowed = bool(filters.include or filters.exclude), filters.windowed  # per side, not key
        local_side = self.local_side
        start = len(location.key)
        async for objects in self._in_key_order(location, client, is_source):
            entries = []
            for info in objects:
                relative = info.key[start:]
                problem = listing_problem(info)
                if problem:  # at the source: named, and what it would replace is kept; else left be
                    if is_source:
                        entries.append(Entry(relative, 0, 0.0, "", info.key, problem, True, unlisted=True))
                    continue
                if names and not filters.takes_name(relative):
                    continue
                modified = epoch_seconds(info.modified)
                outside = windowed and not filters.in_window(info.size, modified)
                if local_side and info.key.endswith("/"):  # a directory locally, never a file
                    if is_source and info.size:  # holding data that cannot land: named, skipped
                        why = MARKER_DATA % info.size
                        entries.append(Entry(relative, 0, 0.0, "", info.key, why, outside=outside))
                    continue
                entries.append(  # as Entry(...) with its defaults: a fifth of sync's CPU went to its keywords
                    _new_entry(
                        (
                            relative,
                            info.size,
                            modified,
                            info.etag,
                            info.key,
                            "",
                            False,
                            False,
                            info.checksum_algorithm,
                            outside,
                        )
                    )
                )
            yield entries

    def _in_key_order(
        self, location: S3Location, client: Storage, is_source: bool
    ) -> AsyncIterator[list[ObjectInfo]]:
        """One side's listing in key order, as the merge needs it: as the service lists it, in
        key ranges side by side where they pay; sorted on this side (`sorted_listing`: an
        external sort, memory bounded) where the service lists in no order, an S3 Express
        directory bucket from the start, any other as soon as its first page shows it; or the
        side's inventory, sorted (`_inventoried`)."""
        bucket, prefix = location.bucket, location.key
        manifest = self.inventories[0 if is_source else 1]
        if manifest is not None:
            return self._inventoried(manifest, location, client, is_source)

        def sorted_pages() -> AsyncIterator[list[ObjectInfo]]:
            return sorted_listing(client, bucket, prefix)

        if is_directory_bucket(bucket):
            return sorted_pages()
        if self.options.spec.partitioned_listing is not False:
            pages = list_prefix(
                client,
                bucket,
                prefix,
                concurrency=LISTING_CONCURRENCY,
                auto=self.options.spec.partitioned_listing is None,
                ordered_for=MERGE_NEEDS_ORDER,
            )
        else:
            pages = (
                page.objects
                async for page in list_sequential(client, bucket, prefix, ordered_for=MERGE_NEEDS_ORDER)
            )
        return in_order_or_sorted(pages, sorted_pages)

    async def _inventoried(
        self, manifest: Manifest, location: S3Location, client: Storage, is_source: bool
    ) -> AsyncIterator[list[ObjectInfo]]:
        """A side's objects as its inventory lists them, in key order: AWS writes an inventory's
        files in no order of keys, so they are read whole into an external sort (memory bounded,
        and nothing handed on before the last row is in: an inventory that cannot be read gives
        nothing to act on). An inventory that lists nothing under the source prefix stops a
        sync --delete here, before the merge could call any destination object extra."""
        handed = 0
        async for objects in sorted_pages(inventory_pages(client, manifest, location.key), manifest.url):
            handed += len(objects)
            yield objects
        if not handed and is_source and self.refuse_empty_source:
            raise JobAborted(self.refuse_empty_source)

    async def _local_entries(self, location: LocalLocation, is_source: bool) -> AsyncIterator[list[Entry]]:
        filters = self.options.filters
        page: list[Entry] = []
        root = str(location.path)
        if not is_source and not location.path.exists():
            return
        # s3bulk's temporary files are left out; at the destination, those of a process killed
        # outright (which nothing else would ever remove) are removed
        for entry in walk(root, self.options.spec.follow_symlinks and is_source, sweep=not is_source):
            unknown = bool(entry.problem) and entry.problem != NOT_UTF8  # what it holds, or is
            unreadable = unknown and entry.refused  # no filter can say it holds nothing wanted
            if filters and not unreadable and not filters.takes_name(entry.relative):
                continue
            outside = not unreadable and not filters.in_window(entry.size, entry.mtime)
            path = os.path.join(root, entry.relative)
            if entry.problem:
                if is_source:  # reported; what the destination holds under it is kept (Unlisted)
                    relative = entry.relative + "/" if entry.directory else entry.relative
                    problem, refused = entry.problem, entry.refused
                    page.append(Entry(relative, 0, 0.0, "", path, problem, refused, unknown, outside=outside))
                continue
            page.append(Entry(entry.relative, entry.size, entry.mtime, "", path, outside=outside))
            if len(page) >= 1000:
                yield page
                page = []
                await asyncio.sleep(0)
        if page:
            yield page

    def transfer(
        self, relative: str, size: int, mtime: float, etag: str = "", replaces: str | None = None
    ) -> TransferItem:
        """The item that copies `relative` from one side to the other (over what `replaces`
        says, `TransferItem.replaces`); ValueError: a key that cannot land under the local
        destination (`local_target_path`)."""
        source, destination = self.source, self.destination
        if isinstance(source, S3Location):
            name = source.key + relative
        else:
            name = os.path.join(str(source.path), relative)
        if isinstance(destination, S3Location):
            target = destination.key + relative
        else:
            target = local_target_path(str(destination.path), relative, self.options.spec.allow_control_chars)
        return TransferItem(name, target, size, mtime, etag, replaces)

    def item_id(self, transfer: TransferItem) -> str:
        """A transfer's name in the journal: its name relative to the source."""
        if isinstance(self.source, S3Location):
            return transfer.source[len(self.source.key) :]
        return transfer.source[len(str(self.source.path)) :].lstrip("/")

    # ---- worker side ------------------------------------------------------------------------
    @staticmethod
    def expand(descriptor: DiffBatch, ctx: WorkerContext, item_id: Callable[[Any], str]) -> list[Any]:
        """A batch's items not done yet (a resume's), counted in the totals; its problems and
        what it found unchanged counted as they are."""
        stats = ctx.stats
        stats.objects_unchanged += descriptor.unchanged
        for problem in descriptor.problems:
            stats.failures.append(problem)
            if problem.skipped:
                stats.objects_skipped += 1
            else:
                stats.objects_failed += 1
        items = ctx.drop_done(list(descriptor.items), item_id)
        for item in items:
            stats.objects_listed += len(item.keys) if isinstance(item, DeleteBatch) else 1
            if not isinstance(item, DeleteBatch | LocalDelete):
                stats.bytes_listed += transfer_of(item).size
        return items


async def sides_match(item: CheckItem, sides: Sides, stores: Stores) -> bool | None:
    """Whether both sides of `item` hold the same bytes (None: nothing can tell): two objects by
    the full-object checksums a HEAD of each returns; a file against its object by its checksum,
    or its MD5 against the ETag (`Storage.file_matches`)."""
    transfer = item.transfer
    if sides.direction == "copy":
        return await _objects_match(transfer, sides, stores)
    upload = sides.direction == "upload"
    remote = sides.destination if upload else sides.source
    assert isinstance(remote, S3Location)
    local, key = (
        (transfer.source, transfer.destination) if upload else (transfer.destination, transfer.source)
    )
    storage = stores.storage if upload else stores.source_storage
    part_size = sides.options.spec.part_size
    return await storage.file_matches(
        local, item.etag, transfer.size, part_size, bucket=remote.bucket, key=key
    )


async def _objects_match(transfer: TransferItem, sides: Sides, stores: Stores) -> bool | None:
    """Whether two objects keep the same full-object checksum, a HEAD of each in checksum mode
    says (None: one keeps none, or they keep different algorithms)."""
    assert isinstance(sides.source, S3Location) and isinstance(sides.destination, S3Location)
    reader, writer = stores.source_storage, stores.storage
    source, destination = await asyncio.gather(
        reader.head(sides.source.bucket, transfer.source, of_source=reader is writer, checksums=True),
        writer.head(sides.destination.bucket, transfer.destination, checksums=True),
    )
    ours, theirs = checksums.full_object(source), checksums.full_object(destination)
    if ours is None or theirs is None or ours[0] != theirs[0]:
        return None
    return ours == theirs


async def _only_named(pages: AsyncIterator[list[Entry]], names: Iterator[str]) -> AsyncIterator[list[Entry]]:
    """The entries whose names a sorted manifest holds: both are in the same order, so one walk
    down each finds them, whatever the size of either. An entry that could not be listed (a
    directory that could not be read: `Unlisted`) is kept where the manifest names it or
    anything under it: else what the manifest names there would look extra at the destination."""
    wanted = next(names, None)
    async for page in pages:
        kept = []
        for entry in page:
            base = entry.relative.rstrip("/")
            covered = False  # a name the manifest holds lies at or under this unlisted entry
            while wanted is not None and wanted < entry.relative:
                covered = covered or (entry.unlisted and wanted == base)
                wanted = next(names, None)
            if wanted is not None and entry.unlisted:
                covered = covered or wanted == base or wanted.startswith(base + "/")
            if covered or wanted == entry.relative:
                kept.append(entry)
        if kept:
            yield kept


def _counted_in(stats: WorkerStats, policy: RetryPolicy) -> Retrier:
    """The driver's listings count their requests and retries in its own stats."""

    def retried(error: Exception) -> None:
        stats.retries += 1
        stats.throttles += bool(getattr(error, "throttled", False))

    return Retrier(policy, Meter(stats.requests, stats.stage_seconds, retried))


async def prefetch(pages: AsyncIterator[list[Entry]], depth: int = 2) -> AsyncGenerator[list[Entry], None]:
    """List one side ahead of the merge, so both sides' round trips overlap."""
    queue: asyncio.Queue[list[Entry] | BaseException | None] = asyncio.Queue(maxsize=depth)

    async def fill() -> None:
        try:
            async for page in pages:
                await queue.put(page)
        except Exception as exc:  # the consumer raises it; a cancel ends this at once
            await queue.put(exc)
            return
        await queue.put(None)

    task = asyncio.create_task(fill())
    try:
        while (page := await queue.get()) is not None:
            if isinstance(page, BaseException):
                raise page
            yield page
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
