"""Memory stays bounded whatever the item count; the adaptive in-flight limit grows to the
service's knee and backs off when throttled; the token bucket keeps its rate (`_engine/`),
without a server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from s3bulk._engine.adaptive import WINDOW_SECONDS, AdaptiveLimit
from s3bulk._engine.driver import Engine
from s3bulk._engine.job import WorkerContext
from s3bulk._engine.worker import EngineOptions
from s3bulk._report import Report, WorkerStats

MiB = 1024**2

LIVE = {"items": 0, "peak_items": 0, "payload": 0, "peak_payload": 0}
LOCK = threading.Lock()
PAYLOAD = 64 * 1024


class CountedItem:
    def __init__(self, number: int) -> None:
        self.number = number
        with LOCK:
            LIVE["items"] += 1
            LIVE["peak_items"] = max(LIVE["peak_items"], LIVE["items"])

    def __del__(self) -> None:
        with LOCK:
            LIVE["items"] -= 1


class ManyItemsJob:
    """100 pages of 100 items, like a listing; each item holds 64 KiB while it runs."""

    pages, per_page = 100, 100

    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        for page in range(self.pages):
            yield page

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        return iter(())

    async def open(self, ctx: WorkerContext) -> None:
        pass

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        yield [CountedItem(descriptor * self.per_page + n) for n in range(self.per_page)]

    async def run(self, item: CountedItem, ctx: WorkerContext) -> int:
        payload = bytearray(PAYLOAD)
        with LOCK:
            LIVE["payload"] += len(payload)
            LIVE["peak_payload"] = max(LIVE["peak_payload"], LIVE["payload"])
        await asyncio.sleep(0)
        with LOCK:
            LIVE["payload"] -= len(payload)
        return len(payload)

    def item_id(self, item: CountedItem) -> str:
        return str(item.number)

    def cost(self, item: CountedItem) -> int:
        return PAYLOAD

    def describe(self, item: CountedItem) -> tuple[str, str, int]:
        return str(item.number), "", PAYLOAD

    async def close(self, ctx: WorkerContext) -> None:
        pass


def test_async_engine_holds_a_bounded_number_of_items_among_10000() -> None:
    concurrency = 16
    engine = Engine("async", EngineOptions(concurrency=concurrency, max_in_flight_bytes=64 * MiB))
    report = asyncio.run(engine.run(ManyItemsJob(), Report("synthetic")))  # type: ignore[arg-type]
    assert report.ok and report.objects_done == 10_000 and report.bytes_done == 10_000 * PAYLOAD
    # at most two pages being expanded, the item queue (2 x concurrency) and the items in flight
    bound = 2 * ManyItemsJob.per_page + 3 * concurrency
    assert LIVE["items"] == 0
    assert LIVE["peak_items"] <= bound, LIVE
    assert LIVE["peak_payload"] <= concurrency * PAYLOAD, LIVE


# ---- AIMD, on a modelled service whose throughput stops growing at a knee ----------------------


class ModelledService:
    """Throughput grows with requests in flight up to `knee`, then stays flat while latency grows
    (requests queue at the server); the clock is simulated, so nothing depends on timing."""

    def __init__(self, knee: int) -> None:
        self.knee = knee
        self.now = 0.0
        self.throttling = False

    def clock(self) -> float:
        return self.now

    async def run_windows(self, limit: AdaptiveLimit, windows: int) -> list[int]:
        """Complete requests at the modelled rate with every slot kept busy; the limit at the
        end of each window."""
        seen = []
        for _ in range(windows):
            end = self.now + WINDOW_SECONDS
            while self.now < end:
                while limit.in_flight < limit.limit:
                    await limit.acquire()
                self.now += WINDOW_SECONDS / (10 * min(limit.limit, self.knee))
                if self.throttling:
                    limit.throttled()
                await limit.release(0.01 * max(1.0, limit.limit / self.knee))
            seen.append(limit.limit)
        return seen


def test_adaptive_limit_grows_to_the_knee_and_no_further() -> None:
    service = ModelledService(knee=100)
    limit = AdaptiveLimit(ceiling=1024, start=8, clock=service.clock)
    seen = asyncio.run(service.run_windows(limit, 40))
    assert seen[:3] == [8, 16, 32] and max(seen[:6]) >= 100  # warm-up, then slow start doubles
    assert all(100 <= value <= 256 for value in seen[-20:]), seen  # settles near the knee
    assert max(seen) < 1024


def test_adaptive_limit_halves_when_throttled() -> None:
    service = ModelledService(knee=64)
    limit = AdaptiveLimit(ceiling=256, start=8, clock=service.clock)
    before = asyncio.run(service.run_windows(limit, 10))[-1]
    service.throttling = True
    after = asyncio.run(service.run_windows(limit, 1))[-1]
    assert before >= 64 and after <= before // 2 and limit.decreases >= 1


# ---- token buckets, on a simulated clock ------------------------------------------------------


def test_token_bucket_keeps_the_rate_and_lets_an_oversized_batch_through() -> None:
    from s3bulk._engine.ratelimit import TokenBucket

    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    bucket = TokenBucket(2500, clock=lambda: now[0], sleep=sleep)

    async def load(batches: int, size: int) -> None:
        for _ in range(batches):
            await bucket.acquire(size)

    asyncio.run(load(20, 500))  # 10,000 vectors at 2,500/s, the first 2,500 from the burst
    assert now[0] == pytest.approx(3.0)
    asyncio.run(load(1, 6000))  # bigger than the burst: it goes, then the bucket pays it off
    assert now[0] == pytest.approx(3.0 + 6000 / 2500)
    asyncio.run(load(40, 100))  # the debt is paid: 4,000 more take 1.6 s at the rate
    assert now[0] == pytest.approx(5.4 + 4000 / 2500)
    assert bucket.waited == pytest.approx(now[0])  # never idle: every simulated second was a wait


def test_token_bucket_halves_when_throttled_and_climbs_back() -> None:
    from s3bulk._engine.ratelimit import TokenBucket

    now = [0.0]
    bucket = TokenBucket(1000, burst=100, clock=lambda: now[0])
    bucket.throttled()
    bucket.throttled()  # the same burst of refusals: one signal
    assert bucket.rate == 500 and bucket.cuts == 1
    now[0] += 1.5
    bucket.throttled()
    assert bucket.rate == pytest.approx((500 + 1.5 * 20) / 2)  # climbing back 20/s each second
    for _ in range(10):
        bucket.throttled()
        now[0] += 1.0
    assert bucket.rate >= bucket.floor == 50  # never stops altogether
    now[0] += 60  # a minute without a refusal: back to the ceiling, not beyond
    bucket._refill()
    assert bucket.rate == 1000
    for _ in range(20):  # the service takes 300/s: a cut aims just under that, not at half
        now[0] += 0.1
        bucket.delivered(30)
    bucket.throttled()
    assert bucket.rate == pytest.approx(0.9 * 300, rel=0.05)
