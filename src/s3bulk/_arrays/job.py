"""The fetch-and-decode wave of a gather, as an engine Job: every ranged GET of every file.

Items are RangeReads planned by the driver from the chunk indexes. A worker fetches a range
(a huge one as concurrent parts), then decodes its chunks in a thread pool (zlib releases the
GIL) and writes the selected elements straight into the output array, a .npy file mapped into
memory by every worker: no bulk data crosses a pipe, whichever engine runs the job, and memory is
bounded by the engine's byte budget (range bytes plus decoded chunks in flight), not by the
output's size.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from s3bulk._arrays.decode import ChunkDecoder, unsupported_filter
from s3bulk._arrays.ranges import RangeRead, parts
from s3bulk._config import AwsSettings
from s3bulk._engine.job import ItemBatch, WorkerContext
from s3bulk._errors import ItemError
from s3bulk._report import WorkerStats
from s3bulk._stores.storage import Storage

MiB = 1024**2
ITEMS_PER_DESCRIPTOR = 64


@dataclass(frozen=True)
class FilePlacement:
    """What a worker needs to decode one file's chunks and put them in the output."""

    url: str
    root: str
    key: str
    dtype: str
    chunks: tuple[int, ...]
    filters: list[tuple[int, int, tuple[int, ...], str]]
    prefix: tuple[int, ...]  # stacked: the file's index on the output's first axis
    axis: int  # concatenated: the output axis the file's rows are offset on (-1: stacked)
    offset: int  # ... and by how much
    divide_by: float | None  # --scale: stored / scale_factor


class GatherJob:
    def __init__(
        self,
        files: list[FilePlacement],
        output_path: str,
        settings: AwsSettings,
        *,
        split_bytes: int = 16 * MiB,
        decode_threads: int = 0,
    ) -> None:
        self.files = files
        self.output_path = output_path
        self.settings = settings
        self.split_bytes = split_bytes
        self.decode_threads = decode_threads or max(2, os.cpu_count() or 2)
        self.reads: list[RangeRead] = []  # driver side only: not shipped to workers
        self.preflight_requests: dict[str, int] = {}  # finding the files, reading their indexes
        self.preflight_notes: list[str] = []
        self.planned: Any = None  # the command's plan of the gather (driver side only)
        self.chunk_bytes = [math.prod(f.chunks) * np.dtype(f.dtype).itemsize for f in files]  # decoded

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["reads"] = []
        for name in ("_storage", "_output", "_pool", "_decoders", "planned"):
            state.pop(name, None)
        return state

    # ---- driver side ----------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        for first in range(0, len(self.reads), ITEMS_PER_DESCRIPTOR):
            batch = self.reads[first : first + ITEMS_PER_DESCRIPTOR]
            stats.objects_listed += len(batch)
            stats.bytes_listed += sum(read.size for read in batch)
            yield ItemBatch(tuple(batch))

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        return iter(())  # a gather has no journal: it is rerun whole

    # ---- worker side ----------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._storage = Storage(self.settings, retry=ctx.retrier)
        self._output = np.load(self.output_path, mmap_mode="r+")
        self._pool = ThreadPoolExecutor(self.decode_threads, thread_name_prefix="s3bulk-decode")
        self._decoders = [  # none for the files h5py reads (a filter no decoder here reads)
            None if unsupported_filter(f.filters) else ChunkDecoder(f.filters, np.dtype(f.dtype), f.chunks)
            for f in self.files
        ]

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        yield list(descriptor.items)  # descriptors are always ItemBatches; the engine expands those itself

    async def run(self, item: RangeRead, ctx: WorkerContext) -> int:
        placement = self.files[item.file]
        started = time.perf_counter()
        pieces = parts(item.start, item.end, self.split_bytes)
        fetched = await asyncio.gather(
            *(self._storage.read_range(placement.root, placement.key, start, end) for start, end in pieces)
        )
        ctx.stats.stage_seconds["transfer"] += time.perf_counter() - started
        data = fetched[0] if len(fetched) == 1 else memoryview(b"".join(fetched))
        decoding = time.perf_counter()
        await asyncio.get_running_loop().run_in_executor(self._pool, self._place, item, data)
        ctx.stats.stage_seconds["decode"] += time.perf_counter() - decoding
        return item.size

    def _place(self, item: RangeRead, data: memoryview) -> None:
        decode = self._decoders[item.file]
        assert decode is not None  # only files s3bulk decodes have range reads
        place_chunks(self._output, self.files[item.file], decode, item, data)

    @staticmethod
    def target(placement: FilePlacement, within: tuple[slice, ...]) -> tuple[int | slice, ...]:
        """Where a piece of one file's result goes in the combined output."""
        if placement.axis < 0:
            return placement.prefix + within
        shifted = list(within)
        moved = shifted[placement.axis]
        shifted[placement.axis] = slice(moved.start + placement.offset, moved.stop + placement.offset)
        return tuple(shifted)

    @staticmethod
    def scaled(placement: FilePlacement, values: np.ndarray) -> np.ndarray:
        if placement.divide_by is None:
            return values
        return values / np.float32(placement.divide_by)

    def item_id(self, item: RangeRead) -> str:
        return f"{self.files[item.file].url}#{item.start}-{item.end}"

    def cost(self, item: RangeRead) -> int:
        return item.size + self.chunk_bytes[item.file]  # the range, and one decoded chunk at a time

    def describe(self, item: RangeRead) -> tuple[str, str, int]:
        return f"{self.files[item.file].url} bytes {item.start}-{item.end - 1}", "", item.size

    async def close(self, ctx: WorkerContext) -> None:
        self._output.flush()
        del self._output
        self._pool.shutdown(wait=True)
        await self._storage.close()


def place_chunks(
    output: np.ndarray, placement: FilePlacement, decode: ChunkDecoder, item: RangeRead, data: memoryview
) -> None:
    """Decode the chunks one range read carries and put their selected parts in `output`."""
    for chunk in item.chunks:
        try:
            values = decode.part(
                data[chunk.offset : chunk.offset + chunk.size], chunk.filter_mask, chunk.piece.source
            )
        except Exception as exc:  # corrupt data is final: fetching again gives the same bytes
            raise ItemError(
                f"{placement.url}: chunk at {chunk.piece.coord} does not decode ({exc}): "
                "the file may be damaged; check it with h5py",
                retryable=False,
            ) from None
        output[GatherJob.target(placement, chunk.piece.target)] = GatherJob.scaled(placement, values).reshape(
            tuple(each.stop - each.start for each in chunk.piece.target)
        )
