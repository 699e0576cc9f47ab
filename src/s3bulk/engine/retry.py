"""Retries with capped exponential backoff and full jitter (sleep = U(0, min(cap, base * 2^n))).

Full jitter spreads retries of many concurrent requests so a throttled service is not hit by
synchronised waves; only ItemErrors marked retryable are tried again.

Two answers are waited out without spending attempts, for up to RetryPolicy.patience_seconds:
- a service that accepted requests and then stops accepting connections (a restart, a failover);
- a service that says slow down (503 SlowDown, 429). Six quick attempts would fail items, even
  a whole listing partition, while the service only asked for patience; the in-flight limit is
  halved meanwhile (engine/adaptive.py), so waiting does not mean hammering.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from s3bulk.errors import ItemError, JobAborted, classify

T = TypeVar("T")
_service_reached = False  # some request of this process succeeded: an unreachable service is an outage


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_seconds: float = 0.1
    cap_seconds: float = 20.0
    # A service that accepts no connection at all (restarting, failing over), or that throttles,
    # is waited for this long before such failures count as attempts: six quick attempts would
    # fail every item in flight during a 3-second restart. Unreachable counts only once this
    # process has reached the service: a wrong endpoint still fails within the usual attempts.
    patience_seconds: float = 300.0
    outage_cap_seconds: float = 5.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap_seconds, self.base_seconds * (2**attempt)))

    def outage_delay(self, waited: int) -> float:
        """Equal jitter: at least half the step, so items waiting out an outage do not hammer it."""
        step = min(self.outage_cap_seconds, 0.25 * (2**waited))
        return random.uniform(step / 2, step)

    def patience_delay(self, error: ItemError, waited: int) -> float | None:
        """How long to wait before trying again without spending an attempt, or None."""
        if not error.retryable:
            return None
        if error.unreachable and _service_reached:
            return self.outage_delay(waited)
        if error.throttled:
            return self.delay(waited + 1)
        return None


async def with_retries(
    action: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str = "",
    on_retry: Callable[[ItemError], None] | None = None,
) -> T:
    attempt = 0
    waited = 0  # retries while the service was unreachable or throttling
    waiting_since: float | None = None
    global _service_reached
    while True:
        try:
            result = await action()
            _service_reached = True
            return result
        except (asyncio.CancelledError, JobAborted):
            raise
        except Exception as exc:
            error = classify(exc, what)
            pause = policy.patience_delay(error, waited)
            if pause is not None:
                now = time.monotonic()
                waiting_since = waiting_since if waiting_since is not None else now
                if now - waiting_since < policy.patience_seconds:
                    if on_retry is not None:
                        on_retry(error)
                    await asyncio.sleep(pause)
                    waited += 1
                    continue
            attempt += 1
            if not error.retryable or attempt >= policy.max_attempts:
                if error.unreachable and not _service_reached:  # a wrong endpoint, or none up
                    error.job_wide = True
                raise error from None
            if on_retry is not None:
                on_retry(error)
            await asyncio.sleep(policy.delay(attempt))
