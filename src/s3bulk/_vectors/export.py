"""`vectors export`: an index's vectors (keys, float32 data, metadata) into Parquet files, as one
engine job.

Each index is listed in up to 16 ListVectors segments side by side (the service's parallel
listing); a segment's pages, with data and metadata, gather into parts of about `part_bytes`
of vectors, each written as one Parquet file (`DEST/INDEX/sSS-NNNNNN.parquet`, written whole
under a temporary name, then renamed), so memory holds a part per segment at most, whatever
the index's size. Each part's footer keeps the token its segment's listing goes on from: a
resumed export reads the last part of each segment's unbroken run and lists on from there,
so it neither lists a segment again from the start nor leaves a gap. Metadata is kept as JSON
text (one object per vector), which `vectors put` reads back as each vector's metadata.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from s3bulk._config import AwsSettings
from s3bulk._engine.job import WorkerContext
from s3bulk._report import WorkerStats
from s3bulk._sources.embeddings import EXPORTED_METADATA
from s3bulk._stores.vectors import VectorsClient
from s3bulk._vectors.digest import without_hash_texts
from s3bulk._vectors.indexes import IndexShape

TOKEN = b"s3bulk.next_token"  # footer key: where the segment's listing goes on ("" once it ended)
MARKER = ".s3bulk-export"  # in DEST: the job that writes there (a resume goes on; others refuse)


@dataclass(frozen=True)
class ExportOptions:
    bucket: str
    indexes: tuple[str, ...]
    destination: str  # a directory: DEST/INDEX/sSS-NNNNNN.parquet
    segments: int = 16
    part_bytes: int = 16 * 1024**2  # vectors' float32 bytes per Parquet file
    content_hash: bool = False  # keep s3bulk's content hash in the metadata exported (`digest`)


@dataclass(frozen=True)
class Segment:
    """A descriptor: one ListVectors segment of one index."""

    index: str
    number: int
    count: int

    def __str__(self) -> str:
        return f"{self.index} segment {self.number + 1} of {self.count}"


@dataclass
class Part:
    """An item: consecutive pages of one segment, written as one Parquet file."""

    index: str
    segment: int
    number: int
    keys: list[str]
    vectors: np.ndarray
    metadata: list[str | None]
    next_token: str  # "" when the segment ends with this part

    @property
    def name(self) -> str:
        return f"{self.index}/s{self.segment:02d}-{self.number:06d}.parquet"


def part_path(destination: str, index: str, segment: int, number: int) -> Path:
    return Path(destination) / index / f"s{segment:02d}-{number:06d}.parquet"


def frontier(destination: str, index: str, segment: int) -> tuple[int, str | None]:
    """(the next part's number, the token to list on from: None to start, "" when the segment
    was exported whole), from the unbroken run of parts already written."""
    import pyarrow.parquet as pq

    number, token = 0, None
    while (path := part_path(destination, index, segment, number)).exists():
        footer = pq.read_schema(path).metadata or {}
        token = footer.get(TOKEN, b"").decode()
        number += 1
        if not token:
            return number, ""
    return number, token


class ExportVectorsJob:
    """The Job (engine/job.py) that exports indexes; picklable plain settings until `open`."""

    direction = "S3 Vectors → files"
    items_hold_their_cost = True  # a part holds its rows from the moment its pages are listed

    def __init__(self, options: ExportOptions, settings: AwsSettings, shapes: dict[str, IndexShape]) -> None:
        self.options = options
        self.settings = settings
        self.shapes = shapes
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []
        self._client: VectorsClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if not name.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client = None

    # ---- driver side --------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Segment]:
        for index in self.options.indexes:
            for number in range(self.options.segments):
                yield Segment(index, number, self.options.segments)

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        """A failed part's segment, listed on from the last part written (its frontier)."""
        failed = {item_id.rpartition("-")[0] for page in rows for item_id, _ in page}
        for name in sorted(failed):
            index, _, segment = name.rpartition("/s")
            yield Segment(index, int(segment), self.options.segments)

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._client = VectorsClient.for_worker(self.settings, ctx.retrier, self.options.segments)

    async def expand(self, segment: Segment, ctx: WorkerContext) -> AsyncIterator[list[Part]]:
        assert self._client is not None
        number, token = await asyncio.to_thread(
            frontier, self.options.destination, segment.index, segment.number
        )
        if token == "":
            return  # exported whole by an earlier run
        dimension = self.shapes[segment.index].dimension
        rows_per_part = max(1, self.options.part_bytes // (4 * dimension))
        keys: list[str] = []
        arrays: list[np.ndarray] = []  # each page's float32 rows, read natively
        metadata: list[str | None] = []
        pages = self._client.list_rows(
            self.options.bucket,
            segment.index,
            dimension,
            segments=segment.count,
            segment=segment.number,
            token=token,
        )
        async for rows, following in pages:
            keys += rows.keys
            # the JSON text the service sent, as the user gave it (unless the hash is asked for)
            metadata += rows.metadata if self.options.content_hash else without_hash_texts(rows.metadata)
            arrays.append(np.frombuffer(rows.data, dtype=np.float32).reshape(len(rows.keys), dimension))
            ctx.stats.objects_listed += len(rows.keys)
            if len(keys) >= rows_per_part or following is None:
                array = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
                part = Part(segment.index, segment.number, number, keys, array, metadata, following or "")
                yield ctx.drop_done([part], self.item_id)
                number, keys, arrays, metadata = number + 1, [], [], []

    async def run(self, part: Part, ctx: WorkerContext) -> int:
        with ctx.stats.timed("write"):
            await asyncio.to_thread(self._write, part)
        ctx.stats.vectors_done += len(part.keys)
        return int(part.vectors.nbytes)

    def _write(self, part: Part) -> None:
        """One Parquet file, whole or not at all: written under a temporary name, then renamed."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        dimension = part.vectors.shape[1]
        values = pa.array(part.vectors.reshape(-1), type=pa.float32())
        table = pa.table(
            {
                "key": pa.array(part.keys, type=pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(values, dimension),
                "metadata": pa.array(part.metadata, type=pa.string()),
            }
        )
        table = table.replace_schema_metadata(
            {
                TOKEN: part.next_token.encode(),
                EXPORTED_METADATA: b"metadata",
                b"s3bulk.index": part.index.encode(),
            }
        )
        path = part_path(self.options.destination, part.index, part.segment, part.number)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.partial")
        pq.write_table(table, temporary, compression="zstd")
        os.replace(temporary, path)

    def item_id(self, part: Part) -> str:
        return part.name[: -len(".parquet")]

    def cost(self, part: Part) -> int:
        return int(part.vectors.nbytes * 2)  # the rows, and pyarrow's copy as it writes

    def describe(self, part: Part) -> tuple[str, str, int]:
        source = f"{self.options.bucket}/{part.index} segment {part.segment + 1}"
        return source, str(Path(self.options.destination) / part.name), len(part.keys)

    async def close(self, ctx: WorkerContext) -> None:
        if self._client is not None:
            await self._client.close()
