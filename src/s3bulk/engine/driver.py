"""The driver: runs a job on a pool of workers (processes or threads) and merges what they report.

The driver never touches object data: it hands out descriptors on request (pull-based, so a fast
worker simply asks more often), takes split ranges back from workers that found big ones, and
merges progress into the report and the journal. Which workers, how many and how many requests
each keeps in flight is the strategy (`strategies.py`); this loop is the same for all of them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import os
import resource
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

from s3bulk.engine.job import Job
from s3bulk.engine.launch import Launcher, ProcessLauncher, ThreadLauncher, WorkerHandle
from s3bulk.engine.strategies import Strategy, choose
from s3bulk.engine.worker import EngineOptions, Redo, watch_pipe
from s3bulk.journal import Journal
from s3bulk.report import Failure, Report, WorkerStats, listed, timed

QUEUED_DESCRIPTORS_PER_WORKER = 4  # enough to keep pull-based workers fed, few enough that
# the driver's memory does not grow with the source (a sync batch carries up to 1,000 actions)
DEBUG = bool(os.environ.get("S3BULK_DEBUG"))
CANCEL_SECONDS = 15.0  # an interrupted job waits this long for workers to clean up


class _Worker:
    def __init__(self, index: int, conn: Connection, process: WorkerHandle) -> None:
        self.index = index
        self.conn = conn
        self.process = process
        self.credit = 0
        self.assigned: dict[int, Any] = {}
        self.done = False


class Engine:
    """Runs jobs with one strategy; `Engine("hybrid")` is the default."""

    def __init__(self, strategy: Strategy | str = "hybrid", options: EngineOptions | None = None) -> None:
        options = options or EngineOptions()
        if isinstance(strategy, str):
            strategy = choose(strategy, None, options.concurrency)
        self.strategy = strategy
        self.name = strategy.name
        self.workers = strategy.workers
        self.options = dataclasses.replace(
            options,
            concurrency=strategy.concurrency,
            adaptive=strategy.adaptive,
            in_process=strategy.in_process,
            workers=strategy.workers,
        )

    async def run(
        self,
        job: Job,
        report: Report,
        on_progress: Callable[[Report], None] | None = None,
        on_records: Callable[[list[dict[str, Any]]], None] | None = None,
        journal: Journal | None = None,
        retry_rows: Iterator[list[tuple[str, int]]] | None = None,
    ) -> Report:
        """Run `job` to the end. With `retry_rows` (from a journal), only those failed items and
        the journal's failed descriptors are run, instead of the job's whole source."""
        started = time.perf_counter()
        cpu_before = _cpu_seconds()
        # the driver thread's CPU by activity: merging results, journal, display (the rest is
        # listing, planning and the event loop itself)
        driver_cpu: collections.Counter[str] = collections.Counter()
        loop = asyncio.get_running_loop()
        launcher = self._launcher()
        queue: collections.deque[tuple[int, Any]] = collections.deque()
        next_id = 0
        outstanding = 0  # descriptors handed out or queued, not yet finished
        source_done = False
        wake = asyncio.Event()
        all_done = asyncio.Event()
        crashes: list[str] = []
        workers: list[_Worker] = []
        # track_items: item ids each worker finished, per descriptor it holds (see worker.Redo)
        handled: dict[int, set[str]] = collections.defaultdict(set)
        redone: list[str] = []

        def enqueue(descriptor: Any, front: bool = False) -> None:
            nonlocal next_id, outstanding
            next_id += 1
            outstanding += 1
            (queue.appendleft if front else queue.append)((next_id, descriptor))

        def split_allowed() -> bool:
            """Workers hand work back (split ranges, listed pages) only while the queue is short,
            so the queue, and the driver's memory, stay bounded."""
            return len(queue) < self.workers

        allowed_now = True
        broken: list[_Worker] = []

        def send(worker: _Worker, message: tuple[Any, ...]) -> None:
            try:
                worker.conn.send(message)
            except (OSError, ValueError):  # it died: its reader sees EOF and hands its work on
                broken.append(worker)

        def dispatch() -> None:
            nonlocal allowed_now
            for worker in workers:
                while worker.credit > 0 and queue and not worker.done and worker not in broken:
                    descriptor_id, descriptor = queue.popleft()
                    worker.credit -= 1
                    worker.assigned[descriptor_id] = descriptor
                    send(worker, ("work", descriptor_id, descriptor, split_allowed()))
            if split_allowed() != allowed_now:
                allowed_now = not allowed_now
                for worker in workers:
                    if not worker.done:
                        send(worker, ("split-allowed", allowed_now))
            wake.set()
            if source_done and outstanding == 0:
                all_done.set()

        def lost(worker: _Worker, why: str) -> None:
            nonlocal outstanding
            if worker.done:
                return
            worker.done = True
            loop.remove_reader(worker.conn.fileno())
            finished_workers.set()
            if not all_done.is_set():
                if self.options.track_items:
                    skipped = sum(len(handled.get(key, ())) for key in worker.assigned)
                    redone.append(
                        f"worker {worker.index} was lost ({why}): its {len(worker.assigned)} "
                        f"partition(s) were redone by the others without the {skipped} item(s) it "
                        "had finished or handed on"
                    )
                else:
                    crashes.append(f"worker {worker.index} died unexpectedly ({why})")
                for descriptor_id, descriptor in worker.assigned.items():
                    outstanding -= 1
                    skip = handled.pop(descriptor_id, set())
                    if isinstance(descriptor, Redo):
                        skip |= descriptor.skip
                        descriptor = descriptor.descriptor
                    enqueue(Redo(descriptor, frozenset(skip)) if skip else descriptor, front=True)
                worker.assigned.clear()
                if all(w.done for w in workers):
                    lost_work = WorkerStats()
                    for _, descriptor in queue:
                        lost_work.failures.append(Failure(str(descriptor), "", "no worker left to run it"))
                        lost_work.failed_descriptors.append((descriptor, "no worker left to run it"))
                        lost_work.objects_failed += 1
                    report.add(lost_work)
                    if journal is not None:
                        journal.record(lost_work)
                    queue.clear()
                    outstanding = 0
                    all_done.set()
            dispatch()

        def handle(worker: _Worker, message: tuple[Any, ...]) -> None:
            nonlocal outstanding
            kind = message[0]
            if kind == "progress":
                delta: WorkerStats = message[1]
                for descriptor_id, item_id in delta.handled:
                    if descriptor_id in worker.assigned:
                        handled[descriptor_id].add(item_id)
                report.add(delta)
                if journal is not None:
                    with timed(driver_cpu, "journal", time.thread_time):
                        journal.record(delta)
                if delta.records and on_records is not None:
                    on_records(delta.records)
            elif kind == "want":
                worker.credit += message[1]
            elif kind == "split":
                _, descriptors, parent, handed_ids, narrowed = message
                for descriptor in reversed(descriptors):
                    enqueue(descriptor, front=True)
                if self.options.track_items and parent in worker.assigned:
                    handled[parent].update(handed_ids)  # others run them: a redo must not
                    if narrowed is not None:
                        old = worker.assigned[parent]
                        redo = isinstance(old, Redo)
                        worker.assigned[parent] = Redo(narrowed, old.skip) if redo else narrowed
            elif kind == "finished":
                worker.assigned.pop(message[1], None)
                handled.pop(message[1], None)
                outstanding -= 1
            elif kind == "abort":
                abort(message[1])
            elif kind == "crash":
                crashes.append(f"worker {worker.index}: {message[1]}")
            elif kind == "done":
                worker.done = True
                loop.remove_reader(worker.conn.fileno())
                finished_workers.set()
            dispatch()

        def abort(reason: str) -> None:
            """Stop handing out work; workers finish what runs and drop what waits."""
            nonlocal outstanding, source_done
            if report.aborted:
                return
            report.aborted = reason
            outstanding -= len(queue)
            queue.clear()
            source_done = True
            feeder.cancel()
            for each in workers:
                if not each.done:
                    send(each, ("abort",))

        def reader(worker: _Worker) -> Callable[[], None]:
            def on_readable() -> None:
                try:
                    with timed(driver_cpu, "merge", time.thread_time):
                        while not worker.done and worker.conn.poll():
                            handle(worker, worker.conn.recv())
                except (EOFError, OSError) as exc:
                    lost(worker, type(exc).__name__)

            return on_readable

        finished_workers = asyncio.Event()
        for index, (conn, process) in enumerate(launcher.launch(self.workers, job, self.options)):
            worker = _Worker(index, conn, process)
            workers.append(worker)
            watch_pipe(loop, conn, reader(worker))

        driver_stats = WorkerStats()

        async def descriptors() -> AsyncIterator[Any]:
            if retry_rows is None:
                async for descriptor in job.partitions(driver_stats):
                    yield descriptor
                return
            assert journal is not None
            for descriptor in journal.take_failed_descriptors():
                yield descriptor
            for descriptor in job.retry_partitions(retry_rows):
                yield descriptor
                await asyncio.sleep(0)

        def merge_driver_stats() -> None:
            if not driver_stats.is_empty():
                report.add(driver_stats.take())

        queue_bound = max(8, QUEUED_DESCRIPTORS_PER_WORKER * self.workers)

        async def feed() -> None:
            nonlocal source_done
            async for descriptor in listed(descriptors(), driver_stats):
                enqueue(descriptor)
                dispatch()
                while len(queue) >= queue_bound:  # bounded: wait for workers to drain it
                    wake.clear()
                    await wake.wait()
            source_done = True
            dispatch()

        async def tick() -> None:
            """Progress for the display, and a watchdog: a worker process that is gone counts as
            lost even if its pipe never reported EOF."""
            while True:
                for _ in range(10):
                    merge_driver_stats()
                    if journal is not None:
                        with timed(driver_cpu, "journal", time.thread_time):
                            journal.flush()
                    if on_progress is not None:
                        report.wall_seconds = time.perf_counter() - started
                        with timed(driver_cpu, "display", time.thread_time):
                            on_progress(report)
                    await asyncio.sleep(0.1)
                if DEBUG:
                    states = [(w.index, w.done, w.credit, len(w.assigned)) for w in workers]
                    print(
                        f"s3bulk engine: queue={len(queue)} outstanding={outstanding} "
                        f"source_done={source_done} workers={states}",
                        file=sys.stderr,
                    )
                for worker in workers:
                    if not worker.done and not worker.process.is_alive():
                        reader(worker)()  # take any last messages first
                        lost(worker, f"exit code {worker.process.exitcode}")

        feeder = asyncio.create_task(feed())
        ticker = asyncio.create_task(tick())
        try:
            await asyncio.wait([feeder, asyncio.create_task(all_done.wait())], return_when="FIRST_EXCEPTION")
            if not report.aborted:
                feeder.result()
            await all_done.wait()
            for worker in workers:
                if not worker.done:
                    send(worker, ("stop",))
            while not all(worker.done for worker in workers):
                finished_workers.clear()
                await asyncio.wait_for(finished_workers.wait(), timeout=60)
        except asyncio.CancelledError:
            # Interrupted (Ctrl-C, SIGTERM): workers cancel what runs, which cleans up after itself
            # (temporary files removed, multipart uploads aborted), and report what finished, so
            # the journal has it. Whoever has not answered in time is terminated below.
            feeder.cancel()
            for worker in workers:
                if not worker.done:
                    send(worker, ("cancel",))
            deadline = loop.time() + CANCEL_SECONDS
            while not all(worker.done for worker in workers) and loop.time() < deadline:
                finished_workers.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(finished_workers.wait(), deadline - loop.time())
            raise
        finally:
            ticker.cancel()
            feeder.cancel()
            for worker in workers:
                if not worker.done:
                    loop.remove_reader(worker.conn.fileno())
                    worker.process.terminate()
                worker.conn.close()  # a thread worker sees EOF and stops
            for worker in workers:
                worker.process.join(timeout=10)
                if worker.process.is_alive():  # it did not end when asked to: end it
                    worker.process.kill()
                    worker.process.join(timeout=5)
            launcher.close()
        merge_driver_stats()
        report.notes.extend(redone)
        if journal is not None:
            with timed(driver_cpu, "journal", time.thread_time):
                journal.flush()
        for crash in crashes:  # a crash fails the job even if others redid the work: say so
            report.failures.append(Failure("", "", crash))
            report.objects_failed += 1
        report.wall_seconds = time.perf_counter() - started
        own = _cpu_seconds() - cpu_before
        if self.strategy.in_process:  # worker threads already reported their share of it
            own = max(0.0, own - report.cpu_seconds)
        report.cpu_seconds += own
        report.driver_cpu = _driver_breakdown(own, driver_cpu)
        report.engine = self.name
        report.workers = self.workers
        if on_progress is not None:
            on_progress(report)
        return report

    def _launcher(self) -> Launcher:
        if self.strategy.name == "ray":
            from s3bulk.engine.ray_launch import RayLauncher  # ray loads only for this engine

            return RayLauncher(self.options.ray_address)
        return ThreadLauncher() if self.strategy.in_process else ProcessLauncher()


def _driver_breakdown(own: float, driver_cpu: collections.Counter[str]) -> dict[str, float]:
    measured = {activity: round(seconds, 3) for activity, seconds in driver_cpu.items()}
    measured["source"] = round(max(0.0, own - sum(driver_cpu.values())), 3)
    measured["total"] = round(own, 3)
    return measured


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
