"""`cp` and `mv`: upload (local → S3), download (S3 → local) or server-side copy (S3 → S3) as one
job; mv then deletes each source whose copy succeeded. The spec is what the user asked for, the
Command turns it into the job.

source → plan → engine → store: the driver turns the source into descriptors (key ranges of a
listing, batches of local paths); workers list their range or take their batch, map each key to
its destination (refusing keys that would escape a local destination), and move the bytes.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from email.utils import parsedate_to_datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, Self

from s3bulk._commands.base import Command, JobPlan, Spec, absolute, as_epoch, location, patterns
from s3bulk._commands.remove import BatchDeleter, DeleteCap, check_max_delete
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._errors import ItemError, JobAborted, S3Error, UsageError, classify
from s3bulk._plan.diff import newer
from s3bulk._plan.filters import Filters, check_window
from s3bulk._report import Failure, WorkerStats
from s3bulk._sources.listing import KeyRange, SingleObject, find_object, iter_range
from s3bulk._sources.local import NOT_UTF8, UnreadableRoot, walk
from s3bulk._sources.manifest import check_manifest, manifest_chunks
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes, described
from s3bulk._stores.multipart import UploadHooks, file_version
from s3bulk._stores.retry import RetryPolicy
from s3bulk._stores.routes import Parts, bytes_held, upload_held
from s3bulk._stores.s3xml import ObjectInfo, epoch_seconds, listing_problem
from s3bulk._stores.storage import Storage
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

if TYPE_CHECKING:
    from s3bulk._commands.base import JobPlan


MiB = 1024**2
GiB = 1024**3
MIN_PART = 5 * MiB  # S3's smallest part (but the last)
FIND_IN_FLIGHT = 32  # a manifest's objects looked up at once, per descriptor


@dataclass(frozen=True, kw_only=True)
class CopySpec(Spec):
    command: ClassVar[str] = "cp"
    source: str
    destination: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    part_size: int = 8 * MiB
    multipart_threshold: int = 64 * MiB  # uploads and ranged downloads above this go in parts
    copy_multipart_threshold: int = 5 * GiB  # server-side copies above this use UploadPartCopy
    partitioned_listing: bool | None = None  # key ranges listed in parallel; None: decide
    follow_symlinks: bool = False
    guess_mime_type: bool = True
    attributes: Attributes = NO_ATTRIBUTES  # what uploads and copies set on their objects
    show_attributes: bool = False  # downloads: each record carries the object's attributes (a HEAD)
    files_from: str | None = None  # a manifest: the names to copy, relative to the source
    verify: bool = True  # downloads are checked against their ETag (--ignore-checksum: off)
    allow_control_chars: bool = False  # downloads: a key with ESC or another control character lands as named
    no_clobber: bool = False  # never write over an existing destination
    if_size_differ: bool = False  # ... only when its size differs from the source's
    if_newer: bool = False  # ... only when the source is newer
    min_size: int | None = None  # the size and time window (bytes; seconds since the epoch)
    max_size: int | None = None
    newer_than: float | None = None
    older_than: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", location(self.source, "source"))
        object.__setattr__(self, "destination", location(self.destination, "destination"))
        object.__setattr__(self, "include", patterns(self.include, "include"))
        object.__setattr__(self, "exclude", patterns(self.exclude, "exclude"))
        parse_location(self.source), parse_location(self.destination)  # malformed: one line now
        object.__setattr__(self, "newer_than", as_epoch(self.newer_than))
        object.__setattr__(self, "older_than", as_epoch(self.older_than))
        check_window(self.min_size, self.max_size, self.newer_than, self.older_than)
        if self.files_from is not None:
            object.__setattr__(self, "files_from", check_manifest(self.files_from))
            if not self.source.endswith("/"):
                object.__setattr__(self, "source", self.source + "/")  # names are relative to it
        if self.show_attributes and not (self.source.startswith("s3://") and "://" not in self.destination):
            raise UsageError(
                "--attributes is for downloads: for other objects, use s3bulk head or ls --attributes"
            )
        if self.part_size < MIN_PART:
            raise UsageError("--part-size must be at least 5 MiB (the S3 minimum part size)")
        for name in ("multipart_threshold", "copy_multipart_threshold"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name.replace('_', '-')} cannot be negative")

    def places(self) -> tuple[str, str]:
        return self.source, self.destination

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {"attributes": self.attributes.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return super().from_json(data | {"attributes": Attributes.from_json(data.get("attributes"))})

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(each for each in (self.destination, self.source) if each.startswith("s3://"))

    def absolute(self) -> CopySpec:
        return replace(self, source=absolute(self.source), destination=absolute(self.destination))

    def part_size_for_memory(self) -> int:
        return self.part_size

    def leaving_out(self, pattern: str) -> CopySpec:
        return replace(self, exclude=(*self.exclude, pattern))


@dataclass(frozen=True, kw_only=True)
class MoveSpec(CopySpec):
    command: ClassVar[str] = "mv"
    max_delete: int | None = None  # stop the job before deleting more sources than this

    def __post_init__(self) -> None:
        super().__post_init__()
        check_max_delete(self.max_delete)


class CopyCommand(Command):
    name: ClassVar[str] = "cp"
    spec: ClassVar[type[Spec]] = CopySpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, CopySpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        job = CopyJob(source, destination, settings, copy_options(spec, settings, plan))
        job.preflight_requests = await job.preflight()
        return job

    def verb(self, job: Job) -> str:
        direction: str = getattr(job, "direction", "")
        return direction if self.name == "cp" else f"{self.name} ({direction})"


class MoveCommand(CopyCommand):
    name: ClassVar[str] = "mv"
    spec: ClassVar[type[Spec]] = MoveSpec


MiB = 1024**2
GiB = 1024**3
LOCAL_BATCH = 256

Direction = Literal["upload", "download", "copy"]
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


@dataclass(frozen=True)
class CopyOptions:
    filters: Filters = field(default_factory=Filters)
    dry_run: bool = False
    part_size: int = 8 * MiB
    multipart_threshold: int = 64 * MiB
    copy_multipart_threshold: int = 5 * GiB
    part_concurrency: int = 8  # parts of one object in flight (fitted to the byte budget)
    concurrency: int = 64
    partitioned_listing: bool | None = None  # key ranges: on, off, None: where StartAfter seeks
    delete_source: bool = False  # mv: delete each source once its copy succeeded
    max_delete: int | None = None  # mv, sync --delete: deletes this run may make (DeleteCap)
    follow_symlinks: bool = False  # uploads: follow links (loops and dangling links are skipped)
    guess_mime_type: bool = True  # uploads: Content-Type from the file name, as `aws s3` does
    attributes: Attributes = NO_ATTRIBUTES
    show_attributes: bool = False  # downloads: HEAD each object, for its record
    files_from: str | None = None  # a manifest's path: its names, not a listing or a walk
    verify: bool = True
    no_clobber: bool = False  # an existing destination is left as it is (see CopyJob._worth_writing)
    if_size_differ: bool = False
    if_newer: bool = False
    keep_part_layout: bool = False  # copies of multipart objects keep their parts (same ETag)
    allow_control_chars: bool = False  # downloads: names with control characters land as they are
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # the driver's own requests (sync's listings)


def copy_options(spec: CopySpec, settings: AwsSettings, plan: JobPlan) -> CopyOptions:
    """The job's options from the user's spec and the runner's plan (the byte budget sets how
    many parts of one large object are in flight)."""
    return CopyOptions(
        filters=Filters(
            spec.include, spec.exclude, spec.min_size, spec.max_size, spec.newer_than, spec.older_than
        ),
        dry_run=spec.dry_run,
        part_size=spec.part_size,
        multipart_threshold=spec.multipart_threshold,
        copy_multipart_threshold=spec.copy_multipart_threshold,
        concurrency=spec.engine.concurrency,
        partitioned_listing=spec.partitioned_listing,
        delete_source=spec.command == "mv",
        max_delete=getattr(spec, "max_delete", None),
        follow_symlinks=spec.follow_symlinks,
        allow_control_chars=spec.allow_control_chars,
        guess_mime_type=spec.guess_mime_type,
        attributes=spec.attributes,
        show_attributes=spec.show_attributes,
        files_from=spec.files_from,
        verify=spec.verify,
        no_clobber=spec.no_clobber,
        if_size_differ=spec.if_size_differ,
        if_newer=spec.if_newer,
        keep_part_layout=spec.command == "sync" and getattr(spec, "mode", "") == "checksum",
        part_concurrency=parts_in_flight(plan.max_in_flight_bytes, spec.part_size),
        retry=RetryPolicy(max_attempts=spec.engine.attempts(settings)),
    )


def parts_in_flight(budget: int, part_size: int, most: int = 8) -> int:
    """Parts of one large object in flight at once, so that they fit the byte budget."""
    return max(1, min(most, budget // max(1, part_size)))


_MIME_TYPES = mimetypes.MimeTypes()  # Python's own table only: the same answer on every machine
for _suffix in (".js", ".mjs"):  # RFC 9239, as Python 3.12 has it; 3.11 says application/javascript
    _MIME_TYPES.add_type("text/javascript", _suffix)


def content_type(path: str) -> str | None:
    """The Content-Type `aws s3 cp` would give a file of this name (None: the service's default)."""
    return _MIME_TYPES.guess_type(path, strict=False)[0]


async def check_bucket(client: Storage, bucket: str, prefix: str) -> None:
    """Raise the service's answer if listing `bucket` shows it cannot be used at all (no such
    bucket, bad credentials). AccessDenied is not such an answer: write-only credentials may not
    list, and the writes themselves will tell."""
    try:
        await client.list_objects_v2(bucket, prefix, max_keys=1)
    except S3Error as error:
        if error.job_wide:
            raise


def direction_of(source: Location, destination: Location) -> Direction:
    if isinstance(source, LocalLocation) and isinstance(destination, S3Location):
        return "upload"
    if isinstance(source, S3Location) and isinstance(destination, LocalLocation):
        return "download"
    if isinstance(source, S3Location) and isinstance(destination, S3Location):
        return "copy"
    raise UsageError("both locations are local: s3bulk copies to, from or within S3 (use cp/rsync)")


@dataclass
class CopyJob:
    source: Location
    destination: Location
    settings: AwsSettings
    options: CopyOptions = field(default_factory=CopyOptions)
    direction: Direction = field(init=False)
    preflight_requests: dict[str, int] = field(default_factory=dict, init=False)
    preflight_notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.direction = direction_of(self.source, self.destination)
        self._storage: Storage | None = None  # per worker, made by `open`
        self._source_storage: Storage | None = None
        # a copy between endpoints or accounts: no server-side copy reaches, the bytes pass here
        self._relayed = self.direction == "copy" and self.settings.relays
        self._deleter: BatchDeleter | None = None
        self._written = False  # some item of this worker reached the destination
        self._shown: dict[str, dict[str, Any]] = {}  # downloads' attributes, until recorded
        self._unverified: set[str] = set()  # downloads whose bytes nothing could check, until recorded
        limit = self.options.max_delete
        self._cap = DeleteCap(limit) if limit is not None else None
        self._many = self._source_is_many()
        self._local_root = ""
        if isinstance(self.source, LocalLocation):
            path = self.source.path
            if not path.exists():
                raise UsageError(f"local source {str(path)!r} does not exist")
            if self.source.trailing_slash and not path.is_dir():
                raise UsageError(f"local source {str(path)!r} is not a directory (drop the trailing '/')")
            # items are named relative to this: a directory's contents, or the directory itself
            self._local_root = str(path if self.source.trailing_slash else path.parent)
        self._check_destination()

    def _check_destination(self) -> None:
        """Refuse, before any request, what every item would fail at: a copy onto itself, into its
        own source (the copies would be listed and copied again), many objects into a file."""
        source, destination = self.source, self.destination
        if isinstance(source, S3Location) and isinstance(destination, S3Location):
            if source.bucket != destination.bucket:
                return
            if not self._many:
                if source.key == destination.key or (
                    destination.is_prefix and destination.key + basename(source.key) == source.key
                ):
                    raise UsageError(
                        f"source and destination are the same object ({source}): nothing to copy"
                    )
                return
            target = destination.key if destination.is_prefix else destination.key + "/"
            if target == source.key:
                raise UsageError(
                    f"source and destination are the same ({source}): nothing would be copied; "
                    "to change attributes, copy to another prefix"
                )
            if target.startswith(source.key):
                raise UsageError(
                    f"destination s3://{destination.bucket}/{target} is inside the source {source}: "
                    "the copies would be listed and copied again; pick a prefix outside it"
                )
        elif isinstance(destination, LocalLocation) and self._many:
            path = destination.path
            if path.exists() and not path.is_dir():
                raise UsageError(
                    f"destination {str(path)!r} is a file, and many objects need a directory: "
                    "give a directory (it is created if missing)"
                )

    async def preflight(self) -> dict[str, int]:
        """Before the job starts (and before its journal exists): one listing request on the
        bucket written to, so bad credentials or a missing bucket stop the job with one line
        instead of failing every item. Returns the requests it made."""
        destination = self.destination
        if self.options.dry_run or not isinstance(destination, S3Location):
            return {}
        storage = Storage(self.settings, connections=2)
        try:
            await check_bucket(storage, destination.bucket, destination.key)
        finally:
            await storage.close()
        return dict(storage.meter.requests)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_storage"] = None
        state["_source_storage"] = None
        state["_deleter"] = None
        return state

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

    # ---- worker side -------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        stats = ctx.stats

        def started(bucket: str, key: str, upload_id: str) -> None:
            stats.uploads_started.append((bucket, key, upload_id))
            ctx.report_now()  # to the journal before any part is sent

        connections = self.options.concurrency * 2
        self._storage = Storage(
            self.settings,
            connections=connections,
            retry=ctx.retrier,
            hooks=UploadHooks(started, stats.uploads_ended.append, ctx.resumed_upload),
            verify=self.options.verify,
        )
        self._source_storage = self._storage
        if self.settings.source is not None:  # the source is read where it is, as whom it says
            self._source_storage = Storage(
                self.settings.source, connections=connections, retry=ctx.retrier, verify=self.options.verify
            )
        if self.options.delete_source and isinstance(self.source, S3Location):
            self._deleter = BatchDeleter(self._source_storage, self.source.bucket)

    async def close(self, ctx: WorkerContext) -> None:
        for storage in {id(each): each for each in (self._storage, self._source_storage) if each}.values():
            await storage.close()

    @property
    def storage(self) -> Storage:
        """Where the destination is written (and a server-side copy made)."""
        assert self._storage is not None, "the job is not open in this worker"
        return self._storage

    @property
    def source_storage(self) -> Storage:
        """Where the source is listed and read: the destination's unless settings.source says."""
        assert self._source_storage is not None, "the job is not open in this worker"
        return self._source_storage

    @cached_property
    def parts(self) -> Parts:
        """Made once: every item's cost and transfer asks for it."""
        options = self.options
        return Parts(options.part_size, options.part_concurrency, options.multipart_threshold)

    def cost(self, item: TransferItem) -> int:
        if self.options.dry_run or (self.direction == "copy" and not self._relayed):  # server-side
            return 0
        if self.direction == "download":  # a body streamed into its file is not held whole
            return bytes_held(item.size, item.etag, self.parts)
        if self.direction == "upload":  # a large file's parts are read as they are sent
            return upload_held(item.size, self.parts)
        if item.size > self.options.multipart_threshold:  # a relay holds its parts in flight
            return self.options.part_size * self.options.part_concurrency
        return item.size

    def describe(self, item: TransferItem) -> tuple[str, str, int]:
        return self._source_url(item.source), self._destination_url(item.destination), item.size

    def _source_url(self, source: str) -> str:
        if isinstance(self.source, S3Location):
            return f"s3://{self.source.bucket}/{source}"
        return source

    def _destination_url(self, destination: str) -> str:
        if isinstance(self.destination, S3Location):
            return f"s3://{self.destination.bucket}/{destination}"
        return destination

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
            found = await find_object(self.source_storage, self.source.bucket, descriptor.key)
            yield self._map_objects([found], ctx)
            return
        if isinstance(descriptor, NamedObjects):
            yield self._map_objects(await self._found(descriptor.keys, ctx), ctx)
            return
        async for objects in iter_range(
            self.source_storage,
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
                    return await find_object(self.source_storage, bucket, key)
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

    async def run(self, item: Any, ctx: WorkerContext) -> int | BatchOutcome:
        if self._guarded and not await self._worth_writing(item):
            return unchanged(ctx, item.size)
        cap = self._cap if self.options.delete_source else None
        if cap is not None and not cap.take(1, ctx.stop_job):  # mv: a delete reserved before the copy
            raise JobAborted(cap.message)  # not started, so not journaled: a resume does it
        if self.options.dry_run:
            return int(item.size)
        version = None  # mv of a file: the version of it that is deleted only if it is the one stored
        try:
            if self.direction == "download":
                moved = await self._download(item, ctx)
            elif self.direction == "upload":
                version = file_version(item.source) if self.options.delete_source else None
                moved = await self._upload(item, ctx)
            elif self._relayed:
                moved = await self._relay(item)
            else:
                moved = await self._copy(item, ctx)
        except BaseException as exc:
            if cap is not None:
                cap.give_back(1)  # no copy, so no delete
            if isinstance(exc, JobAborted) or not isinstance(exc, Exception):
                raise
            raise self._refused_destination(classify(exc)) from None
        self._written = True
        if self.options.delete_source:
            await self._delete_source(item, ctx, version)
        return moved

    @property
    def _guarded(self) -> bool:
        options = self.options
        return options.no_clobber or options.if_size_differ or options.if_newer

    async def _worth_writing(self, item: TransferItem) -> bool:
        """--no-clobber, --if-size-differ, --if-newer (s5cmd's -n, -s, -u): an existing
        destination is written over only if every condition given says so; a missing one always
        is. A local file is a stat, an object a HEAD (sync compares whole listings instead)."""
        there = await self._destination_state(item)
        if there is None:
            return True
        size, mtime = there
        options = self.options
        if options.no_clobber or (options.if_size_differ and size == item.size):
            return False
        return not options.if_newer or newer(await self._source_time(item), mtime)

    async def _destination_state(self, item: TransferItem) -> tuple[int, float] | None:
        """(size, modification time) of what is at the destination, or None."""
        if isinstance(self.destination, LocalLocation):
            try:
                found = os.stat(item.destination)
            except (FileNotFoundError, NotADirectoryError):
                return None
            return found.st_size, found.st_mtime
        return await self._object_state(self.storage, self.destination.bucket, item.destination)

    async def _source_time(self, item: TransferItem) -> float:
        if item.mtime:
            return item.mtime
        if isinstance(self.source, LocalLocation):
            return os.stat(item.source).st_mtime
        state = await self._object_state(self.source_storage, self.source.bucket, item.source)
        return state[1] if state else 0.0

    @staticmethod
    async def _object_state(storage: Storage, bucket: str, key: str) -> tuple[int, float] | None:
        try:
            head = await storage.head(bucket, key)
        except S3Error as error:
            if error.status == 404:
                return None
            raise
        modified = (
            parsedate_to_datetime(head["last-modified"]).timestamp() if head.get("last-modified") else 0.0
        )
        return int(head.get("content-length") or 0), modified

    def _refused_destination(self, error: ItemError) -> ItemError:
        """A write refused for want of permission before any write of this worker succeeded
        (AccessDenied from the bucket written to; EACCES from the directory downloaded into):
        the destination refuses us, so every item would fail alike, and the job stops with one
        line (a job-wide error). After a success it is about that key or that directory (a
        bucket policy on a prefix, object lock, one read-only directory). A download's
        AccessDenied is the source's, about that object."""
        local = self.direction == "download"
        if error.denied and local != isinstance(error, S3Error) and not self._written:
            error.job_wide = True
        return error

    async def _delete_source(
        self, item: TransferItem, ctx: WorkerContext, version: tuple[int, ...] | None = None
    ) -> None:
        """mv: runs only after the copy succeeded, so a failed copy never loses its source; a
        file that changed since it was read (`version`) is kept: what is stored is not it."""
        try:
            if self._deleter is not None:
                await self._deleter.delete(item.source)
            elif version is not None and file_version(item.source) != version:
                raise ItemError(
                    "it changed after it was read (the object holds the version before)", retryable=False
                )
            else:
                os.unlink(item.source)
        except (ItemError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise ItemError(f"copied, but the source was not deleted: {reason}", retryable=False) from None
        ctx.stats.objects_deleted += 1

    async def _download(self, item: TransferItem, ctx: WorkerContext) -> int:
        assert isinstance(self.source, S3Location)
        got = await self.source_storage.download(
            self.source.bucket, item.source, item.destination, item.size, item.mtime, self.parts, item.etag
        )
        if got.verified is False:  # said in the report, and in its record (`record`)
            ctx.stats.objects_unverified += 1
            if len(self._unverified) > 10_000:  # no record is asked for: each would take its own
                self._unverified.clear()
            self._unverified.add(item.source)
        if self.options.show_attributes:  # for `record`, which runs next for every recorded item
            head = await self.source_storage.head(self.source.bucket, item.source)
            self._shown[item.source] = described(head)
        return got.written

    def record(self, item: Any) -> dict[str, Any]:
        source, destination, size = self.describe(item)
        found: dict[str, Any] = {"source": source, "destination": destination, "size": size}
        if self.options.show_attributes:
            found["attributes"] = self._shown.pop(item.source, {})
        key = getattr(getattr(item, "transfer", item), "source", None)  # sync's items too
        if key in self._unverified:
            self._unverified.discard(key)
            found["verified"] = False
        return found

    async def _upload(self, item: TransferItem, ctx: WorkerContext) -> int:
        assert isinstance(self.destination, S3Location)
        attributes = self.options.attributes
        if self.options.guess_mime_type:
            attributes = attributes.with_content_type(content_type(item.source))
        return await self.storage.upload(
            item.source, self.destination.bucket, item.destination, attributes, self.parts
        )

    async def _relay(self, item: TransferItem) -> int:
        source, destination = self.source, self.destination
        assert isinstance(source, S3Location) and isinstance(destination, S3Location)
        return await self.storage.relay(
            self.source_storage.reader,
            source.bucket,
            item.source,
            destination.bucket,
            item.destination,
            size=item.size,
            parts=self.parts,
            attributes=self.options.attributes,
        )

    async def _copy(self, item: TransferItem, ctx: WorkerContext) -> int:
        source, destination = self.source, self.destination
        assert isinstance(source, S3Location) and isinstance(destination, S3Location)
        parts = Parts(
            self.options.part_size, self.options.part_concurrency, self.options.copy_multipart_threshold
        )
        await self.storage.copy(
            source.bucket,
            item.source,
            destination.bucket,
            item.destination,
            size=item.size,
            etag=item.etag,
            parts=parts,
            keep_layout=self.options.keep_part_layout,
            attributes=self.options.attributes,
        )
        return item.size


def unchanged(ctx: WorkerContext, size: int) -> BatchOutcome:
    """An item found the same at its destination after all (a guard, a checksum): it leaves the
    totals it was listed in and counts as unchanged, not as done."""
    stats = ctx.stats
    stats.objects_unchanged += 1
    stats.objects_listed -= 1
    stats.bytes_listed -= size
    return BatchOutcome([], [])


def _listed_time(info: ObjectInfo, filters: Filters) -> float | None:
    """The object's time when the window needs it (a retry's descriptors carry none: they were
    selected when first listed)."""
    return epoch_seconds(info.modified) if filters.windowed and info.modified else None


COMMANDS = (CopyCommand(), MoveCommand())  # found by the registry (s3bulk._commands)
