"""Retries with capped exponential backoff and full jitter (sleep = U(0, min(cap, base * 2^n))).

Full jitter spreads retries of many concurrent requests so a throttled service is not hit by
synchronised waves; only ItemErrors marked retryable are tried again.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from s3bulk.errors import ItemError, classify

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_seconds: float = 0.1
    cap_seconds: float = 20.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap_seconds, self.base_seconds * (2**attempt)))


async def with_retries(
    action: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str = "",
    on_retry: Callable[[ItemError], None] | None = None,
) -> T:
    attempt = 0
    while True:
        try:
            return await action()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = classify(exc, what)
            attempt += 1
            if not error.retryable or attempt >= policy.max_attempts:
                raise error from None
            if on_retry is not None:
                on_retry(error)
            await asyncio.sleep(policy.delay(attempt))
