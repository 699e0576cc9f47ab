"""`s3bulk.map` and `map_async`: the user's function over every object under a prefix.

The job runs on the engine (`_commands/map.py`) in a thread of its own, so the caller iterates
over results while it runs: `(ObjectInfo, result)` pairs in completion order, through a bounded
queue (a caller that stops reading holds the job back instead of filling memory). With `to=` the
function's bytes are uploaded and nothing comes back; with `output=` the results are written as
rows (.jsonl, .parquet) by the driver. `MapResults.report` is the job's report once it has ended;
the results it waited past are kept for the iteration that follows.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import queue
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, ClassVar, overload

from s3bulk._api.base import Patterns, called_as, spec_of
from s3bulk._commands.map import MapSpec, hold
from s3bulk._config import AwsSettings
from s3bulk._engine.loop import run_loop
from s3bulk._engine.spec import EngineSpec
from s3bulk._report import Report
from s3bulk._stores.s3xml import ObjectInfo

RESULTS_WAITING = 1000  # results held for a caller that reads slower than the job makes them
_END = object()


class _Job:
    """One map job on a thread of its own, apart from the MapResults its caller holds, so that a
    MapResults dropped unread lets the job go on (its results thrown away) instead of holding it
    at a full queue, and so that Python's exit can finish or stop what is still running."""

    unseen: ClassVar[dict[_Job, None]] = {}  # jobs whose end nobody has read yet, in order

    def __init__(self, spec: MapSpec, settings: AwsSettings | None, journal: bool) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(RESULTS_WAITING)
        self.source = spec.source
        self.report: Report | None = None
        self.so_far: Report | None = None  # the report as the job goes (its counts for repr)
        self.error: BaseException | None = None
        self.resumable = journal
        self.discarding = bool(spec.to)  # with to=, nothing comes back
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Report] | None = None
        self.stopping = False
        # waited on rather than thread.join: a Ctrl-C that interrupts a join can leave the thread
        # marked as ended while it still runs (CPython 3.11)
        self.ended = threading.Event()
        _finish_at_exit()
        _Job.unseen[self] = None
        self.thread = threading.Thread(
            target=self._run, args=(spec, settings, journal), name="s3bulk-map", daemon=True
        )
        self.thread.start()

    def _run(self, spec: MapSpec, settings: AwsSettings | None, journal: bool) -> None:
        from s3bulk._runner import execute

        # with output=, the command writes the rows itself (MapCommand.rows)
        forward = None if spec.to else self._forward

        async def main() -> Report:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            if self.stopping and self._task is not None:  # stopped before it began
                self._task.cancel()
            return await execute(spec, settings, journal=journal, on_records=forward, on_progress=self._seen)

        try:
            self.report = run_loop(main())
        except BaseException as exc:  # the caller's thread raises it
            self.error = exc
        finally:
            self.ended.set()
            self.queue.put(_END)

    def _seen(self, report: Report) -> None:
        self.so_far = report

    def _forward(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            if self.discarding:
                return
            self.queue.put((record["object"], record["result"]))  # waits while the caller lags

    def discard(self) -> None:
        """Nobody will read the results (their MapResults is gone): let the job run on without
        them, freeing a _forward that waits at a full queue."""
        self.discarding = True
        ended = False
        with contextlib.suppress(queue.Empty):
            while True:
                ended = self.queue.get_nowait() is _END or ended
        if ended:
            self.queue.put(_END)

    def stop(self) -> None:
        """Cancel the job as Ctrl-C would: it journals what it did and ends with JobInterrupted."""
        self.stopping = True
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)

    def end_at_exit(self) -> None:
        """Python is exiting and nobody has read how this job ended: finish it if it runs
        (Ctrl-C stops it, resumably) and say how it ended, failures and errors included."""
        if not self.ended.is_set():
            self._finish()
        if self.error is not None:
            print(f"s3bulk.map: {self.error}", file=sys.stderr)
        elif self.report is not None and self.report.aborted:
            print(f"s3bulk.map: stopped: {self.report.aborted}", file=sys.stderr)
        elif self.report is not None and self.report.failures:
            first = self.report.failures[0]
            print(
                f"s3bulk.map: {self.report.objects_done:,} done, {self.report.objects_failed:,} failed "
                f"(the first: {first.source}: {first.reason})",
                file=sys.stderr,
            )

    def _finish(self) -> None:
        how = "Ctrl-C stops it, to be resumed" if self.resumable else "Ctrl-C stops it"
        print(
            f"s3bulk.map: its results unread, the job runs to its end before Python exits ({how})",
            file=sys.stderr,
        )
        self.discarding = True
        try:
            while not self.ended.wait(0.2):
                pass
        except KeyboardInterrupt:
            self.stop()
            self.ended.wait()


def _exiting() -> None:
    for job in list(_Job.unseen):
        job.end_at_exit()


@functools.cache
def _finish_at_exit() -> None:
    """Registered where Python's exit runs it before it stops the thread pools the job uses
    (asyncio.to_thread refuses work once concurrent.futures has shut down, and the atexit
    module runs after that)."""
    import concurrent.futures.thread  # noqa: F401  registered first, so run after ours

    threading._register_atexit(_exiting)  # type: ignore[attr-defined]


class MapResults:
    """The results of `s3bulk.map` as they come: iterate for (ObjectInfo, result) pairs, once, as
    any iterator. `report` waits for the end and returns the Report; the results it waited past
    are kept, in memory, for the iteration that follows (read the report first, as a notebook
    does, and every result is still there; iterate first where they are too many to hold). Its
    repr says whether the job runs, its counts so far and the results not yet read. A MapResults
    dropped unread lets its job run on; Python's exit waits for it."""

    def __init__(self, spec: MapSpec, settings: AwsSettings | None, journal: bool) -> None:
        self._job = _Job(spec, settings, journal)
        self._kept: collections.deque[tuple[ObjectInfo, Any]] = collections.deque()
        weakref.finalize(self, self._job.discard)

    def __iter__(self) -> Iterator[tuple[ObjectInfo, Any]]:
        job = self._job
        while True:
            if self._kept:
                yield self._kept.popleft()
            elif (entry := job.queue.get()) is not _END:
                yield entry
            else:
                break
        self._ended()

    def _ended(self) -> None:
        """The queue said the job ended: it says so again to whoever reads next (a second
        iteration, `report`), and the job's end is read, its error raised."""
        job = self._job
        job.queue.put(_END)
        job.ended.wait()
        _Job.unseen.pop(job, None)
        if job.error is not None:
            raise job.error

    @property
    def report(self) -> Report:
        """The job's Report, once it has ended; the results not yet read are kept."""
        job = self._job
        while (entry := job.queue.get()) is not _END:
            self._kept.append(entry)
        self._ended()
        assert job.report is not None
        return job.report

    def __repr__(self) -> str:
        job = self._job
        state = "ended" if job.ended.is_set() else "running"
        if job.ended.is_set() and job.error is not None:
            state = f"failed ({type(job.error).__name__}: {job.error})"
        seen = job.report or job.so_far
        done, failed = (seen.objects_done, seen.objects_failed) if seen is not None else (0, 0)
        with job.queue.mutex:
            waiting = len(self._kept) + sum(entry is not _END for entry in job.queue.queue)
        unread = f"{waiting:,} results not yet read" if waiting else "all results read"
        if not job.ended.is_set() and not waiting:
            unread = "no results waiting"
        return f"<MapResults of {job.source}: {state}, {done:,} done, {failed:,} failed, {unread}>"


MAP = EngineSpec()  # the engine defaults of map


@overload
def map_objects(  # neither to= nor output=: results to iterate
    fn: Callable[..., Any],
    source: str,
    *,
    to: None = None,
    output: None = None,
    include: Patterns = (),
    exclude: Patterns = (),
    inventory: str | None = None,
    on_error: str = MapSpec.on_error,
    stream: bool = False,
    engine: str = MAP.engine,
    workers: int | None = None,
    concurrency: int = MAP.concurrency,
    max_memory: int | None = None,
    ray_address: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
) -> MapResults: ...


@overload
def map_objects(
    fn: Callable[..., Any],
    source: str,
    *,
    to: str | None = None,
    output: str | None = None,
    include: Patterns = (),
    exclude: Patterns = (),
    inventory: str | None = None,
    on_error: str = MapSpec.on_error,
    stream: bool = False,
    engine: str = MAP.engine,
    workers: int | None = None,
    concurrency: int = MAP.concurrency,
    max_memory: int | None = None,
    ray_address: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
) -> Report: ...


@called_as("map")
def map_objects(
    fn: Callable[..., Any],
    source: str,
    *,
    to: str | None = None,
    output: str | None = None,
    include: Patterns = (),
    exclude: Patterns = (),
    inventory: str | None = None,
    on_error: str = MapSpec.on_error,
    stream: bool = False,
    engine: str = MAP.engine,
    workers: int | None = None,
    concurrency: int = MAP.concurrency,
    max_memory: int | None = None,
    ray_address: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
) -> MapResults | Report:
    """Run `fn(obj, body)` over every object under `source` (s3://bucket/prefix/): `obj` is the
    object's ObjectInfo, `body` its bytes. `fn` may be sync (run on threads beside the fetching,
    in one worker process per core) or `async def`. Iterate the result for (obj, result) pairs in
    completion order, as the job makes them. With `to="s3://bucket/prefix/"` each result (bytes,
    or None to skip) is uploaded under the same relative key instead, and with `output="x.jsonl"`
    (or ".parquet") results are written as rows: both run the job to its end, like `copy`, and
    return its Report.

    `include`/`exclude` take one glob or several; `on_error="collect"` fails an object whose
    function raised alone (`report.failures`), "abort" ends the job; `stream=True` hands a sync
    `fn` a file-like reader instead of the bytes, for objects too large to hold; `engine`,
    `workers`, `concurrency`, `max_memory` and `ray_address` are `copy`'s; `inventory` (an S3
    Inventory of the bucket: its manifest.json's s3:// URL, or its configuration's prefix) names
    the objects in place of a listing, each of its files one worker's.

    `.report` waits for the end; a job whose results are left unread runs on, and Python's exit
    waits for it. A job of an importable function is journaled and resumable
    (`s3bulk.resume(job_id)`)."""
    spec, _ = spec_of(
        MapSpec,
        MAP,
        {
            "function": hold(fn),
            "source": source,
            "to": to,
            "output": output,
            "include": include,
            "exclude": exclude,
            "inventory": inventory,
            "on_error": on_error,
            "stream": stream,
            "engine": engine,
            "workers": workers,
            "concurrency": concurrency,
            "max_memory": max_memory,
            "ray_address": ray_address,
            "journal": journal,
            "settings": settings,
        },
    )
    assert isinstance(spec, MapSpec)
    resumable = journal and not spec.function.startswith("held:")
    results = MapResults(spec, settings, resumable)
    return results.report if to or output else results


async def map_async(
    fn: Callable[..., Any],
    source: str,
    *,
    to: str | None = None,
    output: str | None = None,
    include: Patterns = (),
    exclude: Patterns = (),
    inventory: str | None = None,
    on_error: str = MapSpec.on_error,
    stream: bool = False,
    engine: str = MAP.engine,
    workers: int | None = None,
    concurrency: int = MAP.concurrency,
    max_memory: int | None = None,
    ray_address: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
) -> AsyncIterator[tuple[ObjectInfo, Any]]:
    """`map_objects` for an event loop (the same options): the same job, its pairs awaited one
    by one (with `to=` or `output=` there are none: the job has ended when the iteration does)."""
    started = await asyncio.to_thread(
        functools.partial(
            map_objects,
            fn,
            source,
            to=to,
            output=output,
            include=include,
            exclude=exclude,
            inventory=inventory,
            on_error=on_error,
            stream=stream,
            engine=engine,
            workers=workers,
            concurrency=concurrency,
            max_memory=max_memory,
            ray_address=ray_address,
            journal=journal,
            settings=settings,
        )
    )
    if isinstance(started, Report):
        return
    results = iter(started)
    while (pair := await asyncio.to_thread(next, results, None)) is not None:
        yield pair


map = map_objects
