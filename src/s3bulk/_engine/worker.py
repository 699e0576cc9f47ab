"""One worker: an asyncio loop (uvloop) running a job's items with bounded concurrency.

A worker is a process (processes, hybrid, auto engines) or a thread of the main process (serial,
threads, async engines); both speak the same pipe protocol to the driver. Pull-based and bounded
everywhere: the worker asks the driver for descriptors only when it can take more, a
descriptor's items flow through a queue of fixed size, and a fixed number of consumers run them.
Memory therefore depends on the in-flight limit, never on the object count.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import os
import pickle
import queue
import resource
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, TypeVar

from s3bulk._engine.adaptive import AdaptiveLimit
from s3bulk._engine.budget import ByteBudget
from s3bulk._engine.job import (
    REDO_SKIP,
    BatchOutcome,
    ItemBatch,
    Job,
    Redo,
    Skipped,
    WorkerContext,
    item_record,
)
from s3bulk._engine.links import InlineLink, watch_pipe
from s3bulk._engine.loop import run_loop
from s3bulk._engine.messages import (
    Abort,
    Cancel,
    Crash,
    Done,
    DriverGone,
    Finished,
    Progress,
    Split,
    SplitAllowed,
    Stop,
    Stopping,
    Want,
    Work,
)
from s3bulk._engine.ratelimit import TokenBucket
from s3bulk._engine.strategies import AUTO_CEILING_FACTOR
from s3bulk._errors import ItemError, JobAborted, classify
from s3bulk._stores.retry import Gate, RetryPolicy, requests_done
from s3bulk._stores.underway import piece_counter

if TYPE_CHECKING:
    from s3bulk._journal.store import PartWriter
from s3bulk._report import Failure, WorkerStats, listed, timed

T = TypeVar("T")
PROGRESS_INTERVAL = 0.1
EXPANDING: contextvars.ContextVar[int] = contextvars.ContextVar("expanding", default=0)
DESCRIPTOR_PREFETCH = 2


@dataclass(frozen=True)
class EngineOptions:
    concurrency: int = 64  # requests in flight per worker (with `adaptive`, the ceiling)
    adaptive: bool = False  # find the in-flight limit by AIMD (engine "auto")
    in_process: bool = False  # workers are threads of the driver's process
    inline: bool = False  # the one worker is a task of the driver's own event loop
    workers: int = 1  # how many workers share the job (work is handed over only if several)
    max_in_flight_bytes: int = 16 * 1024**2  # per worker process
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    record_items: int = 0  # records (source, destination, size) each worker sends, for the first items
    journal_path: str | None = None  # set: record item ids for the driver's journal
    skip_done: bool = False  # resume: leave out items the journal has as done
    track_items: bool = False  # report which items each descriptor finished, so a lost worker's
    # descriptors can be redone without them (the ray engine: a lost worker does not fail the job)
    ray_address: str | None = None  # the ray engine: the cluster (None: a local instance)
    journal_url: str | None = None  # the ray engine: the job's prefix in the object store
    journal_run: int = 0  # the run of the job this is (names the object-store journal's parts)
    journal_snapshot: str | None = None  # resume: the published journal workers skip done items by
    # resume: multipart uploads (bucket, key, upload id) an earlier run left, to be gone on with
    resumable_uploads: tuple[tuple[str, str, str], ...] = ()
    bytes_per_second: int | None = None  # the job's caps (--bwlimit, --tpslimit): each worker
    requests_per_second: float | None = None  # keeps its share of them (`_caps`)
    memory_capped: bool = False  # --max-memory: freed bodies go back to the system (`_hold_less`)


# Items that may run beyond the in-flight limit because they have sent their last request and
# wait for work on this machine: the MD5 lanes gather up to 16 bodies (stores/digests.py).
LOCAL_WORK_ITEMS = 16


class _Slot:
    """A consumer's place in the in-flight limit for the item it runs, given back once: when the
    item says it sends no more requests (`requests_done`), or when it ends. The latency the limit
    learns from is then the requests' own, without the local work after them. One per consumer
    task, taken again for each item: nothing is made per item."""

    __slots__ = ("acquired", "cost", "held", "limit")

    def __init__(self, limit: AdaptiveLimit | None) -> None:
        self.limit, self.acquired, self.cost, self.held = limit, 0.0, 0, False

    def take(self, acquired: float, cost: int) -> None:
        self.acquired, self.cost, self.held = acquired, cost, self.limit is not None

    async def release(self, moved: int | None = None) -> None:
        if self.held and self.limit is not None:
            self.held = False
            latency = time.perf_counter() - self.acquired
            await self.limit.release(latency, self.cost if moved is None else moved)


class _Underway:
    """The pieces of the item a consumer task runs that have moved already (`_stores/underway`):
    counted into the worker's `bytes_underway` as they move, and taken out again when the item
    ends, which counts its bytes as done (or failed) as a whole. One per consumer task."""

    __slots__ = ("count", "stats")

    def __init__(self, stats: WorkerStats) -> None:
        self.stats, self.count = stats, 0

    def __call__(self, count: int) -> None:
        self.count += count
        self.stats.bytes_underway += count

    def settle(self) -> None:
        if self.count:
            self.stats.bytes_underway -= self.count
            self.count = 0


class WorkerRuntime:
    """Runs descriptors sent by the driver; reports progress and final stats back."""

    def __init__(self, job: Job, options: EngineOptions, ctx: WorkerContext, send: Any) -> None:
        self.job = job
        self.options = options
        self.ctx = ctx
        self.send = send
        # (descriptor id, item, bytes of the budget it holds already, or None)
        self.items: asyncio.Queue[tuple[int, Any, int | None] | None] = asyncio.Queue(
            maxsize=options.concurrency * 2
        )
        # A job whose items carry their bytes from the moment they are listed (vectors batches:
        # the rows) takes each item's cost before queueing it, so the budget bounds the queue
        # too (a queue of 32 batches of 2 MB of rows would otherwise sit beside the budget).
        self.cost_before_queue: bool = getattr(job, "items_hold_their_cost", False)
        self.open_items: dict[int, int] = {}  # descriptor id -> items not yet finished
        self.expanded: set[int] = set()  # descriptors whose expansion is complete
        self.split_allowed = False
        self.aborting = False  # the job asked to stop: run nothing new, report what is done
        self.recorded = 0  # records sent so far (EngineOptions.record_items)
        self.budget = ByteBudget(options.max_in_flight_bytes)
        self.parts: PartWriter | None = None  # the object-store journal's writer (ray engine)
        self.limit: AdaptiveLimit | None = None
        if options.adaptive:
            # start where hybrid runs (--concurrency), then move: up to 4x, or down when throttled
            start = max(8, options.concurrency // AUTO_CEILING_FACTOR)
            self.limit = AdaptiveLimit(options.concurrency, start, on_change=self._limit_changed)
        elif options.concurrency > 1:  # --concurrency is the ceiling; throttling halves it
            self.limit = AdaptiveLimit(
                options.concurrency, options.concurrency, on_change=self._limit_changed, find_knee=False
            )
        if self.limit is not None:
            ctx.on_throttle = self.limit.throttled
        ctx.stats.concurrency += self.limit.limit if self.limit else options.concurrency

    def _limit_changed(self, old: int, new: int) -> None:
        self.ctx.stats.concurrency += new - old
        self.ctx.stats.limit_cuts += new < old

    async def expand(self, descriptor_id: int, descriptor: Any) -> None:
        stats = self.ctx.stats
        self.open_items[descriptor_id] = 0
        EXPANDING.set(descriptor_id)  # this task's own context: ctx.split and drop_done see it
        if isinstance(descriptor, Redo):
            REDO_SKIP.set(descriptor.skip)
            descriptor = descriptor.descriptor
        try:
            async for batch in listed(self._batches(descriptor), stats):
                if self.aborting:
                    break
                end = len(batch)
                index = 0
                while index < end:
                    end = self._hand_over(descriptor_id, batch, index, end)
                    self.open_items[descriptor_id] += 1
                    start = time.perf_counter()
                    item = batch[index]
                    held = await self.budget.acquire(self.job.cost(item)) if self.cost_before_queue else None
                    await self.items.put((descriptor_id, item, held))
                    stats.stage_seconds["wait"] += time.perf_counter() - start
                    index += 1
        except JobAborted as exc:
            self.abort(str(exc))
        except Exception as exc:  # a listing that cannot go on: the whole descriptor failed
            error = classify(exc)
            if error.job_wide:  # no other listing would fare better: stop the job, once
                self.abort(str(error))
                self._expanded(descriptor_id)
                return
            stats.objects_failed += 1
            stats.failures.append(Failure(str(descriptor), "", str(error)))
            if self.options.journal_path:
                stats.failed_descriptors.append((descriptor, str(error)))
        self._expanded(descriptor_id)

    def _expanded(self, descriptor_id: int) -> None:
        self.expanded.add(descriptor_id)
        self.ctx.stats.expanded.append(descriptor_id)  # after its items' counts (the totals)
        self.send(Want(1))
        self._maybe_finished(descriptor_id)

    async def _batches(self, descriptor: Any) -> AsyncIterator[list[Any]]:
        if isinstance(descriptor, ItemBatch):
            skip = REDO_SKIP.get()
            yield [item for item in descriptor.items if self.job.item_id(item) not in skip]
            return
        async for batch in self.job.expand(descriptor, self.ctx):
            yield batch

    def _hand_over(self, descriptor_id: int, batch: list[Any], index: int, end: int) -> int:
        """Before queueing batch[index], hand what this worker cannot start soon to idle workers
        (in chunks, through the driver) and return the new end of this worker's share. A page of
        1,000 keys must not sit behind one worker's few slots while others have nothing to do.
        Only while the driver's queue is short: the expander still waits for its own share, so
        listing never runs ahead of the work."""
        keep = 2 * (self.limit.limit if self.limit else self.options.concurrency)
        if self.options.workers < 2 or not self.split_allowed or end - index <= keep:
            return end
        rest = batch[index + keep : end]
        handed = [self.job.item_id(item) for item in rest] if self.options.track_items else []
        batches = [ItemBatch(tuple(rest[n : n + keep])) for n in range(0, len(rest), keep)]
        self.send(Split(batches, descriptor_id, handed, None))
        return index + keep

    def abort(self, reason: str) -> None:
        if not self.aborting:
            self.aborting = True
            self.send(Stopping(reason))

    def _maybe_finished(self, descriptor_id: int) -> None:
        if descriptor_id in self.expanded and self.open_items.get(descriptor_id) == 0:
            del self.open_items[descriptor_id]
            self.expanded.discard(descriptor_id)
            self.flush()  # the driver counts its items before it forgets the descriptor
            if self.parts is not None:
                self.parts.write()
            self.send(Finished(descriptor_id))

    async def consume(self) -> None:
        stats = self.ctx.stats
        slot = _Slot(self.limit)
        requests_done.set(slot.release)  # this task's own context: its items give back `slot`
        underway = _Underway(stats)
        piece_counter.set(underway)  # and count their pieces into it

        while (entry := await self.items.get()) is not None:
            descriptor_id, item, held = entry
            start = time.perf_counter()
            has_slot = False
            if not self.aborting:
                if held is None:
                    held = await self.budget.acquire(self.job.cost(item))
                if self.limit is not None:
                    await self.limit.acquire()
                    has_slot = True
            if self.aborting:  # not started, so not journaled: a later run does it. Asked again
                # after the waits: more consumers than slots wait in them (LOCAL_WORK_ITEMS)
                if has_slot and self.limit is not None:
                    await self.limit.release(0.0)
                await self.budget.release(held or 0)
                self.open_items[descriptor_id] -= 1
                self._maybe_finished(descriptor_id)
                continue
            assert held is not None  # taken above: the job was not stopping
            acquired = time.perf_counter()
            stats.stage_seconds["wait"] += acquired - start
            stats.in_flight += 1
            moved = 0
            slot.take(acquired, held)  # held: the item's cost, as the budget took it
            try:
                result = await self.job.run(item, self.ctx)  # its storage retried each request
                if isinstance(result, BatchOutcome):
                    self._count_batch(result)
                elif isinstance(result, Skipped):
                    self._count_skipped(item, result)
                else:
                    moved = result
                    self._count_done(item, result)
                self._handled(descriptor_id, item, result)
            except JobAborted as exc:
                self.abort(str(exc))
            except Exception as exc:  # ItemError; anything else is a bug, but must not lose the item
                error = classify(exc)
                if error.job_wide:
                    # every other item would fail alike: stop the job with this one line; the
                    # item is not journaled as failed, so a resume after the fix does it
                    self.abort(str(error))
                else:
                    self._count_failed(descriptor_id, item, exc)
                error = None  # type: ignore[assignment]  # its traceback holds this frame: no cycle
            finally:
                stats.in_flight -= 1
                underway.settle()
                await self.budget.release(held)
                if slot.held:
                    await slot.release(moved)
            stats.stage_seconds["request"] += time.perf_counter() - acquired
            self.open_items[descriptor_id] -= 1
            self._maybe_finished(descriptor_id)

    def _count_failed(self, descriptor_id: int, item: Any, exc: Exception) -> None:
        source, destination, size = self.job.describe(item)
        reason = str(exc) if isinstance(exc, ItemError) else f"internal error: {exc!r}"
        stats = self.ctx.stats
        stats.objects_failed += 1
        item_id = self.job.item_id(item) if self.options.journal_path else ""
        stats.failures.append(Failure(source, destination, reason, item_id=item_id, size=size))
        self._handled(descriptor_id, item, None)

    def _handled(self, descriptor_id: int, item: Any, result: int | BatchOutcome | Skipped | None) -> None:
        """Tell the driver (with the counts, in the same message) that this item is finished."""
        if not self.options.track_items:
            return
        handled = self.ctx.stats.handled
        handled.append((descriptor_id, self.job.item_id(item)))
        if isinstance(result, BatchOutcome):  # members are what a redone listing would yield
            handled.extend((descriptor_id, member) for member, _, _ in result.done)
            handled.extend((descriptor_id, failure.item_id) for failure in result.failures)

    def _count_done(self, item: Any, moved: int) -> None:
        stats = self.ctx.stats
        stats.objects_done += 1
        stats.bytes_done += moved
        if self.options.journal_path:
            stats.done_ids.append((self.job.item_id(item), moved))
        if self.recorded < self.options.record_items:
            self.recorded += 1
            stats.records.append(item_record(self.job, item))

    def _count_skipped(self, item: Any, skipped: Skipped) -> None:
        stats = self.ctx.stats
        stats.objects_skipped += 1
        if self.options.journal_path:
            stats.done_ids.append((self.job.item_id(item), 0))
        if self.recorded < self.options.record_items:
            self.recorded += 1
            stats.records.append(item_record(self.job, item) | {"destination": "", "skipped": skipped.reason})

    def _count_batch(self, outcome: BatchOutcome) -> None:
        stats = self.ctx.stats
        stats.objects_done += len(outcome.done)
        stats.bytes_done += sum(size for _, size, _ in outcome.done)
        stats.objects_failed += len(outcome.failures)
        stats.failures.extend(outcome.failures)
        if self.options.journal_path:
            stats.done_ids.extend((item_id, size) for item_id, size, _ in outcome.done)
        wanted = self.options.record_items - self.recorded
        if wanted > 0:
            found = outcome.records or tuple({"source": url, "size": size} for _, size, url in outcome.done)
            records = list(found[:wanted])
            self.recorded += len(records)
            stats.records.extend(records)

    async def report_progress(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL)
            self.flush()

    def flush(self) -> None:
        if not self.ctx.stats.is_empty():
            delta = self.ctx.stats.take()
            if self.parts is not None:
                self.parts.add(delta)
            self.send(Progress(delta))


# A worker whose driver is gone waits this long for its items' cleanup (an upload's abort gets
# `multipart.ABORT_SECONDS`), then leaves anyway: nobody is left to wait for it, and an orphan
# process holding connections is worse than a cleanup cut short.
DRIVER_GONE_CLEANUP_SECONDS = 20.0


async def _cancel(tasks: list[asyncio.Task[Any]], within: float | None = None) -> None:
    """Cancel `tasks` and wait for their cleanup to end, or for `within` seconds."""
    for task in tasks:
        task.cancel()
    gathered = asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.wait([gathered], timeout=within)


class _Sender:
    """Sends to the driver from a thread. The event loop must never block on a full pipe: the
    driver may itself be blocked sending this worker a page, and only this loop drains that."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="s3bulk-sender", daemon=True)
        self.thread.start()

    def __call__(self, message: Any) -> None:
        self.outbox.put(message)

    def _run(self) -> None:
        while (message := self.outbox.get()) is not None:
            try:
                self.conn.send(message)
            except (OSError, ValueError):
                return

    def close(self) -> None:
        self.outbox.put(None)
        self.thread.join()


async def _serve(
    conn: Connection, job: Job, options: EngineOptions, worker_id: int, own_process: bool = False
) -> None:
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    if own_process:  # SIGTERM (the driver ending a job it was told to stop, or anyone else)
        loop.add_signal_handler(signal.SIGTERM, inbox.put_nowait, Cancel())

    def receive() -> None:
        try:
            while conn.poll():
                inbox.put_nowait(conn.recv())
        except (EOFError, OSError) as exc:
            if os.environ.get("S3BULK_DEBUG"):
                print(f"worker {worker_id}: pipe closed: {exc!r}", file=sys.stderr)
            # once: a closed pipe stays readable, and the loop called this again each turn while
            # the items were being cancelled (1.4 million times in 10 s, each a DriverGone queued)
            loop.remove_reader(conn.fileno())
            inbox.put_nowait(DriverGone())

    watch_pipe(loop, conn, receive)
    send = _Sender(conn)
    try:
        await _run_worker(inbox, send, job, options, worker_id)
    finally:
        loop.remove_reader(conn.fileno())
        send.close()


async def inline_main(link: InlineLink, job: Job, options: EngineOptions, worker_id: int) -> None:
    """Entry point of a worker that is a task of the driver's event loop (`links.InlineLink`)."""
    await _run_worker(link.inbox, link.from_worker, job, options, worker_id)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)


def _hold_less() -> None:
    """Under --max-memory: glibc's malloc raises its mmap threshold each time a large block is
    freed (up to 32 MiB), so after the first bodies the next ones come from heaps that keep what
    is freed, and the peak of a capped download of 3 x 100 MiB varied from 104 to 127 MiB for a
    122 MiB cap. A fixed 1 MiB threshold gives each larger body its own mapping, returned when
    it is freed: 83-87 MiB, in the same time. Process-wide; nothing where there is no mallopt."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 1024**2)


def _caps(options: EngineOptions, stats: WorkerStats) -> tuple[Gate | None, Gate | None]:
    """This worker's share of the job's caps, as token buckets (requests, bytes); a second's
    worth may go at once, so one body larger than that still goes, then the rest wait. Time
    spent waiting is the "rate" stage, so the verdict names the cap, not the service."""
    share = max(1, options.workers)
    gates: list[Gate | None] = []
    for rate in (options.requests_per_second, options.bytes_per_second):
        gates.append(TimedGate(TokenBucket(rate / share), stats) if rate else None)
    return gates[0], gates[1]


@dataclass(frozen=True)
class TimedGate:
    """A token bucket's acquire whose waits are the worker's "rate" stage."""

    bucket: TokenBucket
    stats: WorkerStats

    async def __call__(self, amount: float) -> None:
        with timed(self.stats.stage_seconds, "rate"):
            await self.bucket.acquire(amount)


async def _run_worker(
    inbox: asyncio.Queue[Any], send: Callable[[Any], None], job: Job, options: EngineOptions, worker_id: int
) -> None:
    ctx = WorkerContext(worker_id, retry=options.retry, journaled=bool(options.journal_path))
    ctx.requests_gate, ctx.bytes_gate = _caps(options, ctx.stats)
    if options.memory_capped:
        _hold_less()
    ctx.resumable = {(bucket, key): upload_id for bucket, key, upload_id in options.resumable_uploads}
    runtime = WorkerRuntime(job, options, ctx, send)
    reader = None
    journal_copy = None
    if options.journal_url:
        from s3bulk._journal.store import PartWriter, StoreJournal

        store = StoreJournal(options.journal_url, job.settings)
        runtime.parts = PartWriter(store, options.journal_run, worker_id, ctx.retrier)
        if options.skip_done and options.journal_snapshot:  # this machine may not have the journal
            journal_copy = await asyncio.to_thread(store.fetch, options.journal_snapshot)
    if options.journal_path and options.skip_done:
        from s3bulk._journal.local import JournalReader

        reader = JournalReader(journal_copy or options.journal_path)
        ctx.done_before = reader.done

    def split(descriptors: list[Any], handed: list[str] | None = None, narrowed: Any = None) -> None:
        """Hand descriptors to other workers. `handed` names items they hold that the descriptor
        being expanded would yield again if redone; `narrowed` is that descriptor's new extent."""
        send(Split(descriptors, EXPANDING.get(), handed or [], narrowed))

    ctx.split = split
    ctx.want_split = lambda: runtime.split_allowed
    ctx.report_now = runtime.flush
    ctx.stop_job = runtime.abort
    await job.open(ctx)
    extra = LOCAL_WORK_ITEMS if runtime.limit is not None else 0  # past their requests (_Slot)
    consumers = [asyncio.create_task(runtime.consume()) for _ in range(options.concurrency + extra)]
    reporter = asyncio.create_task(runtime.report_progress())
    expanders: set[asyncio.Task[None]] = set()
    send(Want(DESCRIPTOR_PREFETCH))
    cancelled = False
    while True:
        match await inbox.get():
            case Work(descriptor_id, descriptor, split_allowed):
                runtime.split_allowed = split_allowed
                task = asyncio.create_task(runtime.expand(descriptor_id, descriptor))
                expanders.add(task)
                task.add_done_callback(expanders.discard)
            case SplitAllowed(allowed):
                runtime.split_allowed = allowed
            case Abort():  # another worker's job asked to stop
                runtime.aborting = True
            case Stop():
                break
            case DriverGone():
                # The driver was killed: stop at once rather than finish work nobody will record.
                # Cancelling runs each item's cleanup (a download's temporary file is removed, a
                # multipart upload aborted); the journal has only what the driver confirmed, so
                # a resume redoes the rest.
                await _cancel([*expanders, *consumers, reporter], within=DRIVER_GONE_CLEANUP_SECONDS)
                return
            case Cancel():
                # The job was interrupted (Ctrl-C, SIGTERM): the same cleanup, then tell the
                # driver what finished, so the journal knows it and the uploads that were aborted.
                await _cancel([*expanders, *consumers, reporter])
                cancelled = True
                break
    for task in expanders:
        task.cancel()
    if not cancelled:  # stopped normally: the consumers finish what is queued
        for _ in consumers:
            await runtime.items.put(None)
        await asyncio.gather(*consumers, return_exceptions=True)
        reporter.cancel()
    runtime.flush()
    if runtime.parts is not None:
        await runtime.parts.close()
    await job.close(ctx)
    if reader is not None:
        reader.close()
    if journal_copy is not None:
        os.unlink(journal_copy)
    # a thread worker counts its own thread; the driver counts the rest of the shared process
    # (an inline worker's thread is the driver's: the driver counts it all)
    if not options.inline:
        usage = resource.getrusage(resource.RUSAGE_THREAD if options.in_process else resource.RUSAGE_SELF)
        ctx.stats.cpu_seconds += usage.ru_utime + usage.ru_stime
    runtime.flush()
    send(Done())


def worker_main(
    conn: Connection, job: Job, options: EngineOptions, worker_id: int, inherited_fds: tuple[int, ...] = ()
) -> None:
    """Process entry point. Leaves with os._exit: obstore's runtime threads can abort a normal
    interpreter shutdown (docs/architecture.md, hazards), and the driver already has every
    result by then. `inherited_fds` are the driver's pipe ends a fork copied into this process."""
    for descriptor in inherited_fds:
        with contextlib.suppress(OSError):
            os.close(descriptor)
    code = 0
    asyncio.events._set_running_loop(None)  # forked from inside the driver's running loop
    # Ctrl-C reaches every process of the terminal's group: the driver alone decides what to do
    # (it asks workers to cancel and clean up), so a worker must not die of it half-way
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run_loop(_serve(conn, job, options, worker_id, own_process=True))
    except BaseException as exc:
        code = 1
        with contextlib.suppress(Exception):
            conn.send(Crash(f"{type(exc).__name__}: {exc}"))
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def thread_main(conn: Connection, pickled_job: bytes, options: EngineOptions, worker_id: int) -> None:
    """Thread entry point. The job arrives pickled, as it would to a process, so each thread
    builds its own clients and shares no state with the others."""
    try:
        run_loop(_serve(conn, pickle.loads(pickled_job), options, worker_id))
    except BaseException as exc:
        with contextlib.suppress(Exception):
            conn.send(Crash(f"{type(exc).__name__}: {exc}"))
    finally:
        with contextlib.suppress(Exception):
            conn.close()
