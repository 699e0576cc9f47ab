"""`s3bulk doctor`: a short probe of one bucket/prefix that says, in plain words, what limits a
bulk job there and which engine and concurrency to use.

Steps, each small (a few hundred requests in all):
1. list one page: does the prefix exist, and what does a LIST cost;
2. a few small GETs one after another: the round trip (the fastest one) and the client CPU each
   request costs (process CPU over the requests);
3. GETs at rising concurrency (1, 2, 4, ... 256): where throughput stops growing is the knee.
If the prefix holds objects, step 3 reads their first bytes (ranged GETs; nothing is written).
An empty prefix gets probe objects under `.s3bulk-doctor-*/`, deleted again at the end.
The recommendation follows from the numbers: if the knee's request rate needs most of a core
just to issue requests, one process cannot feed it (use hybrid/auto); the in-flight count at the
knee is what --concurrency should reach, summed over the workers.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from s3bulk._config import AwsSettings, cores
from s3bulk._stores.objects import obstore_can_address
from s3bulk._stores.storage import Storage
from s3bulk._urls import parse_s3

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PROBE_SIZE = 64 * 1024
GROWTH = 1.15  # a level must beat the last by 15% to count as growth
BUSY_CORE = 0.7  # a single process issuing requests at this share of a core is the bottleneck


@dataclass
class Level:
    concurrency: int
    requests_per_second: float
    megabytes_per_second: float
    median_ms: float


@dataclass
class Diagnosis:
    url: str
    endpoint: str
    listed_keys: int = 0
    list_ms: float = 0.0
    rtt_ms: float = 0.0
    cpu_ms_per_request: float = 0.0
    probe: str = ""  # what step 3 read
    levels: list[Level] = field(default_factory=list)
    knee: int = 0
    recommendation: str = ""
    engine: str = ""
    workers: int = 0
    concurrency: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def doctor(url: str, settings: AwsSettings | None = None, max_concurrency: int = 256) -> Diagnosis:
    """Synchronous twin of `doctor_async`."""
    return asyncio.run(doctor_async(url, settings, max_concurrency))


async def doctor_async(
    url: str, settings: AwsSettings | None = None, max_concurrency: int = 256
) -> Diagnosis:
    """Probe `url` (s3://bucket/prefix/) and recommend an engine and concurrency for it."""
    settings = settings or AwsSettings.from_env()
    settings.credentials()
    location = parse_s3(url)
    bucket, prefix = location.bucket, location.key
    result = Diagnosis(url, settings.resolved_endpoint)
    client = Storage(settings, connections=max_concurrency)
    written: list[str] = []
    try:
        started = time.perf_counter()
        page = await client.list_objects_v2(bucket, prefix)
        result.list_ms = 1000 * (time.perf_counter() - started)
        result.listed_keys = len(page.objects)
        readable = [info for info in page.objects if info.size > 0 and obstore_can_address(info.key)]
        keys = [info.key for info in readable]
        size = min(PROBE_SIZE, min((info.size for info in readable), default=0))
        if keys:
            result.probe = f"the first {size:,} bytes of {len(keys):,} existing objects (nothing written)"
        else:
            base = f"{prefix}.s3bulk-doctor-{uuid.uuid4().hex[:8]}/"
            written = [f"{base}probe-{n:03d}" for n in range(16)]
            body = os.urandom(PROBE_SIZE)
            await asyncio.gather(*(client.put_bytes(bucket, key, body) for key in written))
            keys, size = written, PROBE_SIZE
            result.probe = f"{len(written)} probe objects of {PROBE_SIZE // 1024} KiB, deleted afterwards"

        async def get(n: int) -> float:
            began = time.perf_counter()
            data = await client.read_range(f"s3://{bucket}", keys[n % len(keys)], 0, size)
            assert len(data) == size
            return time.perf_counter() - began

        await get(0)  # connection set-up is not a round trip
        cpu = time.process_time()
        sequential = [await get(n) for n in range(10)]
        result.cpu_ms_per_request = 1000 * (time.process_time() - cpu) / len(sequential)
        result.rtt_ms = 1000 * min(sequential)
        await _ramp(result, get, size, max_concurrency)
    finally:
        if written:
            await client.delete_many(bucket, written)
        await client.close()
    _recommend(result)
    return result


async def _ramp(result: Diagnosis, get: Any, size: int, max_concurrency: int) -> None:
    best, flat = 0.0, 0
    for concurrency in (level for level in LEVELS if level <= max_concurrency):
        count = max(32, 4 * concurrency)
        gate = asyncio.Semaphore(concurrency)
        latencies: list[float] = []

        async def one(n: int, gate: asyncio.Semaphore = gate, latencies: list[float] = latencies) -> None:
            async with gate:
                latencies.append(await get(n))

        began = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(count)))
        seconds = time.perf_counter() - began
        rate = count / seconds
        result.levels.append(Level(concurrency, rate, rate * size / 1e6, 1000 * statistics.median(latencies)))
        if rate > best * GROWTH:
            best, flat = rate, 0
            result.knee = concurrency
        else:
            flat += 1
            if flat == 2:  # two levels without growth: past the knee
                break


def _recommend(result: Diagnosis) -> None:
    """Engine, workers and concurrency from the knee: the rate quoted is the one measured there
    (a later level's few percent more is not growth), the concurrency twice it, said so."""
    knee_rate = next(
        (level.requests_per_second for level in result.levels if level.concurrency == result.knee),
        max((level.requests_per_second for level in result.levels), default=0.0),
    )
    core_share = knee_rate * result.cpu_ms_per_request / 1000
    available = cores()
    if core_share >= BUSY_CORE and available > 1:
        workers = available
        why = (
            f"issuing {knee_rate:,.0f} requests/s takes {core_share:.1f} of a core in one process, "
            f"so spread it over {workers} processes"
        )
        engine = "auto"
    else:
        workers = 1 if result.knee <= 64 else available
        why = (
            f"one process issues {knee_rate:,.0f} requests/s with {core_share:.1f} of a core; "
            f"the service, not the client, is the limit"
        )
        engine = "async" if workers == 1 else "hybrid"
    per_worker = max(8, -(-max(result.knee, 1) // workers) * 2)  # twice the knee: headroom for big objects
    result.engine, result.workers, result.concurrency = engine, workers, per_worker
    flags = f"--engine {engine}" + ("" if engine == "async" else f" --workers {workers}")
    flags += f" --concurrency {per_worker}"
    headroom = "twice the knee per worker, headroom for larger objects"
    result.recommendation = (
        f"throughput stops growing at about {result.knee} requests in flight "
        f"({knee_rate:,.0f} requests/s there); {why}: use {flags} ({headroom})"
    )


def render(result: Diagnosis) -> str:
    lines = [
        f"doctor {result.url} (endpoint {result.endpoint})",
        f"  listing: {result.listed_keys:,} keys in the first page, {result.list_ms:.1f} ms",
        f"  round trip: {result.rtt_ms:.1f} ms (fastest of 10 small GETs); client CPU "
        f"{result.cpu_ms_per_request:.2f} ms per request",
        f"  rising concurrency, reading {result.probe}:",
        "    in flight  requests/s    MB/s  median ms",
    ]
    lines += [
        f"    {level.concurrency:9}  {level.requests_per_second:10,.0f}  {level.megabytes_per_second:6.1f}"
        f"  {level.median_ms:9.1f}"
        for level in result.levels
    ]
    lines.append(f"recommendation: {result.recommendation}")
    return "\n".join(lines)
