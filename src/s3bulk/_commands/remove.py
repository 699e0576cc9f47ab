"""`rm`: delete one object, a prefix, or the keys a glob matches, with DeleteObjects (1,000 keys
a request, several requests in flight, per-key outcomes: `deletes.run_delete_batch`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, as_epoch, patterns
from s3bulk._commands.deletes import (
    CHANGED_AFTER_LISTING,
    BatchDeleter,
    DeleteBatch,
    check_max_delete,
    run_delete_batch,
)
from s3bulk._config import AwsSettings
from s3bulk._engine.caps import DeleteCap
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import ItemError, UsageError
from s3bulk._plan.filters import Filters, check_window
from s3bulk._report import Failure, Report, WorkerStats
from s3bulk._sources.inventory import (
    InventoryFile,
    Manifest,
    check_inventory,
    file_pages,
    load_inventory,
)
from s3bulk._sources.listing import KeyRange, SingleObject, find_object, iter_range
from s3bulk._sources.manifest import NamedObjects, check_manifest, look_up, manifest_chunks
from s3bulk._stores.s3xml import ObjectInfo, epoch_seconds
from s3bulk._stores.storage import MAX_KEYS_PER_DELETE, Storage
from s3bulk._urls import S3Location, parse_s3, relative_key

ENGINE = EngineSpec(concurrency=16)  # DeleteObjects requests in flight per worker


@dataclass(frozen=True, kw_only=True)
class RemoveSpec(Spec):
    command: ClassVar[str] = "rm"
    target: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    partitioned_listing: bool | None = None
    min_size: int | None = None  # the size and time window (bytes; seconds since the epoch)
    max_size: int | None = None
    newer_than: float | None = None
    older_than: float | None = None
    max_delete: int | None = None  # stop the job before deleting more than this
    files_from: str | None = None  # a manifest: the keys to delete, relative to the target prefix
    inventory: str | None = None  # an S3 Inventory of the bucket, in place of its listing
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        check_max_delete(self.max_delete)
        if not isinstance(self.target, str):
            raise TypeError(f"target must be an s3:// URL (str), not {type(self.target).__name__}")
        object.__setattr__(self, "include", patterns(self.include, "include"))
        object.__setattr__(self, "exclude", patterns(self.exclude, "exclude"))
        object.__setattr__(self, "newer_than", as_epoch(self.newer_than))
        object.__setattr__(self, "older_than", as_epoch(self.older_than))
        check_window(self.min_size, self.max_size, self.newer_than, self.older_than)
        if self.files_from is not None:
            object.__setattr__(self, "files_from", check_manifest(self.files_from))
            if any(char in self.target for char in _WILDCARDS) or not self.target.endswith("/"):
                raise UsageError(
                    f"--files-from names keys under a prefix: give one ending in '/', not {self.target!r}"
                )
        check_inventory(self.inventory, self.target, self.files_from)
        if self.inventory is not None and any(char in self.target for char in _WILDCARDS):
            raise UsageError("--inventory names the objects under a prefix: give --include for a pattern")
        location = parse_s3(self.target)
        if not location.key and not self.target.rstrip().endswith("/"):
            raise UsageError(  # emptying a bucket must be spelled out
                f"refusing to delete every object in s3://{location.bucket} from {self.target!r}: "
                f"say s3://{location.bucket}/ (or s3://{location.bucket}/*) if that is what you want"
            )

    def places(self) -> tuple[str, str]:
        return self.target, ""

    def s3_locations(self) -> tuple[str, ...]:
        return (self.target,)

    def leaving_out(self, pattern: str) -> RemoveSpec:
        return replace(self, exclude=(*self.exclude, pattern))


class RemoveCommand(Command):
    name: ClassVar[str] = "rm"
    spec: ClassVar[type[Spec]] = RemoveSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        from s3bulk._plan.filters import Filters

        assert isinstance(spec, RemoveSpec)
        options = RemoveOptions(
            Filters(
                spec.include, spec.exclude, spec.min_size, spec.max_size, spec.newer_than, spec.older_than
            ),
            spec.dry_run,
            spec.engine.concurrency,
            spec.partitioned_listing,
            spec.max_delete,
            spec.files_from,
        )
        job = RemoveJob(parse_s3(spec.target), settings, options)
        if job.pattern and spec.files_from is None:
            await job.take_literally()
        if spec.inventory is not None:
            job.manifest = await load_inventory(settings, spec.inventory, job.target.bucket)
        return job

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """A glob that matched nothing is an error, as in a shell with failglob and in s5cmd: a
        typo in it would otherwise say "0 objects" and exit 0."""
        assert isinstance(job, RemoveJob)
        if completed and job.pattern and not (report.objects_total or report.objects_already_done):
            report.objects_failed += 1
            report.failures.append(Failure(str(job.target), "", "no object matches this pattern"))


_WILDCARDS = "*?["


def split_wildcard(key: str) -> tuple[str, str]:
    """('logs/2024-', 'logs/2024-*.gz') for 'logs/2024-*.gz': list the literal part, match the
    pattern against whole keys. No wildcard: the pattern is empty."""
    positions = [key.index(char) for char in _WILDCARDS if char in key]
    if not positions:
        return key, ""
    return key[: min(positions)], key


@dataclass(frozen=True)
class RemoveOptions:
    filters: Filters = field(default_factory=Filters)
    dry_run: bool = False
    concurrency: int = 16
    partitioned_listing: bool | None = None  # key ranges: on, off, None: where StartAfter seeks
    max_delete: int | None = None
    files_from: str | None = None


@dataclass
class RemoveJob:
    """Delete one object, everything under a prefix, or the keys matching a glob."""

    target: S3Location
    settings: AwsSettings
    options: RemoveOptions = field(default_factory=RemoveOptions)
    prefix: str = field(init=False)
    pattern: str = field(init=False)
    preflight_requests: dict[str, int] = field(default_factory=dict, init=False)
    preflight_notes: list[str] = field(default_factory=list, init=False)
    manifest: Manifest | None = field(default=None, init=False)  # --inventory's, checked

    def __post_init__(self) -> None:
        self.prefix, self.pattern = split_wildcard(self.target.key)
        self._storage: Storage | None = None
        self._deleter: BatchDeleter | None = None  # --inventory's: a listing days old, each key as listed
        self._key_filter = Filters(include=(self.pattern,)) if self.pattern else Filters()
        limit = self.options.max_delete
        self._cap = DeleteCap(limit) if limit is not None else None

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"_storage": None}

    async def take_literally(self) -> None:
        """A target with `*`, `?` or `[` that names an existing key means that key, as `cp` and
        `cat` read it (and `aws s3 rm` does): `rm 's3://b/q?.txt'` must not also delete
        `qX.txt`, nor `rm 's3://b/a[1].txt'` delete nothing. Only a target that names no key is
        a pattern."""
        storage = Storage(self.settings, connections=2)
        try:
            page = await storage.list_objects_v2(self.target.bucket, self.target.key, max_keys=1)
        finally:
            await storage.close()
        if page.objects and page.objects[0].key == self.target.key:
            self.prefix, self.pattern = self.target.key, ""
            self._key_filter = Filters()

    @property
    def single(self) -> bool:
        return not self.pattern and not self.target.is_prefix

    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        if self.manifest is not None:  # each data file one descriptor: no listing of the bucket
            for file in self.manifest.files:
                yield file
            return
        if self.options.files_from is not None:  # named keys: no listing, sizes unknown
            filters = self.options.filters
            for names in manifest_chunks(self.options.files_from, MAX_KEYS_PER_DELETE):
                keys = tuple(self.prefix + name for name in names if filters.takes_name(name))
                if keys:
                    yield self._named(keys)
                await asyncio.sleep(0)
            return
        yield SingleObject(self.target.key) if self.single else KeyRange()

    def _named(self, keys: tuple[str, ...]) -> DeleteBatch | NamedObjects:
        """Named keys go straight to DeleteObjects, unless a window selects among them: then each
        is looked up first, for its size and time."""
        if self.options.filters.windowed:
            return NamedObjects(keys)
        return DeleteBatch(self.target.bucket, tuple((key, 0) for key in keys))

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        for batch in rows:
            if self.options.filters.windowed:  # looked up again: deleted only if still in the window
                yield NamedObjects(tuple(key for key, _ in batch))
            else:
                yield DeleteBatch(self.target.bucket, tuple(batch))

    async def open(self, ctx: WorkerContext) -> None:
        self._storage = Storage(self.settings, connections=self.options.concurrency * 2, retry=ctx.retrier)
        if self.manifest is not None:  # conditions where the service takes them, else a HEAD just before
            self._deleter = BatchDeleter(self._storage, self.target.bucket, changed=CHANGED_AFTER_LISTING)

    async def close(self, ctx: WorkerContext) -> None:
        if self._storage is not None:
            await self._storage.close()

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[DeleteBatch]]:
        assert self._storage is not None
        if isinstance(descriptor, DeleteBatch):  # a manifest's keys, or a retry's
            keys = ctx.drop_done(list(descriptor.keys), lambda entry: entry[0])
            ctx.stats.objects_listed += len(keys)
            if keys:
                yield [replace(descriptor, keys=tuple(keys))]
            return
        bucket = self.target.bucket
        if isinstance(descriptor, NamedObjects):
            named = self._listed(descriptor.keys, await look_up(self._storage, bucket, descriptor.keys), ctx)
            batch = self._batch([info for info in named if self._wanted(info)], ctx)
            if batch:
                yield batch
            return
        if isinstance(descriptor, SingleObject):
            found = await find_object(self._storage, bucket, descriptor.key)
            yield self._batch([found], ctx)
            return
        if isinstance(descriptor, InventoryFile):
            async for objects in file_pages(self._storage, descriptor, self.prefix):
                batch = self._batch([info for info in objects if self._wanted(info)], ctx)
                if batch:
                    yield batch
            return
        async for objects in iter_range(
            self._storage,
            bucket,
            self.prefix,
            descriptor,
            on_split=ctx.split if self.options.partitioned_listing is not False else None,
            want_split=ctx.want_split,
            auto=self.options.partitioned_listing is None,
        ):
            batch = self._batch([info for info in objects if self._wanted(info)], ctx)
            if batch:
                yield batch

    def _listed(
        self, keys: tuple[str, ...], found: list[ObjectInfo | ItemError], ctx: WorkerContext
    ) -> list[ObjectInfo]:
        """The named objects found; one not there is nothing to delete, one that could not be
        looked up is its item's failure (and not deleted)."""
        listed = []
        for key, info in zip(keys, found, strict=True):
            if isinstance(info, ObjectInfo):
                listed.append(info)
            elif info.retryable:
                ctx.stats.objects_failed += 1
                url = f"s3://{self.target.bucket}/{key}"
                ctx.stats.failures.append(Failure(url, "", str(info), item_id=key))
        return listed

    def _batch(self, objects: list[ObjectInfo], ctx: WorkerContext) -> list[DeleteBatch]:
        """One DeleteBatch of the keys an earlier run did not delete yet (empty: none left), each
        with the ETag it was listed with (an inventory's may be days old: a key written since is kept)."""
        keys = ctx.drop_done([(info.key, info.size) for info in objects], lambda entry: entry[0])
        ctx.stats.objects_listed += len(keys)
        ctx.stats.bytes_listed += sum(size for _, size in keys)
        etags = tuple((info.key, info.etag) for info in objects if info.etag)  # deleted as listed
        return [DeleteBatch(self.target.bucket, tuple(keys), etags)] if keys else []

    def _wanted(self, info: ObjectInfo) -> bool:
        if not self._key_filter.accepts(info.key):
            return False
        filters = self.options.filters
        if not filters:
            return True
        mtime = epoch_seconds(info.modified) if filters.windowed and info.modified else None
        return filters.accepts(relative_key(info.key, self.prefix), info.size, mtime)

    async def run(self, item: DeleteBatch, ctx: WorkerContext) -> BatchOutcome:
        assert self._storage is not None
        outcome = await run_delete_batch(
            self._storage, item, self.options.dry_run, self._cap, ctx, self._deleter
        )
        ctx.stats.objects_deleted += len(outcome.done)
        return outcome

    def cost(self, item: DeleteBatch) -> int:
        return 0

    def describe(self, item: DeleteBatch) -> tuple[str, str, int]:
        return f"s3://{item.bucket}/{item.keys[0][0] if item.keys else ''}", "", sum(s for _, s in item.keys)

    def item_id(self, item: DeleteBatch) -> str:
        return item.keys[0][0] if item.keys else ""


COMMANDS = (RemoveCommand(),)  # found by the registry (s3bulk._commands)
