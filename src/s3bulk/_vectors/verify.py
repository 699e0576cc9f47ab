"""`vectors verify` and `vectors count`: did the load store what the files hold?

verify reads a sample of rows from the source (chosen by seeded random row numbers, so only the
slices holding them are read, and the same seed checks the same rows), fetches them back with
GetVectors (100 keys a call, several calls in flight) and compares float32 data bit for bit and
metadata as JSON. count pages through ListVectors in parallel segments.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from s3bulk._config import AwsSettings
from s3bulk._errors import UsageError
from s3bulk._sources.embeddings import (
    EmbeddingSpec,
    Slice,
    open_file,
    plan_slices,
    read_slice,
)
from s3bulk._stores.retry import Meter
from s3bulk._stores.vectors import VectorsClient
from s3bulk._vectors.digest import without_hash
from s3bulk._vectors.indexes import index_of, index_shapes
from s3bulk._vectors.validate import check_rows

GET_KEYS_PER_CALL = 100
MAX_SEGMENTS = 16


@dataclass
class VerifyReport:
    sampled: int = 0
    matched: int = 0
    invalid: int = 0  # rows the checks reject: a load never sends them
    missing: list[str] = field(default_factory=list)
    differ: list[tuple[str, str]] = field(default_factory=list)  # (key, what differs)
    requests: Counter[str] = field(default_factory=Counter)
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # what was decided for the user

    @property
    def ok(self) -> bool:
        return not self.missing and not self.differ

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "sampled": self.sampled,
            "matched": self.matched,
            "invalid": self.invalid,
            "missing": self.missing,
            "differ": [{"key": key, "what": what} for key, what in self.differ],
            "requests": dict(self.requests),
            "wall_seconds": round(self.wall_seconds, 3),
            "notes": self.notes,
        }


@dataclass
class Expected:
    index: str
    key: str
    vector: np.ndarray
    metadata: dict[str, Any] | None


async def verify_vectors(
    source: EmbeddingSpec,
    bucket: str,
    indexes: tuple[str, ...],
    settings: AwsSettings,
    *,
    sample: int | None = 1000,
    seed: int = 0,
    concurrency: int = 16,
) -> VerifyReport:
    """Compare `sample` random rows (every row if None) of the source with what the indexes
    hold. A source read without metadata where the indexes hold some is a usage error that names
    the option: every row would differ."""
    started = time.perf_counter()
    report = VerifyReport()
    shapes = await index_shapes(settings, bucket, indexes, report.requests)
    client = VectorsClient(settings, max_connections=concurrency, meter=Meter(report.requests))
    calls = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()
    pending: dict[str, list[Expected]] = {index: [] for index in indexes}
    unread: set[str] = set()  # metadata keys stored where the source was read without any

    async def check(index: str, group: list[Expected]) -> None:
        async with calls:
            found = await client.get_vectors(bucket, index, [row.key for row in group])
        _compare(group, {entry["key"]: entry for entry in found}, report, unread)

    def launch(index: str) -> None:
        group, pending[index] = pending[index], []
        task = asyncio.create_task(check(index, group))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        async for row in _sampled_rows(source, indexes, shapes, sample, seed, report):
            pending[row.index].append(row)
            if len(pending[row.index]) == GET_KEYS_PER_CALL:
                launch(row.index)
                while len(tasks) >= concurrency * 2:  # bounded: the source waits for the checks
                    await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
        for index in indexes:
            if pending[index]:
                launch(index)
        await asyncio.gather(*tasks)
    finally:
        await client.close()
    if unread and not (source.metadata_columns or source.metadata_json_column):
        keys = ",".join(sorted(unread)[:5])
        raise UsageError(
            f"{bucket}/{','.join(indexes)} holds metadata ({keys}) and the source was read without "
            f"any: name its columns, e.g. --metadata-columns {keys}"
        )
    report.wall_seconds = time.perf_counter() - started
    return report


def _compare(
    group: list[Expected], found: dict[str, dict[str, Any]], report: VerifyReport, unread: set[str]
) -> None:
    for row in group:
        stored = found.get(row.key)
        if stored is None:
            report.missing.append(row.key)
            continue
        data = np.asarray((stored.get("data") or {}).get("float32") or [], dtype=np.float32)
        expected_metadata = orjson.loads(orjson.dumps(row.metadata)) if row.metadata else None
        if data.tobytes() != row.vector.tobytes():
            changed = (
                int(np.count_nonzero(data != row.vector))
                if data.shape == row.vector.shape
                else len(row.vector)
            )
            report.differ.append((row.key, f"data: {changed} of {len(row.vector)} values differ"))
        elif (kept := without_hash(stored.get("metadata"))) != expected_metadata:
            if kept and not expected_metadata:
                unread.update(kept)
            report.differ.append(
                (row.key, f"metadata: stored {stored.get('metadata')!r}, source {expected_metadata!r}")
            )
        else:
            report.matched += 1


async def _sampled_rows(
    source: EmbeddingSpec,
    indexes: tuple[str, ...],
    shapes: dict[str, Any],
    sample: int | None,
    seed: int,
    report: VerifyReport,
) -> AsyncIterator[Expected]:
    slices = [_counted(piece, source) for piece in await asyncio.to_thread(lambda: list(plan_slices(source)))]
    total = sum((piece.stop or 0) - piece.start for piece in slices)
    if sample is not None and sample <= 0:
        raise UsageError("--sample must be at least 1 (or --all)")
    chosen = (
        None
        if sample is None or sample >= total
        else sorted(random.Random(seed).sample(range(total), sample))
    )
    offset = 0
    for piece in slices:
        rows = (piece.stop or 0) - piece.start
        wanted: set[int] | None = None
        if chosen is not None:
            wanted = {n - offset + piece.start for n in chosen if offset <= n < offset + rows}
        offset += rows
        if wanted is not None and not wanted:
            continue
        chunks = read_slice(piece, source, 1000)
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            for row in _chunk_rows(chunk, indexes, shapes, wanted, report):
                yield row
            if wanted is not None and chunk.first_row + len(chunk.keys) > max(wanted):
                break


def _chunk_rows(
    chunk: Any,
    indexes: tuple[str, ...],
    shapes: dict[str, Any],
    wanted: set[int] | None,
    report: VerifyReport,
) -> Iterator[Expected]:
    shape = next(iter(shapes.values()))
    problems = dict(chunk.problems) | check_rows(
        chunk.keys,
        chunk.vectors,
        chunk.metadata,
        dimension=shape.dimension,
        metric=shape.metric,
        non_filterable=shape.non_filterable,
    )
    for position, key in enumerate(chunk.keys):
        if wanted is not None and chunk.first_row + position not in wanted:
            continue
        report.sampled += 1
        if position in problems:
            report.invalid += 1
            continue
        metadata = chunk.metadata[position] if chunk.metadata is not None else None
        yield Expected(index_of(key, indexes), key, chunk.vectors[position], metadata)


def _counted(piece: Slice, source: EmbeddingSpec) -> Slice:
    """A JSON Lines file's row count (one pass over its newlines), so rows can be sampled."""
    if piece.stop is not None:
        return piece
    lines = 0
    with open_file(piece.path, source.settings) as handle:
        while block := handle.read(8 * 1024**2):
            lines += block.count(b"\n")
        handle.seek(max(0, handle.tell() - 1))
        if handle.read(1) not in (b"\n", b""):
            lines += 1
    return Slice(piece.path, piece.name, piece.format, 0, lines)


async def count_vectors(
    settings: AwsSettings, bucket: str, indexes: tuple[str, ...], segments: int = MAX_SEGMENTS
) -> dict[str, int]:
    """Vectors per index, by ListVectors in `segments` parallel segments (up to 16)."""
    if not 1 <= segments <= MAX_SEGMENTS:
        raise UsageError(f"--segments {segments}: ListVectors takes 1 to {MAX_SEGMENTS} segments")
    await index_shapes(settings, bucket, indexes)  # a missing index says so, with the fix
    client = VectorsClient(settings, max_connections=segments)

    async def segment(index: str, number: int) -> int:
        pages = client.list_pages(bucket, index, segments=segments, segment=number)
        return sum([len(vectors) async for vectors, _ in pages])

    try:
        counts = {}
        for index in indexes:
            counts[index] = sum(await asyncio.gather(*(segment(index, n) for n in range(segments))))
        return counts
    finally:
        await client.close()
