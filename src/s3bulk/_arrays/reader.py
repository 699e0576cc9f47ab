"""Selections read for the xarray backend: one engine per process, whichever thread asks.

xarray (and dask, a task per chunk of its own) asks for a selection of one file at a time, from
whatever thread it runs in. Each request becomes a gather of that file's part, run on one event
loop in a thread of its own: one connection pool (`Storage`), one byte budget and one pool of
decoding threads for the whole process, however many files and threads ask at once. A file's
chunk index is read with its siblings' (the other files one `open_mfdataset` opened), in waves
across all of them, the first time any of them is read, and the same selection of the siblings
is read ahead: dask asks for one file's part a task at a time, a few at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from s3bulk._arrays.decode import ChunkDecoder
from s3bulk._arrays.files import FileRef, find_files, open_store
from s3bulk._arrays.gather import GatherOptions, build_indexes, plan_files, range_reads
from s3bulk._arrays.index import DatasetIndex, IndexCache, open_dataset
from s3bulk._arrays.job import FilePlacement, place_chunks
from s3bulk._arrays.ranges import RangeRead, parts
from s3bulk._arrays.selection import Part
from s3bulk._config import AwsSettings
from s3bulk._errors import UsageError
from s3bulk._stores.blockfile import BlockFile

T = TypeVar("T")
MiB = 1024**2


class Budget:
    """Bytes held at once (ranges in flight and chunks being decoded), shared by every request."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, size: int) -> Any:
        size = min(size, self.limit)  # one range larger than the budget still goes, alone
        async with self.changed:
            await self.changed.wait_for(lambda: self.held + size <= self.limit)
            self.held += size
        try:
            yield
        finally:
            async with self.changed:
                self.held -= size
                self.changed.notify_all()


class SharedReader:
    """The process's one engine for array reads (see the module's docstring)."""

    def __init__(self, settings: AwsSettings, *, max_in_flight_bytes: int = 256 * MiB) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="s3bulk-arrays", daemon=True)
        self.thread.start()
        self.pool = ThreadPoolExecutor(max(2, os.cpu_count() or 2), thread_name_prefix="s3bulk-decode")
        self.max_in_flight_bytes = max_in_flight_bytes
        self.refs: dict[str, FileRef] = {}
        self.heads: dict[str, bytes] = {}  # each file's first block, as its opening read it
        self.options = GatherOptions(cache_dir=str(IndexCache.default_directory()))
        self.requests: dict[str, int] = {}  # by kind, for a bench or a curious user
        self.ahead: dict[tuple[str, str, tuple[Any, ...]], asyncio.Future[np.ndarray]] = {}  # read ahead
        self.reading: dict[tuple[str, str, tuple[Any, ...]], asyncio.Future[np.ndarray]] = {}  # asked for
        self._storage: Any = None
        self._budget: Budget | None = None
        self._indexing: asyncio.Lock | None = None

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the engine's loop and wait for it (from any thread but the loop's)."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def _engine(self) -> tuple[Any, Budget, asyncio.Lock]:
        if self._storage is None:  # made on the loop: they belong to it
            from s3bulk._stores.storage import Storage

            self._storage = Storage(self.settings, connections=64)
            self._budget = Budget(self.max_in_flight_bytes)
            self._indexing = asyncio.Lock()
        assert self._budget is not None and self._indexing is not None
        return self._storage, self._budget, self._indexing

    # ---- opening ---------------------------------------------------------------------------------
    async def locate(self, urls: Sequence[str]) -> list[FileRef]:
        """Each URL's size and ETag (one listing request each, side by side), kept for later."""
        unknown = [url for url in dict.fromkeys(urls) if url not in self.refs]
        found = await asyncio.gather(*(find_files([url], self.settings) for url in unknown))
        for url, (refs, requests) in zip(unknown, found, strict=True):
            self.refs[url] = refs[0]
            self._count(requests)
        return [self.refs[url] for url in urls]

    async def open_heads(self, urls: Sequence[str]) -> None:
        """The first block of every file, in one wave: what h5netcdf reads the metadata from."""
        refs = await self.locate(urls)
        todo = [ref for ref in refs if ref.url not in self.heads]
        handles = [self.handle(ref) for ref in todo]
        await asyncio.gather(*(handle.prefetch(0, self.options.block_size) for handle in handles))
        for ref, handle in zip(todo, handles, strict=True):
            self.heads[ref.url] = handle.cached(0, self.options.block_size)
            self._count({"GET (HDF5 metadata)": handle.requests})

    def handle(self, ref: FileRef) -> BlockFile:
        """A file-like view of a file for h5py, its first block already there when it was read."""
        handle = BlockFile(
            open_store(ref.root, self.settings), ref.key, ref.size, block_size=self.options.block_size
        )
        if ref.url in self.heads:
            handle.seed(0, self.heads[ref.url])
        return handle

    # ---- reading ---------------------------------------------------------------------------------
    async def read(
        self, url: str, dataset: str, key: tuple[Part, ...], siblings: Sequence[str] = ()
    ) -> np.ndarray:
        """`key` (ints and slices) of `dataset` in the file at `url`, as a numpy array. The same
        key of its siblings is read along (`_read_ahead`) when it fits half the byte budget."""
        wanted = (url, dataset, _hashable(key))
        if (ahead := self.ahead.pop(wanted, None)) is not None:
            return await ahead
        ref, *others = await self.locate([url, *siblings])
        _, _, indexing = self._engine()
        async with indexing:  # a request's siblings' indexes serve the requests that follow it
            try:
                indexes = await build_indexes(
                    [ref, *others], dataset, key, self.settings, self.options, self.heads
                )
            except UsageError:  # a sibling this key does not fit (another length): this file alone
                indexes = await build_indexes([ref], dataset, key, self.settings, self.options, self.heads)
            self._count({"GET (HDF5 metadata)": sum(index.metadata_requests for index in indexes)})
        if (ahead := self.ahead.pop(wanted, None)) is not None:  # read ahead while this one waited
            return await ahead
        own = self.reading[wanted] = asyncio.ensure_future(self._read_file(ref, indexes[0], dataset, key))
        self._read_ahead(list(zip(others, indexes[1:], strict=False)), dataset, key)
        try:
            return await own
        finally:
            self.reading.pop(wanted, None)

    def _read_ahead(
        self, siblings: list[tuple[FileRef, DatasetIndex]], dataset: str, key: tuple[Part, ...]
    ) -> None:
        """Start reading the same key of the sibling files: xarray with dask asks for one file's
        part a task at a time, as many at once as dask has threads (2 on a 2-core machine), and
        a selection of all files would wait for each in turn. A read ahead that is not asked for
        within the next key is dropped (its bytes are the price; half the budget at most)."""
        for stale in [each for each in self.ahead if each[2] != _hashable(key)]:
            self.ahead.pop(stale).cancel()
        fits = []
        for ref, index in siblings:
            try:
                (plan,), _, dtype, _ = plan_files([ref], [index], key, self.options)
            except UsageError:
                continue  # the key does not fit this file (another length): nothing to read ahead
            fits.append((ref, index, math.prod(plan.shape) * dtype.itemsize))
        if sum(size for _, _, size in fits) > self.max_in_flight_bytes // 2:
            return
        for ref, index, _ in fits:
            wanted = (ref.url, dataset, _hashable(key))
            if wanted not in self.ahead and wanted not in self.reading:
                future = asyncio.ensure_future(self._read_file(ref, index, dataset, key))
                future.add_done_callback(lambda done: done.cancelled() or done.exception())
                self.ahead[wanted] = future

    async def _read_file(
        self, ref: FileRef, index: DatasetIndex, dataset: str, key: tuple[Part, ...]
    ) -> np.ndarray:
        storage, budget, _ = self._engine()
        (plan,), _, dtype, _ = plan_files([ref], [index], key, self.options)
        output = np.empty(plan.shape, dtype=dtype)  # this file's part, integer axes dropped
        if plan.fallback:
            return await asyncio.to_thread(self._read_with_h5py, ref, dataset, key, output)
        reads, unwritten = range_reads([plan], self.options)
        for _, piece in unwritten:
            output[piece.target] = index.fill_value
        placement = FilePlacement(
            ref.url, ref.root, ref.key, index.dtype, index.chunks, index.filters, (), 0, 0, None
        )
        decode = ChunkDecoder(index.filters, np.dtype(index.dtype), index.chunks)
        decoded = math.prod(index.chunks) * np.dtype(index.dtype).itemsize
        loop = asyncio.get_running_loop()

        async def one(read: RangeRead) -> None:
            async with budget.hold(read.size + decoded):
                pieces = parts(read.start, read.end, self.options.split_bytes)
                got = await asyncio.gather(*(storage.read_range(ref.root, ref.key, a, b) for a, b in pieces))
                data = got[0] if len(got) == 1 else memoryview(b"".join(got))
                await loop.run_in_executor(self.pool, place_chunks, output, placement, decode, read, data)

        await asyncio.gather(*(one(read) for read in reads))
        self._count({"GET": len(reads)})
        return output

    def _read_with_h5py(
        self, ref: FileRef, dataset: str, key: tuple[Part, ...], output: np.ndarray
    ) -> np.ndarray:
        """A dataset no decoder here reads (or a layout without chunks), through h5py."""
        import h5py
        import hdf5plugin  # noqa: F401  (registers its filters with the HDF5 library h5py uses)

        handle = self.handle(ref)
        with h5py.File(handle, "r") as h5file:
            output[...] = open_dataset(h5file, dataset, ref.url)[key]
        self._count({"GET (h5py)": handle.requests})
        return output

    def _count(self, requests: dict[str, int]) -> None:
        for kind, count in requests.items():
            self.requests[kind] = self.requests.get(kind, 0) + count


def _hashable(key: tuple[Part, ...]) -> tuple[Any, ...]:
    """A key as a dictionary key (a slice is not hashable before Python 3.12)."""
    return tuple((each.start, each.stop, each.step) if isinstance(each, slice) else each for each in key)


_READERS: dict[AwsSettings, SharedReader] = {}
_LOCK = threading.Lock()


def shared_reader(settings: AwsSettings | None = None) -> SharedReader:
    """The process's reader for these settings (made once)."""
    settings = settings or AwsSettings.from_env()
    with _LOCK:
        if settings not in _READERS:
            _READERS[settings] = SharedReader(settings)
        return _READERS[settings]
