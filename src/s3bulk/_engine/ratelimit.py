"""Token buckets: hard caps on requests/s or items/s (S3 Vectors allows about 2,500 vectors/s
and 1,000 requests/s per index), kept on average and over any window longer than the burst.

A caller takes what it needs at once and, if that leaves the bucket in debt, waits until the
debt is paid off at the refill rate. A batch larger than the burst therefore still goes (alone,
after the wait) instead of waiting forever. Callers of one bucket are served in arrival order,
because each one's wait starts from the debt the callers before it left.

The documented limits are a ceiling, not a promise: a service that answers 429/503 below them
(a busy index, a quota shared with another loader) makes `throttled` cut the rate at once, to
just under what the service accepted over the last seconds (`delivered`), or by half when that
is not known yet. The rate then climbs back by a fiftieth of the ceiling per second without
throttling (AIMD), so a long job settles just under what the service really gives instead of
retrying into a wall.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable

DELIVERY_WINDOW = 2.0  # seconds of accepted requests a cut looks back on
MAX_SLEEP_STEP = 0.1


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
        self._started = clock()
        self._delivered: collections.deque[tuple[float, float]] = collections.deque()

    def delivered(self, amount: float) -> None:
        """Record what the service accepted, so a cut can aim at what it really gives."""
        now = self._clock()
        self._delivered.append((now, amount))
        while self._delivered and now - self._delivered[0][0] > DELIVERY_WINDOW:
            self._delivered.popleft()

    def now(self) -> float:
        return self._clock()

    def throttled(self, sent_at: float | None = None) -> None:
        """The service said "slow down" to a request sent at `sent_at` (by `now()`). Refusals of
        requests sent before the last cut are answers to the old rate, not news; without a send
        time, one cut a second at most."""
        now = self._clock()
        if self._last_cut >= (sent_at if sent_at is not None else now - 1.0):
            return
        self._refill()
        self._last_cut = now
        self.cuts += 1
        target = self.rate / 2
        window = min(DELIVERY_WINDOW, now - self._started)
        accepted = sum(amount for when, amount in self._delivered if now - when <= window)
        if window >= DELIVERY_WINDOW / 4 and accepted:
            target = min(0.85 * self.rate, 0.9 * accepted / window)
        self.rate = max(self.floor, target)

    def _refill(self) -> None:
        now = self._clock()
        if self.rate < self.ceiling:
            self.rate = min(self.ceiling, self.rate + (now - self._updated) * self.ceiling / 50)
        self.tokens = min(self.burst, self.tokens + (now - self._updated) * self.rate)
        self._updated = now

    async def acquire(self, amount: float = 1.0) -> None:
        self._refill()
        self.tokens -= amount
        owed = -self.tokens  # tokens the refill must bring before this caller may go
        while owed > 1e-9:
            # wait in steps, paying the debt at the rate of the moment: callers already waiting
            # when the rate is cut wait longer too, instead of going out at the old pace
            step = min(owed / self.rate, MAX_SLEEP_STEP)
            began = self._clock()
            await self._sleep(step)
            elapsed = self._clock() - began
            self.waited += elapsed
            owed -= elapsed * self.rate
