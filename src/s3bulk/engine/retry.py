"""Retries with capped exponential backoff and full jitter (sleep = U(0, min(cap, base * 2^n))).

Full jitter spreads retries of many concurrent requests so a throttled service is not hit by
synchronised waves; only ItemErrors marked retryable are tried again. A service that accepted
requests and then stops accepting connections (a restart, a failover) is an outage, waited out
without spending attempts (RetryPolicy.outage_seconds).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from s3bulk.errors import ItemError, classify

T = TypeVar("T")
_service_reached = False  # some request of this process succeeded: an unreachable service is an outage


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_seconds: float = 0.1
    cap_seconds: float = 20.0
    # A service that accepts no connection at all (restarting, failing over) is waited for this
    # long before such failures count as attempts: six quick attempts would fail every item in
    # flight during a 3-second restart. Only once this process has reached the service: a wrong
    # endpoint still fails within the usual attempts.
    outage_seconds: float = 300.0
    outage_cap_seconds: float = 5.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap_seconds, self.base_seconds * (2**attempt)))

    def outage_delay(self, waited: int) -> float:
        """Equal jitter: at least half the step, so items waiting out an outage do not hammer it."""
        step = min(self.outage_cap_seconds, 0.25 * (2**waited))
        return random.uniform(step / 2, step)


async def with_retries(
    action: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str = "",
    on_retry: Callable[[ItemError], None] | None = None,
) -> T:
    attempt = 0
    waited = 0  # retries while the service was unreachable
    outage_began: float | None = None
    global _service_reached
    while True:
        try:
            result = await action()
            _service_reached = True
            return result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = classify(exc, what)
            if error.retryable and error.unreachable and _service_reached:
                now = time.monotonic()
                outage_began = outage_began if outage_began is not None else now
                if now - outage_began < policy.outage_seconds:
                    if on_retry is not None:
                        on_retry(error)
                    await asyncio.sleep(policy.outage_delay(waited))
                    waited += 1
                    continue
            attempt += 1
            if not error.retryable or attempt >= policy.max_attempts:
                raise error from None
            if on_retry is not None:
                on_retry(error)
            await asyncio.sleep(policy.delay(attempt))
