"""Chunks -> ranged GETs: coalesce chunks that lie close together, cap a range's size.

Latency, not bandwidth, bounds a wave of small reads: two chunks 100 KiB apart cost one round
trip as one request and two as two. Reading the gap is cheap next to a round trip (at 1 Gb/s,
1 MiB takes 8 ms; a cross-region RTT is 20-80 ms), so chunks whose gap is at most `max_gap` share
a request as long as it stays under `max_range`. A single chunk larger than `split_bytes` is
fetched as several concurrent parts by the job (see GatherJob.run).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from s3bulk._arrays.selection import ChunkPiece

MiB = 1024**2


@dataclass(frozen=True)
class StoredChunk:
    offset: int  # in the file
    size: int
    filter_mask: int
    piece: ChunkPiece


@dataclass(frozen=True)
class RangeRead:
    """One ranged GET of file `file` and the chunks it carries (offsets relative to `start`)."""

    file: int
    start: int
    end: int
    chunks: tuple[StoredChunk, ...]

    @property
    def size(self) -> int:
        return self.end - self.start


def coalesce(
    file: int, chunks: Iterable[StoredChunk], *, max_gap: int = MiB, max_range: int = 16 * MiB
) -> Iterator[RangeRead]:
    ordered = sorted(chunks, key=lambda chunk: chunk.offset)
    group: list[StoredChunk] = []
    start = end = 0
    for chunk in ordered:
        chunk_end = chunk.offset + chunk.size
        if group and chunk.offset - end <= max_gap and max(end, chunk_end) - start <= max_range:
            group.append(chunk)
            end = max(end, chunk_end)
            continue
        if group:
            yield _read(file, start, end, group)
        group, start, end = [chunk], chunk.offset, chunk_end
    if group:
        yield _read(file, start, end, group)


def _read(file: int, start: int, end: int, group: list[StoredChunk]) -> RangeRead:
    relative = tuple(
        StoredChunk(chunk.offset - start, chunk.size, chunk.filter_mask, chunk.piece) for chunk in group
    )
    return RangeRead(file, start, end, relative)


def parts(start: int, end: int, split_bytes: int) -> list[tuple[int, int]]:
    """[start, end) cut into pieces of at most split_bytes (the last one may be shorter)."""
    return [(offset, min(end, offset + split_bytes)) for offset in range(start, end, split_bytes)] or [
        (start, end)
    ]
