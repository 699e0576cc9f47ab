"""`vectors delete`: keys out of S3 Vectors indexes, 500 per DeleteVectors, as one engine job.

The keys come from a list (one per line: a file, or stdin spooled beside the journals so a
resume reads the same list), from the key column of Parquet files (what was loaded, deleted
again), or from a metadata filter: each index listed whole (keys and metadata, in parallel
segments), the keys that match kept in a Parquet file beside the journals, whole or not at all,
so a resume deletes what the first listing found. The driver reads them in chunks of
`CHUNK_KEYS`, numbered in the order read; a worker routes a chunk's keys to their index (the
one they were listed from, or by the same hash `vectors put` shards with) and sends
batches of at most 500 under the index's write budget, which PutVectors shares. The journal
records each batch by chunk and number, so a resumed job sends again only what was in flight.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from s3bulk._config import AwsSettings
from s3bulk._engine.caps import DeleteCap
from s3bulk._engine.job import BatchOutcome, WorkerContext
from s3bulk._errors import UsageError
from s3bulk._report import WorkerStats
from s3bulk._stores.multipart import parts_group
from s3bulk._stores.vectors import MAX_SEGMENTS, VectorsClient
from s3bulk._vectors.filters import matches
from s3bulk._vectors.indexes import index_of
from s3bulk._vectors.pacing import IndexPace

MAX_KEYS_PER_DELETE = 500
CHUNK_KEYS = 5000  # a descriptor: ten DeleteVectors of one index, a few hundred KB of keys


@dataclass(frozen=True)
class DeleteOptions:
    bucket: str
    indexes: tuple[str, ...]
    keys_from: tuple[str, ...]  # text files of keys, or Parquet files (their key column)
    # each file's own index (a filter's matches, listed from it), in place of the index a key
    # hashes to; empty: keys are routed as `vectors put` shards them
    keys_index: tuple[str, ...] = ()
    key_column: str = ""  # Parquet: "" is `key`, else `id`
    vectors_per_second: float = 2500.0
    requests_per_second: float = 1000.0
    dry_run: bool = False
    max_delete: int | None = None  # stop the job before deleting more than this
    concurrency: int = 16


@dataclass(frozen=True)
class KeyChunk:
    """A descriptor: keys `number * CHUNK_KEYS` on, in the order the sources list them."""

    number: int
    keys: tuple[str, ...]
    index: str | None = None  # the index they were listed from: deleted there, not routed

    def __str__(self) -> str:
        return f"keys {self.number * CHUNK_KEYS:,} to {self.number * CHUNK_KEYS + len(self.keys) - 1:,}"


@dataclass
class VectorDeletes:
    """An item: one DeleteVectors of one index."""

    id: str  # "chunk-batch", plus "@index" when the keys are sharded
    index: str
    keys: list[str]


def read_keys(paths: tuple[str, ...], key_column: str, settings: AwsSettings) -> Iterator[str]:
    """Every key the sources name, in order: each line of a text file (blank lines and
    surrounding whitespace left out), or each value of a Parquet file's key column."""
    from s3bulk._sources.embeddings import open_file

    for path in paths:
        if path.endswith(".parquet"):
            yield from _parquet_keys(path, key_column, settings)
            continue
        with open_file(path, settings) as handle:
            lines = handle if not path.startswith("s3://") else handle.read().splitlines()
            for line in lines:
                key = line.decode().strip()
                if key:
                    yield key


def _parquet_keys(path: str, key_column: str, settings: AwsSettings) -> Iterator[str]:
    import pyarrow.parquet as pq

    from s3bulk._sources.embeddings import open_file

    with open_file(path, settings) as handle:
        parquet = pq.ParquetFile(handle)
        names = parquet.schema_arrow.names
        column = key_column or next((name for name in ("key", "id") if name in names), "")
        if column not in names:
            raise UsageError(
                f"{path}: no {'column ' + repr(key_column) if key_column else 'key or id column'} "
                f"(the columns are {', '.join(names)}): name it with --key-column"
            )
        for batch in parquet.iter_batches(columns=[column], batch_size=CHUNK_KEYS):
            yield from (str(key) for key in batch.column(0).to_pylist() if key is not None and key != "")


async def list_matches(
    client: VectorsClient, bucket: str, index: str, condition: dict[str, Any], path: str
) -> tuple[int, int]:
    """(vectors listed, keys matched): the keys of `index` whose metadata the filter matches,
    into a Parquet file (a `key` column), from ListVectors in 16 segments with metadata. The
    file is written under a temporary name and renamed once every segment was listed to its
    end: a listing that broke leaves no file, and nothing is deleted from it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    temporary = f"{path}.partial"
    listed, matched = 0, 0
    pending: list[str] = []
    with pq.ParquetWriter(temporary, pa.schema([("key", pa.string())])) as writer:

        def flush() -> None:
            nonlocal pending
            if pending:
                writer.write_table(pa.table({"key": pa.array(pending, type=pa.string())}))
                pending = []

        async def segment(number: int) -> None:
            nonlocal listed, matched
            pages = client.list_pages(bucket, index, segments=MAX_SEGMENTS, segment=number, metadata=True)
            async for vectors, _ in pages:
                listed += len(vectors)
                found = [vector["key"] for vector in vectors if matches(condition, vector.get("metadata"))]
                matched += len(found)
                pending.extend(found)
                if len(pending) >= CHUNK_KEYS:
                    flush()

        try:
            async with parts_group() as group:  # a segment that fails stops the others
                for number in range(MAX_SEGMENTS):
                    group.create_task(segment(number))
            flush()
        except BaseException:
            writer.close()
            os.unlink(temporary)
            raise
    os.replace(temporary, path)
    return listed, matched


class DeleteVectorsJob:
    """The Job (engine/job.py) that deletes vectors; picklable plain settings until `open`."""

    direction = "S3 Vectors"
    items_hold_their_cost = False

    def __init__(self, options: DeleteOptions, settings: AwsSettings, workers: int = 1) -> None:
        self.options = options
        self.settings = settings
        self.workers = workers
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []
        self._client: VectorsClient | None = None
        self._limits: dict[str, IndexPace] = {}
        self._cap: DeleteCap | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if not name.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client, self._limits, self._cap = None, {}, None

    # ---- driver side --------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[KeyChunk]:
        chunks = self._chunks()
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            stats.objects_listed += len(chunk.keys)
            yield chunk

    def _chunks(self) -> Iterator[KeyChunk]:
        """Each source's keys in chunks, numbered across the sources (a chunk holds one file's)."""
        number = 0
        owners = self.options.keys_index or (None,) * len(self.options.keys_from)
        for path, index in zip(self.options.keys_from, owners, strict=True):
            pending: list[str] = []
            for key in read_keys((path,), self.options.key_column, self.settings):
                pending.append(key)
                if len(pending) == CHUNK_KEYS:
                    yield KeyChunk(number, tuple(pending), index)
                    number, pending = number + 1, []
            if pending:
                yield KeyChunk(number, tuple(pending), index)
                number += 1

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[KeyChunk]:
        """The chunks holding failed batches, whole: their batches that did finish are skipped."""
        failed = {int(item_id.partition("-")[0]) for page in rows for item_id, _ in page}
        for chunk in self._chunks():
            if chunk.number in failed:
                yield chunk

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        options = self.options
        self._client = VectorsClient.for_worker(self.settings, ctx.retrier, max(8, options.concurrency))
        self._limits = {
            index: IndexPace(
                options.vectors_per_second,
                options.requests_per_second,
                burst=MAX_KEYS_PER_DELETE,
                workers=self.workers,
            )
            for index in options.indexes
        }
        self._cap = DeleteCap(options.max_delete) if options.max_delete is not None else None

    def share_limits(self, limits: dict[str, IndexPace]) -> None:
        """Draw on these budgets (a sync's puts'): the service counts puts and deletes together."""
        self._limits = limits

    async def expand(self, chunk: KeyChunk, ctx: WorkerContext) -> AsyncIterator[list[VectorDeletes]]:
        yield ctx.drop_done(self.batches_of(chunk), self.item_id)

    def batches_of(self, chunk: KeyChunk) -> list[VectorDeletes]:
        """A chunk's keys routed to their index, 500 per DeleteVectors (a key named twice, once)."""
        indexes = self.options.indexes
        routed: dict[str, list[str]] = {index: [] for index in indexes}
        for key in dict.fromkeys(chunk.keys):  # a key named twice is deleted once
            routed[chunk.index or index_of(key, indexes)].append(key)
        items = []
        for index, keys in routed.items():
            suffix = f"@{index}" if len(indexes) > 1 else ""
            for number, start in enumerate(range(0, len(keys), MAX_KEYS_PER_DELETE)):
                batch = keys[start : start + MAX_KEYS_PER_DELETE]
                items.append(VectorDeletes(f"{chunk.number}-{number}{suffix}", index, batch))
        return items

    async def run(self, item: VectorDeletes, ctx: WorkerContext) -> BatchOutcome:
        assert self._client is not None
        if self._cap is not None:  # a dry run stops where the real one would
            granted = self._cap.take(len(item.keys), ctx.stop_job)
            if not granted:
                return BatchOutcome([], [])
            item = VectorDeletes(item.id, item.index, item.keys[:granted])
        if not self.options.dry_run:
            body = {"vectorBucketName": self.options.bucket, "indexName": item.index, "keys": item.keys}
            await self._limits[item.index].send(self._client, "DeleteVectors", body, len(item.keys), ctx)
        ctx.stats.vectors_done += len(item.keys)
        where = f"s3vectors://{self.options.bucket}/{item.index}/"
        return BatchOutcome([(self.item_id(item), 0, where + item.keys[0])], [])

    def item_id(self, item: VectorDeletes) -> str:
        return item.id

    def cost(self, item: VectorDeletes) -> int:
        return 0

    def describe(self, item: VectorDeletes) -> tuple[str, str, int]:
        return (
            f"{len(item.keys)} keys from {item.keys[0]}",
            f"{self.options.bucket}/{item.index}",
            len(item.keys),
        )

    async def close(self, ctx: WorkerContext) -> None:
        if self._client is not None:
            await self._client.close()
