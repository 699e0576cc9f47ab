"""The storage seam: what every job does with object storage, in verbs (list, head, download,
upload, copy, delete many, read a range), for one worker.

Behind each verb it picks the transport: obstore (Rust, GIL-free) moves object bytes; s3bulk's
own signed client (`stores.s3`) lists with raw StartAfter control, copies across buckets, runs
multipart uploads whose ids must be known (`stores.multipart`), and handles the keys obstore's
path model cannot address. Every request is counted by kind, every error classified
(errors.classify) and retried with the one policy (`stores.retry`), so a throttle on any of them
(a listing page, a DeleteObjects, a part) reaches the engine's adaptive limit.

Downloads are `downloads.py`'s (the way each takes decided once, `routes.py`), uploads and
copies `writes.py`'s, and the local side of a transfer `localfiles.py`'s; this seam composes
them and keeps listing, reading, buckets and deletes. Object attributes travel as
`Attributes` (`attributes.py`): uploads and copies send what it says, through obstore when it
can carry them, else through the signed client.
"""

from __future__ import annotations

import asyncio
import collections
import io
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from s3bulk._config import AwsSettings
from s3bulk._errors import BytesMismatch, ItemError, S3Error, UsageError
from s3bulk._lazy import lazy_module
from s3bulk._stores import checksums
from s3bulk._stores.attributes import Attributes
from s3bulk._stores.digests import Md5Lanes
from s3bulk._stores.downloads import Downloads
from s3bulk._stores.etags import (
    StreamCheck,
    etag_matches_file,
    md5_parts,
    single_part_md5,
)
from s3bulk._stores.localfiles import read_file
from s3bulk._stores.multipart import (
    UploadHooks,
    etag_parts,
)
from s3bulk._stores.objects import obstore_can_address, store_for
from s3bulk._stores.reader import BACKGROUND, ObjectReader
from s3bulk._stores.retry import Meter, Retrier, done_with_requests
from s3bulk._stores.routes import LANES_MIN, WHOLE_BODY_MAX, MiB, Parts
from s3bulk._stores.s3 import S3Client
from s3bulk._stores.s3xml import (
    Advance,
    BucketInfo,
    ListPage,
    Repeats,
    UploadInfo,
    VersionInfo,
    repeated,
    xml_safe,
)
from s3bulk._stores.verify import Check, body_matches, encrypted, stream_check
from s3bulk._stores.writer import ObjectWriter
from s3bulk._stores.writes import Source, Writes

if TYPE_CHECKING:
    import obstore
else:
    obstore = lazy_module("obstore")  # most jobs never call it: ~6 MiB and ~30 ms saved

T = TypeVar("T")
MAX_KEYS_PER_DELETE = 1000
WRITER_PARTS_IN_FLIGHT = 4  # a file-like writer holds at most (4 + 1) parts and 2 chunks


class Storage:
    """One worker's storage (its connection pools are its event loop's). `retry` carries the
    policy and the meter the worker counts into; `hooks` hear of every multipart upload id."""

    def __init__(
        self,
        settings: AwsSettings,
        *,
        connections: int = 64,
        retry: Retrier | None = None,
        hooks: UploadHooks | None = None,
        verify: bool = True,
    ) -> None:
        self.settings = settings
        self.verify = verify  # downloads are checked by a checksum or ETag (--ignore-checksum: off)
        self.retry = retry or Retrier()
        self.meter: Meter = self.retry.meter
        self.hooks = hooks or UploadHooks()
        self.connections = connections
        self.client = S3Client(settings, max_connections=connections, meter=self.meter)
        self._stores: dict[str, Any] = {}
        self.downloads = Downloads(self.client, self.retry, self.head, verify=verify, connections=connections)
        self.writes = Writes(self.client, self.retry, self.hooks, self.head)
        self.reader = Source(self.client, self.retry, self.head)  # where a relayed copy reads
        # The verbs of downloads and writes, as theirs (their docstrings say what each does).
        self.download = self.downloads.download
        self.upload = self.writes.upload
        self.put_bytes = self.writes.put_bytes
        self.copy = self.writes.copy
        self.relay = self.writes.relay
        self.upload_stream = self.writes.upload_stream
        self.write_conditions = self.writes.write_conditions
        self._lanes = Md5Lanes()  # local files' MD5s (check, sync --checksum), hashed side by side
        self._reading: Storage | None = None  # the file-like readers' and writers' (`_on_background`)

    async def close(self) -> None:
        await self.client.close()
        self._stores.clear()
        self.downloads.close()
        if self._reading is not None:
            await asyncio.wrap_future(BACKGROUND.start(self._reading.close()))
            self._reading = None

    def _store(self, root: str) -> Any:
        """obstore's store for "s3://bucket" or a local directory."""
        store = self._stores.get(root)
        if store is None:
            store = self._stores[root] = store_for(root, self.settings, max_connections=self.connections * 2)
        return store

    async def _retrying(self, action: Callable[[], Awaitable[T]], what: str, *, job_wide: bool = False) -> T:
        return await self.retry(action, what, job_wide=job_wide)

    # ---- listing and looking -------------------------------------------------------------------
    async def list_objects_v2(
        self,
        bucket: str,
        prefix: str = "",
        *,
        start_after: str | None = None,
        continuation_token: str | None = None,
        delimiter: str | None = None,
        max_keys: int = 1000,
    ) -> ListPage:
        """One ListObjectsV2 page (keys in full, whatever they hold), retried."""
        return await self._retrying(
            lambda: self.client.list_objects_v2(
                bucket,
                prefix,
                start_after=start_after,
                continuation_token=continuation_token,
                delimiter=delimiter,
                max_keys=max_keys,
            ),
            f"list s3://{bucket}/{prefix}",
            job_wide=True,
        )

    async def head(
        self,
        bucket: str,
        key: str,
        part_number: int | None = None,
        *,
        of_source: bool = False,
        version_id: str = "",
        checksums: bool = False,
    ) -> dict[str, str]:
        """The object's headers, names in lower case (with `part_number`: that part's size; with
        `checksums`: the x-amz-checksum-* the service keeps)."""
        return await self._retrying(
            lambda: self.client.head_object(
                bucket,
                key,
                part_number=part_number,
                of_source=of_source,
                version_id=version_id,
                checksums=checksums,
            ),
            f"head s3://{bucket}/{key}",
        )

    async def restore(self, bucket: str, key: str, days: int, tier: str) -> str:
        """RestoreObject of an archived object, retried: "requested", "restored" or "ongoing"."""
        return await self._retrying(
            lambda: self.client.restore_object(bucket, key, days, tier), f"restore s3://{bucket}/{key}"
        )

    async def list_versions(self, bucket: str, prefix: str = "") -> AsyncIterator[list[VersionInfo]]:
        """Every version and delete marker under `prefix` (a versioned bucket), a page at a time."""
        listing = partial(self.client.list_object_versions, bucket, prefix)
        async for page in self._marker_pages(listing, f"list the versions in s3://{bucket}/{prefix}"):
            yield page

    # ---- reading -------------------------------------------------------------------------------
    async def read_range(self, root: str, key: str, start: int, end: int) -> memoryview:
        """Bytes [start, end) of an object ("s3://bucket" root, through the signed client) or a
        local file (directory root, obstore's LocalStore), checked for length and retried whole."""
        url = f"{root}/{key}"

        async def read() -> memoryview:
            if root.startswith("s3://"):
                data = memoryview(await self.client.get_range(root[len("s3://") :], key, start, end))
            else:
                data = memoryview(await obstore.get_range_async(self._store(root), key, start=start, end=end))
            if len(data) != end - start:
                raise ItemError(f"{url}: got {len(data)} bytes of {end - start}", retryable=True)
            return data

        return await self._retrying(read, f"read {url}")

    async def file_matches(
        self, path: str, etag: str, size: int, part_size: int, *, bucket: str = "", key: str = ""
    ) -> bool | None:
        """Whether the local file holds the `size` bytes of the object s3://bucket/key whose
        ETag is `etag` (None: nothing can tell), for sync --checksum and check. The ETag says
        first; where it cannot prove the file equal (it is no MD5, as an SSE-C or SSE-KMS
        object's, or no part size gives it), a HEAD asks for the full-object checksum the service
        keeps, and the file's own (computed here, `checksums.file_matches`) decides."""
        said = await self._etag_matches(path, etag, size, part_size)
        if said is True or not key:
            return said
        head = await self.head(bucket, key, checksums=True)
        if int(head.get("content-length") or -1) != size:
            return False
        found = await asyncio.to_thread(checksums.file_matches, path, head)
        return said if found is None else found

    async def _etag_matches(self, path: str, etag: str, size: int, part_size: int) -> bool | None:
        """Whether the file holds the bytes `etag` describes (None: it cannot tell). A file from
        `LANES_MIN` to `WHOLE_BODY_MAX` under a single-part ETag is read whole by a thread and
        hashed in SIMD lanes with others."""
        expected = single_part_md5(etag) if LANES_MIN <= size <= WHOLE_BODY_MAX else None
        if not expected:
            return await asyncio.to_thread(etag_matches_file, path, etag, size, part_size)
        await done_with_requests()  # no request at all
        with self._lanes.coming() as lane:
            data = await asyncio.to_thread(read_file, path, size + 1)  # a longer file differs
            return len(data) == size and await lane.md5(data) == expected

    async def stream_object(
        self,
        bucket: str,
        key: str,
        write: Callable[[memoryview], Awaitable[None]],
        parts: Parts,
        version_id: str = "",
    ) -> int:
        """The object's bytes handed to `write` in order, read as ranges of `parts.size` with
        `parts.in_flight` at once (memory: that many ranges), each asked for with If-Match on the
        ETag so that a change midway fails the read rather than splicing two versions, and checked
        as they pass as a download is (`verify.py`): by the full-object checksum the object keeps,
        else its MD5 ETag."""
        head = await self.head(bucket, key, version_id=version_id, checksums=True)
        size, etag = int(head.get("content-length") or 0), head.get("etag", "")
        check = await self.stream_check_of(bucket, key, head, size, version_id) if self.verify else None
        starts = iter(range(0, size, parts.size))
        what = f"get s3://{bucket}/{key}"

        async def fetch(start: int) -> memoryview:
            end = min(start + parts.size, size)

            async def read() -> memoryview:
                data = await self.client.get_range(
                    bucket, key, start, end, if_match=etag, version_id=version_id
                )
                if len(data) != end - start:
                    raise ItemError(f"{what}: got {len(data)} bytes of {end - start}", retryable=True)
                return memoryview(data)

            return await self._retrying(read, what)

        pending = collections.deque(
            asyncio.ensure_future(fetch(start)) for start in itertools.islice(starts, max(1, parts.in_flight))
        )
        written = 0
        try:
            while pending:
                data = await pending.popleft()
                following = next(starts, None)
                if following is not None:
                    pending.append(asyncio.ensure_future(fetch(following)))
                if check is None:
                    await write(data)
                elif len(data) > MiB:  # hashed by a thread while it is written
                    await asyncio.gather(write(data), asyncio.to_thread(check.update, data))
                else:
                    check.update(data)
                    await write(data)
                written += len(data)
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if (
            check is not None
            and not check.matches()
            and await self._mismatch_holds(check, bucket, key, etag, size)
        ):
            raise BytesMismatch(
                f"{what}: the bytes received do not match {check.what}: they changed on the way "
                "(what was written is not the object)"
            )
        return written

    async def stream_check_of(
        self, bucket: str, key: str, head: dict[str, str], size: int, version_id: str = ""
    ) -> Check | None:
        """How a stream of the object is checked as it passes (`verify.stream_check`): under a
        multipart MD5 ETag, with its parts' size as a HEAD of part 1 tells it."""
        count = md5_parts(head.get("etag", ""))
        if not count or checksums.full_object(head) or encrypted(head):
            return stream_check(head)
        first = await self.head(bucket, key, 1, version_id=version_id)
        part_size = int(first.get("content-length") or 0)
        return stream_check(head, part_size if part_size and -(-size // part_size) == count else None)

    async def _mismatch_holds(self, check: Check, bucket: str, key: str, etag: str, size: int) -> bool:
        """Whether a check that failed says the bytes are wrong: a checksum's always, an ETag's
        only where its parts were as even as the stream's hashing took them (`_parts_are_even`)."""
        return not isinstance(check, StreamCheck) or await self._parts_are_even(bucket, key, etag, size)

    async def _parts_are_even(self, bucket: str, key: str, etag: str, size: int) -> bool:
        """Whether a stream's check could hold (a single-part ETag, or parts all the size of the
        first but the last): parts of uneven sizes, rare, are not hashed as they passed."""
        count = etag_parts(etag)
        if count < 2:
            return True
        sizes = await self.downloads.told_part_sizes(bucket, key, count, size)
        return bool(sizes) and all(each == sizes[0] for each in sizes[:-1]) and sizes[-1] <= sizes[0]

    async def get_object(self, bucket: str, key: str, *, if_match: str = "") -> bytes:
        """A whole object's bytes (one that fits in memory; of that ETag, with `if_match`),
        retried, and checked as a download is (`verify.body_matches`): asked for in checksum
        mode, by the full-object checksum its answer carries, else its MD5 ETag. Bytes that
        contradict it are asked for again, then fail (BytesMismatch)."""
        what = f"get s3://{bucket}/{key}"

        async def get() -> bytes:
            headers, body = await self.client.get_object(bucket, key, if_match=if_match, checksums=True)
            matches, by = body_matches(headers, body) if self.verify else (None, "")
            if matches is False:
                message = f"{what}: the bytes received do not match {by}: they changed on the way"
                raise BytesMismatch(message, retryable=True)
            return body

        return await self._retrying(get, what)

    async def get_range(self, bucket: str, key: str, start: int, end: int, *, if_match: str = "") -> bytes:
        """Bytes [start, end) of the object (fewer when it ends sooner; of that ETag, with
        `if_match`: 412 otherwise), retried."""
        return await self._retrying(
            lambda: self.client.get_range(bucket, key, start, end, if_match=if_match),
            f"get s3://{bucket}/{key}",
        )

    # ---- file-like access (sync: readers and writers on the signed client) ------------------------
    def _on_background(self) -> Storage:
        """The storage of this one's file-like readers and writers, on their event loop
        (`reader.BACKGROUND`): theirs is a loop of its own, since their callers block."""
        if self._reading is None:
            retry = Retrier(self.retry.policy)
            self._reading = Storage(
                self.settings, connections=self.connections, retry=retry, verify=self.verify
            )
        return self._reading

    def open_reader(
        self, bucket: str, key: str, *, buffer_size: int, size: int | None = None, etag: str = ""
    ) -> Any:
        """A file-like reader (read, readinto, seek, tell): `buffer_size` bytes for a read
        somewhere new, the next blocks fetched ahead when reading goes on (`reader.py`); `size`
        and `etag` known already spare it a HEAD. Its requests go through a storage of its own,
        on the readers' event loop (`reader.BACKGROUND`), one for every reader of this one."""
        reader = ObjectReader(self._on_background(), bucket, key, block=buffer_size, size=size, etag=etag)
        return io.BufferedReader(reader, buffer_size)

    def open_writer(
        self,
        bucket: str,
        key: str,
        attributes: Attributes,
        *,
        buffer_size: int,
        on_close: Callable[[], None] | None = None,
    ) -> Any:
        """A file-like writer that uploads `buffer_size` parts as they fill (multipart above one
        part) and completes on close (then calls `on_close`); leaving its `with` block by an
        exception aborts it (`writer.py`: `pipe`'s upload, on the readers' event loop)."""
        _need_addressable(key)
        parts = Parts(size=buffer_size, in_flight=WRITER_PARTS_IN_FLIGHT)
        return ObjectWriter(self._on_background(), bucket, key, attributes, parts, on_close=on_close)

    # ---- buckets -------------------------------------------------------------------------------
    async def list_buckets(self) -> list[BucketInfo]:
        return await self._retrying(self.client.list_buckets, "list buckets")

    async def bucket_exists(self, bucket: str) -> bool:
        """Whether the bucket is there: what a HEAD of a key's 404 cannot say (it has no body)."""
        try:
            await self._retrying(lambda: self.client.head_bucket(bucket), f"head bucket s3://{bucket}")
        except S3Error as error:
            if error.status == 404:
                return False
            raise
        return True

    async def make_bucket(self, bucket: str, region: str) -> None:
        await self._retrying(lambda: self.client.create_bucket(bucket, region), f"make bucket s3://{bucket}")

    async def remove_bucket(self, bucket: str) -> None:
        await self._retrying(lambda: self.client.delete_bucket(bucket), f"remove bucket s3://{bucket}")

    async def versioning(self, bucket: str) -> str:
        """The bucket's versioning: "Enabled", "Suspended", or "" (never turned on)."""
        return await self._retrying(
            lambda: self.client.get_bucket_versioning(bucket), f"get versioning of s3://{bucket}"
        )

    async def set_versioning(self, bucket: str, status: str) -> None:
        await self._retrying(
            lambda: self.client.put_bucket_versioning(bucket, status), f"set versioning of s3://{bucket}"
        )

    async def copy_version(
        self, source_bucket: str, source_key: str, version_id: str, bucket: str, key: str
    ) -> None:
        """One version of an object copied by the service (CopyObject, so up to 5 GiB), with
        the attributes it had: onto its own key, it is the current version again (the older
        ones stay), as `aws s3api copy-object --copy-source b/k?versionId=V` restores one."""
        what = f"copy s3://{source_bucket}/{source_key} ({version_id})"
        await self._retrying(
            lambda: self.client.copy_object(
                source_bucket, source_key, bucket, key, source_version=version_id
            ),
            what,
        )

    # ---- deleting ------------------------------------------------------------------------------
    async def delete_many(
        self, bucket: str, keys: list[str], etags: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Delete `keys` (any number, 1,000 per DeleteObjects); returns {key: reason} for those
        that could not be deleted. A DeleteObjects answer can be "200 OK" and still refuse keys
        (AccessDenied, SlowDown, InternalError): the retryable ones are sent again. A key in
        `etags` is deleted only while it has that ETag, where the service takes the condition
        (refused, "PreconditionFailed", otherwise; a server that ignores it deletes: mv asks
        first whether it does, `commands.deletes.BatchDeleter`)."""
        failed = await self.delete_versions(bucket, [(key, "") for key in keys], etags)
        return {key: reason for (key, _), reason in failed.items()}

    async def delete_object(self, bucket: str, key: str, etag: str = "") -> None:
        """Delete one key, retried; with `etag`, only while it has that ETag, where the service
        takes the condition on a DeleteObject (412 otherwise)."""
        await self._retrying(
            partial(self.client.delete_object, bucket, key, etag=etag), f"delete s3://{bucket}/{key}"
        )

    async def delete_versions(
        self, bucket: str, entries: list[tuple[str, str]], etags: dict[str, str] | None = None
    ) -> dict[tuple[str, str], str]:
        """`delete_many` of (key, version id) entries: that version of the key, or with "" the
        key itself (a delete marker, where the bucket keeps versions)."""
        failed: dict[tuple[str, str], str] = {}
        etags = etags or {}
        for key, version in (
            entry for entry in entries if not xml_safe(entry[0])
        ):  # no XML body can name them
            try:
                await self._retrying(
                    partial(
                        self.client.delete_object, bucket, key, version_id=version, etag=etags.get(key, "")
                    ),
                    f"delete s3://{bucket}/{key}",
                )
            except ItemError as exc:
                failed[key, version] = str(exc)
        batched = [entry for entry in entries if xml_safe(entry[0])]
        for start in range(0, len(batched), MAX_KEYS_PER_DELETE):
            batch = batched[start : start + MAX_KEYS_PER_DELETE]
            failed.update(await self._delete_batch(bucket, batch, etags))
        return failed

    async def _delete_batch(
        self, bucket: str, entries: list[tuple[str, str]], etags: dict[str, str]
    ) -> dict[tuple[str, str], str]:
        failed: dict[tuple[str, str], str] = {}
        policy = self.retry.policy
        attempt = 0
        while entries:
            conditions = {key: etags[key] for key, _ in entries if key in etags}
            try:
                errors = await self._retrying(
                    partial(self.client.delete_objects, bucket, entries, conditions),
                    f"delete {len(entries)} keys in s3://{bucket}",
                )
            except ItemError as exc:  # the request as a whole failed, after its own retries
                return failed | dict.fromkeys(entries, str(exc))
            attempt += 1
            again = []
            for entry, code, message in errors:
                status = 500 if code in S3Error.RETRYABLE_CODES else 400
                error = S3Error(status, code, message, f"delete s3://{bucket}/{entry[0]}")
                if error.retryable and attempt < policy.max_attempts:
                    again.append(entry)
                    self.meter.retried(error)
                else:
                    failed[entry] = str(error)
            entries = again
            if entries:
                await asyncio.sleep(policy.delay(attempt))
        return failed

    async def list_uploads(self, bucket: str, prefix: str = "") -> AsyncIterator[list[UploadInfo]]:
        """The multipart uploads in progress under `prefix`, a page at a time. MinIO reads the
        prefix as one exact key, so when it finds nothing the whole bucket's are listed and
        filtered here."""
        found = False
        async for page in self._upload_pages(bucket, prefix):
            found = found or bool(page)
            yield page
        if prefix and not found:
            async for page in self._upload_pages(bucket, ""):
                yield [upload for upload in page if upload.key.startswith(prefix)]

    async def _upload_pages(self, bucket: str, prefix: str) -> AsyncIterator[list[UploadInfo]]:
        listing = partial(self.client.list_multipart_uploads, bucket, prefix)
        async for page in self._marker_pages(listing, f"list multipart uploads in s3://{bucket}/{prefix}"):
            yield page

    async def _marker_pages(
        self, listing: Callable[[tuple[str, str] | None], Awaitable[Any]], what: str
    ) -> AsyncIterator[Any]:
        """The entries of a listing that goes on from a pair of markers (ListMultipartUploads,
        ListObjectVersions), a page at a time, each page retried; stopped where it does not
        advance (markers that come round again, `s3xml.Advance`)."""
        markers: tuple[str, str] | None = None
        repeats, advance = Repeats(), Advance(what)
        while True:
            page = await self._retrying(partial(listing, markers), what, job_wide=True)
            entries = page[0]
            advance.page(
                (entries[0], entries[-1], len(entries)) if entries else None, page.next_markers is not None
            )
            yield entries
            if page.next_markers is None:
                return
            if page.next_markers == markers or repeats.seen(page.next_markers):
                raise repeated(what)
            markers = page.next_markers

    async def abort_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """Abort a multipart upload (one already gone is not an error)."""
        await self._retrying(
            lambda: self.client.abort_multipart_upload(bucket, key, upload_id),
            f"abort an upload of s3://{bucket}/{key}",
        )


def _need_addressable(key: str) -> None:
    if not obstore_can_address(key):
        raise UsageError(f"{key!r}: this key cannot be opened as a file (use get() or put())")
