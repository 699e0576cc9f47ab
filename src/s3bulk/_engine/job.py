"""What an engine runs: a Job turns descriptors into items and items into results.

The split keeps workers shared-nothing. The driver only produces *descriptors* (a key range, a
batch of local paths): small, picklable, never bulk data. Each worker process expands descriptors
into items with its own clients and runs them. Every engine uses the same Job, so results differ
only by execution strategy.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from s3bulk._config import AwsSettings
from s3bulk._report import Failure, WorkerStats
from s3bulk._stores.retry import Gate, Meter, Retrier, RetryPolicy


class BatchOutcome(NamedTuple):
    """What one item did member by member (a DeleteObjects of up to 1,000 keys reports each key's
    fate), or what it found (a HEAD's attributes, as `records`). A single item's `run` may return
    just its byte count instead."""

    done: list[tuple[str, int, str]]  # (item id, bytes, source URL for --json records)
    failures: list[Failure]
    records: tuple[dict[str, Any], ...] = ()  # per done member, when a source and size say too little


class Skipped(NamedTuple):
    """A single item's run that chose to leave it alone (map's function returned None with
    `to=`): counted skipped, not done, and journaled as handled, so a resume leaves it too."""

    reason: str


@dataclass(frozen=True)
class ItemBatch:
    """A descriptor of items a busy worker handed over for idle ones (or the driver planned
    itself): already planned, so they run as they are."""

    items: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{len(self.items)} handed-over items"


@dataclass(frozen=True)
class Redo:
    """A lost worker's descriptor, run again without the items that worker (or a worker it
    handed them to) already finished: each item is still done, and counted, exactly once."""

    descriptor: Any
    skip: frozenset[str]

    def __str__(self) -> str:
        return str(self.descriptor)


# Set while a worker expands a lost worker's descriptor again: the item ids finished already.
# A context variable, because each descriptor expands in its own task.
REDO_SKIP: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("redo_skip", default=frozenset())


@dataclass
class WorkerContext:
    """Per-process state handed to a job: its stats and a way to hand off split work."""

    worker_id: int
    stats: WorkerStats = field(default_factory=WorkerStats)
    # a journal keeps what this run starts, so a stopped job may leave uploads for its resume
    journaled: bool = False
    # hand descriptors to idle workers: (descriptors, handed item ids, narrowed own descriptor)
    split: Callable[..., None] = lambda descriptors, handed=None, narrowed=None: None
    want_split: Callable[[], bool] = lambda: False
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    done_before: Callable[[list[str]], set[str]] = lambda ids: set()  # ids an earlier run finished
    on_throttle: Callable[[], None] = lambda: None  # the adaptive in-flight limit backs off
    # send the counts now, not at the next tick: what they carry must reach the journal before a
    # kill could lose it (a multipart upload's id: else nothing could ever abort that upload)
    report_now: Callable[[], None] = lambda: None
    # stop the job (once, with this one line) after the item at hand: what has not started is
    # not journaled, so a resume does it
    stop_job: Callable[[str], None] = lambda reason: None

    requests_gate: Gate | None = None  # the job's caps, this worker's share (worker._caps)
    # resume: (bucket, key) -> the id of a multipart upload an earlier run left, taken by the
    # item that uploads that key again (`resumed_upload`)
    resumable: dict[tuple[str, str], str] = field(default_factory=dict)
    bytes_gate: Gate | None = None

    def resumed_upload(self, bucket: str, key: str) -> str | None:
        return self.resumable.pop((bucket, key), None)

    def kept_upload(self, stored: int) -> None:
        """A multipart upload left for the resume as the job stops, holding `stored` bytes."""
        self.stats.uploads_kept += 1
        self.stats.bytes_kept += stored

    def count_retry(self, error: Exception) -> None:
        """Told of every retry of every request: it shows in the report, and a service that says
        "slow down" gets fewer requests at once (whichever request it was)."""
        self.stats.retries += 1
        if getattr(error, "throttled", False):
            self.stats.throttles += 1
            self.on_throttle()

    @property
    def retrier(self) -> Retrier:
        """The one retry policy, counting into this worker's stats: what its storage retries with."""
        meter = Meter(self.stats.requests, self.stats.stage_seconds, self.count_retry)
        return Retrier(self.retry, meter, self.requests_gate, self.bytes_gate)

    def drop_done(self, items: list[Any], item_id: Callable[[Any], str]) -> list[Any]:
        """Leave out items an earlier run of this job finished (resume), counting them, and items
        this run already finished when a lost worker's descriptor is redone (not counted again)."""
        if not items:
            return items
        skip = REDO_SKIP.get()
        if skip:
            items = [item for item in items if item_id(item) not in skip]
        done = self.done_before([item_id(item) for item in items])
        if not done:
            return items
        self.stats.objects_already_done += len(done)
        return [item for item in items if item_id(item) not in done]


class Job(Protocol):
    """A bulk job. Instances are pickled to worker processes, so keep them to plain settings."""

    settings: AwsSettings
    preflight_requests: dict[str, int]  # requests its Command made before the engine started
    preflight_notes: list[str]  # what was decided for the user then (columns found, caches used)

    def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        """Driver side: the initial descriptors (streamed, so huge sources stay bounded). Work the
        driver itself does (sync's listings and diff) is counted in `stats`."""
        ...

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any] | AsyncIterator[Any]:
        """Driver side: descriptors that redo exactly these failed items, (item id, size) each;
        an async iterator where the job must list again to know which still need doing (a
        delete rests on this run's listing, never on the failed run's: sync)."""
        ...

    async def open(self, ctx: WorkerContext) -> None:
        """Worker side: build this process's clients."""
        ...

    def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        """Worker side: the items of one descriptor, in batches (e.g. one listing page)."""
        ...

    async def run(self, item: Any, ctx: WorkerContext) -> int | BatchOutcome | Skipped:
        """Worker side: do one item; return bytes moved (or a batch's outcome); raise ItemError."""
        ...

    def item_id(self, item: Any) -> str:
        """The item's stable name in the journal (the source key or relative path)."""
        ...

    def cost(self, item: Any) -> int:
        """Bytes this item holds in memory while it runs (0 when bytes never pass through us)."""
        ...

    def describe(self, item: Any) -> tuple[str, str, int]:
        """(source, destination, size) for reports and failure lists. A job may also have a
        `record(item)` giving a finished item's `--json` record with what it learned doing it
        (`item_record` below is the default)."""
        ...

    async def close(self, ctx: WorkerContext) -> None: ...


def item_record(job: Job, item: Any) -> dict[str, Any]:
    """What `--json` prints for a finished item: where from, where to, its size, and what the
    job's own `record` adds."""
    record = getattr(job, "record", None)
    if record is not None:
        return dict(record(item))
    source, destination, size = job.describe(item)
    return {"source": source, "destination": destination, "size": size}
