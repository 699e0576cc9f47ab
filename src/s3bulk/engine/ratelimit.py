"""Token buckets: hard caps on requests/s or items/s (S3 Vectors allows about 2,500 vectors/s
and 1,000 requests/s per index), kept on average and over any window longer than the burst.

A caller takes what it needs at once and, if that leaves the bucket in debt, waits until the
debt is paid off at the refill rate. A batch larger than the burst therefore still goes (alone,
after the wait) instead of waiting forever. Callers of one bucket are served in arrival order,
because each one's wait starts from the debt the callers before it left.

The documented limits are a ceiling, not a promise: a service that answers 429/503 below them
(a busy index, a quota shared with another loader) makes `throttled` halve the rate at once, and
the rate climbs back by a twentieth of the ceiling per second without throttling (AIMD), so a
long job settles just under what the service really gives instead of retrying into a wall.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError("a token bucket needs a positive rate")
        self.rate = rate
        self.ceiling = rate
        self.floor = rate / 20
        self.burst = burst if burst is not None else rate  # one second's worth
        self.tokens = self.burst
        self._clock = clock
        self._sleep = sleep
        self._updated = clock()
        self.waited = 0.0  # seconds callers spent waiting: the report's "wait" for rate limits
        self.cuts = 0
        self._last_cut = float("-inf")

    def throttled(self) -> None:
        """The service said "slow down": halve the rate, once per second at most (one burst of
        refusals is one signal, not many)."""
        now = self._clock()
        if now - self._last_cut < 1.0:
            return
        self._refill()
        self._last_cut = now
        self.cuts += 1
        self.rate = max(self.floor, self.rate / 2)

    def _refill(self) -> None:
        now = self._clock()
        if self.rate < self.ceiling:
            self.rate = min(self.ceiling, self.rate + (now - self._updated) * self.ceiling / 20)
        self.tokens = min(self.burst, self.tokens + (now - self._updated) * self.rate)
        self._updated = now

    async def acquire(self, amount: float = 1.0) -> None:
        self._refill()
        self.tokens -= amount
        if self.tokens < 0:
            delay = -self.tokens / self.rate
            self.waited += delay
            await self._sleep(delay)
