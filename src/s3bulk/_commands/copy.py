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
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.deletes import check_max_delete
from s3bulk._commands.mover import Mover
from s3bulk._commands.transfer import (
    Direction,
    TransferOptions,
    TransferSpec,
    check_places,
    check_source,
    transfer_options,
    written_bucket_usable,
)
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, Skipped, WorkerContext
from s3bulk._errors import UsageError
from s3bulk._flags import INVENTORY, option, verbatim
from s3bulk._plan.keys import Refused, TransferItem, plan_files, plan_objects
from s3bulk._report import Failure, WorkerStats
from s3bulk._sources.inventory import (
    InventoryFile,
    Manifest,
    check_inventory,
    file_pages,
    load_inventory,
)
from s3bulk._sources.listing import KeyRange, ObjectBatch, SingleObject, find_object, iter_range
from s3bulk._sources.local import LocalBatch, named_files, walk, walked_again
from s3bulk._sources.manifest import NamedObjects, look_up, manifest_chunks
from s3bulk._stores.conditional import asked_replaces
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._text import NOT_UTF8, is_utf8
from s3bulk._urls import (
    LocalLocation,
    Location,
    S3Location,
    parse_location,
)

LOCAL_BATCH = 256


@dataclass(frozen=True, kw_only=True)
class CopySpec(TransferSpec):
    command: ClassVar[str] = "cp"
    inventory: str | None = field(default=None, metadata=INVENTORY)  # an S3 Inventory in place of a listing
    # one object's conditional write (issue 66): only over that ETag, or ('*') where none is
    if_match: str | None = field(
        default=None,
        metadata=option(
            "--if-match", help="One object: write only over the object of this ETag.", read=verbatim
        ),
    )
    if_none_match: str | None = field(
        default=None,
        metadata=option(
            "--if-none-match", help="One object: '*', write only where no object is.", read=verbatim
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_inventory(self.inventory, self.source, self.files_from)
        replaces = asked_replaces(self.if_match, self.if_none_match)
        if replaces is None:
            return
        if self.source.endswith("/") or self.destination.endswith("/") or "://" not in self.destination:
            raise UsageError(
                "--if-match / --if-none-match are for one object written to S3: "
                "cp FILE-OR-URL s3://bucket/key (for many, -n leaves what is there)"
            )
        if self.no_clobber or self.if_size_differ or self.if_newer:
            raise UsageError("--if-match / --if-none-match and -n, -s, -u: give one of them")

    @property
    def replaces(self) -> str | None:
        """What the one object written may replace (`TransferItem.replaces`)."""
        return asked_replaces(self.if_match, self.if_none_match)


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
        replaces = spec.replaces if isinstance(spec, CopySpec) else None
        options = transfer_options(
            spec, settings, plan, delete_source=moving, max_delete=max_delete, replaces=replaces
        )
        job = CopyJob(source, destination, settings, options)
        job.preflight_requests = await job.preflight()
        if isinstance(spec, CopySpec) and spec.inventory is not None:
            assert isinstance(source, S3Location)
            job.manifest = await load_inventory(settings.reading, spec.inventory, source.bucket)
        return job

    def verb(self, job: Job) -> str:
        direction: str = getattr(job, "direction", "")
        return direction if self.name == "cp" else f"{self.name} ({direction})"


class MoveCommand(CopyCommand):
    name: ClassVar[str] = "mv"
    spec: ClassVar[type[Spec]] = MoveSpec


@dataclass
class CopyJob:
    """The driver side of cp and mv: the source as descriptors (key ranges of a listing, batches
    of local paths, a manifest's names) and each key's destination; the worker side is its
    `Mover`'s."""

    source: Location
    destination: Location
    settings: AwsSettings
    options: TransferOptions
    mover: Mover = field(init=False)
    preflight_requests: dict[str, int] = field(default_factory=dict, init=False)
    preflight_notes: list[str] = field(default_factory=list, init=False)
    manifest: Manifest | None = field(default=None, init=False)  # --inventory's, checked

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
        return await written_bucket_usable(self.settings, self.destination, self.options.spec.dry_run)

    # ---- driver side -------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        source = self.source
        if self.manifest is not None:  # each data file one descriptor: no listing of the source
            for file in self.manifest.files:
                yield file
            return
        if self.options.spec.files_from is not None:
            for names in manifest_chunks(self.options.spec.files_from):
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
        for entry in walk(str(path), self.options.spec.follow_symlinks):
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
        """A manifest's chunk as work: keys under the source prefix, or the directory's files."""
        if isinstance(self.source, S3Location):
            return NamedObjects(tuple(self.source.key + name for name in names))
        root, window = self._local_root, self.options.filters
        files = named_files(root, names, self.options.spec.follow_symlinks)
        if window.windowed:  # the window selects among the names as it does in a walk
            files = (each for each in files if each[2] or window.in_window(each[1], _mtime(root, each[0])))
        return LocalBatch(root, tuple(files))

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        for batch in rows:
            if isinstance(self.source, S3Location):
                # a name a manifest gave that was not found has no size: looked up again
                unknown = tuple(item_id for item_id, size in batch if not size)
                if unknown:
                    yield NamedObjects(unknown)
                yield ObjectBatch(tuple(ObjectInfo(item_id, size, "", "") for item_id, size in batch if size))
            else:
                again = walked_again(self._local_root, batch, self.options.spec.follow_symlinks)
                yield LocalBatch(self._local_root, tuple(again))

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

    async def run(self, item: TransferItem, ctx: WorkerContext) -> int | BatchOutcome | Skipped:
        return await self.mover.run(item, ctx)

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[TransferItem]]:
        if isinstance(descriptor, LocalBatch):
            assert isinstance(self.destination, S3Location)
            with ctx.stats.timed("plan"):
                planned = plan_files(
                    descriptor.entries,
                    descriptor.root,
                    self.destination,
                    self.options.filters,
                    many=self._many,
                )
            yield self._counted(*planned, ctx)
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
        if isinstance(descriptor, InventoryFile):
            async for objects in file_pages(self.mover.source_storage, descriptor, self.source.key):
                yield self._map_objects(objects, ctx)  # a page at a time, as listed
            return
        async for objects in iter_range(
            self.mover.source_storage,
            self.source.bucket,
            self.source.key,
            descriptor,
            on_split=ctx.split if self.options.spec.partitioned_listing is not False else None,
            want_split=ctx.want_split,
            auto=self.options.spec.partitioned_listing is None,
        ):
            if ctx.want_split():  # other workers are short of work: hand them this page
                ctx.split([ObjectBatch(tuple(objects))], handed=[info.key for info in objects])
                # and let the driver's answer in (whether it still wants pages) before the next:
                # from a listing that never waits (pages served from a cache), the flag never
                # changed and every page of 10^6 keys went to the driver's queue at once (353 MiB)
                await asyncio.sleep(0)
            else:
                yield self._map_objects(objects, ctx)

    async def _found(self, keys: tuple[str, ...], ctx: WorkerContext) -> list[ObjectInfo]:
        """The objects a manifest names (`look_up`): a missing one is its item's failure, not
        the job's."""
        assert isinstance(self.source, S3Location)
        bucket = self.source.bucket
        found = []
        for key, info in zip(keys, await look_up(self.mover.source_storage, bucket, keys), strict=True):
            if isinstance(info, ObjectInfo):
                found.append(info)
                continue
            url = f"s3://{bucket}/{key}"
            reason = f"no such object: {url} (named by --files-from)" if not info.retryable else str(info)
            ctx.stats.objects_failed += 1
            ctx.stats.failures.append(Failure(url, "", reason, item_id=key))
        return found

    def _source_is_many(self) -> bool:
        if self.options.spec.files_from is not None:
            return True
        source = self.source
        return source.is_prefix if isinstance(source, S3Location) else source.path.is_dir()

    def _map_objects(self, objects: list[ObjectInfo], ctx: WorkerContext) -> list[TransferItem]:
        """The listed objects as items (`plan_objects`)."""
        assert isinstance(self.source, S3Location)
        with ctx.stats.timed("plan"):
            options = self.options
            planned = plan_objects(
                objects,
                self.source,
                self.destination,
                options.filters,
                many=self._many,
                allow_control_chars=options.spec.allow_control_chars,
            )
        return self._counted(*planned, ctx)

    def _counted(
        self, items: list[TransferItem], refused: list[Refused], ctx: WorkerContext
    ) -> list[TransferItem]:
        """Planned items less those done before (a resume's), counted in the totals; those
        refused named in the report."""
        stats = ctx.stats
        for each in refused:
            stats.failures.append(
                Failure(each.url, "", each.reason, item_id=each.item_id, skipped=each.skipped)
            )
            if each.skipped:
                stats.objects_skipped += 1
            else:
                stats.objects_failed += 1
        items = ctx.drop_done(items, self.item_id)
        stats.objects_listed += len(items)
        stats.bytes_listed += sum(item.size for item in items)
        return items


def _mtime(root: str, name: str) -> float | None:
    """A named file's modification time (None: it went since it was found; its upload says so)."""
    try:
        return os.stat(os.path.join(root, name)).st_mtime
    except OSError:
        return None


COMMANDS = (CopyCommand(), MoveCommand())  # found by the registry (s3bulk._commands)
