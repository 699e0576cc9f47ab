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
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.deletes import (
    CHANGED_AFTER_LISTING,
    HEADS,
    BatchDeleter,
    DeleteBatch,
    LocalDelete,
    check_max_delete,
    run_delete_batch,
)
from s3bulk._commands.mover import Mover
from s3bulk._commands.sides import CheckItem, DiffBatch, Sides, SidesSpec, sides_match, transfer_of
from s3bulk._commands.transfer import (
    Direction,
    TransferOptions,
    transfer_options,
    unchanged,
    written_bucket_usable,
)
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, Skipped, WorkerContext
from s3bulk._errors import ItemError, S3Error, UsageError
from s3bulk._flags import option
from s3bulk._plan.diff import Entry, SyncMode, decide
from s3bulk._report import Failure, WorkerStats
from s3bulk._sources.local import walk
from s3bulk._stores.conditional import NOTHING
from s3bulk._stores.storage import Storage
from s3bulk._urls import LocalLocation, Location, S3Location, parse_location

MODES = ("mtime", "size", "checksum")
NOT_FOR_SYNC = ("no_clobber", "if_size_differ", "if_newer")


@dataclass(frozen=True, kw_only=True)
class SyncSpec(SidesSpec):
    """sync compares whole listings: the per-object guards of cp (-n, -s, -u), NOT_FOR_SYNC,
    mean nothing there and are no option of it."""

    command: ClassVar[str] = "sync"
    mode: str = "mtime"  # changed: sizes differ or the source is newer; "size"; "checksum"
    delete: bool = field(
        default=False,
        metadata=option("--delete", help="Delete destination objects missing at the source.", panel="job"),
    )
    allow_empty_source: bool = field(  # --delete from an empty or missing source: refused unless set
        default=False,
        metadata=option(
            "--allow-empty-source",
            help="With --delete, accept an empty or missing source (empties DST).",
            panel="job",
        ),
    )
    max_delete: int | None = None  # --delete: stop the job before deleting more than this
    exact_timestamps: bool = field(
        default=False,
        metadata=option(
            "--exact-timestamps",
            help="Downloads: fetch again a file of the same size whose time differs from its object's "
            "at all (by default only an object newer than its file is), as aws s3 sync does.",
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_max_delete(self.max_delete)
        if self.mode not in MODES:
            raise UsageError(f"unknown sync mode {self.mode!r}: use mtime, size or checksum")
        if self.exact_timestamps and self.mode != "mtime":
            raise UsageError("--exact-timestamps compares times: not with --size-only or --checksum")
        if self.exact_timestamps and not (self.source.startswith("s3://") and "://" not in self.destination):
            raise UsageError(
                "--exact-timestamps is for downloads (a file keeps its object's time; an object's is "
                "when it was written): sync s3://bucket/prefix/ DIR"
            )


class SyncCommand(Command):
    name: ClassVar[str] = "sync"
    spec: ClassVar[type[Spec]] = SyncSpec

    def python_bound(self, spec: Spec) -> bool:
        assert isinstance(spec, SyncSpec)
        return spec.mode == "checksum"  # local files are hashed by the workers

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, SyncSpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        layout = spec.mode == "checksum"  # a copy of a multipart object keeps its parts: same ETag
        options = transfer_options(spec, settings, plan, max_delete=spec.max_delete, keep_part_layout=layout)
        job = SyncJob(
            source,
            destination,
            settings,
            options,
            mode=spec.mode,  # type: ignore[arg-type]
            delete=spec.delete,
            allow_empty_source=spec.allow_empty_source,
        )
        await job.sides.read_inventories()
        job.preflight_requests = await job.preflight()
        return job

    def verb(self, job: Job) -> str:
        return f"sync ({getattr(job, 'direction', '')})"


# A delete's name in the journal: NUL first, which no key (no listing's XML carries one) and no
# file name holds. With "delete:", a key named `delete:/some/path` whose transfer failed came back
# from --retry-failed as a delete of /some/path.
DELETE_PREFIX = "\x00delete:"
SOURCE_HOLDS_IT = (
    "not deleted: the source holds this name now (written after the source's inventory was "
    "taken), so it is not extra: kept (run the sync again, from a newer inventory or a listing, "
    "to copy it)"
)
UNSEEN_SOURCE = "not deleted: whether the source holds it now could not be looked up"
STALE_DELETE = (
    "not deleted: an earlier run's listing found it extra; --retry-failed deletes it only if "
    "its own listings still do"
)


@dataclass
class SyncJob:
    """The driver lists both sides and diffs them (`Sides`); the workers copy what differs with
    cp's `Mover`, check what only bytes can settle (`sides_match`), and delete what the source
    lacks (with --delete)."""

    source: Location
    destination: Location
    settings: AwsSettings
    options: TransferOptions
    mode: SyncMode = "mtime"
    delete: bool = False
    allow_empty_source: bool = False
    sides: Sides = field(init=False)
    mover: Mover = field(init=False)
    preflight_requests: dict[str, int] = field(default_factory=dict, init=False)
    preflight_notes: list[str] = field(default_factory=list, init=False)
    # this run's listings, named: only descriptors they decided may delete (`expand`)
    listing: str = field(default_factory=lambda: os.urandom(8).hex(), init=False)

    @property
    def exact_timestamps(self) -> bool:
        """--exact-timestamps: a download's file of another time than its object's is fetched again."""
        spec = self.options.spec
        return isinstance(spec, SyncSpec) and spec.exact_timestamps

    def __post_init__(self) -> None:
        self.sides = Sides(self.source, self.destination, self.settings, self.options)
        self.source, self.destination = self.sides.source, self.sides.destination
        self.mover = Mover(self.source, self.destination, self.settings, self.options)
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

    @property
    def direction(self) -> Direction:
        return self.sides.direction

    async def preflight(self) -> dict[str, int]:
        """The bucket written to answers (`written_bucket_usable`); `sync --delete` from an empty
        source is refused; and `sync s3://b/name ...` where `name` is an object and `name/`
        holds nothing is refused, as a local file is (cp copies one object)."""
        requests = await written_bucket_usable(self.settings, self.destination, self.options.spec.dry_run)
        if self.sides.source_inventoried:  # its rows say if it is empty (`Sides._inventoried`): no LIST
            if self.delete and not self.allow_empty_source:
                self.sides.refuse_empty_source = (
                    f"the source's inventory lists nothing under {self.source}: sync --delete would "
                    "delete everything in the destination; pass --allow-empty-source if that is what you want"
                )
            return requests
        if self.delete and not self.allow_empty_source and await self._source_is_empty():
            raise UsageError(
                f"the source {self.source} is empty or missing: sync --delete would delete everything "
                "in the destination; pass --allow-empty-source if that is what you want"
            )
        maybe_object = self.sides.maybe_object
        if not maybe_object:
            return requests
        assert isinstance(self.source, S3Location)
        storage = Storage(self.settings.reading, connections=2)
        try:
            bucket = self.source.bucket
            below = await storage.list_objects_v2(bucket, self.source.key, max_keys=1)
            named = await storage.list_objects_v2(bucket, maybe_object, max_keys=1)
        finally:
            await storage.close()
        if not below.objects and named.objects and named.objects[0].key == maybe_object:
            raise UsageError(
                f"sync works on prefixes, and s3://{bucket}/{maybe_object} is an object: "
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
    def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        return self.sides.batches(stats, self._plan)

    def _plan(
        self, chunk: list[tuple[Entry | None, Entry | None]], only: frozenset[str] | None = None
    ) -> DiffBatch:
        """What the merge's pairs ask for; with `only` (a retry's failed deletes), only the
        deletes of those names this run's listings still find extra, and what could not be
        listed."""
        items: list[Any] = []
        deletes: list[Entry] = []
        problems: list[Failure] = []
        unchanged = 0
        exact = self.exact_timestamps
        for source, destination in self.sides.in_scope(chunk):
            if source is None:  # extra: the source's listing in full has no such name
                assert destination is not None
                if self.delete and (only is None or destination.name in only):
                    deletes.append(destination)
                continue
            if only is not None and not (source.problem and source.unlisted):
                continue
            if source.problem:
                path = self._shown_as(source)
                why = source.problem + (
                    "; nothing under it is deleted" if self.delete and source.unlisted else ""
                )
                problems.append(Failure(path, "", why, skipped=not source.refused))
                continue
            decision = decide(source, destination, self.mode, self.sides.local_side, exact)
            if decision == "same":
                unchanged += 1
                continue
            try:
                transfer = self.sides.transfer(
                    source.relative, source.size, source.mtime, source.etag, self._replaces(destination)
                )
            except ValueError as exc:
                problems.append(Failure(source.name, "", f"refused key: {exc}"))
                continue
            if decision == "check":
                etag = source.etag or (destination.etag if destination else "")
                items.append(CheckItem(transfer, etag))
            else:
                items.append(transfer)
        items.extend(self._delete_items(deletes))
        return DiffBatch(tuple(items), unchanged, tuple(problems), self.listing)

    def _replaces(self, destination: Entry | None) -> str | None:
        """What a write may replace at an S3 destination: the version listed there (If-Match), or
        no object where none was listed (If-None-Match: *), so that another writer's object,
        written since the listing, is never overwritten (`conditional.write_condition`)."""
        if not isinstance(self.destination, S3Location):
            return None
        if destination is None:
            return NOTHING
        return destination.etag or None

    def _shown_as(self, source: Entry) -> str:
        """A source entry as the report names it: its URL, or its path."""
        if isinstance(self.source, S3Location):
            return f"s3://{self.source.bucket}/{source.name}"
        return source.name or os.path.join(str(self.source), source.relative)

    def _delete_items(self, deletes: list[Entry]) -> list[Any]:
        """The deletes of what the destination's listing holds extra, each of the version listed
        (an object's ETag, a file's size and time): another writer's since is kept."""
        if not deletes:
            return []
        if isinstance(self.destination, S3Location):
            keys = tuple((entry.name, entry.size) for entry in deletes)
            etags = tuple((entry.name, entry.etag) for entry in deletes if entry.etag)
            return [DeleteBatch(self.destination.bucket, keys, etags)]
        return [LocalDelete(entry.name, entry.size, entry.mtime) for entry in deletes]

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> AsyncIterator[Any]:
        return self._retried(rows)

    async def _retried(self, rows: Iterator[list[tuple[str, int]]]) -> AsyncIterator[Any]:
        """The failed transfers again; the failed deletes only where both sides, listed again by
        this run, still find the name extra (issue 62): the source may hold it by now, another
        writer may have written it, and the failed run's listing says nothing of either."""
        deletes: set[str] = set()
        for batch in rows:
            items = []
            for item_id, size in batch:
                if item_id.startswith(DELETE_PREFIX):
                    deletes.add(item_id[len(DELETE_PREFIX) :])
                else:
                    items.append(self.sides.transfer(item_id, size, 0.0))
            if items:
                yield DiffBatch(tuple(items), listing=self.listing)
        if not deletes:
            return
        only = frozenset(deletes)
        async for diff in self.sides.batches(WorkerStats(), lambda chunk: self._plan(chunk, only)):
            yield diff

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        await self.mover.open(ctx)
        self._deleters: dict[str, BatchDeleter] = {}

    def _deleter(self, bucket: str) -> BatchDeleter:
        """The worker's deleter of the destination's extra objects, which learns once which
        conditional delete the service takes (`BatchDeleter`)."""
        deleter = self._deleters.get(bucket)
        if deleter is None:
            deleter = BatchDeleter(self.mover.storage, bucket, changed=CHANGED_AFTER_LISTING)
            self._deleters[bucket] = deleter
        return deleter

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_deleters": {}}

    async def close(self, ctx: WorkerContext) -> None:
        await self.mover.close()

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        assert isinstance(descriptor, DiffBatch)
        if descriptor.listing != self.listing:
            descriptor = self._without_deletes(descriptor)
        yield self.sides.expand(descriptor, ctx, self.item_id)

    def _without_deletes(self, descriptor: DiffBatch) -> DiffBatch:
        """A batch an earlier run listed (a retry's descriptor that was never run): its
        transfers, and its deletes failed by name, which a retry deletes only where its own
        listings find them extra still."""
        items, problems = [], list(descriptor.problems)
        for item in descriptor.items:
            if isinstance(item, DeleteBatch):
                url = f"s3://{item.bucket}/"
                problems.extend(
                    Failure(url + key, "", STALE_DELETE, item_id=DELETE_PREFIX + key, size=size)
                    for key, size in item.keys
                )
            elif isinstance(item, LocalDelete):
                problems.append(
                    Failure(item.path, "", STALE_DELETE, item_id=DELETE_PREFIX + item.path, size=item.size)
                )
            else:
                items.append(item)
        return replace(descriptor, items=tuple(items), problems=tuple(problems), listing=self.listing)

    async def run(self, item: Any, ctx: WorkerContext) -> int | BatchOutcome | Skipped:
        mover = self.mover
        if isinstance(item, DeleteBatch):
            item, kept = await self._still_extra(item)
            outcome = BatchOutcome([], [])
            if item.keys:
                outcome = await run_delete_batch(
                    mover.storage, item, self.options.spec.dry_run, mover.cap, ctx, self._deleter(item.bucket)
                )
            ctx.stats.objects_deleted += len(outcome.done)
            return BatchOutcome(
                [(DELETE_PREFIX + key, 0, url) for key, _, url in outcome.done],
                [
                    replace(failure, item_id=DELETE_PREFIX + failure.item_id)
                    for failure in [*kept, *outcome.failures]
                ],
                # the records name what each delete removes (a --dry-run's plan sums it), though no
                # byte moved
                tuple({"source": url, "size": size} for _, size, url in outcome.done),
            )
        if isinstance(item, LocalDelete):
            if self.sides.source_inventoried:
                relative = os.path.relpath(item.path, str(self.destination)).replace(os.sep, "/")
                why = (await self._held_at_source([relative])).get(relative)
                if why:
                    raise ItemError(why, retryable=False)
            if mover.cap is not None and not mover.cap.take(1, ctx.stop_job):
                return BatchOutcome([], [])  # not deleted, not journaled: a resume does it
            if not self.options.spec.dry_run:
                remove_as_listed(item)
            ctx.stats.objects_deleted += 1
            return 0
        if isinstance(item, CheckItem):
            if await sides_match(item, self.sides, mover.stores):  # nothing to do after all
                return unchanged(ctx, item.transfer.size)
            item = item.transfer
        return await mover.run(item, ctx)

    async def _still_extra(self, batch: DeleteBatch) -> tuple[DeleteBatch, list[Failure]]:
        """The batch less the keys the source holds now, and those kept, each named. A source
        inventory is a listing of a day or more ago: a name written to the source since is not
        in it, and its destination object (copied since, or written there) would look extra. So
        from an inventory, each name is looked up at the source (a HEAD) just before its delete,
        and deleted only where the source has no such object; with a listing of this run, the
        batch as it is."""
        if not self.sides.source_inventoried:
            return batch, []
        assert isinstance(self.destination, S3Location)
        start = len(self.destination.key)
        held = await self._held_at_source([key[start:] for key, _ in batch.keys])
        if not held:
            return batch, []
        url = f"s3://{batch.bucket}/"
        kept = [
            Failure(url + key, "", held[key[start:]], item_id=key, size=size)
            for key, size in batch.keys
            if key[start:] in held
        ]
        keys = tuple(entry for entry in batch.keys if entry[0][start:] not in held)
        names = {key for key, _ in keys}
        return replace(batch, keys=keys, etags=tuple(each for each in batch.etags if each[0] in names)), kept

    async def _held_at_source(self, names: list[str]) -> dict[str, str]:
        """{name: why its destination is kept} of the names (relative to the source prefix) the
        source holds now, or that could not be looked up; a name the source answers 404 for is
        extra, and absent from the answer. `HEADS` at a time."""
        assert isinstance(self.source, S3Location)
        reader, writer = self.mover.source_storage, self.mover.storage
        bucket, prefix = self.source.bucket, self.source.key
        heads = asyncio.Semaphore(HEADS)

        async def kept(name: str) -> str:
            async with heads:
                try:
                    await reader.head(bucket, prefix + name, of_source=reader is writer)
                except S3Error as error:
                    return "" if error.status == 404 else f"{UNSEEN_SOURCE}: {error}"
                except ItemError as error:
                    return f"{UNSEEN_SOURCE}: {error}"
            return SOURCE_HOLDS_IT

        found = await asyncio.gather(*(kept(name) for name in names))
        return {name: why for name, why in zip(names, found, strict=True) if why}

    def cost(self, item: Any) -> int:
        if isinstance(item, DeleteBatch | LocalDelete):
            return 0
        return self.mover.cost(transfer_of(item))

    def describe(self, item: Any) -> tuple[str, str, int]:
        if isinstance(item, DeleteBatch):
            return f"s3://{item.bucket}/{item.keys[0][0]}", "", 0
        if isinstance(item, LocalDelete):
            return item.path, "", item.size
        return self.mover.describe(transfer_of(item))

    def record(self, item: Any) -> dict[str, Any]:
        if isinstance(item, DeleteBatch | LocalDelete):
            source, destination, size = self.describe(item)
            return {"source": source, "destination": destination, "size": size}
        return self.mover.record(transfer_of(item))

    def item_id(self, item: Any) -> str:
        if isinstance(item, DeleteBatch):
            return DELETE_PREFIX + item.keys[0][0]
        if isinstance(item, LocalDelete):
            return DELETE_PREFIX + item.path
        return self.sides.item_id(transfer_of(item))


def remove_as_listed(item: LocalDelete) -> None:
    """Remove the file sync --delete found extra, unless it changed since it was listed (its
    size or time: another writer's file is kept, and the item fails by name)."""
    try:
        now = os.stat(item.path, follow_symlinks=False)
    except FileNotFoundError:
        return
    if item.mtime is not None and (now.st_size != item.size or now.st_mtime != item.mtime):
        raise ItemError(CHANGED_AFTER_LISTING, retryable=False)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(item.path)


COMMANDS = (SyncCommand(),)  # found by the registry (s3bulk._commands)
