"""Downloads: an object into a file that is either absent or whole and checked afterwards,
never half-written, by the way `routes.download_route` decides: fetched into a temporary file
beside the target (by the native batch GETs, `gets.py`, or the signed client), checked by the
full-object checksum the object keeps (its GET's, or its ranges' CRCs combined) or else its ETag,
given the object's time, then landed (`landing.py`). A mismatch is fetched again; an ETag that
looks like an MD5 and is none (SSE-KMS, SSE-C) gets a second opinion from a HEAD. Every file is
made, written and landed by name in the directory opened for it (`folders.py`), which a
directory swapped for a link meanwhile cannot change; only reads that check its bytes go by path.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, TypeVar

from s3bulk._errors import ItemError
from s3bulk._stores import checksums
from s3bulk._stores.conditional import Version, of_one_version, version_of
from s3bulk._stores.etags import (
    etag_matches_file,
    etag_matches_layout,
    likeliest_part_size,
    single_part_md5,
)
from s3bulk._stores.folders import Folders
from s3bulk._stores.gets import Gets, Landing
from s3bulk._stores.landing import (
    directory_clash,
    disk_full,
    file_in_the_way,
    kind,
    land,
    refused_write,
    temporary_name,
)
from s3bulk._stores.localfiles import new_file, set_time, write_checked, write_in_thread
from s3bulk._stores.multipart import etag_parts, parts_group
from s3bulk._stores.retry import Meter, Retrier
from s3bulk._stores.routes import SMALL_BODY_MAX, Parts, Way, download_route, spans
from s3bulk._stores.s3 import S3Client
from s3bulk._stores.underway import count_moved

T = TypeVar("T")
Head = Callable[..., Awaitable[dict[str, str]]]


class _Local(ItemError):
    """A failure of this machine's (a full disk) inside a request that is retried: it is not
    retried, and `cause` goes on as itself."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause), retryable=False)
        self.cause = cause


class Downloaded(NamedTuple):
    """What a download wrote, and whether its bytes were checked (against the object's ETag or
    a checksum it carries; not when neither can tell, as for an SSE-KMS object without one),
    and the ETag of the version it wrote (every GET asked for that one: `conditional.py`)."""

    written: int
    verified: bool | None  # None: not asked to (--ignore-checksum)
    etag: str = ""


@dataclass(slots=True)
class _Place:
    """Where a download is written (`temporary`) and where it lands (`target`): names in the open
    directory `folder` (`directory`, as users know it), and whether it is there already: the
    native GETs land a small file themselves, right after writing it (`gets.py` says why)."""

    folder: int
    directory: str
    temporary: str
    target: str
    existed: bool
    landed: bool = False

    @property
    def written(self) -> str:
        """The temporary file's path, for what only reads it back."""
        return os.path.join(self.directory, self.temporary)


def _under(root: str, parent: str) -> tuple[str, str]:
    """(root, the path of `parent` below it) where `parent` is below `root`, else (`parent`, "")."""
    inside = root.rstrip(os.sep) + os.sep
    if root and parent.startswith(inside):
        return root, parent[len(inside) :].strip(os.sep)
    return parent, ""


def changed_on_the_way(bucket: str, key: str, checked_by: str) -> ItemError:
    """The bytes received are not the object's: fetched again."""
    return ItemError(
        f"the bytes received do not match s3://{bucket}/{key} ({checked_by}): changed on the way",
        retryable=True,
    )


class Downloads:
    """One worker's downloads (its native GETs are its event loop's), sent through `client`,
    retried by `retry`, asking `head` (the seam's, retried) where a HEAD must say."""

    def __init__(
        self, client: S3Client, retry: Retrier, head: Head, *, verify: bool, connections: int
    ) -> None:
        self.client = client
        self.retry = retry
        self.meter: Meter = retry.meter
        self.head = head
        self.verify = verify  # checked against a checksum or ETag (--ignore-checksum: off)
        self.connections = connections
        self._gets: dict[str, Gets] = {}  # the native batch GETs, per bucket
        self._folders = Folders()  # directories opened (made, and swept) by this worker's downloads
        self._temporaries = 0

    def close(self) -> None:
        for gets in self._gets.values():
            gets.close()
        self._gets.clear()
        self._folders.close()

    async def _retrying(self, action: Callable[[], Awaitable[T]], what: str) -> T:
        return await self.retry(action, what)

    async def download(
        self,
        bucket: str,
        key: str,
        target: str,
        size: int,
        mtime: float,
        parts: Parts,
        etag: str = "",
        root: str = "",
    ) -> Downloaded:
        """The object into the file `target`, which is either absent or complete afterwards, never
        half-written: fetched into a temporary file beside it (again from the start if a fetch
        fails), size checked, checked against its `etag` or its checksum (`_fetch`), given the
        object's time, then landed (landing.py). Every GET asks for the version `etag` names
        (If-Match): one that changed since it was listed is fetched again whole, as it is now
        (`conditional.of_one_version`). `root`: the destination directory the target was placed
        under (cp's, sync's); the directories between them are opened without following a link
        that leads outside it (`folders.py`). Without it, the target's own directory is opened as
        it is named. Says whether its bytes could be checked, and which version it wrote."""
        parent = os.path.dirname(target) or "."  # "k" and "./k" land in the working directory
        base, below = _under(root, parent)
        folder = self._hold_folder(parent, base, below)
        try:
            name = os.path.basename(target)
            existed = kind(name, folder)
            if existed == "directory":  # made for keys below this one: no need to fetch it to know
                raise directory_clash(target)
            self._temporaries += 1
            temporary = temporary_name(target, self._temporaries)
            place = _Place(folder, parent, temporary, name, existed=existed is not None)
            landed = False
            what = f"get s3://{bucket}/{key}"

            async def fetch(version: Version) -> Downloaded:
                return await self._retrying(
                    lambda: self._fetch(bucket, key, place, version, parts, parent), what
                )

            async def now() -> Version:
                return version_of(await self.head(bucket, key))

            try:
                listed = Version(etag, size, mtime)
                if not etag and size > parts.threshold:  # ranges, each of which must name one version
                    listed = await now()
                fetched = await of_one_version(fetch, listed, now, what)
                if not place.landed:
                    land(temporary, name, existed=place.existed, folder=folder, shown=target)
                landed = True
            except OSError as exc:
                raise disk_full(exc, parent) or refused_write(exc, parent) or exc from None
            finally:
                if not landed:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(temporary, dir_fd=folder)  # what is left of the fetch
            return fetched
        finally:
            self._folders.release(base, below)

    def _hold_folder(self, parent: str, root: str, below: str) -> int:
        """The open directory `parent`, `below` under `root` (`Folders.hold`), or why not."""
        try:
            return self._folders.hold(root, below)
        except (FileExistsError, NotADirectoryError):
            raise file_in_the_way(parent) or ItemError(f"cannot create {parent}", retryable=False) from None
        except OSError as exc:
            raise disk_full(exc, parent) or refused_write(exc, parent) or exc from None

    async def _fetch(
        self, bucket: str, key: str, place: _Place, version: Version, parts: Parts, parent: str
    ) -> Downloaded:
        """One attempt at the bytes of that version of the object into `place.temporary`, with
        its time, checked against its ETag; a full disk stops the job."""
        etag, size = version.etag, version.size
        try:
            written, matches = await self._fetch_into(bucket, key, place, size, parts, version.mtime, etag)
        except OSError as exc:
            raise disk_full(exc, parent) or refused_write(exc, parent) or exc from None
        if matches is False:
            matches = await self._second_opinion(bucket, key, place.written, etag, size)
            if matches is False:
                raise changed_on_the_way(bucket, key, "its ETag or checksum")
        return Downloaded(written, (matches is True) if self.verify else None, etag)

    async def _second_opinion(
        self, bucket: str, key: str, temporary: str, etag: str, size: int
    ) -> bool | None:
        """Bytes and ETag disagree, which is rare but for objects whose ETag is no MD5 though it
        looks like one (SSE-KMS, SSE-C), or whose parts no guessed part size gives: a HEAD says.
        A full-object checksum the service keeps (x-amz-checksum-crc64nvme, -crc32c, -crc32,
        -sha256, -sha1: `checksums.file_matches`) then decides; an encrypted object without one
        is taken as it came, unverified (None); a multipart one is hashed again by the sizes of
        its parts, as the service tells them; where the service keeps a checksum per part
        (`COMPOSITE`), the file is checked by its parts' checksums, so cut."""
        head = await self.head(bucket, key, checksums=True)
        found = await asyncio.to_thread(checksums.file_matches, temporary, head)
        if found is not None:
            return found
        per_part = checksums.composite(head)
        if per_part is not None:
            algorithm, value, count = per_part
            sizes = await self.told_part_sizes(bucket, key, count, size)
            if sizes:
                matches = checksums.file_matches_parts
                return await asyncio.to_thread(matches, temporary, algorithm, value, sizes)
        kms = head.get("x-amz-server-side-encryption", "").startswith("aws:kms")
        if kms or head.get("x-amz-server-side-encryption-customer-algorithm"):
            return None
        sizes = await self.told_part_sizes(bucket, key, etag_parts(etag), size)
        return bool(sizes) and await asyncio.to_thread(etag_matches_layout, temporary, etag, sizes) is True

    async def _full_object_crc(self, bucket: str, key: str) -> tuple[str, str] | None:
        """(algorithm, value) of the object's full-object CRC, as a HEAD in checksum mode says
        (None: it carries none, or a SHA, whose ranges' values do not combine)."""
        found = checksums.full_object(await self.head(bucket, key, checksums=True))
        return found if found and checksums.is_crc(found[0]) else None

    async def told_part_sizes(self, bucket: str, key: str, count: int, size: int) -> list[int]:
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
        """The object's bytes into `place.temporary`, the way its route says, every GET only while
        the object's ETag is `etag` (412 otherwise), and whether they match its checksum or
        `etag` (None: nothing could tell; `verify` off: never asked); a small one may have
        landed already."""
        way = download_route(key, size, etag, parts).way
        if way not in (Way.STREAMED, Way.RANGED):  # those wait for their own bytes, GET by GET
            await self.retry.pace_bytes(size)
        condition, etag = etag, etag if self.verify else ""
        if way is Way.NATIVE:
            written, matches = await self._get_native(bucket, key, place, size, mtime, etag, condition)
        elif way in (Way.STREAMED, Way.RANGED):
            written, matches = await self._fetch_streamed(
                bucket, key, place, size, parts, etag, mtime, condition
            )
        else:  # the signed client's: a key with a dot segment, a small multipart object, nothing
            written, matches = await self._fetch_signed(
                bucket, key, place, size, parts, mtime, etag, condition, whole=way is not Way.WHOLE
            )
        if written != size:
            raise ItemError(
                f"got {written:,} bytes of an object listed at {size:,}: it changed since, or the "
                "connection was cut",
                retryable=True,
            )
        return written, matches

    async def _fetch_signed(
        self,
        bucket: str,
        key: str,
        place: _Place,
        size: int,
        parts: Parts,
        mtime: float,
        etag: str,
        condition: str,
        *,
        whole: bool,
    ) -> tuple[int, bool | None]:
        """`_fetch_into` through the signed client, the body whole in memory, then written and
        hashed against `etag` (a thread for a large one, so the loop goes on meanwhile): an
        object up to `WHOLE_BODY_MAX` under a multipart ETag (parts of at most 8 MiB: rare) in
        one ranged GET one byte past its listed size (an object that grew since comes back longer
        and fails the size check); `whole`, with no range: an empty one (a range of nothing is
        answered 416), a key with a dot segment (`routes.Way.SIGNED`), as the route decided."""
        if whole:
            _, body = await self.client.get_object(bucket, key, if_match=condition)
        else:
            body = await self.client.get_range(bucket, key, 0, size + 1, if_match=condition)
        temporary, folder = place.temporary, place.folder
        if len(body) <= SMALL_BODY_MAX:
            return write_checked(temporary, body, mtime, etag, parts.size, folder)
        return await write_in_thread(write_checked, temporary, body, mtime, etag, parts.size, folder)

    async def _get_native(
        self, bucket: str, key: str, place: _Place, size: int, mtime: float, etag: str, condition: str
    ) -> tuple[int, bool | None]:
        """`_fetch_into` the way `Way.NATIVE` (up to `WHOLE_BODY_MAX`, a single-part ETag or
        none): fetched, written, checked and, when right, landed by the native part, many per
        hand-off (`gets.py`); from 16 KiB streamed to a writer thread of its own, checked by the
        checksum the answer carries, else hashed in SIMD lanes with the bodies that ended with it."""
        gets = self._native_gets(bucket)
        self.meter.requests["GET"] += 1
        expected = single_part_md5(etag)
        landing = Landing(place.target, place.existed, size, expected)  # in the same folder
        got = await gets.get_into(
            key,
            size + 1,
            place.temporary,
            mtime,
            hash=expected is not None,
            check=self.verify and self.client.settings.asks_checksums,
            landing=landing,
            folder=place.folder,
            if_match=condition,
        )
        place.landed = got.landed
        if got.written != size:  # the wrong size fails on its own (_fetch_into)
            return got.written, None
        if got.checked is False:  # the full-object checksum its answer carried: no second opinion
            raise changed_on_the_way(bucket, key, "the checksum it came with")
        if got.checked:
            return got.written, True
        return got.written, None if expected is None else got.md5 == expected

    def _native_gets(self, bucket: str) -> Gets:
        gets = self._gets.get(bucket)
        if gets is None:
            gets = self._gets[bucket] = Gets(self.client, bucket, max_connections=self.connections * 2)
        return gets

    async def _fetch_streamed(
        self,
        bucket: str,
        key: str,
        place: _Place,
        size: int,
        parts: Parts,
        etag: str,
        mtime: float,
        condition: str,
    ) -> tuple[int, bool | None]:
        """An object from `WHOLE_BODY_MAX` into `temporary`, written as it comes by the native
        part's writer thread (`gets.py`): above the threshold in ranges of `parts.size`,
        `parts.in_flight` at once, each at its offset (`_in_lanes`); below, in one GET of the
        whole object, read up to one byte past the listed size (an object that grew since fails
        the size check), in checksum mode: its bytes are checked by the full-object checksum its
        answer carries. Above, a HEAD asks for that checksum, and where it is a CRC, those of the
        ranges combine into the one the file is checked by. Without one, and with an `etag`, the
        file is hashed in the parts it likely has as it is written (native/src/parthash.rs).
        Returns the bytes written and whether they match."""
        gets = self._native_gets(bucket)
        ranged = size > parts.threshold
        crc = await self._full_object_crc(bucket, key) if self.verify and ranged else None
        part_size = likeliest_part_size(etag, size, parts.size) if etag and not crc else None
        temporary, folder = place.temporary, place.folder
        with contextlib.suppress(FileNotFoundError):  # an earlier attempt's: its hasher may still
            os.unlink(temporary, dir_fd=folder)  # map it, and a file cut short under a mapping is a SIGBUS
        os.close(new_file(temporary, folder))  # made here, anew; the GETs write into it
        hashed = gets.hash_parts(temporary, size, part_size, folder) if part_size else None
        checked: bool | None = None
        ranges: dict[int, tuple[str, int]] = {}  # start -> (the range's CRC, its length)

        async def fetch(start: int, end: int) -> int:
            nonlocal checked
            if ranged:
                algorithm = crc[0] if crc else None
                got = await gets.get_range_into(
                    key, start, end, temporary, hashed, algorithm, folder=folder, if_match=condition
                )
                if got.checksum is not None:
                    ranges[start] = (base64.b64encode(got.checksum).decode(), got.written)
                return got.written
            got = await gets.get_into(
                key,
                end,
                temporary,
                0.0,
                hash=False,
                check=self.verify and self.client.settings.asks_checksums,
                hashed=hashed,
                folder=folder,
                if_match=condition,
            )
            checked = got.checked
            return got.written

        try:
            written = await self._in_lanes(
                f"get s3://{bucket}/{key}", size, parts, spans(size, parts, part_size), fetch
            )
            if crc and written == size:
                algorithm, expected = crc
                checked = (
                    checksums.whole_object(algorithm, [ranges[start] for start in sorted(ranges)]) == expected
                )
            known = None
            if hashed is not None and written == size and checked is None:
                digests = await gets.part_digests(hashed)
                hashed = None  # forgotten by the native part
                known = (part_size, digests) if part_size and digests else None
        finally:
            if hashed is not None:
                gets.forget_parts(hashed)
        if checked is False and written == size:
            raise changed_on_the_way(bucket, key, "the checksum it came with")
        set_time(temporary, mtime, folder)
        if etag and checked is None and written == size:  # hashed as it came (`known`), or read back
            path = place.written
            checked = await asyncio.to_thread(etag_matches_file, path, etag, size, parts.size, known)
        return written, checked

    async def _in_lanes(
        self,
        what: str,
        size: int,
        parts: Parts,
        ranges: Iterator[tuple[int, int]],
        fetch: Callable[[int, int], Awaitable[int]],
    ) -> int:
        """`fetch` of each of `ranges` (start, end), `parts.in_flight` at once, each a request of
        its own, retried alone (a link cut every 20 MB failed a 300 MiB download whole, six times
        over, where each range would have come); the first whose attempts are spent stops the
        others, and the download is not retried for it. Returns the bytes written."""
        written = 0

        async def counted(start: int, end: int) -> int:
            await self.retry.pace_request()
            self.meter.requests["GET"] += 1
            try:
                return await fetch(start, end)
            except OSError as exc:  # this machine's (a full disk): not the request's to retry
                raise _Local(exc) from None

        async def lane() -> None:
            nonlocal written
            for start, end in ranges:  # shared by the lanes: each takes the next range
                await self.retry.pace_bytes(min(end, size) - start)
                try:
                    got = await self._retrying(partial(counted, start, end), f"{what} from byte {start:,}")
                except _Local as exc:
                    raise exc.cause from None
                except ItemError as exc:  # its own attempts are spent: not the download's to retry
                    exc.retryable = False
                    raise
                written += got  # after the await: lanes add side by side
                count_moved(got)

        async with parts_group() as group:
            for _ in range(max(1, parts.in_flight)):
                group.create_task(lane())
        return written
