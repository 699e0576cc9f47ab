"""One index's write budget: the service takes about `vectors_per_second` vectors and
`requests_per_second` PutVectors and DeleteVectors requests together a second per index, so a
put and a delete of the same index draw on the same pair of token buckets, and every attempt,
the first and each retry, waits for its tokens before it is sent. A 429/503 cuts both buckets
to just under what the service accepted (AIMD in `engine.ratelimit`)."""

from __future__ import annotations

from typing import Any

from s3bulk._engine.job import WorkerContext
from s3bulk._engine.ratelimit import TokenBucket
from s3bulk._stores.vectors import VectorsClient


class IndexPace:
    """The two token buckets of one index, in one worker (its share of the limits)."""

    def __init__(
        self, vectors_per_second: float, requests_per_second: float, *, burst: int, workers: int
    ) -> None:
        """Rates per index, split evenly between `workers` processes; `burst`: a batch's vectors."""
        share = max(1, workers)
        self.vectors = TokenBucket(vectors_per_second / share, burst=burst)
        self.requests = TokenBucket(requests_per_second / share, burst=max(1.0, 10 / share))

    async def send(
        self,
        client: VectorsClient,
        operation: str,
        body: Any,
        count: int,
        ctx: WorkerContext,
        body_sha256: str | None = None,
    ) -> None:
        """`operation` with `count` vectors, retried by the one policy, each attempt paced."""
        sent_at = 0.0

        async def attempt() -> None:
            nonlocal sent_at
            waited = self.vectors.waited + self.requests.waited
            await self.vectors.acquire(count)
            await self.requests.acquire(1)
            ctx.stats.stage_seconds["rate"] += self.vectors.waited + self.requests.waited - waited
            sent_at = self.vectors.now()
            await client.call_once(operation, body, body_sha256)

        def throttled() -> None:  # a refusal of what was sent before the last cut is old news
            self.vectors.throttled(sent_at)
            self.requests.throttled(sent_at)

        await client.retry(attempt, operation, throttled)
        self.vectors.delivered(count)
        self.requests.delivered(1)
