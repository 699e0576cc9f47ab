"""`sync SRC DST`: make DST hold what SRC holds, transferring only what differs.

source → plan → engine → store: the driver lists both sides in key order, merge-joins them
(`plan.diff`) and streams batches of actions (copy, check-then-copy, delete) to the workers,
which run them with `cp`'s operations. Listings, the diff and the transfers overlap, and memory
stays flat in the object count (a page per side plus a bounded queue of action batches).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple

from s3bulk._commands.base import JobPlan, Spec
from s3bulk._commands.copy import MARKER_DATA, CopyCommand, CopyJob, CopySpec, TransferItem, unchanged
from s3bulk._commands.remove import DeleteBatch, check_max_delete, run_delete_batch
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._errors import UsageError
from s3bulk._plan.diff import Entry, SyncMode, Unlisted, decide, merge_join
from s3bulk._report import Failure, WorkerStats
from s3bulk._sources.listing import list_prefix, list_sequential
from s3bulk._sources.local import NOT_UTF8, walk
from s3bulk._sources.manifest import sorted_names
from s3bulk._stores import checksums
from s3bulk._stores.landing import PART_SUFFIX, remove_if_stale
from s3bulk._stores.retry import Meter, Retrier, RetryPolicy
from s3bulk._stores.s3xml import epoch_seconds, listing_problem
from s3bulk._stores.storage import Storage
from s3bulk._urls import LocalLocation, Location, S3Location, local_target_path, parse_location

MODES = ("mtime", "size", "checksum")


@dataclass(frozen=True, kw_only=True)
class SyncSpec(CopySpec):
    command: ClassVar[str] = "sync"
    mode: str = "mtime"  # changed: sizes differ or the source is newer; "size"; "checksum"
    delete: bool = False  # also delete what the source lacks
    allow_empty_source: bool = False  # --delete from an empty or missing source: refused unless set
    max_delete: int | None = None  # --delete: stop the job before deleting more than this

    def __post_init__(self) -> None:
        super().__post_init__()
        check_max_delete(self.max_delete)
        if self.mode not in MODES:
            raise UsageError(f"unknown sync mode {self.mode!r}: use mtime, size or checksum")


class SyncCommand(CopyCommand):
    name: ClassVar[str] = "sync"
    spec: ClassVar[type[Spec]] = SyncSpec

    def python_bound(self, spec: Spec) -> bool:
        assert isinstance(spec, SyncSpec)
        return spec.mode == "checksum"  # local files are hashed by the workers

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        from s3bulk._commands.copy import copy_options

        assert isinstance(spec, SyncSpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        options = copy_options(spec, settings, plan)
        job = SyncJob(
            source,
            destination,
            settings,
            options,
            mode=spec.mode,  # type: ignore[arg-type]
            delete=spec.delete,
            allow_empty_source=spec.allow_empty_source,
        )
        job.preflight_requests = await job.preflight()
        return job

    def verb(self, job: Job) -> str:
        return f"sync ({getattr(job, 'direction', '')})"


ACTIONS_PER_BATCH = 1000
LISTING_CONCURRENCY = 16  # list requests in flight per side, when key ranges are listed in parallel
DELETE_PREFIX = "delete:"
MERGE_NEEDS_ORDER = (
    "sync and check walk two sorted listings side by side, so they stop here rather than copy or "
    "delete the wrong objects (cp and rm do not need the order)"
)


class CheckItem(NamedTuple):
    """Copy `transfer` unless its two sides already hold the same bytes (checksum mode): the local
    side's MD5 matches `etag`, or checksum does; or the two objects keep the same checksum."""

    transfer: TransferItem
    etag: str


class LocalDelete(NamedTuple):
    path: str
    size: int


@dataclass(frozen=True)
class SyncBatch:
    """A descriptor: actions the driver's diff decided, plus what it found needs nothing."""

    items: tuple[Any, ...] = ()
    unchanged: int = 0
    problems: tuple[Failure, ...] = ()

    def __str__(self) -> str:
        return f"{len(self.items)} sync actions"


def as_directory(location: Location) -> Location:
    """sync always works on prefixes and directories, with or without the trailing '/'."""
    if isinstance(location, S3Location):
        key = location.key
        return S3Location(location.bucket, key if not key or key.endswith("/") else key + "/")
    return LocalLocation(location.path, trailing_slash=True)


@dataclass
class SyncJob(CopyJob):
    mode: SyncMode = "mtime"
    delete: bool = False
    allow_empty_source: bool = False

    def __post_init__(self) -> None:
        source = self.source
        if isinstance(source, LocalLocation) and source.path.exists() and not source.path.is_dir():
            raise UsageError(
                f"sync works on directories and prefixes, and {str(source.path)!r} is a file: "
                "use s3bulk cp for one file"
            )
        # s3://b/name without '/' is read as the prefix name/, unless it names an object (preflight)
        self._maybe_object = source.key if isinstance(source, S3Location) and not source.is_prefix else ""
        self.source = as_directory(source)
        self.destination = as_directory(self.destination)
        super().__post_init__()
        self._local_side = self.direction != "copy"
        self._unlisted = Unlisted()  # the driver's: what the source could not list (merge order)
        if (
            self.delete
            and isinstance(self.source, S3Location)
            and isinstance(self.destination, S3Location)
            and self.source.bucket == self.destination.bucket
            and self.source.key.startswith(self.destination.key)
        ):
            raise UsageError(
                f"the source {self.source} is inside the destination {self.destination}: with --delete, "
                "sync would delete the source itself; pick a destination outside it"
            )

    async def preflight(self) -> dict[str, int]:
        """CopyJob's check of the bucket written to; and `sync s3://b/name ...` where `name` is an
        object and `name/` holds nothing is refused, as a local file is (cp copies one object)."""
        requests = await super().preflight()
        if self.delete and not self.allow_empty_source and await self._source_is_empty():
            raise UsageError(
                f"the source {self.source} is empty or missing: sync --delete would delete everything "
                "in the destination; pass --allow-empty-source if that is what you want"
            )
        if not self._maybe_object:
            return requests
        assert isinstance(self.source, S3Location)
        storage = Storage(self.settings.reading, connections=2)
        try:
            bucket = self.source.bucket
            below = await storage.list_objects_v2(bucket, self.source.key, max_keys=1)
            named = await storage.list_objects_v2(bucket, self._maybe_object, max_keys=1)
        finally:
            await storage.close()
        if not below.objects and named.objects and named.objects[0].key == self._maybe_object:
            raise UsageError(
                f"sync works on prefixes, and s3://{bucket}/{self._maybe_object} is an object: "
                "use s3bulk cp for one object (or end the URL with '/' for a prefix)"
            )
        return requests | {
            kind: requests.get(kind, 0) + count for kind, count in storage.meter.requests.items()
        }

    async def _source_is_empty(self) -> bool:
        """Whether the source holds nothing at all (a typo, an unmounted disk, a wrong bucket):
        what an emptied destination would be the price of."""
        source = self.source
        if isinstance(source, LocalLocation):
            return next(iter(walk(str(source.path), False)), None) is None if source.path.is_dir() else True
        assert isinstance(source, S3Location)
        storage = Storage(self.settings.reading, connections=2)
        try:
            page = await storage.list_objects_v2(source.bucket, source.key, max_keys=1)
        finally:
            await storage.close()
        return not page.objects

    # ---- driver side: list both sides, diff, emit actions ------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        policy = self.options.retry
        client = Storage(self.settings, connections=LISTING_CONCURRENCY * 2, retry=_counted_in(stats, policy))
        reader = client
        if self.settings.source is not None:
            reader = Storage(
                self.settings.source, connections=LISTING_CONCURRENCY * 2, retry=_counted_in(stats, policy)
            )
        try:
            sides = [
                self._entries(self.source, reader, is_source=True),
                self._entries(self.destination, client, is_source=False),
            ]
            if self.options.files_from is not None:  # only what the manifest names, on both sides
                sides = [_only_named(side, sorted_names(self.options.files_from)) for side in sides]
            async with (
                contextlib.aclosing(_prefetch(sides[0])) as source_pages,
                contextlib.aclosing(_prefetch(sides[1])) as destination_pages,
            ):  # closed when the merge ends, failed or not: their listers stop
                async for chunk in merge_join(source_pages, destination_pages, chunk=ACTIONS_PER_BATCH):
                    with stats.timed("plan"):
                        batch = self._plan(chunk)
                    if batch.items or batch.unchanged or batch.problems:
                        yield batch
        finally:
            await client.close()
            if reader is not client:
                await reader.close()

    async def _entries(
        self, location: Location, client: Storage, is_source: bool
    ) -> AsyncIterator[list[Entry]]:
        filters = self.options.filters
        if isinstance(location, LocalLocation):
            page: list[Entry] = []
            root = str(location.path)
            if not is_source and not location.path.exists():
                return
            for entry in walk(root, self.options.follow_symlinks and is_source):
                if entry.relative.endswith(PART_SUFFIX) and not is_source:
                    # our own download in flight, not part of the tree; or one whose process was
                    # killed outright, which nothing else would ever remove
                    remove_if_stale(os.path.join(root, entry.relative))
                    continue
                unknown = bool(entry.problem) and entry.problem != NOT_UTF8  # what it holds, or is
                unreadable = unknown and entry.refused  # no filter can say it holds nothing wanted
                if (
                    filters
                    and not unreadable
                    and not filters.accepts(entry.relative, entry.size, entry.mtime)
                ):
                    continue
                if entry.problem:
                    if is_source:  # reported; what the destination holds under it is kept (Unlisted)
                        relative = entry.relative + "/" if entry.directory else entry.relative
                        path = os.path.join(root, entry.relative)
                        page.append(
                            Entry(relative, 0, 0.0, "", path, entry.problem, entry.refused, unlisted=unknown)
                        )
                    continue
                page.append(
                    Entry(entry.relative, entry.size, entry.mtime, "", os.path.join(root, entry.relative))
                )
                if len(page) >= 1000:
                    yield page
                    page = []
                    await asyncio.sleep(0)
            if page:
                yield page
            return
        prefix = location.key
        skip_markers = self._local_side  # "dir/" marker objects have no file counterpart
        if self.options.partitioned_listing is not False:
            pages = list_prefix(
                client,
                location.bucket,
                prefix,
                concurrency=LISTING_CONCURRENCY,
                auto=self.options.partitioned_listing is None,
                ordered_for=MERGE_NEEDS_ORDER,
            )
        else:
            pages = (
                page.objects
                async for page in list_sequential(
                    client, location.bucket, prefix, ordered_for=MERGE_NEEDS_ORDER
                )
            )
        async for objects in pages:
            entries = []
            for info in objects:
                relative = info.key[len(prefix) :]
                problem = listing_problem(info)
                if problem:  # at the source: named, and what it would replace is kept; else left be
                    if is_source:
                        entries.append(Entry(relative, 0, 0.0, "", info.key, problem, True, unlisted=True))
                    continue
                if filters and not filters.accepts(relative, info.size, epoch_seconds(info.modified)):
                    continue
                if skip_markers and info.key.endswith("/"):  # a directory locally, never a file
                    if is_source and info.size:  # holding data that cannot land: named, skipped
                        entries.append(Entry(relative, 0, 0.0, "", info.key, MARKER_DATA % info.size))
                    continue
                modified, checksum = epoch_seconds(info.modified), info.checksum_algorithm
                entries.append(Entry(relative, info.size, modified, info.etag, info.key, checksum=checksum))
            yield entries

    def _plan(self, chunk: list[tuple[Entry | None, Entry | None]]) -> SyncBatch:
        items: list[Any] = []
        deletes: list[tuple[str, int]] = []
        problems: list[Failure] = []
        unchanged = 0
        unlisted = self._unlisted
        for source, destination in chunk:
            if source is None:
                assert destination is not None
                if self.delete and not unlisted.covers(destination.relative):
                    deletes.append((destination.name, destination.size))
                continue
            unlisted.saw(source)
            if source.problem:
                path = self._shown_as(source)
                why = source.problem + (
                    "; nothing under it is deleted" if self.delete and source.unlisted else ""
                )
                problems.append(Failure(path, "", why, skipped=not source.refused))
                continue
            decision = decide(source, destination, self.mode, self._local_side)
            if decision == "same":
                unchanged += 1
                continue
            try:
                transfer = self._transfer(source.relative, source.size, source.mtime, source.etag)
            except ValueError as exc:
                problems.append(Failure(source.name, "", f"refused key: {exc}"))
                continue
            if decision == "check":
                etag = source.etag or (destination.etag if destination else "")
                items.append(CheckItem(transfer, etag))
            else:
                items.append(transfer)
        items.extend(self._delete_items(deletes))
        return SyncBatch(tuple(items), unchanged, tuple(problems))

    def _shown_as(self, source: Entry) -> str:
        """A source entry as the report names it: its URL, or its path."""
        if isinstance(self.source, S3Location):
            return f"s3://{self.source.bucket}/{source.name}"
        return source.name or os.path.join(str(self.source), source.relative)

    def _transfer(self, relative: str, size: int, mtime: float, etag: str = "") -> TransferItem:
        source, destination = self.source, self.destination
        if isinstance(source, S3Location):
            name = source.key + relative
        else:
            name = os.path.join(str(source.path), relative)
        if isinstance(destination, S3Location):
            target = destination.key + relative
        else:
            target = local_target_path(str(destination.path), relative, self.options.allow_control_chars)
        return TransferItem(name, target, size, mtime, etag)

    def _delete_items(self, deletes: list[tuple[str, int]]) -> list[Any]:
        if not deletes:
            return []
        if isinstance(self.destination, S3Location):
            return [DeleteBatch(self.destination.bucket, tuple(deletes))]
        return [LocalDelete(path, size) for path, size in deletes]

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        for batch in rows:
            items: list[Any] = []
            deletes = []
            for item_id, size in batch:
                if item_id.startswith(DELETE_PREFIX):
                    deletes.append((item_id[len(DELETE_PREFIX) :], size))
                else:
                    items.append(self._transfer(item_id, size, 0.0))
            items.extend(self._delete_items(deletes))
            yield SyncBatch(tuple(items))

    # ---- worker side --------------------------------------------------------------------------
    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        stats = ctx.stats
        assert isinstance(descriptor, SyncBatch)
        stats.objects_unchanged += descriptor.unchanged
        for problem in descriptor.problems:
            stats.failures.append(problem)
            if problem.skipped:
                stats.objects_skipped += 1
            else:
                stats.objects_failed += 1
        items = ctx.drop_done(list(descriptor.items), self.item_id)
        for item in items:
            stats.objects_listed += len(item.keys) if isinstance(item, DeleteBatch) else 1
            if not isinstance(item, DeleteBatch | LocalDelete):
                stats.bytes_listed += self._transfer_of(item).size
        yield items

    @staticmethod
    def _transfer_of(item: Any) -> TransferItem:
        return item.transfer if isinstance(item, CheckItem) else item

    async def run(self, item: Any, ctx: WorkerContext) -> int | BatchOutcome:
        if isinstance(item, DeleteBatch):
            outcome = await run_delete_batch(self.storage, item, self.options.dry_run, self._cap, ctx)
            ctx.stats.objects_deleted += len(outcome.done)
            return BatchOutcome(
                [(DELETE_PREFIX + key, 0, url) for key, _, url in outcome.done],
                [replace(failure, item_id=DELETE_PREFIX + failure.item_id) for failure in outcome.failures],
            )
        if isinstance(item, LocalDelete):
            if self._cap is not None and not self._cap.take(1, ctx.stop_job):
                return BatchOutcome([], [])  # not deleted, not journaled: a resume does it
            if not self.options.dry_run:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(item.path)
            ctx.stats.objects_deleted += 1
            return 0
        if isinstance(item, CheckItem):
            transfer = item.transfer
            same = await self.sides_match(item)
            if same:  # nothing to do after all
                return unchanged(ctx, transfer.size)
            item = transfer
        return await super().run(item, ctx)

    async def sides_match(self, item: CheckItem) -> bool | None:
        """Whether both sides of `item` hold the same bytes (None: nothing can tell)."""
        if self.direction == "copy":
            return await self._objects_match(item.transfer)
        return await self._local_matches(item)

    async def _objects_match(self, transfer: TransferItem) -> bool | None:
        """Whether two objects keep the same full-object checksum, a HEAD of each in checksum
        mode says (None: one keeps none, or they keep different algorithms)."""
        assert isinstance(self.source, S3Location) and isinstance(self.destination, S3Location)
        reader, writer = self.source_storage, self.storage
        source, destination = await asyncio.gather(
            reader.head(self.source.bucket, transfer.source, of_source=reader is writer, checksums=True),
            writer.head(self.destination.bucket, transfer.destination, checksums=True),
        )
        ours, theirs = checksums.full_object(source), checksums.full_object(destination)
        if ours is None or theirs is None or ours[0] != theirs[0]:
            return None
        return ours == theirs

    async def _local_matches(self, item: CheckItem) -> bool | None:
        """Whether the local side of `item` holds the object's bytes (`Storage.file_matches`)."""
        transfer = item.transfer
        upload = self.direction == "upload"
        remote = self.destination if upload else self.source
        assert isinstance(remote, S3Location)
        local, key = (
            (transfer.source, transfer.destination) if upload else (transfer.destination, transfer.source)
        )
        storage = self.storage if upload else self.source_storage
        part_size = self.options.part_size
        return await storage.file_matches(
            local, item.etag, transfer.size, part_size, bucket=remote.bucket, key=key
        )

    def cost(self, item: Any) -> int:
        if isinstance(item, DeleteBatch | LocalDelete):
            return 0
        return super().cost(self._transfer_of(item))

    def describe(self, item: Any) -> tuple[str, str, int]:
        if isinstance(item, DeleteBatch):
            return f"s3://{item.bucket}/{item.keys[0][0]}", "", 0
        if isinstance(item, LocalDelete):
            return item.path, "", item.size
        return super().describe(self._transfer_of(item))

    def item_id(self, item: Any) -> str:
        if isinstance(item, DeleteBatch):
            return DELETE_PREFIX + item.keys[0][0]
        if isinstance(item, LocalDelete):
            return DELETE_PREFIX + item.path
        transfer = self._transfer_of(item)
        if isinstance(self.source, S3Location):
            return transfer.source[len(self.source.key) :]
        return transfer.source[len(str(self.source.path)) :].lstrip("/")


async def _only_named(pages: AsyncIterator[list[Entry]], names: Iterator[str]) -> AsyncIterator[list[Entry]]:
    """The entries whose names a sorted manifest holds: both are in the same order, so one walk
    down each finds them, whatever the size of either."""
    wanted = next(names, None)
    async for page in pages:
        kept = []
        for entry in page:
            while wanted is not None and wanted < entry.relative:
                wanted = next(names, None)
            if wanted == entry.relative:
                kept.append(entry)
        if kept:
            yield kept


def _counted_in(stats: WorkerStats, policy: RetryPolicy) -> Retrier:
    """The driver's listings count their requests and retries in its own stats."""

    def retried(error: Exception) -> None:
        stats.retries += 1
        stats.throttles += bool(getattr(error, "throttled", False))

    return Retrier(policy, Meter(stats.requests, stats.stage_seconds, retried))


async def _prefetch(pages: AsyncIterator[list[Entry]], depth: int = 2) -> AsyncGenerator[list[Entry], None]:
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


COMMANDS = (SyncCommand(),)  # found by the registry (s3bulk._commands)
