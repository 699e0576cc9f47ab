"""The worker side of a transfer, which `cp`, `mv` and `sync` each compose into their job: the
two storages a worker reads and writes through (`Stores`, which `check` composes alone), and
what is done with one `TransferItem` (`Mover`): the guards that may leave it be (-n, -s, -u),
the download, upload, server-side copy or relay, what it holds of the byte budget, what its
record says, and for mv the source deleted once its copy succeeded.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from functools import cached_property
from typing import Any

from s3bulk._commands.deletes import BatchDeleter
from s3bulk._commands.transfer import Direction, TransferOptions, content_type, direction_of, unchanged
from s3bulk._config import AwsSettings
from s3bulk._engine.caps import DeleteCap
from s3bulk._engine.job import BatchOutcome, Skipped, WorkerContext
from s3bulk._errors import ItemError, JobAborted, S3Error, WrittenMeanwhile, classify
from s3bulk._plan.diff import newer
from s3bulk._plan.keys import TransferItem
from s3bulk._stores.archives import NotRestored, archived
from s3bulk._stores.attributes import described
from s3bulk._stores.conditional import (
    NOTHING,
    Version,
    WriteConditions,
    not_as_asked,
    replaced_meanwhile,
    write_condition,
)
from s3bulk._stores.folders import descriptor_path, open_below, remove_below
from s3bulk._stores.multipart import UploadHooks, file_version, version_of
from s3bulk._stores.routes import Parts, bytes_held, upload_held
from s3bulk._stores.storage import Storage
from s3bulk._urls import LocalLocation, Location, S3Location


@dataclass
class Stores:
    """The storages of one worker: where the destination is written (and a server-side copy
    made), and where the source is read, which is the same one unless `settings.source` names
    another endpoint or account. Made by `open` in each worker, never pickled."""

    settings: AwsSettings
    connections: int
    verify: bool = True
    # how a storage is made: the storage seam, or for job logic tested alone an in-memory one
    # behind the same verbs (tests/unit/memory.py)
    make: Callable[..., Storage] = Storage
    _storage: Storage | None = field(default=None, init=False)
    _source_storage: Storage | None = field(default=None, init=False)

    def open(self, ctx: WorkerContext) -> None:
        stats = ctx.stats

        def started(bucket: str, key: str, upload_id: str) -> None:
            stats.uploads_started.append((bucket, key, upload_id))
            ctx.report_now()  # to the journal before any part is sent

        self._storage = self.make(
            self.settings,
            connections=self.connections,
            retry=ctx.retrier,
            hooks=UploadHooks(
                started,
                stats.uploads_ended.append,
                ctx.resumed_upload,
                ctx.kept_upload if ctx.journaled else None,
            ),
            verify=self.verify,
        )
        self._source_storage = self._storage
        if self.settings.source is not None:  # the source is read where it is, as whom it says
            self._source_storage = self.make(
                self.settings.source, connections=self.connections, retry=ctx.retrier, verify=self.verify
            )

    async def close(self) -> None:
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

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_storage": None, "_source_storage": None}


@dataclass
class Mover:
    """Moves `TransferItem`s from `source` to `destination` (both as the job resolved them)."""

    source: Location
    destination: Location
    settings: AwsSettings
    options: TransferOptions
    stores: Stores = field(init=False)
    direction: Direction = field(init=False)

    def __post_init__(self) -> None:
        self.direction = direction_of(self.source, self.destination)
        self.stores = Stores(self.settings, self.options.concurrency * 2, self.options.spec.verify)
        # a copy between endpoints or accounts: no server-side copy reaches, the bytes pass here
        self.relayed = self.direction == "copy" and self.settings.relays
        limit = self.options.max_delete
        self.cap = DeleteCap(limit) if limit is not None else None
        self._deleter: BatchDeleter | None = None
        self._written = False  # some item of this worker reached the destination
        self._shown: dict[str, dict[str, Any]] = {}  # downloads' attributes, until recorded
        self._unverified: set[str] = set()  # downloads whose bytes nothing could check, until recorded
        self._honoured: WriteConditions | None = None  # found once per worker (`_write_conditions`)
        self._probing: asyncio.Lock | None = None

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_deleter": None, "_honoured": None, "_probing": None}

    async def open(self, ctx: WorkerContext) -> None:
        self.stores.open(ctx)
        if self.options.delete_source and isinstance(self.source, S3Location):
            self._deleter = BatchDeleter(self.stores.source_storage, self.source.bucket)

    async def close(self) -> None:
        await self.stores.close()

    @property
    def storage(self) -> Storage:
        return self.stores.storage

    @property
    def source_storage(self) -> Storage:
        return self.stores.source_storage

    @cached_property
    def parts(self) -> Parts:
        """Made once: every item's cost and transfer asks for it."""
        options = self.options
        in_flight = options.ranges_in_flight if self.direction == "download" else options.part_concurrency
        return Parts(options.spec.part_size, in_flight, options.spec.multipart_threshold)

    def cost(self, item: TransferItem) -> int:
        if self.options.spec.dry_run or (self.direction == "copy" and not self.relayed):  # server-side
            return 0
        if self.direction == "download":  # a body streamed into its file is not held whole
            return bytes_held(item.source, item.size, item.etag, self.parts)
        if self.direction == "upload":  # a large file's parts are read as they are sent
            return upload_held(item.destination, item.size, self.parts)
        if item.size > self.options.spec.multipart_threshold:  # a relay holds its parts in flight
            return self.options.spec.part_size * self.options.part_concurrency
        return item.size

    def describe(self, item: TransferItem) -> tuple[str, str, int]:
        return url_of(self.source, item.source), url_of(self.destination, item.destination), item.size

    def record(self, item: TransferItem) -> dict[str, Any]:
        source, destination, size = self.describe(item)
        found: dict[str, Any] = {"source": source, "destination": destination, "size": size}
        if self.options.spec.show_attributes:
            found["attributes"] = self._shown.pop(item.source, {})
        if item.source in self._unverified:
            self._unverified.discard(item.source)
            found["verified"] = False
        return found

    async def run(self, item: TransferItem, ctx: WorkerContext) -> int | BatchOutcome | Skipped:
        asked = self.options.replaces
        if asked is not None:
            item = item._replace(replaces=asked)
            await self._as_asked(item, ctx)
        elif self._guarded:
            write, replaces = await self._guard(item, ctx)
            if not write:
                return unchanged(ctx, item.size)
            item = item._replace(replaces=replaces)
        try:
            return await self._write(item, ctx)
        except NotRestored as exc:  # in Glacier or Deep Archive, no restored copy to read yet
            if not self.options.spec.restored_only:
                raise
            return Skipped(str(exc))  # --restored-only: counted, and the job goes on
        except WrittenMeanwhile:
            assert item.replaces is not None
            _, destination, _ = self.describe(item)
            if asked is not None:
                raise not_as_asked(destination, asked) from None
            if self._guarded and self.options.spec.no_clobber and item.replaces == NOTHING:
                return unchanged(ctx, item.size)  # -n: the 412 says what a HEAD would have
            raise replaced_meanwhile(item.replaces) from None

    async def _as_asked(self, item: TransferItem, ctx: WorkerContext) -> None:
        """--if-match / --if-none-match onto a store that ignores the condition: what is there
        is asked first (a HEAD), and the write refused unless it is what may be replaced."""
        assert item.replaces is not None
        if self.options.spec.dry_run or await self._condition(item, ctx, copy=self._server_side):
            return
        there = await self._destination_state(item)
        etag = there[2].strip('"') if there is not None else None
        if (etag is not None) if item.replaces == NOTHING else (etag != item.replaces):
            raise not_as_asked(self.describe(item)[1], item.replaces)

    @property
    def _server_side(self) -> bool:
        return self.direction == "copy" and not self.relayed

    async def _write(self, item: TransferItem, ctx: WorkerContext) -> int | BatchOutcome:
        cap = self.cap if self.options.delete_source else None
        if cap is not None and not cap.take(1, ctx.stop_job):  # mv: a delete reserved before the copy
            raise JobAborted(cap.message)  # not started, so not journaled: a resume does it
        if self.options.spec.dry_run:
            return int(item.size)
        version = None  # mv of a file: the version of it that is deleted only if it is the one stored
        read = ""  # mv of an object: the ETag of the version copied, the one its delete may delete
        try:
            if self.direction == "download":
                moved, read = await self._download(item, ctx)
            elif self.direction == "upload":
                moved, version = await self._upload(item, await self._condition(item, ctx))
            else:
                condition = await self._condition(item, ctx, copy=self._server_side)
                copied = await (self._relay(item, condition) if self.relayed else self._copy(item, condition))
                moved, read = copied.size, copied.etag
        except BaseException as exc:
            if cap is not None:
                cap.give_back(1)  # no copy, so no delete
            if isinstance(exc, JobAborted) or not isinstance(exc, Exception):
                raise
            raise self._refused_destination(self._archived(item, classify(exc))) from None
        self._written = True
        if self.options.delete_source:
            await self._delete_source(item, ctx, version, read)
        return moved

    @property
    def _guarded(self) -> bool:
        spec = self.options.spec
        return spec.no_clobber or spec.if_size_differ or spec.if_newer

    async def _guard(self, item: TransferItem, ctx: WorkerContext) -> tuple[bool, str | None]:
        """Whether -n, -s, -u let the item be written, and what it may replace then
        (`TransferItem.replaces`). A bare -n onto a store that honours If-None-Match asks
        nothing first: the write itself is refused where an object is (one request; the 412
        counts as unchanged). Else the destination is asked (a stat, a HEAD), and the write
        replaces only what it found."""
        spec = self.options.spec
        bare = spec.no_clobber and not (spec.if_size_differ or spec.if_newer)
        if bare and isinstance(self.destination, S3Location) and not spec.dry_run:
            honoured = await self._write_conditions(ctx)
            if honoured.none_match and (honoured.copy or not self._server_side):
                return True, NOTHING
        there = await self._destination_state(item)
        if there is None:
            return True, NOTHING
        size, mtime, etag = there
        if spec.no_clobber or (spec.if_size_differ and size == item.size):
            return False, None
        if spec.if_newer and not newer(await self._source_time(item), mtime):
            return False, None
        return True, etag or None

    async def _condition(self, item: TransferItem, ctx: WorkerContext, copy: bool = False) -> dict[str, str]:
        """The header that keeps the write from replacing anything but what `item.replaces`
        says, where the destination honours it (`conditional.write_condition`)."""
        if item.replaces is None or not isinstance(self.destination, S3Location):
            return {}
        return write_condition(item.replaces, await self._write_conditions(ctx), copy)

    async def _write_conditions(self, ctx: WorkerContext) -> WriteConditions:
        """Which write conditions the destination honours: probed once (`Storage.write_conditions`),
        the report told of those it ignores."""
        if self._honoured is None:
            self._probing = self._probing or asyncio.Lock()
            async with self._probing:
                if self._honoured is None:
                    assert isinstance(self.destination, S3Location)
                    found = await self.storage.write_conditions(self.destination.bucket, self.destination.key)
                    if found.note():
                        ctx.stats.notes.append(found.note())
                    self._honoured = found
        return self._honoured

    async def _destination_state(self, item: TransferItem) -> tuple[int, float, str] | None:
        """(size, modification time, ETag: "" for a file) of what is at the destination, or None."""
        if isinstance(self.destination, LocalLocation):
            try:
                found = os.stat(item.destination)
            except (FileNotFoundError, NotADirectoryError):
                return None
            if stat.S_ISDIR(found.st_mode):  # in the way, not a file a guard keeps: the write says so
                return None
            return found.st_size, found.st_mtime, ""
        return await _object_state(self.storage, self.destination.bucket, item.destination)

    async def _source_time(self, item: TransferItem) -> float:
        if item.mtime:
            return item.mtime
        if isinstance(self.source, LocalLocation):
            return os.stat(item.source).st_mtime
        state = await _object_state(self.source_storage, self.source.bucket, item.source)
        return state[1] if state else 0.0

    def _archived(self, item: TransferItem, error: ItemError) -> ItemError:
        """A source in Glacier or Deep Archive with no restored copy: the line that says to
        restore it (`s3bulk restore`), not the service's InvalidObjectState."""
        if not isinstance(self.source, S3Location):
            return error
        return archived(error, url_of(self.source, item.source))

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
        self, item: TransferItem, ctx: WorkerContext, version: tuple[int, ...] | None = None, etag: str = ""
    ) -> None:
        """mv: runs only after the copy succeeded, so a failed copy never loses its source; a
        file that changed since it was read (`version`), or an object that is no longer the
        version copied (`etag`: `BatchDeleter`), is kept: what is stored is not it."""
        try:
            if self._deleter is not None:
                if not await self._deleter.delete(item.source, etag):
                    return  # gone already (another writer deleted it): the copy holds it
            else:
                root, relative = self._below_source(item)
                if relative:
                    remove_below(root, relative, version, self.options.spec.follow_symlinks)
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

    async def _download(self, item: TransferItem, ctx: WorkerContext) -> tuple[int, str]:
        """The object into its file: the bytes written, and the ETag of the version they are."""
        assert isinstance(self.source, S3Location) and isinstance(self.destination, LocalLocation)
        got = await self.source_storage.download(
            self.source.bucket,
            item.source,
            item.destination,
            item.size,
            item.mtime,
            self.parts,
            item.etag,
            root=str(self.destination.path),  # what is below it is opened without following links
        )
        if got.verified is False:  # said in the report, and in its record (`record`)
            ctx.stats.objects_unverified += 1
            if len(self._unverified) > 10_000:  # no record is asked for: each would take its own
                self._unverified.clear()
            self._unverified.add(item.source)
        if self.options.spec.show_attributes:  # for `record`, which runs next for every recorded item
            head = await self.source_storage.head(self.source.bucket, item.source)
            self._shown[item.source] = described(head)
        return got.written, got.etag

    async def _upload(self, item: TransferItem, condition: dict[str, str]) -> tuple[int, tuple[int, ...]]:
        """The file sent, read through a descriptor opened below the source's root
        (`folders.open_below`: a directory swapped for a link meanwhile is not followed), and the
        version of it that was (mv deletes only that one)."""
        assert isinstance(self.destination, S3Location)
        attributes = self.options.spec.attributes
        if self.options.spec.guess_mime_type:
            attributes = attributes.with_content_type(content_type(item.source))
        root, relative = self._below_source(item)
        if not relative:  # the file the user named
            version = file_version(item.source)
            sent = await self.storage.upload(
                item.source, self.destination.bucket, item.destination, attributes, self.parts, condition
            )
            return sent, version
        fd = open_below(root, relative, follow=self.options.spec.follow_symlinks)
        try:
            version = version_of(os.fstat(fd))
            path = descriptor_path(fd) or item.source
            try:
                sent = await self.storage.upload(
                    path, self.destination.bucket, item.destination, attributes, self.parts, condition
                )
            except ItemError as exc:  # named by its path, not its descriptor's
                exc.args = tuple(str(arg).replace(path, item.source) for arg in exc.args)
                raise
            return sent, version
        finally:
            os.close(fd)

    def _below_source(self, item: TransferItem) -> tuple[str, str]:
        """(the source directory, the file's name below it), or (its path, "") for a file named
        on its own."""
        assert isinstance(self.source, LocalLocation)
        root = str(self.source.path)
        if item.source.startswith(root.rstrip("/") + "/"):
            return root, item.source[len(root.rstrip("/")) + 1 :]
        return item.source, ""

    async def _relay(self, item: TransferItem, condition: dict[str, str]) -> Version:
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
            attributes=self.options.spec.attributes,
            condition=condition,
        )

    async def _copy(self, item: TransferItem, condition: dict[str, str]) -> Version:
        source, destination = self.source, self.destination
        assert isinstance(source, S3Location) and isinstance(destination, S3Location)
        parts = Parts(
            self.options.spec.part_size,
            self.options.part_concurrency,
            self.options.spec.copy_multipart_threshold,
        )
        return await self.storage.copy(
            source.bucket,
            item.source,
            destination.bucket,
            item.destination,
            size=item.size,
            etag=item.etag,
            parts=parts,
            keep_layout=self.options.keep_part_layout,
            attributes=self.options.spec.attributes,
            condition=condition,
        )


def url_of(place: Location, name: str) -> str:
    """A key as its URL (s3://bucket/key); a local path as it is."""
    return f"s3://{place.bucket}/{name}" if isinstance(place, S3Location) else name


async def _object_state(storage: Storage, bucket: str, key: str) -> tuple[int, float, str] | None:
    """(size, modification time, ETag) of the object, by a HEAD; None when there is none."""
    try:
        head = await storage.head(bucket, key)
    except S3Error as error:
        if error.status == 404:
            return None
        raise
    modified = parsedate_to_datetime(head["last-modified"]).timestamp() if head.get("last-modified") else 0.0
    return int(head.get("content-length") or 0), modified, head.get("etag", "")
