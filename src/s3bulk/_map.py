"""`s3bulk.map` and `map_async`: the user's function over every object under a prefix.

The job runs on the engine (`_commands/map.py`) in a thread of its own, so the caller iterates
over results while it runs: `(ObjectInfo, result)` pairs in completion order, through a bounded
queue (a caller that stops reading holds the job back instead of filling memory). With `to=` the
function's bytes are uploaded and nothing comes back; with `output=` the results are written as
rows (.jsonl, .parquet) by the driver. `MapResults.report` is the job's report once it has ended.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from s3bulk._commands.map import MapSpec, hold
from s3bulk._config import AwsSettings
from s3bulk._engine.loop import run_loop
from s3bulk._engine.spec import EngineSpec
from s3bulk._engine.strategies import DEFAULT_ENGINE
from s3bulk._report import Report
from s3bulk._stores.s3xml import ObjectInfo

RESULTS_WAITING = 1000  # results held for a caller that reads slower than the job makes them
_END = object()


class MapResults:
    """The results of `s3bulk.map` as they come: iterate for (ObjectInfo, result) pairs; `report`
    waits for the end (reading and dropping what the caller did not) and returns the Report."""

    def __init__(self, spec: MapSpec, settings: AwsSettings | None, journal: bool) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(RESULTS_WAITING)
        self._report: Report | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(spec, settings, journal), name="s3bulk-map", daemon=True
        )
        self._thread.start()

    def _run(self, spec: MapSpec, settings: AwsSettings | None, journal: bool) -> None:
        from s3bulk._runner import execute

        # with to=, nothing comes back (no queue to fill while nobody reads); with output=, the
        # command writes the rows itself (MapCommand.rows)
        forward = None if spec.to else self._forward
        try:
            self._report = run_loop(execute(spec, settings, journal=journal, on_records=forward))
        except BaseException as exc:  # the caller's thread raises it
            self._error = exc
        finally:
            self._queue.put(_END)

    def _forward(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._queue.put((record["object"], record["result"]))  # waits while the caller lags

    def __iter__(self) -> Iterator[tuple[ObjectInfo, Any]]:
        while (entry := self._queue.get()) is not _END:
            yield entry
        self._queue.put(_END)  # a second iteration, or `report`, ends at once
        if self._error is not None:
            raise self._error

    @property
    def report(self) -> Report:
        for _ in self:
            pass
        self._thread.join()
        assert self._report is not None
        return self._report


def map_objects(
    fn: Callable[..., Any],
    source: str,
    *,
    to: str | None = None,
    output: str | None = None,
    include: str | tuple[str, ...] | list[str] = (),
    exclude: str | tuple[str, ...] | list[str] = (),
    on_error: str = "collect",
    stream: bool = False,
    engine: str = DEFAULT_ENGINE,
    workers: int | None = None,
    concurrency: int = 64,
    max_memory: int | None = None,
    ray_address: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
) -> MapResults:
    """Run `fn(obj, body)` over every object under `source` (s3://bucket/prefix/): `obj` is the
    object's ObjectInfo, `body` its bytes. `fn` may be sync (run on threads beside the fetching,
    in one worker process per core) or `async def`. Iterate the result for (obj, result) pairs in
    completion order; with `to="s3://bucket/prefix/"` each result (bytes, or None to skip) is
    uploaded under the same relative key instead; with `output="x.jsonl"` (or ".parquet")
    results are written as rows. `stream=True` hands a sync `fn` a file-like reader instead of
    the bytes, for objects too large to hold. An exception fails that object alone
    (`report.failures`), or with on_error="abort" ends the job. `.report` waits for the end. A
    job of an importable function is journaled and resumable (`s3bulk.resume(job_id)`)."""
    chosen = EngineSpec(
        engine=engine,
        workers=workers,
        concurrency=concurrency,
        max_memory=max_memory,
        ray_address=ray_address,
    )
    spec = MapSpec(
        source=source,
        function=hold(fn),
        to=to,
        output=output,
        include=tuple([include] if isinstance(include, str) else include),
        exclude=tuple([exclude] if isinstance(exclude, str) else exclude),
        on_error=on_error,
        stream=stream,
        engine=chosen,
    )
    resumable = journal and not spec.function.startswith("held:")
    return MapResults(spec, settings, resumable)


async def map_async(
    fn: Callable[..., Any],
    source: str,
    *,
    to: str | None = None,
    output: str | None = None,
    include: str | tuple[str, ...] | list[str] = (),
    exclude: str | tuple[str, ...] | list[str] = (),
    on_error: str = "collect",
    stream: bool = False,
    engine: str = DEFAULT_ENGINE,
    workers: int | None = None,
    concurrency: int = 64,
    max_memory: int | None = None,
    ray_address: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
) -> AsyncIterator[tuple[ObjectInfo, Any]]:
    """`map_objects` for an event loop (the options are its own): the same job, its pairs
    awaited one by one."""
    results = iter(
        map_objects(
            fn,
            source,
            to=to,
            output=output,
            include=include,
            exclude=exclude,
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
    while (pair := await asyncio.to_thread(next, results, None)) is not None:
        yield pair


map = map_objects
