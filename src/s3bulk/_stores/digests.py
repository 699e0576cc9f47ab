"""The MD5s that check downloads against their ETags, hashed many bodies at a time.

Checking a body costs 1.2 ms of CPU per MiB with OpenSSL here, as much as everything else a
1 MiB download does. One MD5 cannot go faster (each 64-byte block waits for the one before),
but independent bodies can share the work: the native `md5_many` hashes up to 16 of them in
the lanes of one SIMD register in about the time of one (16 x 1 MiB: 1.6 ms; one: 1.1 ms).
So a body waits here until `LANES` are gathered, or until no other body is on its way (a
single download waits for nothing), or at most `MAX_WAIT`: memory is not the cost, the bodies
are held while they wait as they are while they are written, inside the job's byte budget.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from s3bulk_native import md5_many

LANES = 16
# The longest a body waits for others to share its lanes: a fetch that hangs must not hold the
# bodies queued behind it until its timeout.
MAX_WAIT = 0.02
# Batches up to this many bytes are hashed by the event loop itself (16 x 16 KiB: ~30 us);
# larger ones by a thread, so the loop goes on dispatching meanwhile.
INLINE_MAX = 256 * 1024


class Md5Lanes:
    """One event loop's gathering of bodies to hash: `coming()` around the fetch of a body that
    will be hashed, then `await md5(body)` inside it."""

    def __init__(self) -> None:
        self._queue: list[tuple[Any, asyncio.Future[bytes]]] = []
        self._inside = 0  # fetches inside `coming()`: on their way, queued, or just answered
        self._hashing = False
        self._timer: asyncio.TimerHandle | None = None

    @contextlib.contextmanager
    def coming(self) -> Iterator[None]:
        """A body is on its way: while it is, a batch short of `LANES` waits for it."""
        self._inside += 1
        try:
            yield
        finally:
            self._inside -= 1
            self._flush_if_due()

    async def md5(self, body: Any) -> bytes:
        """The raw MD5 digest of `body` (any buffer of bytes), hashed with others."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._queue.append((body, future))
        self._flush_if_due()
        return await future

    def _flush_if_due(self) -> None:
        if self._hashing or not self._queue:
            return
        if len(self._queue) < LANES and len(self._queue) < self._inside:  # others will come
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(MAX_WAIT, self._flush)
            return
        self._flush()

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._hashing:
            return
        batch = [(body, future) for body, future in self._queue if not future.done()]  # not cancelled
        self._queue = []
        if not batch:
            return
        self._hashing = True
        bodies = [body for body, _ in batch]
        if sum(len(body) for body in bodies) <= INLINE_MAX:
            self._answer(batch, md5_many(bodies))
            return
        hashed = asyncio.get_running_loop().run_in_executor(None, md5_many, bodies)
        hashed.add_done_callback(lambda done: self._answer(batch, done))

    def _answer(self, batch: list[tuple[Any, asyncio.Future[bytes]]], digests: Any) -> None:
        self._hashing = False
        failed: BaseException | None = None
        if isinstance(digests, asyncio.Future):
            failed = asyncio.CancelledError() if digests.cancelled() else digests.exception()
            digests = None if failed else digests.result()
        for index, (_, future) in enumerate(batch):
            if future.done():
                continue
            if failed is not None:
                future.set_exception(failed)
            else:
                future.set_result(digests[index])
        self._flush_if_due()
