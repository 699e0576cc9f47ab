"""`vectors put`: embeddings from files into S3 Vectors indexes, as one engine job.

Source → plan → engine → store, as for objects: the driver hands out slices of files
(`sources.embeddings`), a worker reads a slice in chunks, checks every row (`validate`), routes
rows to their index and queues batches of at most 500 vectors; each batch is one PutVectors,
written straight from numpy without the GIL (`payload`). The journal records each finished
batch by file and row range, so a resumed job re-sends at most the batches that were in flight.

Rate: the service allows about 2,500 vectors/s and 1,000 requests/s per index. Each index gets
its own pair of token buckets (split evenly between worker processes), which also back off on
429/503 (AIMD in `engine.ratelimit`), so the load runs at the service's limit rather than into
it. Going past one index's limit means loading several: `--index a --index b` shards rows by a
hash of the key, so a re-run sends every key to the same index again.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from s3bulk._config import AwsSettings
from s3bulk._engine.job import WorkerContext
from s3bulk._errors import JobAborted
from s3bulk._report import WorkerStats
from s3bulk._sources.embeddings import (
    EmbeddingSpec,
    RowChunk,
    Slice,
    plan_slices,
    read_slice,
)
from s3bulk._stores.vectors import VectorsClient
from s3bulk._vectors.digest import HASH_KEY
from s3bulk._vectors.indexes import IndexShape, index_of
from s3bulk._vectors.limits import (
    MAX_REQUEST_BYTES,
    MAX_VECTORS_PER_REQUEST,
    REQUESTS_PER_SECOND,
    VECTORS_PER_SECOND,
)
from s3bulk._vectors.pacing import IndexPace
from s3bulk._vectors.payload import HashedBody, hashed, put_vectors_body
from s3bulk._vectors.validate import check_rows

# Bodies are written and hashed in threads beside the event loop, neither holding the GIL.
BUILD_THREADS = 2

# A float32 as JSON text is at most 16 characters and a separator ("-0.0000010000001,"), so a
# batch of this many rows per value stays under the request cap whatever the metadata leaves over.
WORST_BYTES_PER_VALUE = 17


@dataclass(frozen=True)
class PutOptions:
    bucket: str
    indexes: tuple[str, ...]
    batch_size: int = MAX_VECTORS_PER_REQUEST
    vectors_per_second: float = VECTORS_PER_SECOND  # per index (the service's documented write limit)
    requests_per_second: float = REQUESTS_PER_SECOND  # per index
    on_error: str = "abort"  # or "skip": bad rows go to the rejects file, the rest loads
    rejects_path: str = "s3bulk-rejects.jsonl"
    concurrency: int = 16
    dry_run: bool = False  # read, check and build every batch; send none
    content_hash: bool = False  # the hash into every index, not only those that declare it (`digest`)
    # (path, index) of each file that loads into an index of its own (--index-per-file), in
    # place of sharding rows over `indexes` by key
    file_indexes: tuple[tuple[str, str], ...] = ()


@dataclass
class VectorBatch:
    """One PutVectors: up to 500 rows of one file for one index."""

    id: str  # the journal's name: "path#first-last", plus "@index" when sharded
    path: str
    index: str
    keys: list[str]
    vectors: np.ndarray
    metadata: list[dict[str, Any] | None] | None


class PutVectorsJob:
    """The Job (engine/job.py) that loads embeddings; picklable plain settings until `open`."""

    direction = "files → S3 Vectors"
    items_hold_their_cost = True  # a batch holds its rows from the moment it is read

    def __init__(
        self,
        source: EmbeddingSpec | None,
        options: PutOptions,
        settings: AwsSettings,
        shapes: dict[str, IndexShape],
        workers: int = 1,
    ) -> None:
        self.source = source  # None: the rows come from elsewhere (a copy's listing)
        self.options = options
        self.settings = settings
        self.shapes = shapes
        self.workers = workers
        self.file_index = dict(options.file_indexes)  # a file's own index (--index-per-file)
        self.preflight_requests: dict[str, int] = {}  # GetIndex calls made before the engine starts
        self.preflight_notes: list[str] = []  # what was decided for the user (columns found)
        self._client: VectorsClient | None = None
        self._limits: dict[str, IndexPace] = {}
        self._rejects: int | None = None
        self._builders: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if not name.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client, self._limits, self._rejects, self._builders = None, {}, None, None

    @property
    def batch_rows(self) -> int:
        dimension = max(shape.dimension for shape in self.shapes.values())
        fitting = MAX_REQUEST_BYTES // (dimension * WORST_BYTES_PER_VALUE + 64)
        return max(1, min(self.options.batch_size, MAX_VECTORS_PER_REQUEST, fitting))

    # ---- driver side --------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Slice]:
        assert self.source is not None
        slices = plan_slices(self.source)
        while (piece := await asyncio.to_thread(next, slices, None)) is not None:
            if piece.stop is not None:  # "objects" of a vectors job are rows
                stats.objects_listed += piece.stop - piece.start
            yield piece

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        """The slices holding failed batches ("path#first-last[@index]"). They are read whole;
        their batches that did finish are skipped as on any resume."""
        assert self.source is not None
        failed: dict[str, list[int]] = {}
        for page in rows:
            for item_id, _ in page:
                path, _, span = item_id.rpartition("#")
                failed.setdefault(path, []).append(int(span.partition("-")[0]))
        for piece in plan_slices(self.source):
            firsts = failed.get(piece.path, [])
            if any(piece.start <= first and (piece.stop is None or first < piece.stop) for first in firsts):
                yield piece

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._client = VectorsClient.for_worker(self.settings, ctx.retrier, max(8, self.options.concurrency))
        self._builders = ThreadPoolExecutor(BUILD_THREADS, thread_name_prefix="s3bulk-body")
        options = self.options
        self._limits = {
            index: IndexPace(
                options.vectors_per_second,
                options.requests_per_second,
                burst=self.batch_rows,
                workers=self.workers,
            )
            for index in options.indexes
        }

    async def expand(self, piece: Slice, ctx: WorkerContext) -> AsyncIterator[list[VectorBatch]]:
        assert self.source is not None
        chunk_rows = self.batch_rows * len(self.options.indexes)
        chunks = read_slice(piece, self.source, chunk_rows)
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            if piece.stop is None:  # JSON Lines: rows are known once read
                ctx.stats.objects_listed += len(chunk.keys)
            yield ctx.drop_done(self.batches_of(piece, chunk, ctx), self.item_id)

    def batches_of(self, piece: Slice, chunk: RowChunk, ctx: WorkerContext) -> list[VectorBatch]:
        """A chunk's good rows in batches, each for one index."""
        return self._batches(piece, self._checked(piece, chunk, ctx))

    def _checked(self, piece: Slice, chunk: RowChunk, ctx: WorkerContext) -> RowChunk:
        """The chunk without its bad rows (written to the rejects file), or JobAborted."""
        problems = dict(chunk.problems)
        for index in self._targets(piece):
            shape = self.shapes[index]
            found = check_rows(
                chunk.keys,
                chunk.vectors,
                chunk.metadata,
                dimension=shape.dimension,
                metric=shape.metric,
                non_filterable=shape.non_filterable,
            )
            for row, reason in found.items():
                problems.setdefault(row, reason)
        if not problems:
            return chunk
        rejected = sorted(problems)
        self._reject(piece, chunk, rejected, problems)
        if self.options.on_error == "abort":
            row = rejected[0]
            raise JobAborted(
                f"row {chunk.number(row)} of {piece.path}: {problems[row]} "
                f"({len(rejected)} bad row(s) in this chunk, listed in {self.options.rejects_path}; "
                "fix the source and --resume the job, or pass --on-error skip to load the rest)"
            )
        ctx.stats.vectors_rejected += len(rejected)
        keep = np.ones(len(chunk.keys), dtype=bool)
        keep[rejected] = False
        rows = np.flatnonzero(keep)
        return RowChunk(
            chunk.first_row,
            [chunk.keys[n] for n in rows],
            chunk.vectors[keep],
            [chunk.metadata[n] for n in rows] if chunk.metadata is not None else None,
            numbers=[chunk.number(int(n)) for n in rows],  # the kept rows' own numbers, for batch ids
        )

    def _targets(self, piece: Slice) -> tuple[str, ...]:
        """The indexes a slice's rows may go to: its file's own, or any the keys shard over."""
        owned = self.file_index.get(piece.path)
        return (owned,) if owned is not None else tuple(set(self.options.indexes))

    def _reject(self, piece: Slice, chunk: RowChunk, rows: list[int], problems: dict[int, str]) -> None:
        """One JSON line per bad row, appended with a single write so processes never interleave."""
        if self._rejects is None:
            self._rejects = os.open(self.options.rejects_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        lines = b"".join(
            orjson.dumps(
                {
                    "file": piece.path,
                    "row": chunk.number(row),
                    "key": chunk.keys[row],
                    "reason": problems[row],
                }
            )
            + b"\n"
            for row in rows
        )
        os.write(self._rejects, lines)

    def _batches(self, piece: Slice, chunk: RowChunk) -> list[VectorBatch]:
        """Rows routed to their index, in batches of at most `batch_rows`. Rows carry their row
        number through the rejects, so a batch's id names the rows it really holds."""
        count = len(chunk.keys)
        if not count:
            return []
        indexes = self.options.indexes
        owned = self.file_index.get(piece.path)
        if owned is not None:
            targets = np.full(count, indexes.index(owned))
        elif len(indexes) > 1:
            targets = np.array([indexes.index(index_of(key, indexes)) for key in chunk.keys])
        else:
            targets = np.zeros(count, dtype=int)
        rows = np.arange(count)
        batches = []
        for number, index in enumerate(indexes):
            chosen = rows[targets == number]
            for start in range(0, len(chosen), self.batch_rows):
                part = chosen[start : start + self.batch_rows]
                if not len(part):
                    continue
                first, last = chunk.number(int(part[0])), chunk.number(int(part[-1]))
                suffix = f"@{index}" if len(indexes) > 1 else ""
                batches.append(
                    VectorBatch(
                        f"{piece.path}#{first}-{last}{suffix}",
                        piece.path,
                        index,
                        [chunk.keys[n] for n in part],
                        chunk.vectors[part],
                        [chunk.metadata[n] for n in part] if chunk.metadata is not None else None,
                    )
                )
        return batches

    async def run(self, batch: VectorBatch, ctx: WorkerContext) -> int:
        """One PutVectors (two, if metadata pushes the body past 20 MiB); returns body bytes."""
        assert self._client is not None
        with ctx.stats.timed("build"):
            body = await asyncio.get_running_loop().run_in_executor(self._builders, self._body, batch)
        if len(body.data) > MAX_REQUEST_BYTES and len(batch.keys) > 1:
            return sum([await self.run(half, ctx) for half in _halves(batch)])
        if not self.options.dry_run:
            pace = self._limits[batch.index]
            await pace.send(self._client, "PutVectors", body.data, len(batch.keys), ctx, body.sha256)
        ctx.stats.vectors_done += len(batch.keys)
        return len(body.data)

    def _body(self, batch: VectorBatch) -> HashedBody:
        """In a builder thread: the body, with each row's content hash where it costs the user
        nothing or was asked for (`digest`), both written natively without the GIL."""
        shape = self.shapes[batch.index]
        body = put_vectors_body(
            self.options.bucket,
            batch.index,
            batch.keys,
            batch.vectors,
            batch.metadata,
            hashed=self.hashes(batch.index),
            non_filterable=shape.non_filterable,
        )
        return hashed(body)

    def hashes(self, index: str) -> bool:
        """Whether the rows put into `index` carry their content hash: where the index declares
        the key non-filterable (it takes nothing from the user's filterable room), or asked."""
        return self.options.content_hash or HASH_KEY in self.shapes[index].non_filterable

    @property
    def limits(self) -> dict[str, IndexPace]:
        """Each index's write budget in this worker (a sync's deletes draw on it too)."""
        return self._limits

    def item_id(self, batch: VectorBatch) -> str:
        return batch.id

    def cost(self, batch: VectorBatch) -> int:
        return int(batch.vectors.nbytes * 3)  # the rows, and their JSON text (about 11 bytes each)

    def describe(self, batch: VectorBatch) -> tuple[str, str, int]:
        span = batch.id.rpartition("#")[2].split("@")[0]
        return f"{batch.path} rows {span}", f"{self.options.bucket}/{batch.index}", len(batch.keys)

    async def close(self, ctx: WorkerContext) -> None:
        if self._client is not None:
            await self._client.close()
        if self._builders is not None:
            self._builders.shutdown(wait=True)
        if self._rejects is not None:
            os.close(self._rejects)


def _halves(batch: VectorBatch) -> list[VectorBatch]:
    middle = len(batch.keys) // 2
    return [
        VectorBatch(
            batch.id,
            batch.path,
            batch.index,
            batch.keys[part],
            batch.vectors[part],
            batch.metadata[part] if batch.metadata is not None else None,
        )
        for part in (slice(0, middle), slice(middle, None))
    ]
