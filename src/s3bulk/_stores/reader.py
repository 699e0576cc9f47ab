"""An object read as a standard raw file (`s3bulk.open(url)`, fsspec's `open`, map's
`stream=True`), on s3bulk's signed client: it follows no redirect and sends a URL as it is
written, as every verb does (obstore's HTTP client, which it read through before, followed a 307
to another host and sent the session token there: issue 62).

The signed client is asynchronous and a file's `read` is not, so the reads run on an event loop
of their own, on a daemon thread (`Background`), started by the first reader a process opens. A
read somewhere new fetches one block; reading on in order fetches the next blocks ahead, a few at
once (one GET after another waits a round trip for each: 2-3x slower at 20 ms RTT,
bench/bench_open.py). Every GET asks for the ETag the object had when it was opened or listed
(If-Match), so an object replaced midway fails the read instead of splicing two versions. A read
of the whole object in order is checked as `cp` checks a download (`verify.py`): the last read
fails if the bytes contradict the object's full-object checksum or its MD5 ETag. A read of parts
of it (a Parquet footer, then columns) cannot be checked against what describes the whole: only
that every part is of one version.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import errno
import io
import os
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from s3bulk._errors import BytesMismatch, S3Error, as_builtin, changed_meanwhile
from s3bulk._stores.verify import Check

if TYPE_CHECKING:
    from s3bulk._stores.storage import Storage

T = TypeVar("T")
AHEAD = 2  # blocks fetched ahead of a read in order: memory is (1 + AHEAD) blocks


class Background:
    """One event loop on a daemon thread, for callers that block."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="s3bulk-reads", daemon=True).start()
                self._loop = loop
            return self._loop

    def start(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._running())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.start(coroutine).result()

    def forget(self) -> None:
        """In a forked child: the thread is not there, nor is its loop."""
        self._loop, self._lock = None, threading.Lock()


BACKGROUND = Background()
os.register_at_fork(after_in_child=BACKGROUND.forget)


class ObjectReader(io.RawIOBase):
    """s3://bucket/key as a raw file, read through `storage` (one that lives on `BACKGROUND`'s
    loop) in blocks of `block` bytes. `size` and `etag` known already (from a listing) spare
    the HEAD that asks for them; without them, the HEAD also asks for the object's checksum."""

    def __init__(
        self, storage: Storage, bucket: str, key: str, *, block: int, size: int | None = None, etag: str = ""
    ) -> None:
        self._storage, self._bucket, self._key = storage, bucket, key
        self._url = f"s3://{bucket}/{key}"  # what errors name
        self._head: dict[str, str] = {}
        self._opening = True  # a 404 now says what is missing; later, that it went since
        if size is None:
            self._head = self._wait(self._opened())
            size, etag = int(self._head.get("content-length") or 0), self._head.get("etag", "")
        self.size: int = size
        self._etag = etag
        self._opening = False
        self._block = max(1, block)
        self._held = memoryview(b"")  # bytes fetched, starting at `_held_at`
        self._held_at = 0
        self._next = 0  # where what was fetched last ends
        self._ahead: collections.deque[tuple[int, concurrent.futures.Future[memoryview]]] = (
            collections.deque()
        )
        self._position = 0
        self._check: Check | None = None  # the bytes from 0 on, hashed in order as they come
        self._checked_to: int | None = 0  # how far; None: not read in order from 0, so not checked

    async def _opened(self) -> dict[str, str]:
        """The HEAD that opens the object, whose 404 (a HEAD's has no body) says what is
        missing: the key, or the bucket."""
        try:
            return await self._storage.head(self._bucket, self._key, checksums=True)
        except S3Error as error:
            if error.status != 404:
                raise
            what = f"open {self._url}"
            if not await self._storage.bucket_exists(self._bucket):
                raise S3Error(404, "NoSuchBucket", f"there is no bucket {self._bucket}", what) from None
            raise S3Error(404, "NoSuchKey", "no object has that key", what) from None

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine run on the readers' loop (`_answer`)."""
        return self._answer(BACKGROUND.start(coroutine))

    def _answer(self, future: concurrent.futures.Future[T]) -> T:
        """What a coroutine on the readers' loop gave; the service's answers as a file's errors."""
        try:
            return future.result()
        except S3Error as error:
            if error.status == 404 and not self._opening:
                message = "no such object (deleted since it was opened or listed?)"
                raise as_builtin(S3Error(404, "NoSuchKey", message, f"read {self._url}")) from None
            if changed_meanwhile(error):
                raise OSError(
                    errno.ESTALE,
                    f"changed since it was opened or listed (its ETag is no longer {self._etag}): "
                    "open it again, after a fresh listing",
                    self._url,
                ) from None
            raise as_builtin(error) from None

    async def _fetch(self, start: int, end: int) -> memoryview:
        """Bytes [start, end): the whole object in one GET (in checksum mode, checked as it came)
        when one block holds it, else a range; both only while it has its ETag. The first block
        of a larger one learns, beside its GET, how the whole is checked if it is read in order
        (a HEAD in checksum mode, when the object was opened from a listing)."""
        storage, bucket, key = self._storage, self._bucket, self._key
        if start == 0 and end >= self.size:
            self._checked_to = None  # checked whole as it came
            return memoryview(await storage.get_object(bucket, key, if_match=self._etag))
        got = storage.get_range(bucket, key, start, end, if_match=self._etag)
        if start or self._checked_to != 0:
            return memoryview(await got)
        data, self._check = await asyncio.gather(got, self._whole_check())
        return memoryview(data)

    async def _whole_check(self) -> Check | None:
        head = self._head or await self._storage.head(self._bucket, self._key, checksums=True)
        if head.get("etag", "").strip('"') != self._etag.strip('"'):
            return None  # another version's: the ranges' If-Match fails the read
        return await self._storage.stream_check_of(self._bucket, self._key, head, self.size)

    def _fill(self) -> None:
        """Fetch what holds `_position`: the next block fetched ahead, when reading goes on in
        order, or one block from there."""
        position = self._position
        if position != self._next or not self._ahead or self._ahead[0][0] != position:
            self._drop_ahead()
            if self.size <= self._block:
                position = 0  # the whole object, in one GET
            end = min(self.size, position + self._block)
            self._ahead.append((position, BACKGROUND.start(self._fetch(position, end))))
        start, future = self._ahead.popleft()
        try:
            data = self._answer(future)
        except BaseException:
            self._drop_ahead()
            raise
        self._held, self._held_at = data, start
        self._next = start + len(data)
        self._hashed(start, data)
        self._read_ahead()

    def _read_ahead(self) -> None:
        following = self._ahead[-1][0] + self._block if self._ahead else self._next
        while len(self._ahead) < AHEAD and following < self.size:
            end = min(self.size, following + self._block)
            self._ahead.append((following, BACKGROUND.start(self._fetch(following, end))))
            following = end

    def _drop_ahead(self) -> None:
        while self._ahead:
            self._ahead.popleft()[1].cancel()

    def _hashed(self, start: int, data: memoryview) -> None:
        """`data` into the check of the whole object, when it follows what was hashed; a read
        that reaches its end so fails if the bytes are not the object's."""
        if self._checked_to != start:
            self._checked_to = None  # read out of order (or checked whole): not checked
            return
        if self._check is not None:
            self._check.update(data)
        self._checked_to = start + len(data)
        if self._checked_to >= self.size and self._check is not None and not self._check.matches():
            raise BytesMismatch(
                f"read {self._url}: the bytes received do not match {self._check.what}: "
                "they changed on the way"
            )

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._position >= self.size:
            return 0
        offset = self._position - self._held_at
        if not 0 <= offset < len(self._held):
            self._fill()
            offset = self._position - self._held_at
        view = memoryview(buffer).cast("B")
        count = min(len(view), len(self._held) - offset)
        view[:count] = self._held[offset : offset + count]
        self._position += count
        return count

    def readall(self) -> bytes:
        """The rest, a block at a time (RawIOBase's own would go 8 KiB at a time)."""
        pieces = []
        while self._position < self.size:
            offset = self._position - self._held_at
            if not 0 <= offset < len(self._held):
                self._fill()
                offset = self._position - self._held_at
            pieces.append(bytes(self._held[offset:]))
            self._position += len(pieces[-1])
        return b"".join(pieces)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self._drop_ahead()
        self._held = memoryview(b"")
        super().close()
