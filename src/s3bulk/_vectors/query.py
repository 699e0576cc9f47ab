"""`vectors query`: many QueryVectors, as one engine job, results as Parquet rows; and their
recall checked against exact nearest neighbours.

The query vectors are read as `vectors put` reads its rows (Parquet, .npy, JSON Lines; a key
per query, given or generated). A chunk of a slice is one item: its queries go out side by side
under the index's query budget, and its results are written as one Parquet file
(`OUT/qNNNNNN-RRRRRRRRR.parquet`: query, rank, key, distance, metadata as JSON), whole then
renamed, so a resumed job writes again only the chunks that were in flight.

`recall` takes a sample of the queries, lists the whole index with its data in parallel
segments and keeps, per sampled query, the k nearest by the index's own metric (numpy, a page
at a time, so memory is the sample, not the index), then says which share of those the
service's answers hold: recall@k of its approximate search.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from s3bulk._config import AwsSettings
from s3bulk._engine.job import WorkerContext
from s3bulk._engine.ratelimit import TokenBucket
from s3bulk._report import WorkerStats
from s3bulk._sources.embeddings import EmbeddingSpec, RowChunk, Slice, plan_slices, read_slice
from s3bulk._stores.vectors import MAX_SEGMENTS, VectorsClient
from s3bulk._vectors.digest import without_hash
from s3bulk._vectors.indexes import IndexShape

CHUNK_QUERIES = 256  # queries per item: one results file


@dataclass(frozen=True)
class QueryOptions:
    bucket: str
    index: str
    output: str  # a directory of Parquet files
    top_k: int = 10
    filter: str | None = None  # a metadata filter, as JSON text
    queries_per_second: float = 0.0  # 0: as fast as the service answers (429s slow it down)
    concurrency: int = 16
    content_hash: bool = False  # keep s3bulk's content hash in the answers' metadata (`digest`)


@dataclass
class QueryChunk:
    """An item: consecutive queries of one slice of one file."""

    id: str
    keys: list[str]
    vectors: np.ndarray


class QueryVectorsJob:
    """The Job (engine/job.py) that runs queries; picklable plain settings until `open`."""

    direction = "queries → S3 Vectors"
    items_hold_their_cost = True

    def __init__(
        self, source: EmbeddingSpec, options: QueryOptions, settings: AwsSettings, shape: IndexShape
    ) -> None:
        self.source = source
        self.options = options
        self.settings = settings
        self.shape = shape
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []
        self._client: VectorsClient | None = None
        self._pace: TokenBucket | None = None
        self._filter: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if not name.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client, self._pace, self._filter = None, None, None

    # ---- driver side --------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Slice]:
        slices = plan_slices(self.source)
        while (piece := await asyncio.to_thread(next, slices, None)) is not None:
            if piece.stop is not None:
                stats.objects_listed += piece.stop - piece.start
            yield piece

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Slice]:
        failed = {item_id for page in rows for item_id, _ in page}
        for piece in plan_slices(self.source):
            if any(item_id.startswith(_slice_name(piece)) for item_id in failed):
                yield piece

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._client = VectorsClient.for_worker(self.settings, ctx.retrier, max(8, self.options.concurrency))
        self._filter = orjson.loads(self.options.filter) if self.options.filter else None  # read once
        rate = self.options.queries_per_second
        self._pace = TokenBucket(rate, burst=max(1.0, min(rate, 10.0))) if rate > 0 else None
        Path(self.options.output).mkdir(parents=True, exist_ok=True)

    async def expand(self, piece: Slice, ctx: WorkerContext) -> AsyncIterator[list[QueryChunk]]:
        chunks = read_slice(piece, self.source, CHUNK_QUERIES)
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            if piece.stop is None:
                ctx.stats.objects_listed += len(chunk.keys)
            yield ctx.drop_done([self._chunk(piece, chunk)], self.item_id)

    @staticmethod
    def _chunk(piece: Slice, chunk: RowChunk) -> QueryChunk:
        rows = [n for n in range(len(chunk.keys)) if n not in chunk.problems]
        chunk_id = f"{_slice_name(piece)}-{chunk.first_row:09d}"
        return QueryChunk(chunk_id, [chunk.keys[n] for n in rows], chunk.vectors[rows])

    async def run(self, chunk: QueryChunk, ctx: WorkerContext) -> int:
        found = await asyncio.gather(*(self._query(vector, ctx) for vector in chunk.vectors))
        with ctx.stats.timed("write"):
            await asyncio.to_thread(self._write, chunk, found)
        ctx.stats.vectors_done += len(chunk.keys)
        return 0

    async def _query(self, vector: np.ndarray, ctx: WorkerContext) -> list[dict[str, Any]]:
        assert self._client is not None
        body: dict[str, Any] = {
            "vectorBucketName": self.options.bucket,
            "indexName": self.options.index,
            "topK": self.options.top_k,
            "queryVector": {"float32": vector.tolist()},
            "returnDistance": True,
            "returnMetadata": True,
        }
        if self._filter is not None:
            body["filter"] = self._filter
        client, pace = self._client, self._pace

        async def attempt() -> dict[str, Any]:
            if pace is not None:
                await pace.acquire(1)
            return await client.call_once("QueryVectors", body)

        reply: dict[str, Any] = await client.retry(attempt, "QueryVectors", pace.throttled if pace else None)
        if pace is not None:
            pace.delivered(1)
        found: list[dict[str, Any]] = reply.get("vectors") or []
        return found

    def _write(self, chunk: QueryChunk, found: list[list[dict[str, Any]]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns: dict[str, list[Any]] = {"query": [], "rank": [], "key": [], "distance": [], "metadata": []}
        for query, answers in zip(chunk.keys, found, strict=True):
            for rank, answer in enumerate(answers, 1):
                columns["query"].append(query)
                columns["rank"].append(rank)
                columns["key"].append(answer["key"])
                columns["distance"].append(answer.get("distance"))
                metadata = answer.get("metadata")
                metadata = metadata if self.options.content_hash else without_hash(metadata)
                columns["metadata"].append(None if metadata is None else orjson.dumps(metadata).decode())
        table = pa.table(
            {
                "query": pa.array(columns["query"], pa.string()),
                "rank": pa.array(columns["rank"], pa.int32()),
                "key": pa.array(columns["key"], pa.string()),
                "distance": pa.array(columns["distance"], pa.float32()),
                "metadata": pa.array(columns["metadata"], pa.string()),
            }
        )
        path = Path(self.options.output) / f"{chunk.id}.parquet"
        temporary = path.with_name(f".{path.name}.partial")
        pq.write_table(table, temporary)
        os.replace(temporary, path)

    def item_id(self, chunk: QueryChunk) -> str:
        return chunk.id

    def cost(self, chunk: QueryChunk) -> int:
        return int(chunk.vectors.nbytes * 4)

    def describe(self, chunk: QueryChunk) -> tuple[str, str, int]:
        return (
            f"{len(chunk.keys)} queries from {chunk.keys[0] if chunk.keys else chunk.id}",
            self.options.output,
            0,
        )

    async def close(self, ctx: WorkerContext) -> None:
        if self._client is not None:
            await self._client.close()


def _slice_name(piece: Slice) -> str:
    """A slice's stable name in item ids: its file's position-free name and first row."""
    stem = piece.name.replace("/", "_").rsplit(".", 1)[0]
    return f"{stem}-{piece.start:09d}"


# ---- recall -----------------------------------------------------------------------------------
async def exact_neighbours(
    client: VectorsClient, bucket: str, index: str, metric: str, queries: np.ndarray, top_k: int
) -> list[list[str]]:
    """The `top_k` nearest keys of each query over the whole index, by `metric`, listed in 16
    segments with data; one page at a time, so memory is the queries' best so far."""
    best_keys: list[list[str]] = [[] for _ in queries]
    best: list[np.ndarray] = [np.empty(0, dtype=np.float32) for _ in queries]
    norms = np.linalg.norm(queries, axis=1)
    lock = asyncio.Lock()

    async def segment(number: int) -> None:
        dimension = queries.shape[1]
        pages = client.list_rows(
            bucket, index, dimension, segments=MAX_SEGMENTS, segment=number, metadata=False
        )
        async for listed, _ in pages:
            if not listed.keys:
                continue
            keys = listed.keys
            rows = np.frombuffer(listed.data, dtype=np.float32).reshape(len(keys), dimension)
            distances = _distances(metric, queries, norms, rows)
            async with lock:
                for n in range(len(queries)):
                    merged = np.concatenate([best[n], distances[n]])
                    names = best_keys[n] + keys
                    order = np.argsort(merged, kind="stable")[:top_k]
                    best[n], best_keys[n] = merged[order], [names[each] for each in order]

    await asyncio.gather(*(segment(number) for number in range(MAX_SEGMENTS)))
    return best_keys


def _distances(metric: str, queries: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(queries, rows) distances as the service measures them: cosine distance, or euclidean."""
    if metric == "cosine":
        scale = np.outer(norms, np.linalg.norm(rows, axis=1))
        cosine: np.ndarray = 1.0 - (queries @ rows.T) / np.where(scale == 0, 1.0, scale)
        return cosine
    squared = (queries**2).sum(axis=1)[:, None] + (rows**2).sum(axis=1)[None, :] - 2 * queries @ rows.T
    euclidean: np.ndarray = np.sqrt(np.maximum(squared, 0.0))
    return euclidean


def recall_at_k(answers: dict[str, list[str]], exact: dict[str, list[str]]) -> float:
    """The share of the exact nearest neighbours that the service's answers hold."""
    wanted = sum(len(keys) for keys in exact.values())
    if not wanted:
        return 1.0
    held = sum(len(set(answers.get(query, [])) & set(keys)) for query, keys in exact.items())
    return held / wanted
