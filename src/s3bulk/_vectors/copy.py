"""`vectors copy`: every vector of one or more indexes into others (another index, bucket,
account or region), as one engine job: what an index cannot change in place (its distance
metric, its non-filterable keys, one index split over several to pass one index's write limit)
is a copy into a new one.

Each source index is listed in up to 16 ListVectors segments side by side, with data and
metadata; a segment's pages gather into batches for the destination (routed by key when there
are several, as `vectors put` shards), each checked against the destination index's shape and
written by the put job's own machinery (`PutVectorsJob`: bodies written natively, the content
hash added, the destination's write limits, bad rows to the rejects file). A batch's journal
name is its segment and a digest of its keys, so a resumed copy lists again and sends only the
batches whose keys it has not stored: a source that changed in between is copied as it is then,
not skipped by position.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from s3bulk._config import AwsSettings
from s3bulk._engine.job import WorkerContext
from s3bulk._report import WorkerStats
from s3bulk._sources.embeddings import RowChunk, Slice
from s3bulk._stores.vectors import ListedRows, VectorsClient
from s3bulk._vectors.digest import without_hash
from s3bulk._vectors.export import Segment
from s3bulk._vectors.indexes import IndexShape
from s3bulk._vectors.job import PutVectorsJob, VectorBatch


@dataclass(frozen=True)
class CopyOptions:
    bucket: str  # the source's vector bucket
    indexes: tuple[str, ...]  # the source's indexes
    segments: int = 16


class CopyVectorsJob:
    """The Job (engine/job.py) that copies indexes; picklable plain settings until `open`."""

    direction = "S3 Vectors → S3 Vectors"
    items_hold_their_cost = True  # a batch holds its rows from the moment its pages are listed

    def __init__(
        self,
        options: CopyOptions,
        source_settings: AwsSettings,
        source_shapes: dict[str, IndexShape],
        put: PutVectorsJob,
    ) -> None:
        self.options = options
        self.source_settings = source_settings
        self.source_shapes = source_shapes
        self.put = put  # the destination's writer: its indexes, shapes, limits, rejects
        self.settings = put.settings  # the destination's
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []
        self._source: VectorsClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if not name.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._source = None

    # ---- driver side --------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Segment]:
        for index in self.options.indexes:
            for number in range(self.options.segments):
                yield Segment(index, number, self.options.segments)

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Segment]:
        """The segments holding failed batches, listed again whole (their stored batches skipped)."""
        failed = {item_id.partition(":")[0] for page in rows for item_id, _ in page}  # BUCKET/INDEX/sNN
        for name in sorted(failed):
            _, index, segment = name.rsplit("/", 2)
            yield Segment(index, int(segment.removeprefix("s")), self.options.segments)

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._source = VectorsClient.for_worker(self.source_settings, ctx.retrier, self.options.segments)
        await self.put.open(ctx)

    async def expand(self, segment: Segment, ctx: WorkerContext) -> AsyncIterator[list[VectorBatch]]:
        """The segment's pages, gathered until they fill a batch for every destination index."""
        assert self._source is not None
        dimension = self.source_shapes[segment.index].dimension
        full = self.put.batch_rows * len(self.put.options.indexes)
        piece = Slice(f"{self.options.bucket}/{segment.index}/s{segment.number:02d}", "", "vectors", 0, None)
        pages = self._source.list_rows(
            self.options.bucket, segment.index, dimension, segments=segment.count, segment=segment.number
        )
        listed, pending = 0, _Rows()
        async for rows, following in pages:
            pending.add(rows, dimension)
            ctx.stats.objects_listed += len(rows.keys)
            if len(pending.keys) >= full or (following is None and pending.keys):
                chunk = pending.chunk(listed)
                listed += len(chunk.keys)
                batches = self.put.batches_of(piece, chunk, ctx)
                yield ctx.drop_done([self._named(piece, batch) for batch in batches], self.item_id)
                pending = _Rows()

    def _named(self, piece: Slice, batch: VectorBatch) -> VectorBatch:
        """The batch named by its segment and its keys (not their place in a listing)."""
        digest = hashlib.blake2b("\0".join(batch.keys).encode(), digest_size=8).hexdigest()
        batch.id = f"{piece.path}:{digest}@{batch.index}"
        return batch

    async def run(self, batch: VectorBatch, ctx: WorkerContext) -> int:
        return await self.put.run(batch, ctx)

    def item_id(self, batch: VectorBatch) -> str:
        return batch.id

    def cost(self, batch: VectorBatch) -> int:
        return self.put.cost(batch)

    def describe(self, batch: VectorBatch) -> tuple[str, str, int]:
        segment = batch.path.rpartition("/s")[2]
        return (
            f"{batch.path.rpartition('/s')[0]} segment {int(segment) + 1}",
            f"{self.put.options.bucket}/{batch.index}",
            len(batch.keys),
        )

    async def close(self, ctx: WorkerContext) -> None:
        if self._source is not None:
            await self._source.close()
        await self.put.close(ctx)


class _Rows:
    """Listed vectors waiting to fill a batch: keys, float32 rows (a page at a time, read
    natively), the user's metadata (the content hash left for the put to add again)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.arrays: list[np.ndarray] = []
        self.metadata: list[dict[str, Any] | None] = []

    def add(self, rows: ListedRows, dimension: int) -> None:
        if not rows.keys:
            return
        self.keys += rows.keys
        self.metadata += [without_hash(orjson.loads(text)) if text else None for text in rows.metadata]
        self.arrays.append(np.frombuffer(rows.data, dtype=np.float32).reshape(len(rows.keys), dimension))

    def chunk(self, first_row: int) -> RowChunk:
        vectors = np.concatenate(self.arrays) if len(self.arrays) > 1 else self.arrays[0]
        metadata = self.metadata if any(entry is not None for entry in self.metadata) else None
        return RowChunk(first_row, self.keys, vectors, metadata)
