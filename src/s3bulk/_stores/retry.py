"""The one retry policy of every request s3bulk sends, and where its retries are counted.

Capped exponential backoff with full jitter (sleep = U(0, min(cap, base * 2^n))): retries of many
concurrent requests spread out, so a throttled service is not hit by synchronised waves. Only
errors marked retryable are tried again (errors.classify decides).

Two answers are waited out without spending attempts, for up to RetryPolicy.patience_seconds:
- a service that accepted requests and then stops accepting connections (a restart, a failover);
- a service that says slow down (503 SlowDown, 429). Six quick attempts would fail items, even
  a whole listing partition, while the service only asked for patience.

Every retry is told to a `Meter` (requests by kind, signing time, retries): the engine's worker
counts it in the report and, when the service throttled, halves its in-flight limit
(engine/adaptive.py), whichever request it was: an object's PUT, a listing page, a DeleteObjects.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TypeVar

from s3bulk._errors import ItemError, JobAborted, classify

log = logging.getLogger("s3bulk")  # --log-level/--log-file route it; messages name URLs, never credentials

T = TypeVar("T")
Gate = Callable[[float], Awaitable[None]]  # waits until `amount` may go (a token bucket's acquire)
_service_reached = False  # some request of this process succeeded: an unreachable service is an outage
# Set by the engine in each task that runs items: awaited once the item being run has sent its
# last request and waits only for work on this machine (its MD5 in the lanes, stores/digests.py), so that its
# slot in the in-flight limit goes to the next item meanwhile. The limit bounds requests to the
# service; a wait here would otherwise cost throughput wherever latency, not CPU, is the limit.
# (A body that then fails its check is fetched again beyond the limit: the engine's consumers,
# the limit plus `LOCAL_WORK_ITEMS`, still bound how many run.)
requests_done: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = contextvars.ContextVar(
    "requests_done", default=None
)


async def done_with_requests() -> None:
    """The item run in this task sends no more requests (see `requests_done`)."""
    hook = requests_done.get()
    if hook is not None:
        await hook()


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


def _ignore(error: ItemError) -> None:
    """A meter nobody reads (a module function, so what holds it still pickles)."""


@dataclass
class Meter:
    """Where a store's activity is counted: requests by kind, time per stage ("build": signing),
    and each retry (`retried`, which may also slow the job down when the service throttles)."""

    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    stage_seconds: MutableMapping[str, float] = field(default_factory=lambda: collections.defaultdict(float))
    retried: Callable[[ItemError], None] = _ignore


async def with_retries(
    action: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str = "",
    on_retry: Callable[[ItemError], None] | None = None,
    job_wide: bool = False,
) -> T:
    """`action()` until it succeeds, a final error, or the policy's attempts are spent. A
    `job_wide` action (a listing's page: when it fails, the job stops) gets twice the attempts
    once this process has reached the service: through 30% of connections reset, a page's six
    attempts all failed now and then (stale pooled connections, one after another), and with
    them the whole job. Before the service was ever reached, a wrong endpoint still fails
    within the usual attempts (12 of them took 56 s to say so)."""
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
                    log.info("waiting %.1fs for the service: %s", pause, error)
                    await asyncio.sleep(pause)
                    waited += 1
                    continue
            attempt += 1
            attempts = policy.max_attempts * (2 if job_wide and _service_reached else 1)
            if not error.retryable or attempt >= attempts:
                if error.unreachable and not _service_reached:  # a wrong endpoint, or none up
                    error.job_wide = True
                log.info("gave up after %d attempt(s): %s", attempt, error)
                try:
                    raise error from None
                finally:  # its traceback holds this frame: no cycle keeps the request's body alive
                    error = exc = None  # type: ignore[assignment]
            if on_retry is not None:
                on_retry(error)
            delay = policy.delay(attempt)
            log.info("retry %d in %.1fs: %s", attempt, delay, error)
            await asyncio.sleep(delay)


@dataclass(frozen=True)
class Retrier:
    """The policy and the meter together: what a store calls around each request. With a job's
    caps (--tpslimit, --bwlimit), also what paces them: each attempt of a request waits for a
    request token, and a store waits for byte tokens before it moves a body (`pace_bytes`)."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    meter: Meter = field(default_factory=Meter)
    requests_gate: Gate | None = None
    bytes_gate: Gate | None = None

    async def pace_request(self) -> None:
        if self.requests_gate is not None:
            await self.requests_gate(1)

    async def pace_bytes(self, count: int) -> None:
        if self.bytes_gate is not None and count > 0:
            await self.bytes_gate(count)

    async def __call__(
        self,
        action: Callable[[], Awaitable[T]],
        what: str = "",
        on_throttle: Callable[[], None] | None = None,
        *,
        job_wide: bool = False,
    ) -> T:
        """`action` retried; `on_throttle` is told of each throttle too (a token bucket, say).
        `job_wide`: its failure stops the job (a listing's page), see `with_retries`."""

        def retried(error: ItemError) -> None:
            self.meter.retried(error)
            if error.throttled and on_throttle is not None:
                on_throttle()

        if self.requests_gate is not None:
            unpaced = action

            async def paced() -> T:
                await self.pace_request()
                return await unpaced()

            action = paced
        return await with_retries(action, self.policy, what=what, on_retry=retried, job_wide=job_wide)
