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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from functools import partial
from typing import Any

from s3bulk._engine.dispatch import Dispatcher, Listener, Slot
from s3bulk._engine.job import Job
from s3bulk._engine.launch import InlineLauncher, Launcher, ProcessLauncher, ThreadLauncher, WorkerHandle
from s3bulk._engine.links import WorkerLink
from s3bulk._engine.messages import Cancel, Stop
from s3bulk._engine.strategies import Strategy, choose
from s3bulk._engine.worker import EngineOptions
from s3bulk._journal.local import Journal
from s3bulk._report import Failure, Report, WorkerStats, listed, timed

QUEUED_DESCRIPTORS_PER_WORKER = 4  # enough to keep pull-based workers fed, few enough that
# the driver's memory does not grow with the source (a sync batch carries up to 1,000 actions)
DEBUG = bool(os.environ.get("S3BULK_DEBUG"))
CANCEL_SECONDS = 15.0  # an interrupted job waits this long for workers to clean up


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
            inline=strategy.inline,
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
        run = _Run(self, job, report, on_progress, on_records, journal, retry_rows)
        return await run.run()

    def _launcher(self) -> Launcher:
        if self.strategy.name == "ray":
            from s3bulk._engine.ray_launch import RayLauncher  # ray loads only for this engine

            return RayLauncher(self.options.ray_address)
        if self.strategy.inline:
            return InlineLauncher()
        return ThreadLauncher() if self.strategy.in_process else ProcessLauncher()


def _driver_breakdown(own: float, driver_cpu: Mapping[str, float]) -> dict[str, float]:
    measured = {activity: round(seconds, 3) for activity, seconds in driver_cpu.items()}
    measured["source"] = round(max(0.0, own - sum(driver_cpu.values())), 3)
    measured["total"] = own
    return measured


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Run(Listener):
    """One run of a job: the workers, the dispatcher between them and the source, the report."""

    def __init__(
        self,
        engine: Engine,
        job: Job,
        report: Report,
        on_progress: Callable[[Report], None] | None,
        on_records: Callable[[list[dict[str, Any]]], None] | None,
        journal: Journal | None,
        retry_rows: Iterator[list[tuple[str, int]]] | None,
    ) -> None:
        self.engine, self.job, self.report, self.journal = engine, job, report, journal
        self.on_progress, self.on_records, self.retry_rows = on_progress, on_records, retry_rows
        self.loop = asyncio.get_running_loop()
        self.started = time.perf_counter()
        self.cpu_before = _cpu_seconds()
        # the driver thread's CPU by activity: merging results, journal, display (the rest is
        # listing, planning and the event loop itself)
        self.driver_cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.driver_stats = WorkerStats()  # what the driver's own source work counts (sync lists)
        self.merged_by_source = 0  # of its objects_listed, what was merged into the report
        self.room = asyncio.Event()  # the queue moved: the source may add more
        self.all_done = asyncio.Event()
        self.worker_gone = asyncio.Event()
        self.feeder: asyncio.Task[None] | None = None
        self.links: list[WorkerLink] = []
        self.processes: list[WorkerHandle] = []
        self.dispatcher = Dispatcher([], self, track_items=engine.options.track_items)

    # ---- the Listener: what the dispatcher tells -----------------------------------------------
    def merge(self, delta: WorkerStats) -> None:
        self.report.add(delta)
        if delta.records and self.on_records is not None:  # first: what the journal holds as done
            self.on_records(delta.records)  # has had its record handed on (map's output= rows)
        if self.journal is not None:
            with timed(self.driver_cpu, "journal", time.thread_time):
                self.journal.record(delta)
            self._stop_if_unjournaled()

    def _stop_if_unjournaled(self) -> None:
        """A journal that cannot be written (a full disk) stops the job, with its one line: what
        runs on unjournaled would be done again by the resume, and a multipart upload whose id
        was not kept could never be aborted."""
        if self.journal is not None and self.journal.broken and not self.dispatcher.aborted:
            self.dispatcher.abort(self.journal.broken)

    def aborting(self, reason: str) -> None:
        self.report.aborted = reason
        if self.feeder is not None:
            self.feeder.cancel()

    def gone(self, slot: Slot) -> None:
        self.links[slot.index].detach()
        self.worker_gone.set()

    def woke(self) -> None:
        self.room.set()

    def finished(self) -> None:
        self.all_done.set()

    # ---- the run -------------------------------------------------------------------------------
    async def run(self) -> Report:
        launcher = self.engine._launcher()
        for index, (link, process) in enumerate(
            launcher.launch(self.engine.workers, self.job, self.engine.options)
        ):
            self.links.append(link)
            self.processes.append(process)
            slot = Slot(index, link)
            self.dispatcher.slots.append(slot)
            link.attach(self.loop, self._deliverer(slot), partial(self.dispatcher.lost, slot))
        self.feeder = asyncio.create_task(self._feed())
        ticker = asyncio.create_task(self._tick())
        try:
            await asyncio.wait(
                [self.feeder, asyncio.create_task(self.all_done.wait())], return_when="FIRST_EXCEPTION"
            )
            if not self.report.aborted:
                self.feeder.result()
            await self.all_done.wait()
            await self._stop_workers()
        except asyncio.CancelledError:
            await self._cancel_workers()
            raise
        finally:
            ticker.cancel()
            self.feeder.cancel()
            self._end_workers(launcher)
        return self._finish()

    def _deliverer(self, slot: Slot) -> Callable[[Any], bool]:
        """What the link calls with each of the worker's messages; False once it is done."""

        def deliver(message: Any) -> bool:
            if slot.done:
                return False
            with timed(self.driver_cpu, "merge", time.thread_time):
                self.dispatcher.handle(slot, message)
            return not slot.done

        return deliver

    async def _descriptors(self) -> AsyncIterator[Any]:
        if self.retry_rows is None:
            async for descriptor in self.job.partitions(self.driver_stats):
                yield descriptor
            return
        assert self.journal is not None
        for descriptor in self.journal.take_failed_descriptors():
            yield descriptor
        retried = self.job.retry_partitions(self.retry_rows)
        if isinstance(retried, AsyncIterator):  # the job lists again to retry (sync's deletes)
            async for descriptor in retried:
                yield descriptor
            return
        for descriptor in retried:
            yield descriptor
            await asyncio.sleep(0)

    async def _feed(self) -> None:
        """The job's source into the queue, never more than a few descriptors per worker ahead."""
        bound = max(8, QUEUED_DESCRIPTORS_PER_WORKER * self.engine.workers)
        dispatcher = self.dispatcher
        before = self._counted_by_source()
        async for descriptor in listed(self._descriptors(), self.driver_stats):
            now = self._counted_by_source()  # the source counted its items itself, as it made it
            dispatcher.add(descriptor, counted=now != before)
            before = now
            while len(dispatcher.queue) >= bound:  # bounded: wait for workers to drain it
                self.room.clear()
                await self.room.wait()
        dispatcher.source_exhausted()

    async def _tick(self) -> None:
        """Progress for the display, the journal's flush, and a watchdog: a worker process that is
        gone counts as lost even if its pipe never reported EOF."""
        while True:
            for _ in range(10):
                self._merge_driver_stats()
                self.report.total_known = self.dispatcher.all_listed
                if self.journal is not None:
                    with timed(self.driver_cpu, "journal", time.thread_time):
                        self.journal.flush()
                    self._stop_if_unjournaled()
                if self.on_progress is not None:
                    self.report.wall_seconds = time.perf_counter() - self.started
                    with timed(self.driver_cpu, "display", time.thread_time):
                        self.on_progress(self.report)
                await asyncio.sleep(0.1)
            if DEBUG:
                self._debug()
            for slot, process in zip(self.dispatcher.slots, self.processes, strict=True):
                if not slot.done and not process.is_alive():
                    self.links[slot.index].drain()  # take any last messages first
                    self.dispatcher.lost(slot, f"exit code {process.exitcode}")

    def _debug(self) -> None:
        dispatcher = self.dispatcher
        states = [(slot.index, slot.done, slot.credit, len(slot.assigned)) for slot in dispatcher.slots]
        print(
            f"s3bulk engine: queue={len(dispatcher.queue)} outstanding={dispatcher.outstanding} "
            f"source_done={dispatcher.source_done} workers={states}",
            file=sys.stderr,
        )

    def _merge_driver_stats(self) -> None:
        if not self.driver_stats.is_empty():
            delta = self.driver_stats.take()
            self.merged_by_source += delta.objects_listed
            self.report.add(delta)

    def _counted_by_source(self) -> int:
        """The items the job's source (not a worker's listing) has counted so far."""
        return self.merged_by_source + self.driver_stats.objects_listed

    async def _until_workers_are_done(self, seconds: float) -> None:
        deadline = self.loop.time() + seconds
        while not all(slot.done for slot in self.dispatcher.slots) and self.loop.time() < deadline:
            self.worker_gone.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.worker_gone.wait(), deadline - self.loop.time())

    async def _stop_workers(self) -> None:
        self.dispatcher.tell_all(Stop())
        while not all(slot.done for slot in self.dispatcher.slots):
            self.worker_gone.clear()
            await asyncio.wait_for(self.worker_gone.wait(), timeout=60)

    async def _cancel_workers(self) -> None:
        """Interrupted (Ctrl-C, SIGTERM): workers cancel what runs, which cleans up after itself
        (temporary files removed, multipart uploads aborted), and report what finished, so the
        journal has it. Whoever has not answered in time is terminated by `_end_workers`."""
        if self.feeder is not None:
            self.feeder.cancel()
        self.dispatcher.tell_all(Cancel())
        await self._until_workers_are_done(CANCEL_SECONDS)

    def _end_workers(self, launcher: Launcher) -> None:
        for slot, link, process in zip(self.dispatcher.slots, self.links, self.processes, strict=True):
            if not slot.done:
                link.detach()
                process.terminate()
            link.close()  # a thread worker sees EOF and stops
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():  # it did not end when asked to: end it
                process.kill()
                process.join(timeout=5)
        launcher.close()

    def _finish(self) -> Report:
        report, dispatcher = self.report, self.dispatcher
        self._merge_driver_stats()
        report.total_known = dispatcher.all_listed
        report.notes.extend(dispatcher.redone)
        if self.journal is not None:
            with timed(self.driver_cpu, "journal", time.thread_time):
                self.journal.flush()
        for crash in dispatcher.crashes:  # a crash fails the job even if others redid the work: say so
            report.failures.append(Failure("", "", crash))
            report.objects_failed += 1
        report.wall_seconds = time.perf_counter() - self.started
        own = _cpu_seconds() - self.cpu_before
        if self.engine.strategy.in_process:  # worker threads already reported their share of it
            own = max(0.0, own - report.cpu_seconds)
        report.cpu_seconds += own
        report.driver_cpu = _driver_breakdown(own, self.driver_cpu)
        report.engine = self.engine.name
        report.workers = self.engine.workers
        report.inline = self.engine.strategy.inline
        if self.on_progress is not None:
            self.on_progress(report)
        return report
