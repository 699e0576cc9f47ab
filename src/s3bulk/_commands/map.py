"""`map FUNCTION SRC`: the user's own function over every object under a prefix, at the speed of
the service. `fn(obj, body)` gets the object's listing entry and its bytes.

The listing is the parallel one `cp` uses; each worker process (one per core: the function is
Python work) fetches bodies on its event loop while a sync `fn` runs on threads beside it, so the
next bodies arrive while the user's code works, and the byte budget bounds what is held, not the
object count. What `fn` returns goes one of three ways: back to the caller (records, in
completion order), uploaded under the mapped key (`to`: bytes, or None to skip), or written as
rows (`output`: JSON lines, by the driver). An exception in `fn` fails that object alone, with its
last line, unless `on_error="abort"`. The function travels to workers by cloudpickle (a lambda, a
closure, a function of `__main__`); the journal keeps its import path when it has one, so a job
of an importable function resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import itertools
import os
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Self

from s3bulk._commands.base import Command, JobPlan, Spec, patterns
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job, Skipped, WorkerContext
from s3bulk._errors import ItemError, JobAborted, UsageError, require_extra
from s3bulk._plan.filters import Filters
from s3bulk._report import WorkerStats
from s3bulk._sources.inventory import InventoryFile, Manifest, check_inventory, file_pages, load_inventory
from s3bulk._sources.listing import KeyRange, iter_range
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._stores.storage import Storage
from s3bulk._urls import S3Location, parse_s3, relative_key

ON_ERROR = ("collect", "abort")
STREAM_BLOCK = 8 * 1024 * 1024  # stream=True: what one reader holds at a time


def function_path(fn: Callable[..., Any]) -> str:
    """ "module:qualname" when `fn` can be imported again by it (a resume needs that), else ""."""
    module, name = getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        return ""
    try:
        return f"{module}:{name}" if imported(f"{module}:{name}") is fn else ""
    except UsageError:
        return ""


def _by_value_if_local(fn: Callable[..., Any]) -> None:
    """On Ray, a function of the user's own module (the current directory, a test's folder)
    travels with its module's code (whose globals must then pickle): a worker on another machine
    has no such file to import it from. A module installed in site-packages stays a reference."""
    import sys

    import cloudpickle

    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    path = getattr(module, "__file__", "") or ""
    if module is not None and path and "site-packages" not in path and module.__name__ != "__main__":
        cloudpickle.register_pickle_by_value(module)


_HELD: dict[str, Callable[..., Any]] = {}  # functions with no import path, held for this process's runs


def hold(fn: Callable[..., Any]) -> str:
    """What a spec names `fn` by: its import path, or a token for a function only this process
    has (a lambda, a closure, one defined in `__main__`), which no resume can find again."""
    path = function_path(fn)
    if path:
        return path
    token = f"held:{id(fn):x}"
    _HELD[token] = fn
    return token


def imported(path: str) -> Callable[..., Any]:
    """The function "package.module:function" names; one line if it cannot be had."""
    if path.startswith("held:"):
        if path not in _HELD:
            raise UsageError(
                "this map's function has no import path (a lambda, a closure, one in __main__), so "
                "only the run that was given it can use it: run the map again, or give module:function"
            )
        return _HELD[path]
    module_name, colon, name = path.partition(":")
    if not colon or not module_name or not name:
        raise UsageError(f"{path!r}: name the function as package.module:function")
    try:
        found: Any = importlib.import_module(module_name)
        for part in name.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot import {path}: {exc}") from None
    if not callable(found):
        raise UsageError(f"{path} is not a function")
    return found  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class MapSpec(Spec):
    command: ClassVar[str] = "map"
    source: str  # s3://bucket/prefix/
    function: str  # "module:qualname", or a token `hold` gave a function only this process holds
    to: str | None = None  # s3://bucket/prefix/: fn's bytes are uploaded under the mapped key
    output: str | None = None  # a .jsonl file of {"key", "result"} rows (written by the driver)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    on_error: str = "collect"
    stream: bool = False  # fn gets a file-like reader instead of the bytes (objects too large to hold)
    inventory: str | None = None  # an S3 Inventory of the bucket, in place of its listing

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", patterns(self.include, "include"))
        object.__setattr__(self, "exclude", patterns(self.exclude, "exclude"))
        location = parse_s3(self.source)
        if location.key and not location.key.endswith("/"):
            object.__setattr__(self, "source", self.source + "/")  # a prefix, as the name says
        if self.to is not None:
            parse_s3(self.to)
            if not self.to.endswith("/"):
                object.__setattr__(self, "to", self.to + "/")
        check_inventory(self.inventory, self.source)
        if self.on_error not in ON_ERROR:
            raise UsageError(f"on_error {self.on_error!r}: use one of {', '.join(ON_ERROR)}")
        if self.to is not None and self.output is not None:
            raise UsageError("to= uploads what the function returns, output= writes it as rows: pick one")
        if self.output is not None and not self.output.endswith((".jsonl", ".parquet")):
            raise UsageError(f"output {self.output!r}: results are written as .jsonl or .parquet: name it so")
        if self.output is not None and self.output.endswith(".parquet"):
            require_extra("parquet", "map's Parquet output")

    def places(self) -> tuple[str, str]:
        return self.source, self.to or self.output or ""

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(place for place in (self.source, self.to) if place)

    def leaving_out(self, pattern: str) -> Self:
        return replace(self, exclude=(*self.exclude, pattern))


class MapCommand(Command):
    name: ClassVar[str] = "map"
    spec: ClassVar[type[Spec]] = MapSpec

    def python_bound(self, spec: Spec) -> bool:
        return True  # the user's code: one process per core

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, MapSpec)
        job = MapJob(settings, parse_s3(spec.source), imported(spec.function), spec)
        if spec.inventory is not None:
            job.manifest = await load_inventory(settings, spec.inventory, job.source.bucket)
        return job

    def verb(self, job: Job) -> str:
        return "map"

    def rows(self, spec: Spec, journal: str | None) -> ResultRows | None:
        assert isinstance(spec, MapSpec)
        return ResultRows(spec.output, journal) if spec.output else None


@dataclass
class MapJob:
    settings: AwsSettings
    source: S3Location
    function: Callable[..., Any]
    spec: MapSpec
    preflight_requests: dict[str, int] = field(default_factory=dict)
    preflight_notes: list[str] = field(default_factory=list)
    manifest: Manifest | None = None  # --inventory's, checked: each data file one descriptor

    def __post_init__(self) -> None:
        self._storage: Storage | None = None
        self._threads: Executor | None = None
        self._results: dict[str, Any] = {}  # what fn returned, until its record is sent
        self._filters = Filters(self.spec.include, self.spec.exclude)
        self._to = parse_s3(self.spec.to) if self.spec.to else None
        self._is_async = inspect.iscoroutinefunction(self.function)
        if self.spec.stream and self._is_async:
            raise UsageError("stream=True hands the function a reader whose reads block: give a sync one")

    def __getstate__(self) -> dict[str, Any]:
        import cloudpickle

        state = dict(self.__dict__) | {"_storage": None, "_threads": None, "_results": {}}
        if self.spec.engine.engine == "ray":  # local processes import it by its path instead
            _by_value_if_local(self.function)
        state["function"] = cloudpickle.dumps(self.function)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        import cloudpickle

        state["function"] = cloudpickle.loads(state["function"])
        self.__dict__.update(state)

    # ---- driver side -------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        if self.manifest is not None:  # no listing of the bucket
            for file in self.manifest.files:
                yield file
            return
        yield KeyRange()

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        for batch in rows:
            yield tuple(ObjectInfo(key, size, "", "") for key, size in batch)

    # ---- worker side -------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._storage = Storage(self.settings, connections=128, retry=ctx.retrier)
        # as many threads as objects in flight: a function that waits (a sleep, a call of its
        # own) holds one thread, never the fetching, nor the other objects' calls
        self._threads = ThreadPoolExecutor(self.spec.engine.concurrency, thread_name_prefix="s3bulk-map")

    async def close(self, ctx: WorkerContext) -> None:
        if self._storage is not None:
            await self._storage.close()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)

    @property
    def storage(self) -> Storage:
        assert self._storage is not None, "the job is not open in this worker"
        return self._storage

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[ObjectInfo]]:
        if isinstance(descriptor, tuple):  # a retry's objects
            yield self._wanted(list(descriptor), ctx)
            return
        if isinstance(descriptor, InventoryFile):
            async for objects in file_pages(self.storage, descriptor, self.source.key):
                yield self._wanted(objects, ctx)
            return
        async for objects in iter_range(
            self.storage,
            self.source.bucket,
            self.source.key,
            descriptor,
            on_split=ctx.split,
            want_split=ctx.want_split,
            auto=True,  # key ranges where StartAfter is measured to seek
        ):
            yield self._wanted(objects, ctx)

    def _wanted(self, objects: list[ObjectInfo], ctx: WorkerContext) -> list[ObjectInfo]:
        chosen = [
            info
            for info in objects
            if not info.key.endswith("/") and self._filters.accepts(relative_key(info.key, self.source.key))
        ]
        chosen = ctx.drop_done(chosen, lambda info: info.key)
        ctx.stats.objects_listed += len(chosen)
        ctx.stats.bytes_listed += sum(info.size for info in chosen)
        return chosen

    async def run(self, item: ObjectInfo, ctx: WorkerContext) -> int | Skipped:
        loop = asyncio.get_running_loop()
        try:
            if self.spec.stream:  # the reader is opened and read on the function's thread
                result = await loop.run_in_executor(self._threads, self._streamed, item)
            elif self._is_async:
                result = await self.function(item, await self._body(item))
            else:  # on a thread: the event loop goes on fetching the next bodies meanwhile
                body = await self._body(item)
                result = await loop.run_in_executor(self._threads, self.function, item, body)
        except Exception as exc:
            last = traceback.format_exception_only(exc)[-1].strip()
            if self.spec.on_error == "abort":
                raise JobAborted(f"map stopped at s3://{self.source.bucket}/{item.key}: {last}") from None
            raise ItemError(f"the function raised {last}", retryable=False) from None
        if self._to is not None:
            if result is None:
                return Skipped("the function returned None")
            if not isinstance(result, bytes | bytearray | memoryview):
                raise ItemError(
                    f"with to=, the function returns bytes or None, not {type(result).__name__}",
                    retryable=False,
                )
            await self.storage.put_bytes(self._to.bucket, self._mapped(item.key), bytes(result))
            return item.size
        self._results[item.key] = result
        return item.size

    async def _body(self, item: ObjectInfo) -> bytes:
        if not item.size:
            return b""
        return bytes(await self.storage.read_range(f"s3://{self.source.bucket}", item.key, 0, item.size))

    def _streamed(self, item: ObjectInfo) -> Any:
        """stream=True: the function gets a file-like reader (read, seek, iteration over lines)
        that fetches as it reads, for objects too large to hold whole; closed once it returns."""
        with self.storage.open_reader(self.source.bucket, item.key, buffer_size=STREAM_BLOCK) as reader:
            return self.function(item, reader)

    def _mapped(self, key: str) -> str:
        assert self._to is not None
        return self._to.key + relative_key(key, self.source.key)

    def record(self, item: ObjectInfo) -> dict[str, Any]:
        to = self._to
        return {
            "source": f"s3://{self.source.bucket}/{item.key}",
            "destination": f"s3://{to.bucket}/{self._mapped(item.key)}" if to else "",
            "key": item.key,
            "size": item.size,
            "object": item,
            "result": self._results.pop(item.key, None),
        }

    def item_id(self, item: ObjectInfo) -> str:
        return item.key

    def cost(self, item: ObjectInfo) -> int:
        return min(item.size, STREAM_BLOCK) if self.spec.stream else item.size

    def describe(self, item: ObjectInfo) -> tuple[str, str, int]:
        return f"s3://{self.source.bucket}/{item.key}", "", item.size


class ResultRows:
    """`output=`: a row per object, {"key", "size", "result"} (in Parquet a dict result's fields
    become columns of their own), appended as JSON lines as results come: to the .jsonl file itself, or
    for a .parquet file to a spool beside it (`FILE.rows.jsonl`) that becomes the Parquet file,
    in row groups of ROW_GROUP, when the job ends.

    Exactly one row per object across kills and resumes: the driver writes a record's row
    before the journal can hold its item as done, so after a kill the rows hold every item the
    journal does, and perhaps a few more (in flight when it died). A resumed run keeps the
    rows written, cuts a line the kill left half-written, and does not write a second row for
    those few, which it runs again. A new job starts the file afresh."""

    ROW_GROUP = 10_000

    def __init__(self, path: str, journal: str | None = None) -> None:
        self.path = path
        self._parquet = path.endswith(".parquet")
        self._spool = f"{path}.rows.jsonl" if self._parquet else path
        if journal is None:
            _remove(self._spool)
        elif self._parquet and os.path.exists(path) and not os.path.exists(self._spool):
            self._spool_parquet()  # an ended run's file (failures left): a --retry-failed adds rows
        _cut_half_written_line(self._spool)
        self._written_again = _rows_not_journaled(self._spool, journal) if journal else set()
        self._sink = open(self._spool, "ab")  # noqa: SIM115 -- closed by close()

    def write(self, records: list[dict[str, Any]]) -> None:
        import orjson

        again = self._written_again
        rows = [
            {"key": record["key"], "size": record["size"], "result": record["result"]}
            for record in records
            if not again or record["key"] not in again
        ]
        self._sink.write(b"".join(orjson.dumps(row, default=str) + b"\n" for row in rows))
        self._sink.flush()

    def close(self, completed: bool = True) -> None:
        """A .parquet file is written when the job ended (its spool is kept for a resume else)."""
        self._sink.close()
        if self._parquet and completed:
            _spool_to_parquet(self._spool, self.path, self.ROW_GROUP)
            os.unlink(self._spool)

    def _spool_parquet(self) -> None:
        import orjson
        import pyarrow.parquet as pq

        with open(self._spool, "wb") as spool:
            for batch in pq.ParquetFile(self.path).iter_batches(self.ROW_GROUP):
                spool.write(b"".join(orjson.dumps(_nested(row)) + b"\n" for row in batch.to_pylist()))


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row: a dict result's fields as columns of their own, unless one is named like
    the object's own columns (key, size): then it stays whole under `result`, as in .jsonl."""
    result = row["result"]
    if isinstance(result, dict) and not {"key", "size"} & result.keys():
        return {"key": row["key"], "size": row["size"], **result}
    return row


def _nested(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row back as a spool row (a --retry-failed of a job that wrote its file)."""
    fields = {name: value for name, value in row.items() if name not in ("key", "size")}
    result = fields["result"] if list(fields) == ["result"] else fields
    return {"key": row["key"], "size": row["size"], "result": result}


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _cut_half_written_line(path: str) -> None:
    """A kill can land inside a write: what follows the last newline is a partial row."""
    with contextlib.suppress(FileNotFoundError), open(path, "rb+") as rows:
        end = rows.seek(0, os.SEEK_END)
        keep = end
        while keep > 0:
            start = max(0, keep - 65536)
            rows.seek(start)
            chunk = rows.read(keep - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            keep = start
        if keep != end:
            rows.truncate(keep)


def _rows_not_journaled(path: str, journal: str) -> set[str]:
    """Keys with a row the journal does not hold as done: their items run again, their rows stay."""
    import orjson

    from s3bulk._journal.local import JournalReader

    reader = JournalReader(journal)
    found: set[str] = set()
    try:
        with contextlib.suppress(FileNotFoundError), open(path, "rb") as rows:
            while batch := [orjson.loads(line)["key"] for line in itertools.islice(rows, 900)]:
                found.update(set(batch) - reader.done(batch))
    finally:
        reader.close()
    return found


def _spool_to_parquet(spool: str, path: str, row_group: int) -> None:
    """The spool's rows as a Parquet file, a row group at a time (written beside it, then renamed
    over it: a reader never sees half a file)."""
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    partial = f"{path}.partial"
    writer: Any = None
    try:
        with open(spool, "rb") as rows:
            while lines := list(itertools.islice(rows, row_group)):
                table = pa.Table.from_pylist([_flat(orjson.loads(line)) for line in lines])
                if writer is None:
                    writer = pq.ParquetWriter(partial, table.schema)
                writer.write_table(table.cast(writer.schema))
        if writer is None:  # no rows: a file with the key and size columns
            writer = pq.ParquetWriter(partial, pa.schema([("key", pa.string()), ("size", pa.int64())]))
        writer.close()
        writer = None
        os.replace(partial, path)
    finally:
        if writer is not None:
            writer.close()
        _remove(partial)


COMMANDS = (MapCommand(),)  # found by the registry (s3bulk._commands)
