"""The MD5s that check downloads against their ETags, hashed many bodies at a time.

Checking a body costs 1.2 ms of CPU per MiB with OpenSSL here, as much as everything else a
1 MiB download does. One MD5 cannot go faster (each 64-byte block waits for the one before),
but independent bodies can share the work: the native `md5_many` hashes up to 16 of them in
the lanes of one SIMD register in about the time of one (16 x 1 MiB: 1.6 ms; one: 1.1 ms).
So a body waits here until `LANES` are gathered, or until no other body on its way is due to
arrive soon (a single download waits for nothing), or at most `MAX_WAIT`. The bodies are held
while they wait as they are while they are written, inside the job's byte budget; so a body
that waits keeps another from being fetched, and the wait is kept to bodies about to arrive.
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
    """One event loop's gathering of bodies to hash: `with lanes.coming() as lane:` around the
    fetch of a body that will be hashed, then `await lane.md5(body)` inside it.

    A batch waits only for bodies that are due: on their way long enough that they should arrive
    within `MAX_WAIT`, judged by how long fetches have taken of late. A body whose fetch has just
    begun is not waited for. Waiting for every body on its way, at 20 ms RTT, the 16 bodies the
    default byte budget admits split into two groups that kept missing each other: each group
    arrived while the other had just been sent for, waited the full 20 ms for it, and the
    download ran at 0.6x its unchecked speed, every batch flushed by the timer."""

    def __init__(self) -> None:
        self._queue: list[tuple[Any, asyncio.Future[bytes]]] = []
        self._on_the_way: list[_Lane] = []  # inside `coming()`, not yet queued: oldest first
        self._fetch_seconds = 0.0  # how long fetches take of late (a moving average)
        self._hashing = False
        self._timer: asyncio.TimerHandle | None = None

    @contextlib.contextmanager
    def coming(self) -> Iterator[_Lane]:
        """A body is on its way: once it is due, a batch short of `LANES` waits for it."""
        lane = _Lane(self, asyncio.get_running_loop().time())
        self._on_the_way.append(lane)
        try:
            yield lane
        finally:
            if not lane.queued:
                self._on_the_way.remove(lane)
            self._flush_if_due()

    async def _md5(self, lane: _Lane, body: Any) -> bytes:
        loop = asyncio.get_running_loop()
        took = loop.time() - lane.start
        self._fetch_seconds += (took - self._fetch_seconds) / (8 if self._fetch_seconds else 1)
        lane.queued = True
        self._on_the_way.remove(lane)
        future: asyncio.Future[bytes] = loop.create_future()
        self._queue.append((body, future))
        self._flush_if_due()
        return await future

    def _others_due(self) -> bool:
        """Whether a body on its way should arrive within `MAX_WAIT` (the oldest is the likeliest)."""
        if not self._on_the_way:
            return False
        now = asyncio.get_running_loop().time()
        return self._on_the_way[0].start + self._fetch_seconds <= now + MAX_WAIT

    def _flush_if_due(self) -> None:
        if self._hashing or not self._queue:
            return
        if len(self._queue) < LANES and self._others_due():
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


class _Lane:
    """One body's place in `Md5Lanes`, from the start of its fetch."""

    __slots__ = ("lanes", "queued", "start")

    def __init__(self, lanes: Md5Lanes, start: float) -> None:
        self.lanes, self.start, self.queued = lanes, start, False

    async def md5(self, body: Any) -> bytes:
        """The raw MD5 digest of `body` (any buffer of bytes), hashed with others."""
        return await self.lanes._md5(self, body)
