"""What a job did: counts, bytes, requests by kind, time per stage, and every failure with its
reason. Workers keep `WorkerStats`; the driver merges their deltas into one `Report`."""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator, MutableMapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from s3bulk._config import cores
from s3bulk._pricing import request_cost


@dataclass
class Failure:
    source: str
    destination: str
    reason: str
    skipped: bool = False  # left out on purpose (a symlink, say): reported, but not a failure
    item_id: str = ""  # the journal's name for the item ("" for job-level problems)
    size: int = 0


@dataclass(frozen=True)
class RecordSink:
    """Where per-object records (source, destination, size) go, and how many each worker
    sends: all of them (`first=None`, for --json), or only the first few a person reads."""

    write: Callable[[list[dict[str, Any]]], None]
    first: int | None = None

    def __call__(self, records: list[dict[str, Any]]) -> None:
        self.write(records)


def seconds() -> collections.defaultdict[str, float]:
    """Seconds by stage (or activity), starting at 0.0 for any name."""
    return collections.defaultdict(float)


@dataclass
class WorkerStats:
    """Counters a worker accumulates and ships to the driver as deltas."""

    objects_listed: int = 0
    bytes_listed: int = 0
    objects_done: int = 0
    bytes_done: int = 0
    objects_failed: int = 0
    objects_skipped: int = 0
    objects_already_done: int = 0  # finished by an earlier run of the job (journal)
    objects_unchanged: int = 0  # sync: already identical at the destination
    objects_deleted: int = 0  # sync --delete, mv sources
    objects_unverified: int = 0  # downloads whose bytes nothing could check (no MD5 ETag, no checksum)
    retries: int = 0
    throttles: int = 0  # retries the service caused by saying "slow down" (429, 503 SlowDown)
    concurrency: int = 0  # change in this worker's in-flight limit (the report sums them)
    limit_cuts: int = 0  # times the in-flight limit was lowered (throttling; auto: also queueing)
    in_flight: int = 0  # change in items running now (the report sums them: a gauge)
    # change in the bytes of items still running that have moved (parts stored, ranges written:
    # `_stores/underway.py`), taken out when the item ends (a gauge, as in_flight)
    bytes_underway: int = 0
    vectors_done: int = 0  # vectors: the vectors in the batches that were stored
    vectors_rejected: int = 0  # vectors: rows that failed the checks (--on-error skip)
    cpu_seconds: float = 0.0
    retrieval_usd: float = 0.0  # restore: what the retrievals asked for cost at list prices
    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    # what the items turned out to be, where "done" says too little (restore: requested, ongoing,
    # restored already, not archived), shown in the summary line as counted
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    stage_seconds: collections.defaultdict[str, float] = field(default_factory=seconds)
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the report says once (the first of each kept)
    records: list[dict[str, Any]] = field(default_factory=list)
    done_ids: list[tuple[str, int]] = field(default_factory=list)  # (item id, size) for the journal
    failed_descriptors: list[tuple[Any, str]] = field(default_factory=list)  # whole listings that failed
    handled: list[tuple[int, str]] = field(default_factory=list)  # (descriptor id, item id) finished
    expanded: list[int] = field(default_factory=list)  # descriptors whose items are all listed
    uploads_started: list[tuple[str, str, str]] = field(default_factory=list)  # multipart (bucket, key, id)
    uploads_ended: list[str] = field(default_factory=list)  # their ids, once completed or aborted
    # a stopped job's multipart uploads left for its resume, and the bytes their stored parts hold
    uploads_kept: int = 0
    bytes_kept: int = 0

    def take(self) -> WorkerStats:
        """Return the counts since the last call and reset them. Containers are cleared in place,
        so clients holding a reference to `requests` keep counting into the live object."""
        delta = WorkerStats()
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, int | float):
                setattr(delta, name, value)
                setattr(self, name, type(value)())
            else:
                setattr(delta, name, value.copy())
                value.clear()
        return delta

    def is_empty(self) -> bool:
        return self == WorkerStats()

    def timed(self, stage: str) -> contextlib.AbstractContextManager[None]:
        """Add the wall time of a synchronous step (planning, building a request) to a stage."""
        return timed(self.stage_seconds, stage)


@contextlib.contextmanager
def timed(
    seconds: MutableMapping[str, float], key: str, clock: Callable[[], float] = time.perf_counter
) -> Iterator[None]:
    """Add the time the block takes, by `clock` (wall, or time.thread_time for CPU), to seconds[key]."""
    start = clock()
    try:
        yield
    finally:
        seconds[key] += clock() - start


T = TypeVar("T")


async def listed(source: AsyncIterable[T], stats: WorkerStats) -> AsyncIterator[T]:
    """`source`, with the time spent waiting for each next element counted as "list" (the part
    the source itself counted as "plan", mapping keys or diffing, is left out)."""
    elements = aiter(source)
    while True:
        asked, planned = time.perf_counter(), stats.stage_seconds["plan"]
        try:
            element = await anext(elements)
        except StopAsyncIteration:
            return
        planning = stats.stage_seconds["plan"] - planned
        stats.stage_seconds["list"] += time.perf_counter() - asked - planning
        yield element


# What a worker's counts are called in the report; every other number has the same name in both.
_REPORT_NAME = {"objects_listed": "objects_total", "bytes_listed": "bytes_total"}
_SUMMED = [name for name, spec in WorkerStats.__dataclass_fields__.items() if spec.type in ("int", "float")]


@dataclass
class Report:
    """The result of a job, returned by the Python API and printed by the CLI."""

    command: str
    source: str = ""
    destination: str = ""
    engine: str = ""
    workers: int = 0
    inline: bool = False  # the one worker ran in the driver's own event loop
    dry_run: bool = False
    objects_total: int = 0
    bytes_total: int = 0
    objects_done: int = 0
    bytes_done: int = 0
    objects_failed: int = 0
    objects_skipped: int = 0
    objects_already_done: int = 0
    objects_unchanged: int = 0
    objects_deleted: int = 0
    objects_unverified: int = 0
    retries: int = 0
    throttles: int = 0
    concurrency: int = 0  # requests allowed in flight across all workers, now
    concurrency_peak: int = 0
    limit_cuts: int = 0
    in_flight: int = 0
    bytes_underway: int = 0  # of the objects still on their way, the bytes that have moved
    vectors_done: int = 0
    vectors_rejected: int = 0
    uploads_kept: int = 0  # stopped: multipart uploads left for the resume to go on with
    bytes_kept: int = 0  # ... and the bytes their stored parts hold, which it will not send again
    # every descriptor is listed, so objects_total and bytes_total are whole, not found so far
    total_known: bool = False
    aborted: str = ""  # why the job stopped early (--on-error abort), or ""
    job_id: str = ""
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0  # every process of the job
    driver_cpu: dict[str, float] = field(default_factory=dict)  # the main process's, by activity
    retrieval_usd: float = 0.0  # restore: the retrievals asked for, at list prices (`_pricing`)
    requests: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)  # what the items turned out to be
    stage_seconds: dict[str, float] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(
        default_factory=list
    )  # what the user should know (gather: index cache, fallbacks)

    @property
    def ok(self) -> bool:
        return self.objects_failed == 0 and not self.aborted

    @property
    def request_cost(self) -> float:
        """Dollars these requests would cost at S3 Standard list prices (see s3bulk._pricing)."""
        return request_cost(self.requests)

    @property
    def objects_per_second(self) -> float:
        return self.objects_done / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def gigabits_per_second(self) -> float:
        return self.bytes_done * 8 / 1e9 / self.wall_seconds if self.wall_seconds else 0.0

    def add(self, delta: WorkerStats) -> None:
        for name in _SUMMED:
            mine = _REPORT_NAME.get(name, name)
            setattr(self, mine, getattr(self, mine) + getattr(delta, name))
        for kind, count in delta.requests.items():
            self.requests[kind] = self.requests.get(kind, 0) + count
        for outcome, count in delta.outcomes.items():
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + count
        for stage, seconds in delta.stage_seconds.items():
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds
        self.failures.extend(delta.failures)
        self.notes.extend(note for note in dict.fromkeys(delta.notes) if note not in self.notes)
        self.concurrency_peak = max(self.concurrency_peak, self.concurrency)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["objects_per_second"] = round(self.objects_per_second, 1)
        data["gigabits_per_second"] = round(self.gigabits_per_second, 3)
        data["request_cost_usd"] = round(self.request_cost, 6)
        data["ms_per_item"] = {stage: round(ms, 3) for stage, ms in per_item_ms(self).items()}
        data["verdict"] = verdict(self)
        return data


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


# ---- where the time went ---------------------------------------------------------------------
# Where a job's time went, in the seed articles' terms: is the client or the service the limit?
#
# Stage seconds are summed over items (many are in flight at once, so the sum can exceed the wall
# time); per item they read like the seeds' tables:
# - list:    waiting for the source (listing pages, a directory walk)
# - plan:    turning listings into work (key mapping, filters, the sync diff)
# - build:   building and signing requests before they are sent (CPU under the GIL)
# - wait:    an item ready but held back (queue full, byte budget, in-flight limit)
# - rate:    held back by a rate limit's token bucket (vectors: the per-index write limits)
# - request: in flight at the service, response handling included
# The seed's signal: if build time per item stays flat while request time per item rises, adding
# load only queues at the service, which is then the limit; if the CPU is busy all the time, the
# client is.
#

STAGES = ("list", "plan", "build", "wait", "rate", "request")
CLIENT_BOUND_CPU_SHARE = 0.8


def stage_seconds(report: Report) -> dict[str, float]:
    """Seconds per stage; request time here excludes the building and rate waits it contains.
    Stages a job never uses (rate, for objects) are left out."""
    raw = report.stage_seconds
    seconds = {stage: raw.get(stage, 0.0) for stage in STAGES if stage != "rate" or stage in raw}
    seconds["request"] = max(0.0, seconds["request"] - seconds["build"] - seconds.get("rate", 0.0))
    return seconds


def per_item_ms(report: Report) -> dict[str, float]:
    items = max(1, report.objects_done + report.objects_failed)
    return {stage: 1000 * value / items for stage, value in stage_seconds(report).items()}


def cpu_share(report: Report, available: int | None = None) -> float:
    """The share of the machine's cores the job kept busy."""
    available = available or cores()
    return report.cpu_seconds / (report.wall_seconds * available) if report.wall_seconds else 0.0


def verdict(report: Report, available: int | None = None) -> str:
    """One sentence a user can act on."""
    available = available or cores()
    share = cpu_share(report, available)
    ms = per_item_ms(report)
    if report.throttles:
        return (
            f"service-bound: it asked us to slow down {report.throttles:,} times; "
            "each time the requests in flight were halved, then grown back while it allowed"
        )
    if (
        ms.get("rate", 0.0) >= 0.5 * ms["request"]
        and ms.get("rate", 0.0) > 0
        and not report.command.startswith("vectors")
    ):
        return (
            f"rate-limited, as asked: each item waited {ms['rate']:.1f} ms for --tpslimit / --bwlimit "
            f"against {ms['request']:.1f} ms in flight; the service and the client have room to spare"
        )
    if ms.get("rate", 0.0) >= 0.5 * ms["request"] and ms.get("rate", 0.0) > 0:
        return (
            f"rate-limited, as asked: each batch waited {ms['rate']:.1f} ms for the per-index write limit "
            f"against {ms['request']:.1f} ms in flight; the client has room to spare. To go faster, shard "
            "over more indexes (--index, repeated), or raise --vectors-per-second if your quota allows"
        )
    if share >= CLIENT_BOUND_CPU_SHARE:
        return (
            f"client-bound: the job kept {share:.0%} of {available} core(s) busy; "
            "more cores (or fewer interpreters sharing them) would speed it up"
        )
    if ms["wait"] >= 0.5 * (ms["request"] + ms["build"]) and report.engine != "auto":
        fix = (
            "--engine hybrid or auto keep many in flight per worker"
            if report.concurrency_peak <= report.workers
            else "raise --concurrency or --max-in-flight (or use --engine auto)"
        )
        return (
            f"limited by s3bulk's own caps ({report.concurrency_peak:,} requests, --max-in-flight bytes "
            f"per worker): items waited {ms['wait']:.1f} ms for a slot against {ms['request']:.1f} ms "
            f"in flight; {fix}"
        )
    return (
        f"service-bound: requests took {ms['request']:.1f} ms each with up to {report.concurrency_peak:,} "
        f"in flight while the CPU was {share:.0%} busy; more in flight helps only a far-away service"
    )


def describe_cpu(report: Report) -> str:
    driver = report.driver_cpu
    own = driver.get("total", 0.0)
    parts = [
        f"{label} {driver[key]:.2f}"
        for key, label in (
            ("source", "listing/planning/loop"),
            ("merge", "merging results"),
            ("journal", "journal"),
            ("display", "display"),
        )
        if driver.get(key, 0.0) >= 0.005
    ]
    inside = f": {', '.join(parts)}" if parts else ""
    return f"CPU {report.cpu_seconds:.2f}s, of which the driver {own:.2f}s{inside}"
