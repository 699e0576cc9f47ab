"""`cp` and `mv`: upload (local → S3), download (S3 → local) or server-side copy (S3 → S3) as one
job; mv then deletes each source whose copy succeeded. The spec is what the user asked for, the
Command turns it into the job.

source → plan → engine → store: the driver turns the source into descriptors (key ranges of a
listing, batches of local paths); workers list their range or take their batch, map each key to
its destination (refusing keys that would escape a local destination), and move the bytes.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.deletes import check_max_delete
from s3bulk._commands.mover import Mover
from s3bulk._commands.transfer import (
    MARKER_DATA,
    Direction,
    TransferItem,
    TransferOptions,
    TransferSpec,
    check_places,
    check_source,
    transfer_options,
    written_bucket_usable,
)
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._errors import ItemError
from s3bulk._plan.filters import Filters
from s3bulk._report import Failure, WorkerStats
from s3bulk._sources.listing import KeyRange, SingleObject, find_object, iter_range
from s3bulk._sources.local import NOT_UTF8, UnreadableRoot, walk
from s3bulk._sources.manifest import manifest_chunks
from s3bulk._stores.s3xml import ObjectInfo, epoch_seconds, listing_problem
from s3bulk._text import is_utf8
from s3bulk._urls import (
    LocalLocation,
    Location,
    S3Location,
    basename,
    local_target_path,
    parse_location,
    relative_key,
)

FIND_IN_FLIGHT = 32  # a manifest's objects looked up at once, per descriptor
LOCAL_BATCH = 256


@dataclass(frozen=True, kw_only=True)
class CopySpec(TransferSpec):
    command: ClassVar[str] = "cp"


@dataclass(frozen=True, kw_only=True)
class MoveSpec(TransferSpec):
    command: ClassVar[str] = "mv"
    max_delete: int | None = None  # stop the job before deleting more sources than this

    def __post_init__(self) -> None:
        super().__post_init__()
        check_max_delete(self.max_delete)


class CopyCommand(Command):
    name: ClassVar[str] = "cp"
    spec: ClassVar[type[Spec]] = CopySpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, CopySpec | MoveSpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        moving = isinstance(spec, MoveSpec)
        max_delete = spec.max_delete if isinstance(spec, MoveSpec) else None
        options = transfer_options(spec, settings, plan, delete_source=moving, max_delete=max_delete)
        job = CopyJob(source, destination, settings, options)
        job.preflight_requests = await job.preflight()
        return job

    def verb(self, job: Job) -> str:
        direction: str = getattr(job, "direction", "")
        return direction if self.name == "cp" else f"{self.name} ({direction})"


class MoveCommand(CopyCommand):
    name: ClassVar[str] = "mv"
    spec: ClassVar[type[Spec]] = MoveSpec


@dataclass(frozen=True)
class LocalBatch:
    """A work descriptor: local files (paths relative to `root`) to upload."""

    root: str
    entries: tuple[tuple[str, int, str, bool], ...]  # (relative path, size, problem or "", refused)

    def __str__(self) -> str:
        return f"{len(self.entries)} files under {self.root}"


@dataclass(frozen=True)
class NamedObjects:
    """A work descriptor: a manifest's chunk of keys (full keys), found by the worker."""

    keys: tuple[str, ...]

    def __str__(self) -> str:
        return f"{len(self.keys)} named objects from {self.keys[0]}" if self.keys else "no objects"


@dataclass(frozen=True)
class ObjectBatch:
    """A work descriptor: one listed page (keys and sizes), handed from the worker that listed it
    to an idle one, so work spreads across processes even when the key space cannot be split."""

    objects: tuple[ObjectInfo, ...]

    def __str__(self) -> str:
        return (
            f"{len(self.objects)} listed objects from {self.objects[0].key}" if self.objects else "no objects"
        )


@dataclass
class CopyJob:
    """The driver side of cp and mv: the source as descriptors (key ranges of a listing, batches
    of local paths, a manifest's names) and each key's destination; the worker side is its
    `Mover`'s."""

    source: Location
    destination: Location
    settings: AwsSettings
    options: TransferOptions = field(default_factory=TransferOptions)
    mover: Mover = field(init=False)
    preflight_requests: dict[str, int] = field(default_factory=dict, init=False)
    preflight_notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.mover = Mover(self.source, self.destination, self.settings, self.options)
        check_source(self.source)
        self._many = self._source_is_many()
        self._local_root = ""
        if isinstance(self.source, LocalLocation):
            path = self.source.path
            # items are named relative to this: a directory's contents, or the directory itself
            self._local_root = str(path if self.source.trailing_slash else path.parent)
        check_places(self.source, self.destination, self._many)

    @property
    def direction(self) -> Direction:
        return self.mover.direction

    async def preflight(self) -> dict[str, int]:
        """Before the job starts: the bucket written to answers (`written_bucket_usable`)."""
        return await written_bucket_usable(self.settings, self.destination, self.options.dry_run)

    # ---- driver side -------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        source = self.source
        if self.options.files_from is not None:
            for names in manifest_chunks(self.options.files_from):
                yield self._named(names)
                await asyncio.sleep(0)
            return
        if isinstance(source, S3Location):
            yield KeyRange() if source.is_prefix else SingleObject(source.key)
            return
        path = source.path
        filters = self.options.filters
        if path.is_file():
            refused = not is_utf8(path.name)
            problem = NOT_UTF8 if refused else ""
            found = path.stat()
            if filters.in_window(found.st_size, found.st_mtime):
                yield LocalBatch(str(path.parent), ((path.name, found.st_size, problem, refused),))
            return
        root = self._local_root
        top = "" if source.trailing_slash else path.name
        batch: list[tuple[str, int, str, bool]] = []
        for entry in walk(str(path), self.options.follow_symlinks):
            if filters.windowed and not entry.problem and not filters.in_window(entry.size, entry.mtime):
                continue
            relative = f"{top}/{entry.relative}" if top else entry.relative
            batch.append((relative, entry.size, entry.problem, entry.refused))
            if len(batch) >= LOCAL_BATCH:
                yield LocalBatch(root, tuple(batch))
                batch = []
                await asyncio.sleep(0)
        if batch:
            yield LocalBatch(root, tuple(batch))

    def _named(self, names: list[str]) -> Any:
        """A manifest's chunk as work: keys under the source prefix, or the directory's files
        (stat here: a file that is not there is that item's failure)."""
        source = self.source
        if isinstance(source, S3Location):
            return NamedObjects(tuple(source.key + name for name in names))
        entries = []
        for name in names:
            try:
                found = os.stat(os.path.join(self._local_root, name))
            except OSError as exc:
                entries.append((name, 0, f"cannot read local file: {exc.strerror}", True))
                continue
            problem = "" if stat.S_ISREG(found.st_mode) else "not a regular file"
            entries.append((name, found.st_size, problem, bool(problem)))
        return LocalBatch(self._local_root, tuple(entries))

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        for batch in rows:
            if isinstance(self.source, S3Location):
                # a name a manifest gave that was not found has no size: looked up again
                unknown = tuple(item_id for item_id, size in batch if not size)
                if unknown:
                    yield NamedObjects(unknown)
                yield ObjectBatch(tuple(ObjectInfo(item_id, size, "", "") for item_id, size in batch if size))
            else:
                yield LocalBatch(self._local_root, tuple(self._retried_files(batch)))

    def _retried_files(self, batch: list[tuple[str, int]]) -> Iterator[tuple[str, int, str, bool]]:
        """The files of failed items again; a directory that could not be read, walked now."""
        for item_id, size in batch:
            path = os.path.join(self._local_root, item_id)
            if not os.path.isdir(path):
                yield item_id, size, "", False
                continue
            try:
                for entry in walk(path, self.options.follow_symlinks):
                    yield f"{item_id}/{entry.relative}", entry.size, entry.problem, entry.refused
            except UnreadableRoot as exc:
                yield item_id, 0, str(exc), True

    def item_id(self, item: TransferItem) -> str:
        """The source key, or for uploads the path relative to the walked root."""
        if self._local_root:
            return item.source[len(self._local_root) :].lstrip("/")
        return item.source

    # ---- worker side: listing and mapping here, the bytes the mover's --------------------------
    async def open(self, ctx: WorkerContext) -> None:
        await self.mover.open(ctx)

    async def close(self, ctx: WorkerContext) -> None:
        await self.mover.close()

    def cost(self, item: TransferItem) -> int:
        return self.mover.cost(item)

    def describe(self, item: TransferItem) -> tuple[str, str, int]:
        return self.mover.describe(item)

    def record(self, item: TransferItem) -> dict[str, Any]:
        return self.mover.record(item)

    async def run(self, item: TransferItem, ctx: WorkerContext) -> int | BatchOutcome:
        return await self.mover.run(item, ctx)

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[TransferItem]]:
        stats = ctx.stats
        if isinstance(descriptor, LocalBatch):
            items = []
            for relative, size, problem, refused in descriptor.entries:
                if problem:
                    path = os.path.join(descriptor.root, relative)
                    # journaled, so --retry-failed tries it again (a manifest's missing file); a
                    # name that is not UTF-8 cannot be journaled, nor ever uploaded under it
                    item_id = relative if refused and problem != NOT_UTF8 else ""
                    stats.failures.append(Failure(path, "", problem, item_id=item_id, skipped=not refused))
                    if refused:
                        stats.objects_failed += 1
                    else:
                        stats.objects_skipped += 1
                    continue
                if not self.options.filters.accepts(relative):
                    continue
                items.append(self._upload_item(descriptor.root, relative, size))
            items = ctx.drop_done(items, self.item_id)
            stats.objects_listed += len(items)
            stats.bytes_listed += sum(item.size for item in items)
            yield items
            return
        assert isinstance(self.source, S3Location)
        if isinstance(descriptor, ObjectBatch):
            yield self._map_objects(list(descriptor.objects), ctx)
            return
        if isinstance(descriptor, SingleObject):
            found = await find_object(self.mover.source_storage, self.source.bucket, descriptor.key)
            yield self._map_objects([found], ctx)
            return
        if isinstance(descriptor, NamedObjects):
            yield self._map_objects(await self._found(descriptor.keys, ctx), ctx)
            return
        async for objects in iter_range(
            self.mover.source_storage,
            self.source.bucket,
            self.source.key,
            descriptor,
            on_split=ctx.split if self.options.partitioned_listing is not False else None,
            want_split=ctx.want_split,
            auto=self.options.partitioned_listing is None,
        ):
            if ctx.want_split():  # other workers are short of work: hand them this page
                ctx.split([ObjectBatch(tuple(objects))], handed=[info.key for info in objects])
            else:
                yield self._map_objects(objects, ctx)

    async def _found(self, keys: tuple[str, ...], ctx: WorkerContext) -> list[ObjectInfo]:
        """The objects a manifest names, looked up FIND_IN_FLIGHT at a time (a missing one is
        its item's failure, not the job's)."""
        assert isinstance(self.source, S3Location)
        bucket, gate = self.source.bucket, asyncio.Semaphore(FIND_IN_FLIGHT)

        async def find(key: str) -> ObjectInfo | None:
            async with gate:
                try:
                    return await find_object(self.mover.source_storage, bucket, key)
                except ItemError as error:
                    url = f"s3://{bucket}/{key}"
                    reason = (
                        f"no such object: {url} (named by --files-from)"
                        if not error.retryable
                        else str(error)
                    )
                    ctx.stats.objects_failed += 1
                    ctx.stats.failures.append(Failure(url, "", reason, item_id=key))
                    return None

        return [info for info in await asyncio.gather(*(find(key) for key in keys)) if info is not None]

    def _source_is_many(self) -> bool:
        if self.options.files_from is not None:
            return True
        source = self.source
        return source.is_prefix if isinstance(source, S3Location) else source.path.is_dir()

    def _destination_key(self, relative: str) -> str:
        """Where `relative` lands in S3. Many objects always go below the destination as a
        prefix, with or without its trailing '/': they can never collapse onto one key."""
        destination = self.destination
        assert isinstance(destination, S3Location)
        if destination.is_prefix:
            return destination.key + relative
        if self._many:
            return f"{destination.key}/{relative}"
        return destination.key

    def _upload_item(self, root: str, relative: str, size: int) -> TransferItem:
        return TransferItem(os.path.join(root, relative), self._destination_key(relative), size)

    def _map_objects(self, objects: list[ObjectInfo], ctx: WorkerContext) -> list[TransferItem]:
        with ctx.stats.timed("plan"):
            return self._plan_objects(objects, ctx)

    def _plan_objects(self, objects: list[ObjectInfo], ctx: WorkerContext) -> list[TransferItem]:
        stats = ctx.stats
        source = self.source
        destination = self.destination
        assert isinstance(source, S3Location)
        single = not source.is_prefix
        filters = self.options.filters
        root_text = str(destination.path) if isinstance(destination, LocalLocation) else ""
        items = []
        for info in objects:
            relative = basename(info.key) if single else relative_key(info.key, source.key)
            problem = listing_problem(info)
            if problem:
                stats.objects_failed += 1
                stats.failures.append(
                    Failure(f"s3://{source.bucket}/{info.key}", "", problem, item_id=info.key)
                )
                continue
            if filters and not filters.accepts(relative, info.size, _listed_time(info, filters)):
                continue
            if isinstance(destination, LocalLocation):
                if info.key.endswith("/"):  # a "directory marker": a directory locally, no file
                    if info.size:  # it holds data nothing local can hold under that name: say so
                        stats.objects_skipped += 1
                        stats.failures.append(
                            Failure(
                                f"s3://{source.bucket}/{info.key}", "", MARKER_DATA % info.size, skipped=True
                            )
                        )
                    continue
                if single and not destination.is_prefix:
                    target = root_text
                else:
                    try:
                        target = local_target_path(root_text, relative, self.options.allow_control_chars)
                    except ValueError as exc:
                        stats.objects_failed += 1
                        stats.failures.append(
                            Failure(f"s3://{source.bucket}/{info.key}", "", f"refused key: {exc}")
                        )
                        continue
            else:
                target = self._destination_key(relative)
            items.append(TransferItem(info.key, target, info.size, epoch_seconds(info.modified), info.etag))
        items = ctx.drop_done(items, self.item_id)
        stats.objects_listed += len(items)
        stats.bytes_listed += sum(item.size for item in items)
        return items


def _listed_time(info: ObjectInfo, filters: Filters) -> float | None:
    """The object's time when the window needs it (a retry's descriptors carry none: they were
    selected when first listed)."""
    return epoch_seconds(info.modified) if filters.windowed and info.modified else None


COMMANDS = (CopyCommand(), MoveCommand())  # found by the registry (s3bulk._commands)
