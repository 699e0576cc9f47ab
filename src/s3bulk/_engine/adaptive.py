"""An in-flight limit that finds the service's knee by itself (AIMD), for `--engine auto`.

A fixed `--concurrency` is either too low (a far-away service needs many requests in flight to
hide its round trip) or too high (a throttling service answers 503 SlowDown, and queueing only
adds latency). The limit starts at --concurrency; after a warm-up window (connections, the
first listing), while every slot is busy, it doubles as long as throughput grows by a quarter
with it ("slow start"), then grows by an eighth per window while throughput still grows. It is
cut in half when the service throttles (429, 503 SlowDown), and by a quarter when latency blows
up (median over twice the best seen) without any gain in throughput: that is requests queueing
at the server, not work getting done. Slow start's last doubling, if it bought nothing, is
mostly taken back (to 1.25x the limit before it). Without a congestion signal the limit is held, and probed
upward again from time to time, since the service's capacity can change.

The fixed engines (async, hybrid) use the same limit with `find_knee=False`: it starts at
--concurrency and never exceeds it, is halved when the service throttles and grows back by an
eighth per busy window (plain AIMD). A user's --concurrency is a ceiling, not a promise to keep
hammering a service that says slow down; retries alone would keep the pressure on.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

WINDOW_SECONDS = 0.5
MIN_SAMPLES = 8  # completions before a window's rate means anything
PROBE_AFTER_HOLDS = 6
SLOW_START_GAIN = 1.25  # doubling what is in flight must bring this much more, or the knee is near


class AdaptiveLimit:
    def __init__(
        self,
        ceiling: int,
        start: int = 8,
        on_change: Callable[[int, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        find_knee: bool = True,
    ) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = max(1, min(start, self.ceiling))
        self.in_flight = 0
        self.on_change = on_change  # (old, new): the report shows the limit as it moves
        self.decreases = 0
        self._clock = clock
        self._changed = asyncio.Condition()
        self._waiting = 0  # requests waiting for a slot: while any wait, nobody jumps the queue
        self._find_knee = find_knee
        self._slow_start = find_knee
        self._holds = 0
        self._best_latency = float("inf")
        self._best_rate = 0.0
        self._previous_rate = 0.0
        self._warming_up = True
        self._raised = False
        self._new_window()

    def _new_window(self) -> None:
        self._window_start = self._clock()
        self._completed = 0
        self._bytes = 0
        self._latencies: list[float] = []
        self._throttled = False
        self._saturated = self.in_flight >= self.limit

    async def acquire(self) -> None:
        if self._waiting or self.in_flight >= self.limit:
            self._waiting += 1
            try:
                async with self._changed:
                    await self._changed.wait_for(lambda: self.in_flight < self.limit)
            finally:
                self._waiting -= 1
        self.in_flight += 1
        if self.in_flight >= self.limit:
            self._saturated = True

    async def release(self, latency: float, moved: int = 0) -> None:
        self.in_flight -= 1
        self._completed += 1
        self._bytes += moved
        self._latencies.append(latency)
        self._maybe_adjust()
        free = self.limit - self.in_flight
        if free > 0 and self._waiting:  # wake only as many as may start: hundreds wait at a low limit
            async with self._changed:
                self._changed.notify(free)

    def throttled(self) -> None:
        """The service said slow down: cut at once, not at the end of the window."""
        if not self._throttled:
            self._throttled = True
            self._set(max(1, self.limit // 2))
            self._slow_start = False

    def _maybe_adjust(self) -> None:
        elapsed = self._clock() - self._window_start
        if elapsed < WINDOW_SECONDS or (self._completed < MIN_SAMPLES and elapsed < 4 * WINDOW_SECONDS):
            return
        rate = (self._bytes or self._completed) / elapsed
        latency = statistics.median(self._latencies)
        if self._warming_up:  # connections, the first listing: nothing to learn from yet
            self._warming_up = False
            self._previous_rate = rate
            self._new_window()
            return
        grew = rate > self._previous_rate * (SLOW_START_GAIN if self._slow_start else 1.02)
        raised, self._raised = self._raised, False  # only a raise can be judged by its gain
        if self._throttled:
            pass  # already cut when it happened
        elif not self._find_knee:
            if self._saturated:  # additive increase back to --concurrency
                self._set(self.limit + max(1, self.limit // 8))
        elif latency > 2 * self._best_latency and rate <= self._best_rate * 1.02:
            self._set(max(1, self.limit * 3 // 4))
            self._slow_start = False
        elif self._saturated and self._slow_start and (grew or not raised):
            self._set(self.limit * 2)
        elif self._saturated and self._slow_start:  # the last doubling bought nothing: undo most
            self._set(self.limit * 5 // 8)
            self._slow_start = False
        elif self._saturated and grew:
            self._set(self.limit + max(1, self.limit // 8))
            self._holds = 0
        elif self._saturated:
            self._slow_start = False
            self._holds += 1
            if self._holds >= PROBE_AFTER_HOLDS:  # capacity may have changed: look again
                self._set(self.limit + max(1, self.limit // 8))
                self._holds = 0
        self._best_latency = min(self._best_latency, latency)
        self._best_rate = max(self._best_rate, rate)
        self._previous_rate = rate
        self._new_window()

    def _set(self, new: int) -> None:
        new = max(1, min(new, self.ceiling))
        if new == self.limit:
            return
        if new < self.limit:
            self.decreases += 1
        old, self.limit = self.limit, new
        self._raised = new > old
        if self.on_change is not None:
            self.on_change(old, new)
