"""`cp`: upload (local → S3), download (S3 → local) and server-side copy (S3 → S3) as one Job.

source → plan → engine → store: the driver turns the source into descriptors (key ranges of a
listing, batches of local paths); workers list their range or take their batch, map each key to
its destination (refusing keys that would escape a local destination), and move the bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import obstore

from s3bulk.config import AwsSettings
from s3bulk.engine.job import WorkerContext
from s3bulk.engine.retry import with_retries
from s3bulk.errors import ItemError, JobAborted, S3Error, UsageError, classify
from s3bulk.landing import (
    directory_clash,
    disk_full,
    file_in_the_way,
    land,
    sweep_stale_parts,
    temporary_path,
)
from s3bulk.plan.filters import Filters
from s3bulk.removal import BatchDeleter
from s3bulk.report import Failure, WorkerStats
from s3bulk.sources.listing import KeyRange, SingleObject, find_object, iter_range
from s3bulk.sources.local import NOT_UTF8, walk
from s3bulk.stores.multipart import (
    Retry,
    UploadHooks,
    copy_attributes,
    copy_in_parts,
    etag_parts,
    source_part_size,
    upload_file,
)
from s3bulk.stores.objects import obstore_can_address, s3_store
from s3bulk.stores.s3xml import ObjectInfo, epoch_seconds
from s3bulk.stores.signed import SignedClient
from s3bulk.text import is_utf8
from s3bulk.urls import LocalLocation, Location, S3Location, basename, local_target, relative_key

MiB = 1024**2
GiB = 1024**3
LOCAL_BATCH = 256
STREAM_CHUNK = 256 * 1024
# Bodies up to this size arrive whole and are written with one call. Streaming a 1 MiB body in
# 256 KiB chunks costs an await and a Rust-to-Python crossing per chunk; measured on 400 x 1 MiB
# downloads (async engine, 3 alternating runs): 1.19 -> 1.06 user CPU s. The byte budget counts
# the whole body as the item's cost either way, so memory stays bounded.
WHOLE_BODY_MAX = 8 * MiB

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
    partitioned_listing: bool = True
    delete_source: bool = False  # mv: delete each source once its copy succeeded
    follow_symlinks: bool = False  # uploads: follow links (loops and dangling links are skipped)
    guess_mime_type: bool = True  # uploads: Content-Type from the file name, as `aws s3` does
    keep_part_layout: bool = False  # copies of multipart objects keep their parts (same ETag)


def parts_in_flight(budget: int, part_size: int, most: int = 8) -> int:
    """Parts of one large object in flight at once, so that they fit the byte budget."""
    return max(1, min(most, budget // max(1, part_size)))


_MIME_TYPES = mimetypes.MimeTypes()  # Python's own table only: the same answer on every machine


def content_type(path: str) -> str | None:
    """The Content-Type `aws s3 cp` would give a file of this name (None: the service's default)."""
    return _MIME_TYPES.guess_type(path, strict=False)[0]


async def check_bucket(client: SignedClient, bucket: str, prefix: str) -> None:
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

    def __post_init__(self) -> None:
        self.direction = direction_of(self.source, self.destination)
        self._client: SignedClient | None = None
        self._stores: dict[str, Any] = {}
        self._made_dirs: set[str] = set()
        self._temp_counter = 0
        self._deleter: BatchDeleter | None = None
        self._hooks = UploadHooks()
        self._written = False  # some item of this worker reached the destination
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
        client = SignedClient(self.settings, max_connections=2)
        try:
            await check_bucket(client, destination.bucket, destination.key)
        finally:
            await client.close()
        return dict(client.requests)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        state["_deleter"] = None
        state["_stores"] = {}
        state["_made_dirs"] = set()
        state["_hooks"] = UploadHooks()
        return state

    # ---- driver side -------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        source = self.source
        if isinstance(source, S3Location):
            yield KeyRange() if source.is_prefix else SingleObject(source.key)
            return
        path = source.path
        if path.is_file():
            refused = not is_utf8(path.name)
            problem = NOT_UTF8 if refused else ""
            yield LocalBatch(str(path.parent), ((path.name, path.stat().st_size, problem, refused),))
            return
        root = self._local_root
        top = "" if source.trailing_slash else path.name
        batch: list[tuple[str, int, str]] = []
        for entry in walk(str(path), self.options.follow_symlinks):
            relative = f"{top}/{entry.relative}" if top else entry.relative
            batch.append((relative, entry.size, entry.problem, entry.refused))
            if len(batch) >= LOCAL_BATCH:
                yield LocalBatch(root, tuple(batch))
                batch = []
                await asyncio.sleep(0)
        if batch:
            yield LocalBatch(root, tuple(batch))

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        for batch in rows:
            if isinstance(self.source, S3Location):
                yield ObjectBatch(tuple(ObjectInfo(item_id, size, "", "") for item_id, size in batch))
            else:
                entries = tuple((item_id, size, "", False) for item_id, size in batch)
                yield LocalBatch(self._local_root, entries)

    def item_id(self, item: TransferItem) -> str:
        """The source key, or for uploads the path relative to the walked root."""
        if self._local_root:
            return item.source[len(self._local_root) :].lstrip("/")
        return item.source

    # ---- worker side -------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._client = SignedClient(self.settings, max_connections=self.options.concurrency * 2)
        self._client.count_into(ctx.stats)
        stats = ctx.stats

        def started(bucket: str, key: str, upload_id: str) -> None:
            stats.uploads_started.append((bucket, key, upload_id))
            ctx.report_now()  # to the journal before any part is sent

        self._hooks = UploadHooks(started=started, ended=stats.uploads_ended.append)
        if self.options.delete_source and isinstance(self.source, S3Location):
            self._deleter = BatchDeleter(self._client, self.source.bucket, ctx.retry, ctx.count_retry)

    async def close(self, ctx: WorkerContext) -> None:
        if self._client is not None:
            await self._client.close()
        self._stores.clear()

    def _store(self, bucket: str) -> Any:
        store = self._stores.get(bucket)
        if store is None:
            store = self._stores[bucket] = s3_store(
                self.settings, bucket, max_connections=self.options.concurrency * 2
            )
        return store

    def cost(self, item: TransferItem) -> int:
        if self.options.dry_run or self.direction == "copy":  # server-side: no bytes pass through us
            return 0
        if item.size > self.options.multipart_threshold:
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
                    stats.failures.append(Failure(path, "", problem, skipped=not refused))
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
        assert isinstance(self.source, S3Location) and self._client is not None
        if isinstance(descriptor, ObjectBatch):
            yield self._map_objects(list(descriptor.objects), ctx)
            return
        if isinstance(descriptor, SingleObject):
            found = await find_object(self._client, self.source.bucket, descriptor.key)
            yield self._map_objects([found], ctx)
            return
        async for objects in iter_range(
            self._client,
            self.source.bucket,
            self.source.key,
            descriptor,
            on_split=ctx.split if self.options.partitioned_listing else None,
            want_split=ctx.want_split,
        ):
            if ctx.want_split():  # other workers are short of work: hand them this page
                ctx.split([ObjectBatch(tuple(objects))], handed=[info.key for info in objects])
            else:
                yield self._map_objects(objects, ctx)

    def _source_is_many(self) -> bool:
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
        items = []
        for info in objects:
            relative = basename(info.key) if single else relative_key(info.key, source.key)
            if filters and not filters.accepts(relative):
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
                root = destination.path
                if single and not destination.is_prefix:
                    target = str(root)
                else:
                    try:
                        target = str(local_target(root, relative))
                    except ValueError as exc:
                        stats.objects_failed += 1
                        stats.failures.append(
                            Failure(f"s3://{source.bucket}/{info.key}", "", f"refused key: {exc}")
                        )
                        continue
            else:
                target = self._destination_key(relative)
            items.append(
                TransferItem(info.key, target, info.size, epoch_seconds(info.last_modified), info.etag)
            )
        items = ctx.drop_done(items, self.item_id)
        stats.objects_listed += len(items)
        stats.bytes_listed += sum(item.size for item in items)
        return items

    async def run(self, item: TransferItem, ctx: WorkerContext) -> int:
        if self.options.dry_run:
            return item.size
        try:
            if self.direction == "download":
                moved = await self._download(item, ctx)
            elif self.direction == "upload":
                moved = await self._upload(item, ctx)
            else:
                moved = await self._copy(item, ctx)
        except JobAborted:
            raise
        except Exception as exc:
            raise self._refused_destination(classify(exc)) from None
        self._written = True
        if self.options.delete_source:
            await self._delete_source(item, ctx)
        return moved

    def _refused_destination(self, error: ItemError) -> ItemError:
        """AccessDenied on a write before any write of this worker succeeded: the destination
        refuses these credentials, so every item would fail alike (a job-wide error). After a
        success it is about that key (a bucket policy on a prefix, object lock)."""
        denied = isinstance(error, S3Error) and error.code == "AccessDenied"
        if denied and self.direction != "download" and not self._written:
            error.job_wide = True
        return error

    async def _delete_source(self, item: TransferItem, ctx: WorkerContext) -> None:
        """mv: runs only after the copy succeeded, so a failed copy never loses its source."""
        try:
            if self._deleter is not None:
                await self._deleter.delete(item.source)
            else:
                os.unlink(item.source)
        except (ItemError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise ItemError(f"copied, but the source was not deleted: {reason}", retryable=False) from None
        ctx.stats.objects_deleted += 1

    def _make_parent(self, target: str) -> str:
        parent = os.path.dirname(target) or "."  # "k" and "./k" land in the working directory
        if parent not in self._made_dirs:
            try:
                os.makedirs(parent, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise file_in_the_way(parent) or ItemError(
                    f"cannot create {parent}", retryable=False
                ) from None
            sweep_stale_parts(parent)  # left by an earlier run killed outright
            if len(self._made_dirs) > 100_000:
                self._made_dirs.clear()
            self._made_dirs.add(parent)
        return parent

    async def _download(self, item: TransferItem, ctx: WorkerContext) -> int:
        """GET into a temporary file beside the target, check the size, then rename: a target
        file is either absent or complete, never half-written."""
        assert isinstance(self.source, S3Location) and self._client is not None
        bucket = self.source.bucket
        target = item.destination
        parent = self._make_parent(target)
        if os.path.isdir(target):  # made for keys below this one: no need to fetch it to know
            raise directory_clash(target)
        self._temp_counter += 1
        temporary = temporary_path(target, self._temp_counter)
        existed = os.path.lexists(target)
        renamed = False
        try:
            if not obstore_can_address(item.source):
                data = await self._client.get_object(bucket, item.source)
                written = _write_file(temporary, data)
            elif item.size > self.options.multipart_threshold:
                written = await self._ranged_download(item, temporary, ctx)
            else:
                ctx.stats.requests["GET"] += 1
                result = await obstore.get_async(self._store(bucket), item.source)
                if item.size <= WHOLE_BODY_MAX:
                    written = _write_file(temporary, await result.bytes_async())
                else:  # streamed: memory per download stays at one chunk
                    written = 0
                    with open(temporary, "wb") as handle:
                        async for chunk in result.stream(min_chunk_size=STREAM_CHUNK):
                            written += handle.write(chunk)
            if written != item.size:
                raise ItemError(
                    f"short read: got {written} of {item.size} bytes (object changed or connection cut)",
                    retryable=True,
                )
            if item.mtime:
                os.utime(temporary, (item.mtime, item.mtime))
            land(temporary, target, existed=existed)
            renamed = True
        except OSError as exc:
            raise disk_full(exc, parent) or exc from None
        finally:
            if not renamed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
        return written

    async def _ranged_download(self, item: TransferItem, temporary: str, ctx: WorkerContext) -> int:
        assert isinstance(self.source, S3Location)
        store = self._store(self.source.bucket)
        part = self.options.part_size
        semaphore = asyncio.Semaphore(self.options.part_concurrency)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:

            async def fetch(start: int) -> int:
                end = min(start + part, item.size)
                async with semaphore:
                    ctx.stats.requests["GET"] += 1
                    data = await obstore.get_range_async(store, item.source, start=start, end=end)
                return os.pwrite(descriptor, memoryview(data), start)

            sizes = await asyncio.gather(*(fetch(start) for start in range(0, item.size, part)))
        finally:
            os.close(descriptor)
        return sum(sizes)

    async def _upload(self, item: TransferItem, ctx: WorkerContext) -> int:
        assert isinstance(self.destination, S3Location) and self._client is not None
        bucket = self.destination.bucket
        path = item.source
        size = os.stat(path).st_size  # the file may have changed since the walk
        if not os.access(path, os.R_OK):
            raise ItemError(f"cannot read local file: permission denied: {path}", retryable=False)
        kind = content_type(path) if self.options.guess_mime_type else None
        if size > self.options.multipart_threshold:
            await upload_file(
                self._client,
                bucket,
                item.destination,
                path,
                size,
                part_size=self.options.part_size,
                concurrency=self.options.part_concurrency,
                headers={"Content-Type": kind} if kind else {},
                hooks=self._hooks,
                retry=self._retry(ctx),
            )
        elif not obstore_can_address(item.destination):
            headers = {"Content-Type": kind} if kind else {}
            await self._client.put_object(bucket, item.destination, Path(path).read_bytes(), headers)
        else:
            ctx.stats.requests["PUT"] += 1
            await obstore.put_async(
                self._store(bucket),
                item.destination,
                Path(path),
                attributes={"Content-Type": kind} if kind else None,
                use_multipart=False,
            )
        return size

    @staticmethod
    def _retry(ctx: WorkerContext) -> Retry:
        """Each part of a large object is retried alone, by the job's policy, and counted."""
        return lambda action: with_retries(action, ctx.retry, on_retry=ctx.count_retry)

    async def _copy(self, item: TransferItem, ctx: WorkerContext) -> int:
        source = self.source
        destination = self.destination
        assert isinstance(source, S3Location) and isinstance(destination, S3Location)
        assert self._client is not None
        in_parts = item.size > self.options.copy_multipart_threshold or (
            self.options.keep_part_layout and etag_parts(item.etag) > 0
        )
        if in_parts:
            await self._copy_in_parts(item, ctx)
        elif (
            source.bucket == destination.bucket
            and obstore_can_address(item.source)
            and obstore_can_address(item.destination)
        ):
            ctx.stats.requests["COPY"] += 1
            await obstore.copy_async(self._store(source.bucket), item.source, item.destination)
        else:
            await self._client.copy_object(source.bucket, item.source, destination.bucket, item.destination)
        return item.size

    async def _copy_in_parts(self, item: TransferItem, ctx: WorkerContext) -> None:
        """UploadPartCopy, keeping the source's attributes and, when it is a multipart object,
        its part layout (so both have the same ETag)."""
        source, destination = self.source, self.destination
        assert isinstance(source, S3Location) and isinstance(destination, S3Location)
        assert self._client is not None
        client, retry = self._client, self._retry(ctx)
        head = await retry(lambda: client.head_object(source.bucket, item.source))
        size = int(head.get("content-length") or item.size)
        etag = head.get("etag", item.etag).strip('"')
        layout = await retry(lambda: source_part_size(client, source.bucket, item.source, size, etag))
        await copy_in_parts(
            client,
            source.bucket,
            item.source,
            destination.bucket,
            item.destination,
            size,
            part_size=layout or self.options.part_size,
            concurrency=self.options.part_concurrency,
            headers=await copy_attributes(client, source.bucket, item.source, head),
            hooks=self._hooks,
            retry=retry,
        )


def _write_file(path: str, data: bytes | memoryview) -> int:
    with open(path, "wb") as handle:
        return handle.write(data)
