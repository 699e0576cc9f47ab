"""`restore`: RestoreObject for every archived object (S3 Glacier Flexible Retrieval, Deep
Archive) under a prefix, named by a manifest or by an S3 Inventory, at the tier and for the days
asked, journaled and resumable.

Idempotent by what the service says of each object, not by what this job did: an object whose
restore is under way, or whose restored copy is ready, is counted as such and not asked again
(a second RestoreObject of a ready copy would reset its expiry, and of one under way is refused).
The listing tells which objects are archived (their StorageClass); a HEAD of each archived one
tells its restore state (`x-amz-restore`), and only then is it asked for. An object an inventory
names is HEADed whatever class the inventory says: a lifecycle rule may have moved it since.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, patterns
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import ItemError, UsageError
from s3bulk._plan.filters import Filters
from s3bulk._pricing import RETRIEVAL_SOURCE, retrieval_cost
from s3bulk._report import Report, WorkerStats, human_bytes
from s3bulk._sources.inventory import (
    InventoryFile,
    Manifest,
    check_inventory,
    inventoried_bucket,
    pages,
    read_file,
    read_manifest,
)
from s3bulk._sources.listing import KeyRange, SingleObject, iter_range
from s3bulk._sources.manifest import NamedObjects, check_manifest, manifest_chunks
from s3bulk._stores.archives import ARCHIVED, check_restore_options, restore_state, tier_refused
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._stores.storage import Storage
from s3bulk._urls import S3Location, parse_s3, relative_key

ENGINE = EngineSpec(engine="async", concurrency=32)  # a HEAD and a small POST each: one process keeps up
MANIFEST_CHUNK = 1000

# What each object turned out to be, as the summary line counts them.
REQUESTED, DRY_REQUESTED = "requested", "to request"
ONGOING, READY, NOT_ARCHIVED = "restore already in progress", "already restored", "not archived"


@dataclass(frozen=True, kw_only=True)
class RestoreSpec(Spec):
    command: ClassVar[str] = "restore"
    concurrency_help: ClassVar[str] = "Objects looked at (a HEAD, then a RestoreObject) at once per worker."
    target: str  # s3://bucket/key, or s3://bucket/prefix/ for every archived object below
    days: int  # how long the restored copy stays
    tier: str = "Standard"  # Bulk, Standard or Expedited: the speed, and the price
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    partitioned_listing: bool | None = None
    files_from: str | None = None  # a manifest: the keys to restore, relative to the target prefix
    inventory: str | None = None  # an S3 Inventory of the bucket, in place of its listing
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        if not isinstance(self.target, str):
            raise TypeError(f"target must be an s3:// URL (str), not {type(self.target).__name__}")
        check_restore_options(self.days, self.tier)
        object.__setattr__(self, "include", patterns(self.include, "include"))
        object.__setattr__(self, "exclude", patterns(self.exclude, "exclude"))
        location = parse_s3(self.target)
        if self.files_from is not None:
            object.__setattr__(self, "files_from", check_manifest(self.files_from))
            if not self.target.endswith("/"):
                raise UsageError(
                    f"--files-from names keys under a prefix: give one ending in '/', not {self.target!r}"
                )
        check_inventory(self.inventory, self.target, self.files_from)
        if not location.key and not self.target.endswith("/"):
            raise UsageError(f"restore what in s3://{location.bucket}? give a key, or a prefix ending in '/'")

    def places(self) -> tuple[str, str]:
        return self.target, ""

    def s3_locations(self) -> tuple[str, ...]:
        return (self.target,)


class RestoreCommand(Command):
    name: ClassVar[str] = "restore"
    spec: ClassVar[type[Spec]] = RestoreSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, RestoreSpec)
        job = RestoreJob(parse_s3(spec.target), settings, spec)
        if spec.inventory is not None:
            job.manifest = await job.read_inventory(spec.inventory)
        return job

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """What the retrievals asked for cost (a dry run: would cost), at list prices."""
        assert isinstance(spec, RestoreSpec)
        asked = report.outcomes.get(DRY_REQUESTED if spec.dry_run else REQUESTED, 0)
        if asked:
            verb = "would cost" if spec.dry_run else "cost"
            report.notes.append(
                f"{asked:,} {spec.tier} retrievals of {human_bytes(report.bytes_done)} {verb} "
                f"${report.retrieval_usd:,.2f} ({RETRIEVAL_SOURCE}; the restored copies' storage "
                f"for {spec.days} day{'s' if spec.days != 1 else ''} is billed apart)"
            )


@dataclass
class RestoreJob:
    """Ask for a restored copy of each archived object that has none and is not being made one."""

    target: S3Location
    settings: AwsSettings
    spec: RestoreSpec
    preflight_requests: dict[str, int] = field(default_factory=dict)
    preflight_notes: list[str] = field(default_factory=list)
    manifest: Manifest | None = None  # --inventory's, checked

    def __post_init__(self) -> None:
        self._storage: Storage | None = None
        spec = self.spec
        self._filters = Filters(spec.include, spec.exclude)

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_storage": None}

    async def read_inventory(self, url: str) -> Manifest:
        """--inventory's manifest, read and checked in the driver: its files become the work."""
        storage = Storage(self.settings, connections=2)
        try:
            manifest = await read_manifest(storage, url)
        finally:
            await storage.close()
        return inventoried_bucket(manifest, self.target.bucket)

    # ---- driver side -------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        if self.manifest is not None:  # each data file one descriptor: no listing of the bucket
            for file in self.manifest.files:
                yield file
            return
        if self.spec.files_from is not None:  # named keys: no listing; each HEAD tells its class
            for names in manifest_chunks(self.spec.files_from, MANIFEST_CHUNK):
                keys = tuple(self.target.key + name for name in names if self._filters.takes_name(name))
                if keys:
                    yield NamedObjects(keys)
                await asyncio.sleep(0)
            return
        yield KeyRange() if self.target.is_prefix else SingleObject(self.target.key)

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        """The failed keys, looked at again (a HEAD each): their state may have changed since."""
        for batch in rows:
            yield NamedObjects(tuple(key for key, _ in batch))

    # ---- worker side -------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        connections = self.spec.engine.concurrency * 2
        self._storage = Storage(self.settings, connections=connections, retry=ctx.retrier)

    async def close(self, ctx: WorkerContext) -> None:
        if self._storage is not None:
            await self._storage.close()

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[ObjectInfo]]:
        assert self._storage is not None
        if isinstance(descriptor, SingleObject | NamedObjects):  # the HEAD tells what it is
            keys = (descriptor.key,) if isinstance(descriptor, SingleObject) else descriptor.keys
            yield self._new([ObjectInfo(key, 0, "", "") for key in keys], ctx)
            return
        if isinstance(descriptor, InventoryFile):  # days old: the class is asked again (a HEAD)
            body = await read_file(self._storage, descriptor)
            for objects in pages(descriptor, body, self.target.key):
                unknown = [info._replace(storage_class="") for info in objects if self._wanted(info)]
                yield self._new(unknown, ctx)
            return
        async for objects in iter_range(
            self._storage,
            self.target.bucket,
            self.target.key,
            descriptor,
            on_split=ctx.split if self.spec.partitioned_listing is not False else None,
            want_split=ctx.want_split,
            auto=self.spec.partitioned_listing is None,
        ):
            yield self._new([info for info in objects if self._wanted(info)], ctx)

    def _new(self, objects: list[ObjectInfo], ctx: WorkerContext) -> list[ObjectInfo]:
        """The objects an earlier run of this job did not settle yet."""
        left = ctx.drop_done(objects, self.item_id)
        ctx.stats.objects_listed += len(left)
        ctx.stats.bytes_listed += sum(info.size for info in left)
        return left

    def _wanted(self, info: ObjectInfo) -> bool:
        return not self._filters or self._filters.accepts(relative_key(info.key, self.target.key))

    async def run(self, item: ObjectInfo, ctx: WorkerContext) -> BatchOutcome:
        """One object: left alone unless archived with no restored copy made or being made."""
        assert self._storage is not None
        outcome, size = await self._restore(item, ctx)
        ctx.stats.outcomes[outcome] += 1
        url = f"s3://{self.target.bucket}/{item.key}"
        record = {"source": url, "size": size, "restore": outcome}
        moved = size if outcome in (REQUESTED, DRY_REQUESTED) else 0
        return BatchOutcome([(item.key, moved, url)], [], (record,))

    async def _restore(self, item: ObjectInfo, ctx: WorkerContext) -> tuple[str, int]:
        assert self._storage is not None
        if item.storage_class and item.storage_class not in ARCHIVED:  # as listed just now
            return NOT_ARCHIVED, item.size
        bucket, spec = self.target.bucket, self.spec
        headers = await self._storage.head(bucket, item.key)
        storage_class = headers.get("x-amz-storage-class", "STANDARD")
        size = int(headers.get("content-length") or item.size)
        if storage_class not in ARCHIVED:
            return NOT_ARCHIVED, size
        state = restore_state(headers.get("x-amz-restore", ""))
        if state is not None:
            return (ONGOING if state.ongoing else READY), size
        refused = tier_refused(storage_class, spec.tier)
        if refused:
            raise ItemError(refused, retryable=False)
        done = (
            DRY_REQUESTED
            if spec.dry_run
            else await self._storage.restore(bucket, item.key, spec.days, spec.tier)
        )
        if done in (DRY_REQUESTED, "requested"):
            ctx.stats.retrieval_usd += retrieval_cost(storage_class, spec.tier, 1, size)
        return {"requested": REQUESTED, "ongoing": ONGOING, "restored": READY}.get(done, done), size

    def item_id(self, item: ObjectInfo) -> str:
        return item.key

    def cost(self, item: ObjectInfo) -> int:
        return 0

    def describe(self, item: ObjectInfo) -> tuple[str, str, int]:
        return f"s3://{self.target.bucket}/{item.key}", "", item.size


COMMANDS = (RestoreCommand(),)  # found by the registry (s3bulk._commands)
