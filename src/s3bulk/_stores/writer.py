"""An object written as a standard raw file (`s3bulk.open(url, "wb")`), on s3bulk's signed client:
it follows no redirect and never sends credentials to another host, as every verb does (obstore's
writer, which it wrote through before, followed a 307 of a GET-like answer to another host: issue
62), and it sends the settings' checksum and SSE-C key as `pipe` does.

A file's `write` blocks and the client is asynchronous: the upload is `pipe`'s (`upload_stream`:
one PUT when it fits in one part, else a multipart upload with a few parts in flight), run on the
readers' event loop (`reader.BACKGROUND`), fed by `write` through a queue of a few chunks. `write`
waits while the queue is full, so memory is bounded by the parts in flight, the part being
filled and the queue, whatever the object's size.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from s3bulk._errors import S3Error, as_builtin
from s3bulk._stores.reader import BACKGROUND
from s3bulk._stores.routes import Parts

if TYPE_CHECKING:
    from s3bulk._stores.attributes import Attributes
    from s3bulk._stores.storage import Storage

QUEUED = 2  # chunks handed over by `write` and not yet taken by the upload
_END = b""


class ObjectWriter(io.RawIOBase):
    """s3://bucket/key as a raw file being written: parts of `parts.size` go as they fill, the
    object is complete on close (then `on_close` is called); leaving a `with` block by an
    exception aborts the upload, and nothing is stored. `flush` sends nothing early (a part
    flushed short would be refused, and the object is whole only on close)."""

    def __init__(
        self,
        storage: Storage,
        bucket: str,
        key: str,
        attributes: Attributes,
        parts: Parts,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._storage, self._bucket, self._key = storage, bucket, key
        self._url = f"s3://{bucket}/{key}"  # what errors name
        self._written = 0
        self._on_close = on_close
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUED)
        self._taking = memoryview(b"")  # the chunk the upload is reading from
        self._ended = False  # the end was taken: each read after it is the end again
        self._task: asyncio.Task[int] = BACKGROUND.run(self._started(attributes, parts))
        self._done: concurrent.futures.Future[int] = BACKGROUND.start(self._finished())

    async def _started(self, attributes: Attributes, parts: Parts) -> asyncio.Task[int]:
        upload = self._storage.upload_stream(self._read, self._bucket, self._key, attributes, parts)
        return asyncio.ensure_future(upload)

    async def _finished(self) -> int:
        return await self._task

    async def _read(self, size: int) -> bytes:
        """Up to `size` bytes of what `write` handed over, b"" at the end (and after it)."""
        if not self._taking:
            if self._ended:
                return _END
            self._taking = memoryview(await self._queue.get())
            if not self._taking:
                self._ended = True
                return _END
        taken, self._taking = self._taking[:size], self._taking[size:]
        return bytes(taken)

    def _hand_over(self, chunk: bytes) -> None:
        """`chunk` to the upload, waiting while the queue is full; an upload that failed
        meanwhile raises its error here, not on close."""
        put: concurrent.futures.Future[Any] = BACKGROUND.start(self._queue.put(chunk))
        either: list[concurrent.futures.Future[Any]] = [put, self._done]
        concurrent.futures.wait(either, return_when=concurrent.futures.FIRST_COMPLETED)
        if not put.done():
            put.cancel()
            self._answer()  # it failed: its error; it cannot have ended without the end
        put.result()

    def _answer(self) -> int:
        """The upload's end: its bytes, or the service's answer as a file's error (a 404 a
        FileNotFoundError, a 403 a PermissionError), in one line."""
        try:
            return self._done.result()
        except S3Error as error:
            raise as_builtin(error) from None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        view = memoryview(data).cast("B")
        if view:
            self._hand_over(bytes(view))  # a copy: the caller may reuse its buffer at once
            self._written += len(view)
        return len(view)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def close(self) -> None:
        if not self.closed:
            try:
                self._hand_over(_END)
                self._answer()
            finally:
                super().close()
                self._closed_now()

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self.close()
            return
        io.RawIOBase.close(self)  # closed to its user; the upload is aborted, nothing stored
        try:
            BACKGROUND.run(self._aborted())
        finally:
            self._closed_now()

    async def _aborted(self) -> None:
        """The upload stopped (a multipart upload is aborted as it stops: `multipart._upload`)."""
        self._task.cancel()
        await asyncio.wait([self._task])

    def __del__(self) -> None:
        """A writer dropped without close stores nothing, as one left by an exception: io's own
        would close it, completing an object its writer may not have finished (and at exit it
        would wait on a loop that is going away)."""
        task = getattr(self, "_task", None)
        if task is not None and not self.closed:
            with contextlib.suppress(RuntimeError):  # the loop closed already
                task.get_loop().call_soon_threadsafe(task.cancel)
            io.RawIOBase.close(self)

    def _closed_now(self) -> None:
        if self._on_close is not None:
            self._on_close()
            self._on_close = None
