"""The storage seam: what every job does with object storage, in verbs (list, head, download,
upload, copy, delete many, read a range), for one worker.

Behind each verb it picks the transport: obstore (Rust, GIL-free) moves object bytes; s3bulk's
own signed client (`stores.s3`) lists with raw StartAfter control, copies across buckets, runs
multipart uploads whose ids must be known (`stores.multipart`), and handles the keys obstore's
path model cannot address. Every request is counted by kind, every error classified
(errors.classify) and retried with the one policy (`stores.retry`), so a throttle on any of them
(a listing page, a DeleteObjects, a part) reaches the engine's adaptive limit.

The local side of a transfer is here too: a download lands atomically (a temporary file beside
the target, then a rename that never replaces a file someone else created; `landing.py`).
Object attributes travel as `Attributes` (`attributes.py`): uploads and copies send what it
says, through obstore when it can carry them, else through the signed client.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import dataclasses
import io
import itertools
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, S3Error, UsageError
from s3bulk._lazy import lazy_module
from s3bulk._stores import checksums, native_http
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.digests import Md5Lanes
from s3bulk._stores.etags import (
    StreamCheck,
    etag_matches_bytes,
    etag_matches_file,
    etag_matches_layout,
    likeliest_part_size,
    md5_parts,
    single_part_md5,
)
from s3bulk._stores.gets import Gets, Landing
from s3bulk._stores.landing import (
    directory_clash,
    disk_full,
    file_in_the_way,
    land,
    refused_write,
    sweep_stale_parts,
    temporary_path,
)
from s3bulk._stores.multipart import (
    UploadHooks,
    copy_attributes,
    copy_in_parts,
    etag_parts,
    parts_group,
    relay_in_parts,
    source_part_size,
    upload_file,
    upload_stream,
    version_of,
)
from s3bulk._stores.objects import ObjectReader, obstore_can_address, store_for
from s3bulk._stores.retry import Meter, Retrier, done_with_requests
from s3bulk._stores.s3 import S3Client, quote_key
from s3bulk._stores.s3xml import BucketInfo, ListPage, Repeats, UploadInfo, VersionInfo, repeated, xml_safe

if TYPE_CHECKING:
    import obstore
else:
    obstore = lazy_module("obstore")  # most jobs never call it: ~6 MiB and ~30 ms saved

T = TypeVar("T")
MiB = 1024**2
MAX_KEYS_PER_DELETE = 1000
# Bodies up to this size arrive whole, in one ranged GET, and are written with one call.
# Streaming a 1 MiB body in 256 KiB chunks costs an await and a Rust-to-Python crossing per
# chunk; measured on 400 x 1 MiB downloads (async engine, 3 alternating runs): 1.19 -> 1.06 user
# CPU s. (Under a single-part ETag or none, the native part streams them: `bytes_held`.)
# Larger ones are written as they come by the native part's writer thread (`_fetch_streamed`):
# above the multipart threshold in ranges of the part size, each at its offset.
WHOLE_BODY_MAX = 8 * MiB
# Bodies obstore fetched (under a multipart ETag) up to this size are written by the event loop
# itself; larger ones by a thread, so the loop keeps dispatching while the kernel copies them (a
# 1 MiB write takes ~0.3 ms here).
SMALL_BODY_MAX = 256 * 1024
# Local files from this size are checked in SIMD lanes with others (digests.py); a smaller one
# costs less to hash at once (4 KiB: 5 us) than to gather. Downloads are hashed in lanes by the
# native batch GETs (gets.py, native/src/gets.rs).
LANES_MIN = 16 * 1024
# Downloads from this size up to WHOLE_BODY_MAX, under a single-part ETag or none, are streamed
# into their files chunk by chunk by the native part's writer thread (native/src/gets.rs:
# STREAM_MIN, the same size), whose queue holds at most 4 MiB of chunks per bucket.
STREAMED_MIN = 16 * 1024
# What one of those is counted in the byte budget. It holds its connection's read buffers (up to
# 128 KiB each: native/vendor/reqwest/PATCHED.md) and its chunks waiting for the writer, not its
# whole body: counted at 512 KiB, a 16 MiB budget admits 32 GETs of 1 MiB (bench/RESULTS.md,
# issue 19's twelfth and sixteenth sessions: 2,000 x 1 MiB peaks at ~72 MiB); 16 were too few at
# 20 ms RTT.
STREAMED_HELD = 512 * 1024


@dataclass(frozen=True)
class Parts:
    """How large objects move: in parts of `size` bytes, `in_flight` at once, above `threshold`."""

    size: int = 8 * MiB
    in_flight: int = 8
    threshold: int = 64 * MiB


def bytes_held(key: str, size: int, etag: str, parts: Parts) -> int:
    """What downloading this object holds in memory while it runs, for the byte budget: from
    `WHOLE_BODY_MAX`, its GETs in flight, each streamed into the file (`STREAMED_HELD` each: one,
    or above the threshold its ranges in flight); `STREAMED_HELD` when the native part streams
    it into its file (`_fetch_into` and `_fetch_whole` pick the way the same way); else (the
    signed client's, say) its size."""
    if not obstore_can_address(key):
        return size
    if size > WHOLE_BODY_MAX:
        ranges = min(parts.in_flight, -(-size // parts.size)) if size > parts.threshold else 1
        return STREAMED_HELD * ranges
    streamed = size >= STREAMED_MIN and (not etag or single_part_md5(etag) is not None)
    return min(size, STREAMED_HELD) if streamed else size


def _spans(size: int, parts: Parts, part_size: int | None) -> Iterator[tuple[int, int]]:
    """The byte ranges a download from `WHOLE_BODY_MAX` asks for, in the order it asks, made
    as they are asked for (a listing that says 5 TiB made 655,360 tasks up front, 1.4 GB in
    15 s): one GET up to the threshold (one byte past the size: `Storage._fetch_streamed`);
    above it, ranges of `parts.size`, and where the object's parts (`part_size`, hashed as they
    come) are larger, the first range of each part, then the second of each, ... so that the
    parts come, and are hashed, side by side."""
    if size <= parts.threshold:
        yield 0, size + 1
        return
    step = parts.size
    if not part_size or part_size <= step:
        for start in range(0, size, step):
            yield start, min(start + step, size)
        return
    for offset in range(0, part_size, step):  # the n-th range of every part, then the next
        for first in range(0, size, part_size):
            start, end = first + offset, min(first + part_size, size)
            if start < end:
                yield start, min(start + step, end)


def upload_held(key: str, size: int, parts: Parts) -> int:
    """What uploading this file holds in memory while it runs, for the byte budget: a small one
    is read whole; a large one's parts in flight are read from the file as they are sent, each
    holding a chunk or two (`STREAMED_HELD`), except under a key only aiohttp can send (a dot
    segment), whose parts are read whole (`http.SignedHttp.send`)."""
    if size <= parts.threshold:
        return size
    streamed = native_http.sendable(f"/{quote_key(key)}")
    return (STREAMED_HELD if streamed else parts.size) * parts.in_flight


class _Local(ItemError):
    """A failure of this machine's (a full disk) inside a request that is retried: it is not
    retried, and `cause` goes on as itself."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause), retryable=False)
        self.cause = cause


class Downloaded(NamedTuple):
    """What a download wrote, and whether its bytes were checked (against the object's ETag or
    a checksum it carries; not when neither can tell, as for an SSE-KMS object without one)."""

    written: int
    verified: bool | None  # None: not asked to (--ignore-checksum)


@dataclass(slots=True)
class _Place:
    """Where a download is written (`temporary`) and where it lands, and whether it is there
    already: the native GETs land a small file themselves, right after writing it (`gets.py`
    says why)."""

    temporary: str
    target: str
    existed: bool
    landed: bool = False


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
        self.verify = verify  # downloads are checked against their ETag (--ignore-checksum: off)
        self.retry = retry or Retrier()
        self.meter: Meter = self.retry.meter
        self.hooks = hooks or UploadHooks()
        self.connections = connections
        self.client = S3Client(settings, max_connections=connections, meter=self.meter)
        self._stores: dict[str, Any] = {}
        self._gets: dict[str, Gets] = {}  # whole-body GETs handed to the native part in batches, per bucket
        self._made: set[str] = set()  # directories made (and swept) by this worker's downloads
        self._temporaries = 0
        self._lanes = Md5Lanes()  # local files' MD5s (check, sync --checksum), hashed side by side

    async def close(self) -> None:
        await self.client.close()
        self._stores.clear()
        for gets in self._gets.values():
            gets.close()
        self._gets.clear()

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

    async def download(
        self, bucket: str, key: str, target: str, size: int, mtime: float, parts: Parts, etag: str = ""
    ) -> Downloaded:
        """The object into the file `target`, which is either absent or complete afterwards, never
        half-written: fetched into a temporary file beside it (again from the start if a fetch
        fails), size checked, checked against its `etag` or its checksum (`_fetch`), given the
        object's time, then landed (landing.py). Says whether its bytes could be checked."""
        parent = os.path.dirname(target) or "."  # "k" and "./k" land in the working directory
        try:
            self._make_parent(parent)
        except OSError as exc:
            raise refused_write(exc, parent) or exc from None
        existed = _kind(target)
        if existed == "directory":  # made for keys below this one: no need to fetch it to know
            raise directory_clash(target)
        self._temporaries += 1
        temporary = temporary_path(target, self._temporaries)
        place = _Place(temporary, target, existed=existed is not None)
        landed = False
        try:
            fetched = await self._retrying(
                lambda: self._fetch(bucket, key, place, size, parts, parent, mtime, etag),
                f"get s3://{bucket}/{key}",
            )
            if not place.landed:
                land(temporary, target, existed=place.existed)
            landed = True
        except OSError as exc:
            raise disk_full(exc, parent) or refused_write(exc, parent) or exc from None
        finally:
            if not landed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)  # what is left of the fetch
        return fetched

    def _make_parent(self, parent: str) -> None:
        if parent not in self._made:
            try:
                os.makedirs(parent, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise file_in_the_way(parent) or ItemError(
                    f"cannot create {parent}", retryable=False
                ) from None
            sweep_stale_parts(parent)  # left by an earlier run killed outright
            if len(self._made) > 100_000:
                self._made.clear()
            self._made.add(parent)

    async def _fetch(
        self,
        bucket: str,
        key: str,
        place: _Place,
        size: int,
        parts: Parts,
        parent: str,
        mtime: float,
        etag: str,
    ) -> Downloaded:
        """One attempt at the object's bytes into `place.temporary`, with the object's time,
        checked against its ETag; a full disk stops the job."""
        try:
            written, matches = await self._fetch_into(bucket, key, place, size, parts, mtime, etag)
        except OSError as exc:
            raise disk_full(exc, parent) or refused_write(exc, parent) or exc from None
        if matches is False:
            matches = await self._second_opinion(bucket, key, place.temporary, etag, size)
            if matches is False:
                raise changed_on_the_way(bucket, key, "its ETag or checksum")
        return Downloaded(written, (matches is True) if self.verify else None)

    async def _second_opinion(
        self, bucket: str, key: str, temporary: str, etag: str, size: int
    ) -> bool | None:
        """Bytes and ETag disagree, which is rare but for objects whose ETag is no MD5 though it
        looks like one (SSE-KMS, SSE-C), or whose parts no guessed part size gives: a HEAD says.
        A full-object checksum the service keeps (x-amz-checksum-crc64nvme, -crc32c, -crc32,
        -sha256, -sha1: `checksums.file_matches`) then decides; an encrypted object without one
        is taken as it came, unverified (None); a multipart one is hashed again by the sizes of
        its parts, as the service tells them."""
        head = await self.head(bucket, key, checksums=True)
        found = await asyncio.to_thread(checksums.file_matches, temporary, head)
        if found is not None:
            return found
        kms = head.get("x-amz-server-side-encryption", "").startswith("aws:kms")
        if kms or head.get("x-amz-server-side-encryption-customer-algorithm"):
            return None
        sizes = await self._told_part_sizes(bucket, key, etag_parts(etag), size)
        return bool(sizes) and await asyncio.to_thread(etag_matches_layout, temporary, etag, sizes) is True

    async def _full_object_crc(self, bucket: str, key: str) -> tuple[str, str] | None:
        """(algorithm, value) of the object's full-object CRC, as a HEAD in checksum mode says
        (None: it carries none, or a SHA, whose ranges' values do not combine)."""
        found = checksums.full_object(await self.head(bucket, key, checksums=True))
        return found if found and checksums.is_crc(found[0]) else None

    async def _told_part_sizes(self, bucket: str, key: str, count: int, size: int) -> list[int]:
        """The sizes of a multipart object's `count` parts, a HEAD of each (?partNumber=); none
        when the service does not tell them (one that ignores partNumber sends the whole size,
        one that refuses it an error)."""
        if count < 2:
            return []
        heads = asyncio.Semaphore(16)

        async def part_size(number: int) -> int:
            async with heads:
                return int((await self.head(bucket, key, number)).get("content-length") or 0)

        try:
            sizes = list(await asyncio.gather(*(part_size(number) for number in range(1, count + 1))))
        except ItemError:  # an S3Error too
            return []
        return sizes if all(sizes) and sum(sizes) == size else []

    async def _fetch_into(
        self, bucket: str, key: str, place: _Place, size: int, parts: Parts, mtime: float, etag: str
    ) -> tuple[int, bool | None]:
        """The object's bytes into `place.temporary` (whole, streamed, or in ranges), and whether
        they match `etag` (None: no ETag, or one that cannot tell; `verify` off: never asked); a
        small one may have landed already."""
        temporary = place.temporary
        streamed = size > WHOLE_BODY_MAX and obstore_can_address(key)
        if not streamed:  # streamed GETs wait for their own bytes (_fetch_streamed)
            await self.retry.pace_bytes(size)
        etag = etag if self.verify else ""
        matches: bool | None = None
        if not obstore_can_address(key):
            _, _, data = await self.client.request("GET", "GET", bucket, key, what=f"get s3://{bucket}/{key}")
            written, matches = await write_in_thread(_write_checked, temporary, data, mtime, etag, parts.size)
        elif streamed:
            written, known, matches = await self._fetch_streamed(bucket, key, temporary, size, parts, etag)
            if matches is False and written == size:
                raise changed_on_the_way(bucket, key, "the checksum it came with")
            _set_time(temporary, mtime)
            if etag and matches is None:  # hashed as it came (`known`), or read back by a thread
                matches = await asyncio.to_thread(etag_matches_file, temporary, etag, size, parts.size, known)
        elif size:
            written, matches = await self._fetch_whole(bucket, key, place, size, parts, mtime, etag)
        else:  # empty: no range to ask (a service answers a range of nothing with 416)
            body = await self.client.get_object(bucket, key)
            written = _write_file(temporary, body, mtime)
            if etag:
                matches = etag_matches_bytes(memoryview(body), etag, parts.size)
        if written != size:
            raise ItemError(
                f"got {written:,} bytes of an object listed at {size:,}: it changed since, or the "
                "connection was cut",
                retryable=True,
            )
        return written, matches

    async def _fetch_whole(
        self, bucket: str, key: str, place: _Place, size: int, parts: Parts, mtime: float, etag: str
    ) -> tuple[int, bool | None]:
        """`_fetch_into` for a body of up to `WHOLE_BODY_MAX`, in one ranged GET that asks for one
        byte more than the listed size: an object that grew since the listing comes back longer
        and fails the size check, as a whole GET would (a service ends a range at the end).
        Under a single-part ETag, or none, the native batch GETs fetch, write, hash and land it
        (`_get_native`). Under a multipart ETag (parts of at most 8 MiB, rare) the signed
        client fetches it whole, and it is hashed here."""
        if not etag or single_part_md5(etag):
            return await self._get_native(bucket, key, place, size, mtime, etag)
        body = await self.client.get_range(bucket, key, 0, size + 1)
        if size <= SMALL_BODY_MAX:
            written = _write_file(place.temporary, body, mtime)
        else:  # written by a thread: the loop goes on with other items
            written = await write_in_thread(_write_file, place.temporary, body, mtime)
        if written != size:  # the wrong size fails on its own (_fetch_into)
            return written, None
        if size <= SMALL_BODY_MAX:
            return written, etag_matches_bytes(memoryview(body), etag, parts.size)
        return written, await asyncio.to_thread(etag_matches_bytes, memoryview(body), etag, parts.size)

    async def _get_native(
        self, bucket: str, key: str, place: _Place, size: int, mtime: float, etag: str
    ) -> tuple[int, bool | None]:
        """`_fetch_whole` under a single-part ETag (or none): fetched, written, hashed and, when
        right, landed by the native part, many per hand-off (`gets.py`); from 16 KiB streamed to
        a writer thread of its own, and hashed in SIMD lanes with the bodies that ended with it."""
        gets = self._native_gets(bucket)
        self.meter.requests["GET"] += 1
        expected = single_part_md5(etag)
        landing = Landing(place.target, place.existed, size, expected)
        got = await gets.get_into(
            key,
            size + 1,
            place.temporary,
            mtime,
            hash=expected is not None,
            check=self.verify,
            landing=landing,
        )
        place.landed = got.landed
        if got.written != size:  # the wrong size fails on its own (_fetch_into)
            return got.written, None
        if got.checked is False:  # the full-object checksum its answer carried: no second opinion
            raise changed_on_the_way(bucket, key, "the checksum it came with")
        if got.checked:
            return got.written, True
        return got.written, None if expected is None else got.md5 == expected

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
            data = await asyncio.to_thread(_read_file, path, size + 1)  # a longer file differs
            return len(data) == size and await lane.md5(data) == expected

    def _native_gets(self, bucket: str) -> Gets:
        gets = self._gets.get(bucket)
        if gets is None:
            gets = self._gets[bucket] = Gets(self.client, bucket, max_connections=self.connections * 2)
        return gets

    async def _fetch_streamed(
        self, bucket: str, key: str, temporary: str, size: int, parts: Parts, etag: str
    ) -> tuple[int, tuple[int, list[bytes]] | None, bool | None]:
        """An object from `WHOLE_BODY_MAX` into `temporary`, written as it comes by the native
        part's writer thread (`gets.py`): above the threshold in ranges of `parts.size`,
        `parts.in_flight` at once, each at its offset, the first that fails stopping the others;
        below, in one GET of the whole object, read up to one byte past the listed size (an
        object that grew since fails the size check), in checksum mode: its bytes are checked by
        the full-object checksum its answer carries. Above, a HEAD asks for that checksum, and
        where it is a CRC, those of the ranges combine into the one the file is checked by.
        Without one, and with an `etag`, the file is hashed in the parts it likely has as it is
        written (native/src/parthash.rs). Returns the bytes written, (that part size, the MD5 of
        each part) when all came, and whether the bytes match the checksum (None: none came)."""
        gets = self._native_gets(bucket)
        crc = await self._full_object_crc(bucket, key) if self.verify and size > parts.threshold else None
        part_size = likeliest_part_size(etag, size, parts.size) if etag and not crc else None
        with open(temporary, "wb"):  # made here; the GETs write into it
            pass
        hashed = gets.hash_parts(temporary, size, part_size) if part_size else None
        spans = _spans(size, parts, part_size)
        written = 0
        checked: bool | None = None
        ranges: dict[int, tuple[str, int]] = {}  # start -> (the range's CRC, its length)
        what = f"get s3://{bucket}/{key}"

        async def fetch(start: int, end: int) -> int:
            nonlocal checked
            await self.retry.pace_request()  # each range is a request of its own
            self.meter.requests["GET"] += 1
            try:
                if size > parts.threshold:
                    got = await gets.get_range_into(
                        key, start, end, temporary, hashed, crc[0] if crc else None
                    )
                    if got.checksum is not None:
                        ranges[start] = (base64.b64encode(got.checksum).decode(), got.written)
                    return got.written
                got = await gets.get_into(
                    key, end, temporary, 0.0, hash=False, check=self.verify, hashed=hashed
                )
                checked = got.checked
                return got.written
            except OSError as exc:  # this machine's (a full disk): not the request's to retry
                raise _Local(exc) from None

        async def lane() -> None:
            """Ranges one after another, each retried alone: a link cut every 20 MB failed a
            300 MiB download whole, six times over, where each range would have come."""
            nonlocal written
            for start, end in spans:  # shared by the lanes: each takes the next range
                await self.retry.pace_bytes(min(end, size) - start)
                try:
                    got = await self._retrying(partial(fetch, start, end), f"{what} from byte {start:,}")
                except _Local as exc:
                    raise exc.cause from None
                except ItemError as exc:  # its own attempts are spent: not the download's to retry
                    exc.retryable = False
                    raise
                written += got  # after the await: lanes add side by side

        try:
            async with parts_group() as group:
                for _ in range(max(1, parts.in_flight)):
                    group.create_task(lane())
            if crc and written == size:
                algorithm, expected = crc
                combined = checksums.whole_object(algorithm, [ranges[start] for start in sorted(ranges)])
                return written, None, combined == expected
            if hashed is None or written != size or checked is not None:
                return written, None, checked
            digests = await gets.part_digests(hashed)
            hashed = None  # forgotten by the native part
            return written, (part_size, digests) if part_size and digests else None, None
        finally:
            if hashed is not None:
                gets.forget_parts(hashed)

    # ---- writing -------------------------------------------------------------------------------
    async def upload(self, path: str, bucket: str, key: str, attributes: Attributes, parts: Parts) -> int:
        """A local file to an object; a large one in parts (each retried alone), its upload id
        told to `hooks` so that nothing is ever left behind. Returns the bytes sent."""
        size = os.stat(path).st_size  # the file may have changed since it was listed
        if not os.access(path, os.R_OK):
            raise ItemError(f"cannot read local file: permission denied: {path}", retryable=False)
        if size <= parts.threshold:  # parts wait for their own bytes (multipart.upload_file)
            await self.retry.pace_bytes(size)
        if size > parts.threshold:
            await upload_file(
                self.client,
                bucket,
                key,
                path,
                size,
                part_size=parts.size,
                concurrency=parts.in_flight,
                headers=attributes.headers(),
                hooks=self.hooks,
                retry=self.retry,
                pace_bytes=self.retry.pace_bytes,
            )
        else:
            return await self._retrying(
                lambda: self._put_file(bucket, key, path, size, attributes), f"put s3://{bucket}/{key}"
            )
        return size

    async def _put_file(self, bucket: str, key: str, path: str, size: int, attributes: Attributes) -> int:
        """The file read whole, as one version of itself (`read_unchanged`), then sent by the
        signed client (its SHA-256 signed: the service refuses a body changed on the way)."""
        body = read_unchanged(path) if size <= 2 * MiB else await asyncio.to_thread(read_unchanged, path)
        await self.client.put_object(bucket, key, body, attributes.headers())
        return len(body)

    async def put_bytes(
        self, bucket: str, key: str, body: bytes, attributes: Attributes | None = None
    ) -> None:
        """A small object from memory (probes, journal parts, map's results), retried."""
        headers = (attributes or NO_ATTRIBUTES).headers()
        await self._retrying(
            lambda: self.client.put_object(bucket, key, body, headers), f"put s3://{bucket}/{key}"
        )

    async def copy(
        self,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        *,
        size: int,
        etag: str,
        parts: Parts,
        keep_layout: bool = False,
        attributes: Attributes = NO_ATTRIBUTES,
    ) -> None:
        """A server-side copy (no bytes pass here), keeping the source's attributes but those
        `attributes` sets. Above the threshold, or for a multipart source when `keep_layout`, it
        copies in parts, in the source's own part layout where it can be found, so both objects
        have the same ETag."""
        what = f"copy s3://{source_bucket}/{source_key}"
        if size > parts.threshold or (keep_layout and etag_parts(etag) > 0):
            await self._copy_in_parts(source_bucket, source_key, bucket, key, size, etag, parts, attributes)
        else:  # the signed client's, which reads the answer: a 200 OK can carry an <Error>
            headers = attributes.copy_headers()
            try:
                await self._retrying(
                    lambda: self.client.copy_object(source_bucket, source_key, bucket, key, headers), what
                )
            except S3Error as exc:
                if not (size == 0 and key.endswith("/") and exc.code == "DirectoryObjectContainsData"):
                    raise
                await self._put_marker(source_bucket, source_key, bucket, key, attributes)

    async def _put_marker(
        self, source_bucket: str, source_key: str, bucket: str, key: str, attributes: Attributes
    ) -> None:
        """An empty 'dir/' marker written anew with its source's attributes: a server that keeps
        such keys as directories (Versity's gateway) refuses to CopyObject one, as if a copy
        could carry data into a directory, but takes a PUT of nothing."""
        head = await self.head(source_bucket, source_key)
        kept = await self.retry(lambda: copy_attributes(self.client, source_bucket, source_key, head))
        headers = attributes.over_source(kept)
        what = f"put s3://{bucket}/{key}"
        await self._retrying(lambda: self.client.put_object(bucket, key, b"", headers), what)

    async def relay(
        self,
        source: Storage,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        *,
        size: int,
        parts: Parts,
        attributes: Attributes = NO_ATTRIBUTES,
    ) -> int:
        """A copy from a place no server-side copy reaches (another endpoint or account, read
        with `source`'s settings): the bytes pass through here, a whole small object or a part
        at a time (memory: parts in flight x part size), and the new object keeps the source's
        attributes (Content-*, metadata, tags) but those `attributes` sets, as a copy does."""
        head = await source.head(source_bucket, source_key)
        size = int(head.get("content-length") or size)
        etag = head.get("etag", "")
        kept = await source.retry(lambda: copy_attributes(source.client, source_bucket, source_key, head))
        headers = attributes.over_source(kept)
        what = f"copy s3://{source_bucket}/{source_key}"

        async def fetch(start: int, end: int) -> bytes:
            await self.retry.pace_bytes(end - start)
            return await source._retrying(
                lambda: source.client.get_range(source_bucket, source_key, start, end, if_match=etag), what
            )

        if size > parts.threshold:
            await relay_in_parts(
                self.client,
                fetch,
                bucket,
                key,
                size,
                part_size=parts.size,
                concurrency=parts.in_flight,
                headers=headers,
                hooks=self.hooks,
                retry=self.retry,
            )
        else:
            body = await fetch(0, size) if size else b""
            await self._retrying(lambda: self.client.put_object(bucket, key, body, headers), what)
        return size

    async def _copy_in_parts(
        self,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        size: int,
        etag: str,
        parts: Parts,
        attributes: Attributes,
    ) -> None:
        client, retry = self.client, self.retry
        head = await self.head(source_bucket, source_key, of_source=True)
        size = int(head.get("content-length") or size)
        etag = head.get("etag", etag).strip('"')
        layout = await retry(lambda: source_part_size(client, source_bucket, source_key, size, etag))
        await copy_in_parts(
            client,
            source_bucket,
            source_key,
            bucket,
            key,
            size,
            part_size=layout or parts.size,
            concurrency=parts.in_flight,
            headers=attributes.over_source(
                await retry(lambda: copy_attributes(client, source_bucket, source_key, head))
            ),
            hooks=self.hooks,
            retry=retry,
        )

    async def upload_stream(
        self,
        read: Callable[[int], Awaitable[bytes]],
        bucket: str,
        key: str,
        attributes: Attributes,
        parts: Parts,
    ) -> int:
        """What `read(n)` gives until it gives b"" (stdin), in parts as it comes; returns bytes."""
        return await upload_stream(
            self.client,
            bucket,
            key,
            read,
            part_size=parts.size,
            concurrency=parts.in_flight,
            headers=attributes.headers(),
            hooks=self.hooks,
            retry=self.retry,
        )

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
        ETag so that a change midway fails the read rather than splicing two versions."""
        head = await self.head(bucket, key, version_id=version_id)
        size, etag = int(head.get("content-length") or 0), head.get("etag", "")
        check = await self._stream_check(bucket, key, head, size, version_id) if self.verify else None
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
        if check is not None and not check.matches() and await self._parts_are_even(bucket, key, etag, size):
            raise ItemError(
                f"{what}: the bytes received do not match its ETag: they changed on the way "
                "(what was written is not the object)",
                retryable=False,
            )
        return written

    async def _stream_check(
        self, bucket: str, key: str, head: dict[str, str], size: int, version_id: str
    ) -> StreamCheck | None:
        """How a stream of the object is checked as it passes: by its ETag, the MD5 of its bytes
        or of its parts' (their size told by a HEAD of part 1); None when the ETag is no MD5
        (SSE-KMS, SSE-C) or the parts' size does not give their number."""
        encrypted = head.get("x-amz-server-side-encryption", "").startswith("aws:kms") or head.get(
            "x-amz-server-side-encryption-customer-algorithm"
        )
        etag = head.get("etag", "")
        count = md5_parts(etag)
        if encrypted or count is None:
            return None
        if not count:
            return StreamCheck(etag)
        first = await self.head(bucket, key, 1, version_id=version_id)
        part_size = int(first.get("content-length") or 0)
        return StreamCheck(etag, part_size) if part_size and -(-size // part_size) == count else None

    async def _parts_are_even(self, bucket: str, key: str, etag: str, size: int) -> bool:
        """Whether a stream's check could hold (a single-part ETag, or parts all the size of the
        first but the last): parts of uneven sizes, rare, are not hashed as they passed."""
        count = etag_parts(etag)
        if count < 2:
            return True
        sizes = await self._told_part_sizes(bucket, key, count, size)
        return bool(sizes) and all(each == sizes[0] for each in sizes[:-1]) and sizes[-1] <= sizes[0]

    async def get_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object (fewer when it ends sooner), retried."""
        return await self._retrying(
            lambda: self.client.get_range(bucket, key, start, end), f"get s3://{bucket}/{key}"
        )

    # ---- file-like access (sync: obstore's buffered reader and writer) ---------------------------
    def open_reader(self, bucket: str, key: str, *, buffer_size: int) -> Any:
        """A file-like reader (read, readinto, seek, tell): `buffer_size` bytes for a read
        somewhere new, the rest of the object streamed when reading goes on (`ObjectReader`)."""
        _need_addressable(key)
        reader = ObjectReader(self._store(f"s3://{bucket}"), key, block=buffer_size)
        return io.BufferedReader(reader, buffer_size)

    def open_writer(self, bucket: str, key: str, attributes: Attributes, *, buffer_size: int) -> Any:
        """A file-like writer that uploads `buffer_size` parts as they fill (multipart above one
        part) and completes on close; leaving its `with` block by an exception aborts it."""
        _need_addressable(key)
        if dataclasses.replace(attributes, tags=()).needs_signed_client:  # obstore's writer takes tags
            raise UsageError(
                "open(..., 'wb') sets Content-* headers, metadata and tags; for a storage class, "
                "encryption, an ACL or Expires use put()"
            )
        return obstore.open_writer(
            self._store(f"s3://{bucket}"),
            key,
            attributes=attributes.obstore(),
            tags=dict(attributes.tags) or None,
            buffer_size=buffer_size,
        )

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

    # ---- deleting ------------------------------------------------------------------------------
    async def delete_many(self, bucket: str, keys: list[str]) -> dict[str, str]:
        """Delete `keys` (any number, 1,000 per DeleteObjects); returns {key: reason} for those
        that could not be deleted. A DeleteObjects answer can be "200 OK" and still refuse keys
        (AccessDenied, SlowDown, InternalError): the retryable ones are sent again."""
        failed = await self.delete_versions(bucket, [(key, "") for key in keys])
        return {key: reason for (key, _), reason in failed.items()}

    async def delete_versions(
        self, bucket: str, entries: list[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """`delete_many` of (key, version id) entries: that version of the key, or with "" the
        key itself (a delete marker, where the bucket keeps versions)."""
        failed: dict[tuple[str, str], str] = {}
        for key, version in (
            entry for entry in entries if not xml_safe(entry[0])
        ):  # no XML body can name them
            try:
                await self._retrying(
                    partial(self.client.delete_object, bucket, key, version_id=version),
                    f"delete s3://{bucket}/{key}",
                )
            except ItemError as exc:
                failed[key, version] = str(exc)
        batched = [entry for entry in entries if xml_safe(entry[0])]
        for start in range(0, len(batched), MAX_KEYS_PER_DELETE):
            failed.update(await self._delete_batch(bucket, batched[start : start + MAX_KEYS_PER_DELETE]))
        return failed

    async def _delete_batch(self, bucket: str, entries: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        failed: dict[tuple[str, str], str] = {}
        policy = self.retry.policy
        attempt = 0
        while entries:
            try:
                errors = await self._retrying(
                    partial(self.client.delete_objects, bucket, entries),
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
        ListObjectVersions), a page at a time, each page retried."""
        markers: tuple[str, str] | None = None
        repeats = Repeats()
        while True:
            page = await self._retrying(partial(listing, markers), what, job_wide=True)
            yield page[0]
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


def changed_on_the_way(bucket: str, key: str, checked_by: str) -> ItemError:
    """The bytes received are not the object's: fetched again."""
    return ItemError(
        f"the bytes received do not match s3://{bucket}/{key} ({checked_by}): changed on the way",
        retryable=True,
    )


async def write_in_thread(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a thread, awaited to its end even when the task is cancelled
    meanwhile, then cancelled: a thread cannot be stopped, and a temporary file it created after
    the download's cleanup ran was left behind (Ctrl-C of 2,000 x 1 MiB downloads left one to
    three `.s3bulk-part` files in 3 of 7 tries)."""
    future = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


def _write_checked(
    path: str, data: bytes | memoryview | obstore.Bytes, mtime: float, etag: str, part_size: int
) -> tuple[int, bool | None]:
    """`_write_file`, and whether the bytes match `etag` (None: not asked, or it cannot tell)."""
    written = _write_file(path, data, mtime)
    return written, etag_matches_bytes(memoryview(data), etag, part_size) if etag else None


def _write_file(path: str, data: bytes | memoryview | obstore.Bytes, mtime: float = 0.0) -> int:
    """`data` into a new file at `path`, given the time `mtime` (when not 0) before it is closed."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        written = os.write(descriptor, data)
        while written < len(data):  # a short write (a signal, a pipe-like filesystem): go on
            written += os.write(descriptor, memoryview(data)[written:])
        if mtime:
            os.utime(descriptor, (mtime, mtime))
    finally:
        os.close(descriptor)
    return written


def _set_time(path: str, mtime: float) -> None:
    if mtime:
        os.utime(path, (mtime, mtime))


def _kind(path: str) -> str | None:
    """ "directory" (or a link to one), "other", or None when nothing is at `path`: one lstat
    when nothing is there, as for most downloads."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            mode = os.stat(path).st_mode
    return "directory" if stat.S_ISDIR(mode) else "other"


def _need_addressable(key: str) -> None:
    if not obstore_can_address(key):
        raise UsageError(f"{key!r}: this key cannot be opened as a file (use get() or put())")


def read_unchanged(path: str) -> bytes:
    """The file's bytes, read whole, and known to be one version of it: a file written to while
    it is read (a log, a database, an editor's save) would be stored torn. Its size, inode,
    modification and change times are the same before and after the read, and as many bytes
    came as it holds (ctime changes on every write, and nobody can set it back)."""
    with open(path, "rb") as handle:
        before = os.fstat(handle.fileno())
        data = handle.read()
        after = os.fstat(handle.fileno())
    if len(data) != before.st_size or version_of(before) != version_of(after):
        raise ItemError(f"{path} changed while it was read", retryable=True)
    return data


def _read_file(path: str, most: int = -1) -> bytes:
    """The file at `path`, or up to `most` bytes from its start."""
    with open(path, "rb") as handle:
        return handle.read(most)
