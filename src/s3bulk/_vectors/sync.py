"""`vectors sync`: make indexes equal to a source, as one engine job: put what is new or changed,
leave what is equal, and (with --delete) delete what the source no longer has.

The plan is made before anything is sent (`plan_sync`, in the driver): each index is listed in
16 segments with metadata (keys and the content hash every s3bulk put keeps, `digest`); the
source is read whole once, each row's hash computed as a put would write it and compared. A key
whose stored vector has no hash (loaded by another tool) is read back with GetVectors, 100 at a
time, and compared by the same hash. What the source lacks is deleted only when both the
listing and the source were read to their end (either failing stops the job before anything is
sent), never from an empty source unless asked, and at most --max-delete.

The job then puts the planned rows (each slice of the source read again, only those rows
built) and sends the deletes, both under each index's one write budget. A resumed sync plans
again: what the stopped run stored is equal now, so it does the rest and nothing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from s3bulk._engine.job import BatchOutcome, WorkerContext
from s3bulk._errors import UsageError
from s3bulk._report import WorkerStats
from s3bulk._sources.embeddings import EmbeddingSpec, RowChunk, Slice, plan_slices, read_slice
from s3bulk._stores.multipart import parts_group
from s3bulk._stores.vectors import MAX_SEGMENTS, VectorsClient
from s3bulk._vectors.delete import CHUNK_KEYS, DeleteVectorsJob, KeyChunk, VectorDeletes
from s3bulk._vectors.digest import HASH_KEY, content_hashes, without_hash
from s3bulk._vectors.indexes import index_of
from s3bulk._vectors.job import PutVectorsJob, VectorBatch

GET_KEYS = 100  # GetVectors takes at most 100 keys
READ_ROWS = 4096  # source rows read at a time while planning


@dataclass(frozen=True)
class PutRows:
    """A descriptor: the rows of one slice to put (numbers within the file)."""

    piece: Slice
    rows: frozenset[int]

    def __str__(self) -> str:
        return f"{len(self.rows):,} changed rows of {self.piece}"


@dataclass
class SyncPlan:
    puts: list[PutRows] = field(default_factory=list)
    deletes: dict[str, list[str]] = field(default_factory=dict)  # index -> keys the source lacks
    unchanged: int = 0
    new: int = 0  # source keys the indexes did not hold
    stored: int = 0  # vectors the indexes held when listed
    source_rows: int = 0
    compared_by_reading: int = 0  # stored without a hash: read back to compare
    gets: int = 0  # the GetVectors that read them

    @property
    def put_rows(self) -> int:
        return sum(len(each.rows) for each in self.puts)


@dataclass
class Listing:
    """An index as ListVectors gave it, keys and metadata: each key's stored content hash (""
    when it has none), and the user's metadata keys found (what a source read without metadata
    would take away)."""

    hashes: dict[str, str] = field(default_factory=dict)
    metadata_keys: set[str] = field(default_factory=set)


async def listed(
    client: VectorsClient, bucket: str, index: str, segments: int = MAX_SEGMENTS, *, keys: bool = True
) -> Listing:
    """The index's keys, hashes and (with `keys`) metadata keys, from ListVectors in `segments`
    segments."""
    found = Listing()

    async def segment(number: int) -> None:
        pages = client.list_pages(bucket, index, segments=segments, segment=number, metadata=True)
        async for vectors, _ in pages:
            for vector in vectors:
                metadata = vector.get("metadata") or {}
                found.hashes[vector["key"]] = str(metadata.get(HASH_KEY, ""))
                if keys and len(metadata) > (HASH_KEY in metadata):
                    found.metadata_keys.update(metadata)

    async with parts_group() as group:  # a segment that fails stops the others
        for number in range(segments):
            group.create_task(segment(number))
    found.metadata_keys.discard(HASH_KEY)
    return found


async def plan_sync(
    client: VectorsClient,
    source: EmbeddingSpec,
    bucket: str,
    indexes: tuple[str, ...],
    delete: bool,
    segments: int = MAX_SEGMENTS,
) -> SyncPlan:
    """What to put and what to delete, from complete listings and a complete read of the source
    (an error in either raises, and nothing is planned). A source read without metadata is
    refused where the indexes hold some: every vector would be put again without it."""
    unread = not (source.metadata_columns or source.metadata_json_column)  # the rows have none
    listings = {index: await listed(client, bucket, index, segments, keys=unread) for index in indexes}
    _check_metadata_kept(bucket, listings)
    stored = {index: listing.hashes for index, listing in listings.items()}
    plan = SyncPlan(stored=sum(len(each) for each in stored.values()))
    seen: dict[str, set[str]] = {index: set() for index in indexes}
    changed: dict[str, tuple[Slice, set[int]]] = {}  # slice name -> its rows to put
    unknown: list[tuple[str, str, str, str, int]] = []  # index, key, source hash, slice name, row
    chunks = _chunks(source)  # read a chunk at a time: the source may be larger than memory
    while (read := await asyncio.to_thread(next, chunks, None)) is not None:
        piece, chunk, digests = read
        rows = changed.setdefault(_name(piece), (piece, set()))[1]
        for position, key in enumerate(chunk.keys):
            plan.source_rows += 1
            row = chunk.number(position)
            index = index_of(key, indexes)
            seen[index].add(key)  # a key the source has is never deleted, even if its row is bad
            if position in chunk.problems:
                rows.add(row)  # the put names the problem, as put does
                continue
            have = stored[index].get(key)
            if have == digests[position]:
                plan.unchanged += 1
            elif have == "":  # stored without a hash: read back below
                unknown.append((index, key, digests[position], _name(piece), row))
            else:
                plan.new += have is None
                rows.add(row)
    plan.compared_by_reading = len(unknown)
    equal = await _equal_when_read(client, bucket, unknown, plan)
    plan.unchanged += len(equal)
    for index, key, _, name, row in unknown:
        if (index, key) not in equal:
            changed[name][1].add(row)
    plan.puts = [PutRows(piece, frozenset(rows)) for piece, rows in changed.values() if rows]
    if delete:
        plan.deletes = {index: sorted(set(stored[index]) - seen[index]) for index in indexes}
    return plan


def _check_metadata_kept(bucket: str, listings: dict[str, Listing]) -> None:
    """Refuse a sync whose source is read without metadata into indexes whose vectors have it
    (their listings found metadata keys): it would put each one again, stripped
    (`--metadata-columns` left out, and no put into these indexes remembered)."""
    for index, listing in listings.items():
        if listing.metadata_keys:
            keys = sorted(listing.metadata_keys)
            raise UsageError(
                f"{bucket}/{index} holds metadata ({', '.join(keys[:5])}) that a sync without "
                f"--metadata-columns would strip: name them, e.g. --metadata-columns {','.join(keys[:5])}"
            )


def _chunks(source: EmbeddingSpec) -> Iterator[tuple[Slice, RowChunk, list[str]]]:
    """Each chunk of the source with its rows' content hashes (made natively, a chunk at a time)."""
    for piece in plan_slices(source):
        for chunk in read_slice(piece, source, READ_ROWS):
            yield piece, chunk, content_hashes(chunk.vectors, chunk.metadata)


def _name(piece: Slice) -> str:
    return f"{piece.path}#{piece.start}"


async def _equal_when_read(
    client: VectorsClient, bucket: str, unknown: list[tuple[str, str, str, str, int]], plan: SyncPlan
) -> set[tuple[str, str]]:
    """Of the keys stored without a hash: those whose vector and metadata, read back
    (GetVectors, 100 keys a request, 16 in flight), equal the source's."""
    wanted: dict[str, dict[str, str]] = {}
    for index, key, digest, _, _ in unknown:
        wanted.setdefault(index, {})[key] = digest
    groups = [
        (index, keys[start : start + GET_KEYS])
        for index, digests in wanted.items()
        for keys in [list(digests)]
        for start in range(0, len(keys), GET_KEYS)
    ]
    plan.gets = len(groups)
    equal: set[tuple[str, str]] = set()

    async def read(index: str, keys: list[str]) -> None:
        found = await client.get_vectors(bucket, index, keys)
        if not found:
            return
        vectors = np.array([vector["data"]["float32"] for vector in found], dtype=np.float32)
        digests = content_hashes(vectors, [without_hash(vector.get("metadata")) for vector in found])
        for vector, digest in zip(found, digests, strict=True):
            if digest == wanted[index][vector["key"]]:
                equal.add((index, vector["key"]))

    for start in range(0, len(groups), 16):
        await asyncio.gather(*(read(index, keys) for index, keys in groups[start : start + 16]))
    return equal


class SyncVectorsJob:
    """The Job (engine/job.py) that carries out a sync plan: a put job's batches for the changed
    rows and a delete job's requests for the keys the source lacks, one budget per index."""

    direction = "files → S3 Vectors"
    items_hold_their_cost = True

    def __init__(self, put: PutVectorsJob, delete: DeleteVectorsJob | None, plan: SyncPlan) -> None:
        self.put = put
        self.delete = delete
        self.plan = plan
        self.settings = put.settings
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []

    # ---- driver side --------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[PutRows | KeyChunk]:
        stats.objects_listed += self.plan.source_rows
        stats.objects_unchanged += self.plan.unchanged
        for each in self._descriptors():
            yield each

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[PutRows | KeyChunk]:
        """A new plan is the retry: what the last run stored is equal now, what it deleted gone."""
        return self._descriptors()

    def _descriptors(self) -> Iterator[PutRows | KeyChunk]:
        yield from self.plan.puts
        number = 0
        for keys in self.plan.deletes.values():
            for start in range(0, len(keys), CHUNK_KEYS):
                yield KeyChunk(number, tuple(keys[start : start + CHUNK_KEYS]))
                number += 1

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        await self.put.open(ctx)
        if self.delete is not None:
            await self.delete.open(ctx)
            self.delete.share_limits(self.put.limits)

    async def expand(self, descriptor: PutRows | KeyChunk, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        if isinstance(descriptor, KeyChunk):
            assert self.delete is not None
            yield self.delete.batches_of(descriptor)
            return
        assert self.put.source is not None
        full = self.put.batch_rows * len(self.put.options.indexes)
        chunks = read_slice(descriptor.piece, self.put.source, full)
        pending: list[RowChunk] = []  # the changed rows, gathered into full batches: a sparse
        held = 0  # change (1% of rows) would otherwise go out a few rows a PutVectors
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            wanted = [n for n in range(len(chunk.keys)) if chunk.number(n) in descriptor.rows]
            if wanted:
                pending.append(_only(chunk, wanted))
                held += len(wanted)
            if held >= full:
                yield self.put.batches_of(descriptor.piece, _joined(pending), ctx)
                pending, held = [], 0
        if pending:
            yield self.put.batches_of(descriptor.piece, _joined(pending), ctx)

    async def run(self, item: VectorBatch | VectorDeletes, ctx: WorkerContext) -> int | BatchOutcome:
        if isinstance(item, VectorDeletes):
            assert self.delete is not None
            outcome = await self.delete.run(item, ctx)
            ctx.stats.vectors_done -= len(item.keys)  # counted as deleted, not stored
            ctx.stats.objects_deleted += len(item.keys)
            return outcome
        return await self.put.run(item, ctx)

    def item_id(self, item: VectorBatch | VectorDeletes) -> str:
        return f"delete:{item.id}" if isinstance(item, VectorDeletes) else self.put.item_id(item)

    def cost(self, item: VectorBatch | VectorDeletes) -> int:
        return 0 if isinstance(item, VectorDeletes) else self.put.cost(item)

    def describe(self, item: VectorBatch | VectorDeletes) -> tuple[str, str, int]:
        if isinstance(item, VectorDeletes):
            assert self.delete is not None
            return self.delete.describe(item)
        return self.put.describe(item)

    async def close(self, ctx: WorkerContext) -> None:
        await self.put.close(ctx)
        if self.delete is not None:
            await self.delete.close(ctx)


def _joined(chunks: list[RowChunk]) -> RowChunk:
    """Several chunks' rows as one, each keeping its number in the file."""
    if len(chunks) == 1:
        return chunks[0]
    keys = [key for chunk in chunks for key in chunk.keys]
    metadata = (
        [entry for chunk in chunks for entry in (chunk.metadata or [None] * len(chunk.keys))]
        if any(chunk.metadata is not None for chunk in chunks)
        else None
    )
    problems: dict[int, str] = {}
    numbers: list[int] = []
    for chunk in chunks:
        problems.update({len(numbers) + n: why for n, why in chunk.problems.items()})
        numbers += [chunk.number(n) for n in range(len(chunk.keys))]
    vectors = np.concatenate([chunk.vectors for chunk in chunks])
    return RowChunk(numbers[0], keys, vectors, metadata, problems, numbers)


def _only(chunk: RowChunk, positions: list[int]) -> RowChunk:
    """The chunk's rows at `positions`, each keeping its number in the file."""
    keys = [chunk.keys[n] for n in positions]
    metadata = [chunk.metadata[n] for n in positions] if chunk.metadata is not None else None
    where = {n: place for place, n in enumerate(positions)}
    problems = {where[n]: why for n, why in chunk.problems.items() if n in where}
    numbers = [chunk.number(n) for n in positions]
    return RowChunk(numbers[0], keys, chunk.vectors[positions], metadata, problems, numbers)
