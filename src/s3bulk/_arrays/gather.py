"""`gather`: one selection out of many chunked HDF5 objects, in three waves.

1. Index: every file's chunk index, from the local cache when the object's ETag still matches,
   else read in concurrent waves for all files: their heads (h5py describes the dataset from
   them, through a BlockFile), then each level of their chunk indexes: version-1 B-trees
   (arrays/btree.py), and the newest format's fixed and extensible arrays and version-2
   B-trees (arrays/layouts.py).
2. Fetch: one engine run over the ranged GETs of all files at once (GatherJob), which decodes
   and writes into a memory-mapped .npy.
3. Fall back: datasets s3bulk cannot read chunk by chunk (contiguous or compact layout, filters
   no decoder here reads: scale-offset, n-bit, rarer plugins) are read through h5py, and the
   report says so.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from s3bulk._arrays.btree import dry_run, leaf_chunks, needed_children, read_node
from s3bulk._arrays.decode import unsupported_filter
from s3bulk._arrays.files import FileRef, find_files, open_store
from s3bulk._arrays.index import (
    CHUNKED,
    DatasetIndex,
    IndexCache,
    describe_dataset,
    look_up_chunks,
    open_dataset,
)
from s3bulk._arrays.job import FilePlacement, GatherJob
from s3bulk._arrays.layouts import (
    HEADER_BYTES,
    READERS,
    V1_TREE,
    Geometry,
    WaveReader,
    geometry_of,
    index_start,
    kind_of,
)
from s3bulk._arrays.ranges import StoredChunk, coalesce
from s3bulk._arrays.selection import AxisPick, Part, chunk_pieces, parse_selection, resolve, result_shape
from s3bulk._config import AwsSettings
from s3bulk._errors import S3BulkError, UsageError, classify
from s3bulk._report import Report
from s3bulk._stores.blockfile import BlockFile

MiB = 1024**2
METADATA = "GET (HDF5 metadata)"


@dataclass(frozen=True)
class GatherOptions:
    combine: str = "concat"  # "concat": files joined along `axis` of the result; "stack": a new first axis
    axis: int = 0
    scale: bool = False  # divide by each file's `scale_factor` attribute (the WIND Toolkit convention)
    cache_dir: str | None = None  # None: no index cache
    block_size: int = MiB  # metadata reads
    max_gap: int = MiB  # coalesce chunks this close
    max_range: int = 16 * MiB
    split_bytes: int = 16 * MiB


@dataclass
class FilePlan:
    ref: FileRef
    index: DatasetIndex
    picks: tuple[AxisPick, ...]
    shape: tuple[int, ...]
    fallback: str = ""  # why h5py reads this file's part ("" when s3bulk does)


@dataclass
class Gathered:
    """The result's shape and type, where it went, and how the job went."""

    shape: tuple[int, ...]
    dtype: np.dtype
    report: Report
    labels: list[str] = field(default_factory=list)  # names of the last axis's entries (columns)


# ---- wave 1: the chunk indexes ------------------------------------------------------------------
def _unknown_chunks(index: DatasetIndex, parts: tuple[Part, ...]) -> list[tuple[int, ...]]:
    """The chunks the selection needs whose location the index does not hold yet."""
    if index.layout != CHUNKED:
        return []
    picks = resolve(parts, index.shape, index.url)
    return index.missing(piece.coord for piece in chunk_pieces(picks, index.chunks))


@dataclass
class _Reading:
    """One file whose index is being read: its cached blocks and what h5py has told us so far."""

    ref: FileRef
    handle: BlockFile
    index: DatasetIndex | None
    coords: list[tuple[int, ...]] = field(default_factory=list)  # chunks still to look up
    start: tuple[bytes, int] | None = None  # (kind, address) of the chunk index (layouts.index_start)
    geometry: Geometry | None = None
    reader: WaveReader = field(init=False)  # the index's reads, each wave's merged

    def __post_init__(self) -> None:
        self.reader = WaveReader(self.handle)


async def build_indexes(
    files: list[FileRef],
    dataset: str,
    parts: tuple[Part, ...],
    settings: AwsSettings,
    options: GatherOptions,
    heads: Mapping[str, bytes] | None = None,
) -> list[DatasetIndex]:
    """Each file's index: cached, or read in waves that serve every file at once: the heads (h5py
    describes the dataset from them), then one wave per level of the chunk indexes. h5py looks up
    only what the walk did not find (single-chunk and implicit indexes, which need no read).
    `heads`: the first bytes of files read already, by URL (the xarray backend's opening)."""
    cache = IndexCache(options.cache_dir)
    indexes = [cache.load(ref.url, ref.etag, dataset) for ref in files]
    todo = [number for number, index in enumerate(indexes) if index is None or _unknown_chunks(index, parts)]
    if not todo:
        return [index for index in indexes if index is not None]
    stores = {root: open_store(root, settings) for root in {files[number].root for number in todo}}
    reading = []
    for number in todo:
        ref = files[number]
        handle = BlockFile(stores[ref.root], ref.key, ref.size, block_size=options.block_size)
        if heads and ref.url in heads:
            handle.seed(0, heads[ref.url])
        reading.append(_Reading(ref, handle, indexes[number]))
    importing = asyncio.to_thread(importlib.import_module, "h5py")  # ~0.1 s, while the heads arrive
    await asyncio.gather(importing, *(each.handle.prefetch(0, options.block_size) for each in reading))
    await asyncio.to_thread(_describe_all, reading, dataset, parts)
    await _walk_indexes(reading)
    await asyncio.to_thread(_look_up_all, reading, dataset)
    for number, each in zip(todo, reading, strict=True):
        assert each.index is not None
        each.index.metadata_requests = each.handle.requests
        each.index.metadata_bytes = each.handle.bytes_read
        cache.save(each.index)
        indexes[number] = each.index
    return [index for index in indexes if index is not None]


def _open(each: _Reading, dataset: str) -> tuple[Any, Any]:
    import h5py

    try:
        h5file = h5py.File(each.handle, "r")
    except OSError as exc:
        url = each.ref.url
        raise UsageError(f"{url} is not an HDF5 file h5py can open ({exc}): check the path") from None
    return h5file, open_dataset(h5file, dataset, each.ref.url)


def _describe_all(reading: list[_Reading], dataset: str, parts: tuple[Part, ...]) -> None:
    """Shape, type and filters of each file's dataset; the chunks to look up; where its index is."""
    for each in reading:
        h5file, node = _open(each, dataset)
        with h5file:
            each.index = each.index or describe_dataset(node, each.ref.url, each.ref.etag, dataset)
            each.coords = _unknown_chunks(each.index, parts)
            if each.coords:
                each.geometry = geometry_of(node)
                look_up = partial(node.id.get_chunk_info_by_coord, each.coords[0])
                each.start = index_start(each.handle, dry_run(each.handle, look_up))


async def _walk_indexes(reading: list[_Reading]) -> None:
    """Look the chunks up in each file's index, all files' reads of a level in flight at once; the
    chunks found leave `coords` (what is left there, h5py looks up)."""
    await asyncio.gather(*(_learn_kind(each) for each in reading if each.start and not each.start[0]))
    trees = [each for each in reading if each.start and each.start[0] == V1_TREE]
    arrays = [each for each in reading if each.start and each.start[0] in READERS]
    await asyncio.gather(_walk_trees(trees), *(_walk_layout(each) for each in arrays))
    for each in reading:
        assert each.index is not None
        each.coords = each.index.missing(each.coords)


async def _learn_kind(each: _Reading) -> None:
    """An index whose start the head did not hold: one read of it says which it is."""
    assert each.start is not None
    at = each.start[1]
    each.reader.fetched[at] = await each.handle.read_async(at, HEADER_BYTES)
    kind = kind_of(each.reader.fetched[at])
    each.start = (kind, at) if kind else None


async def _walk_layout(each: _Reading) -> None:
    assert each.start is not None and each.geometry is not None and each.index is not None
    kind, at = each.start
    found = await READERS[kind](each.reader.read_async, at, each.coords, each.geometry)
    each.index.chunk_info.update(found)


async def _walk_trees(reading: list[_Reading]) -> None:
    """Look the chunks up in each file's version-1 B-tree, level by level, all files' nodes at once."""
    wanted = {id(each): {(*coord, 0) for coord in each.coords} for each in reading}
    frontier = [(each, each.start[1]) for each in reading if each.start is not None]
    while frontier:
        nodes = await asyncio.gather(
            *(read_node(each.reader, at, len(each.coords[0])) for each, at in frontier)
        )
        deeper: list[tuple[_Reading, int]] = []
        for (each, _), node in zip(frontier, nodes, strict=True):
            if node is None:
                continue
            if node.level > 0:
                deeper.extend((each, child) for child in needed_children(node, wanted[id(each)]))
                continue
            assert each.index is not None
            for key, (address, stored, mask) in leaf_chunks(node, wanted[id(each)]).items():
                each.index.chunk_info[key[:-1]] = (address, stored, mask)
        frontier = deeper


def _look_up_all(reading: list[_Reading], dataset: str) -> None:
    for each in reading:
        if not each.coords or (each.geometry and each.geometry.h5py_misreads):
            continue  # h5py's answer would be wrong: the file is read through h5py (plan_files)
        before = each.handle.requests
        h5file, node = _open(each, dataset)
        with h5file:
            assert each.index is not None
            look_up_chunks(node, each.index, each.coords)
        each.index.serial_requests = each.handle.requests - before


# ---- the plan: where each file's part goes ----------------------------------------------------
def plan_files(
    files: list[FileRef], indexes: list[DatasetIndex], parts: tuple[Part, ...], options: GatherOptions
) -> tuple[list[FilePlan], tuple[int, ...], np.dtype, str]:
    """Each file's selection, the combined shape and type, and how files are combined."""
    plans = []
    for ref, index in zip(files, indexes, strict=True):
        picks = resolve(parts, index.shape, ref.url)
        plan = FilePlan(ref, index, picks, result_shape(picks))
        if index.layout != CHUNKED:
            plan.fallback = f"{index.layout} layout"
        elif reason := unsupported_filter(index.filters):
            plan.fallback = reason
        elif _unknown_chunks(index, parts):
            plan.fallback = "a chunk index h5py looks chunks up in wrongly, not read here"
        if options.scale and index.scale_factor is None:
            raise UsageError(
                f"{ref.url}: dataset {index.dataset} has no scale_factor attribute: drop --scale"
            )
        plans.append(plan)
    dtypes = [_native(plan.index.dtype) for plan in plans]
    dtype = np.result_type(*dtypes)
    if options.scale:
        dtype = np.result_type(dtype, np.float32)
    combine = options.combine
    if combine not in ("concat", "stack"):
        raise UsageError(f"unknown combine {combine!r}: use concat or stack")
    if combine == "concat" and len(plans[0].shape) == 0:
        combine = "stack"  # single points: one value per file
    shapes = [plan.shape for plan in plans]
    if combine == "stack":
        if len(set(shapes)) > 1:
            raise UsageError(
                f"files give different shapes {sorted(set(shapes))}: they cannot be stacked; use concat"
            )
        return plans, (len(plans), *shapes[0]), dtype, combine
    ndim = len(shapes[0])
    axis = options.axis + ndim if options.axis < 0 else options.axis
    if not 0 <= axis < ndim:
        raise UsageError(f"--axis {options.axis} is out of range for {ndim}-D parts: use 0..{ndim - 1}")
    others = {shape[:axis] + shape[axis + 1 :] for shape in shapes}
    if len(others) > 1:
        raise UsageError(
            f"files give parts of shapes {sorted(set(shapes))}, which do not line up along axis {axis}: "
            "pick another --axis or select the same extent in every file"
        )
    total = sum(shape[axis] for shape in shapes)
    return plans, (*shapes[0][:axis], total, *shapes[0][axis + 1 :]), dtype, combine


def _native(dtype_text: str) -> np.dtype:
    try:
        dtype = np.dtype(dtype_text)
    except TypeError:
        raise UsageError(
            f"dataset type {dtype_text} is not a plain number type: gather reads numbers"
        ) from None
    return dtype.newbyteorder("=")


def placements(plans: list[FilePlan], combine: str, axis: int, scale: bool) -> list[FilePlacement]:
    result = []
    offset = 0
    for number, plan in enumerate(plans):
        index = plan.index
        stacked = combine == "stack"
        result.append(
            FilePlacement(
                url=plan.ref.url,
                root=plan.ref.root,
                key=plan.ref.key,
                dtype=index.dtype,
                chunks=index.chunks,
                filters=index.filters,
                prefix=(number,) if stacked else (),
                axis=-1 if stacked else axis,
                offset=0 if stacked else offset,
                divide_by=index.scale_factor if scale else None,
            )
        )
        if not stacked:
            offset += plan.shape[axis]
    return result


def range_reads(plans: list[FilePlan], options: GatherOptions) -> tuple[list[Any], list[tuple[int, Any]]]:
    """The ranged GETs of every chunked file, and the (file, piece) pairs never written (fill)."""
    reads: list[Any] = []
    unwritten: list[tuple[int, Any]] = []
    for number, plan in enumerate(plans):
        if plan.fallback:
            continue
        stored = []
        for piece in chunk_pieces(plan.picks, plan.index.chunks):
            info = plan.index.chunk_info[piece.coord]
            if info is None:
                unwritten.append((number, piece))
            else:
                stored.append(StoredChunk(info[0], info[1], info[2], piece))
        reads.extend(coalesce(number, stored, max_gap=options.max_gap, max_range=options.max_range))
    return reads, unwritten


# ---- the whole gather ----------------------------------------------------------------------------
@dataclass
class GatherPlan:
    """Everything decided before the engine fetches: the job (its range reads), and what the end
    of the gather needs (files h5py reads instead, the result's shape and column names)."""

    job: GatherJob
    plans: list[FilePlan]
    parts: tuple[Part, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    combine: str
    requests: dict[str, int]  # finding the files and reading their chunk indexes
    notes: list[str]


async def plan_gather(
    sources: list[str],
    dataset: str,
    selection: str,
    output_path: str,
    settings: AwsSettings,
    options: GatherOptions,
    *,
    check_shape: Callable[[tuple[int, ...]], None] | None = None,
) -> GatherPlan:
    """Read the files' chunk indexes, plan the range reads, and create the output (a new .npy at
    `output_path`, chunks never written already holding the fill value)."""
    parts = parse_selection(selection)
    if any(source.startswith("s3://") for source in sources):
        settings.credentials()  # none: a usage error now, not an error inside the store's callback
    try:
        files, finding = await find_files(sources, settings)
        indexes = await build_indexes(files, dataset, parts, settings, options)
    except S3BulkError:
        raise
    except Exception as exc:  # the store's errors (no such bucket, access denied): one line each
        raise classify(exc, " ".join(sources)) from None
    plans, shape, dtype, combine = plan_files(files, indexes, parts, options)
    if check_shape:
        check_shape(shape)
    axis = options.axis + len(plans[0].shape) if options.axis < 0 else options.axis
    job_files = placements(plans, combine, axis, options.scale)
    reads, unwritten = range_reads(plans, options)
    output = np.lib.format.open_memmap(output_path, mode="w+", dtype=dtype, shape=shape)
    for number, piece in unwritten:
        fill = np.asarray(plans[number].index.fill_value, dtype=dtype)
        output[GatherJob.target(job_files[number], piece.target)] = GatherJob.scaled(job_files[number], fill)
    output.flush()
    del output
    requests = dict(finding)
    metadata = sum(index.metadata_requests for index in indexes)
    requests[METADATA] = metadata
    built = sum(1 for index in indexes if index.metadata_requests)
    serial = sum(index.serial_requests for index in indexes)
    note = (
        f"chunk index: {len(files) - built} of {len(files)} file(s) from the cache, {built} read "
        f"({metadata} requests, {sum(index.metadata_bytes for index in indexes) / MiB:.1f} MiB"
        + (f"; {serial} of them h5py's lookups, one at a time)" if serial else ")")
    )
    job = GatherJob(job_files, output_path, settings, split_bytes=options.split_bytes)
    job.reads = reads
    return GatherPlan(job, plans, parts, shape, dtype, combine, requests, [note])


async def finish_gather(plan: GatherPlan, dataset: str, settings: AwsSettings, report: Report) -> Gathered:
    """After the engine: the files h5py reads itself, then what the output needs to be written."""
    if not report.ok:
        first = report.failures[0].reason if report.failures else report.aborted
        raise GatherFailed(report, f"{report.objects_failed} range read(s) failed, e.g. {first}")
    job = plan.job
    fallbacks = [(number, each) for number, each in enumerate(plan.plans) if each.fallback]
    if fallbacks:
        await asyncio.to_thread(
            _read_with_h5py, fallbacks, job.files, plan.parts, dataset, job.output_path, settings, report
        )
    return Gathered(plan.shape, plan.dtype, report, _labels(plan.plans, plan.combine, plan.shape))


class GatherFailed(S3BulkError):
    def __init__(self, report: Report, message: str) -> None:
        super().__init__(f"gather failed: {message}; nothing was written")
        self.report = report


def _read_with_h5py(
    fallbacks: list[tuple[int, FilePlan]],
    job_files: list[FilePlacement],
    parts: tuple[Part, ...],
    dataset: str,
    output_path: str,
    settings: AwsSettings,
    report: Report,
) -> None:
    """The files s3bulk cannot read chunk by chunk, through h5py over large cached blocks (with
    hdf5plugin's filters registered, for a plugin's filter no decoder here reads)."""
    import h5py
    import hdf5plugin  # noqa: F401  (registers its filters with the HDF5 library h5py uses)

    output = np.load(output_path, mmap_mode="r+")
    requests = 0
    for number, plan in fallbacks:
        ref = plan.ref
        handle = BlockFile(open_store(ref.root, settings), ref.key, ref.size, block_size=4 * MiB)
        try:
            with h5py.File(handle, "r") as h5file:
                values = open_dataset(h5file, dataset, ref.url)[parts]
        except OSError as exc:
            raise UsageError(
                f"{ref.url}: h5py cannot read {dataset} ({plan.fallback}): {exc}; a filter of a plugin "
                "that hdf5plugin does not carry needs its plugin on HDF5_PLUGIN_PATH"
            ) from None
        within = tuple(slice(0, size) for size in plan.shape)
        output[GatherJob.target(job_files[number], within)] = GatherJob.scaled(job_files[number], values)
        requests += handle.requests
        report.bytes_done += handle.bytes_read
        report.notes.append(f"{ref.url}: read through h5py ({plan.fallback})")
    output.flush()
    report.requests["GET (h5py)"] = report.requests.get("GET (h5py)", 0) + requests


def _labels(plans: list[FilePlan], combine: str, shape: tuple[int, ...]) -> list[str]:
    """Column names for .csv/.parquet: the dataset's own index along the result's last axis."""
    if not shape:
        return []
    kept = [(axis, pick) for axis, pick in enumerate(plans[0].picks) if not pick.dropped]
    if len(shape) == 1 or not kept:
        return [plans[0].index.dataset.rsplit("/", 1)[-1]]
    _, last = kept[-1]
    return [str(last.start + last.step * position) for position in range(shape[-1])]


def partial_path(target: str) -> str:
    """A temp name next to `target`, so the final rename is atomic and on the same disk."""
    directory, name = os.path.split(os.path.abspath(target))
    return os.path.join(directory, f".{name}.{os.getpid()}.partial.npy")
