"""Find chunks in the chunk indexes of HDF5's newest file format (`libver="latest"`, netCDF 4.9+),
for all files at once: a fixed array, an extensible array or a version-2 B-tree, each read a
level at a time, the reads of every file's walk in flight together.

HDF5 1.10 replaced the version-1 B-tree of chunked datasets by one of five indexes, chosen by
the dataset's maximum shape (HDF5 spec, "Data Layout Message" version 4 and "Disk Format Level 1"):

- single chunk (the whole dataset is one chunk) and implicit (chunks allocated at creation, in
  order): no index to read; h5py computes their addresses from the layout message it already has;
- fixed array (no unlimited axis): one header ("FAHD"), one data block ("FADB") of entries, one
  per chunk of the maximum shape in row-major order, cut into pages when it is large;
- extensible array (one unlimited axis): a header ("EAHD"), an index block ("EAIB") holding the
  first entries and the addresses of data blocks ("EADB") and super blocks ("EASB"), which grow
  by powers of two; entries ordered as in a fixed array with the unlimited axis first;
- version-2 B-tree (several unlimited axes): a header ("BTHD") and nodes holding records sorted
  by the chunk's scaled offset (offset / chunk shape), internal nodes holding records too.

Every block read here carries a Jenkins lookup3 checksum, checked before it is believed, so a
misread gives no wrong answer: what is not found here h5py looks up (`index.look_up_chunks`).
"""

from __future__ import annotations

import asyncio
import math
import struct
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from s3bulk._arrays.btree import is_chunk_node
from s3bulk._stores.blockfile import BlockFile

Read = Callable[[int, int], Awaitable[bytes]]  # (offset, length) -> bytes
Coords = Collection[tuple[int, ...]]  # chunks, each by its first element's offset
Found = dict[tuple[int, ...], tuple[int, int, int] | None]  # chunk offset -> (address, size, mask)

UNDEFINED = 0xFFFFFFFFFFFFFFFF  # HDF5's undefined address (8-byte offsets)


MASK = 0xFFFFFFFF


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & MASK


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = ((a - c) & MASK) ^ _rot(c, 4)
    c = (c + b) & MASK
    b = ((b - a) & MASK) ^ _rot(a, 6)
    a = (a + c) & MASK
    c = ((c - b) & MASK) ^ _rot(b, 8)
    b = (b + a) & MASK
    a = ((a - c) & MASK) ^ _rot(c, 16)
    c = (c + b) & MASK
    b = ((b - a) & MASK) ^ _rot(a, 19)
    a = (a + c) & MASK
    c = ((c - b) & MASK) ^ _rot(b, 4)
    b = (b + a) & MASK
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    c = ((c ^ b) - _rot(b, 14)) & MASK
    a = ((a ^ c) - _rot(c, 11)) & MASK
    b = ((b ^ a) - _rot(a, 25)) & MASK
    c = ((c ^ b) - _rot(b, 16)) & MASK
    a = ((a ^ c) - _rot(c, 4)) & MASK
    b = ((b ^ a) - _rot(a, 14)) & MASK
    return ((c ^ b) - _rot(b, 24)) & MASK


def lookup3(data: bytes) -> int:
    """Bob Jenkins' hashlittle (lookup3.c, initial value 0), which HDF5 checks its metadata with."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length) & MASK
    position = 0
    for x, y, z in struct.iter_unpack("<3I", memoryview(data)[: (length - 1) // 12 * 12]):
        a, b, c = _mix((a + x) & MASK, (b + y) & MASK, (c + z) & MASK)
        position += 12
    if length == 0:
        return c
    words = struct.unpack("<3I", bytes(data[position:]).ljust(12, b"\0"))
    return _final((a + words[0]) & MASK, (b + words[1]) & MASK, (c + words[2]) & MASK)


def checked(data: bytes, signature: bytes) -> bool:
    """A block that starts with `signature` and ends with the lookup3 checksum of the rest."""
    return (
        len(data) > 8 and data[:4] == signature and lookup3(data[:-4]) == int.from_bytes(data[-4:], "little")
    )


class _Checked:
    """`checked`, once per block: many chunks' entries lie in one page."""

    def __init__(self) -> None:
        self.seen: dict[int, bool] = {}

    def __call__(self, data: bytes, signature: bytes = b"") -> bool:
        if (key := id(data)) not in self.seen:
            self.seen[key] = data[: len(signature)] == signature and len(data) > 4 and checked_sum(data)
        return self.seen[key]


def checked_sum(data: bytes) -> bool:
    return lookup3(data[:-4]) == int.from_bytes(data[-4:], "little")


def _int(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], "little")


@dataclass(frozen=True)
class Geometry:
    """What addressing a chunk needs: the dataset's chunk shape, its maximum shape's chunk counts
    (None: unlimited) and the bytes of one chunk before filters (the size of unfiltered ones)."""

    chunks: tuple[int, ...]
    max_chunks: tuple[int | None, ...]
    chunk_bytes: int

    @property
    def h5py_misreads(self) -> bool:
        """h5py's (HDF5 2.0's) `get_chunk_info_by_coord` answers wrongly for an extensible array
        whose unlimited axis is not the first (it does not swizzle): found here, or read by h5py."""
        return None in self.max_chunks[1:] and self.max_chunks.count(None) == 1

    def scaled(self, coord: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(at // size for at, size in zip(coord, self.chunks, strict=True))

    def linear(self, coord: tuple[int, ...]) -> int:
        """The entry of a chunk in a fixed or extensible array: row-major over the maximum shape's
        chunks, the unlimited axis (if any) moved first (HDF5's "swizzled" coordinates)."""
        scaled, counts = list(self.scaled(coord)), list(self.max_chunks)
        unlimited = [axis for axis, count in enumerate(counts) if count is None]
        if unlimited and unlimited[0] > 0:
            axis = unlimited[0]
            scaled.insert(0, scaled.pop(axis))
            counts.insert(0, counts.pop(axis))
        index = 0
        for at, count in zip(scaled, counts, strict=True):
            index = index * (count or 1) + at
        return index


def _entry(data: bytes, at: int, size: int, geometry: Geometry) -> tuple[int, int, int] | None:
    """A fixed or extensible array's entry: the address, and for filtered chunks (entries longer
    than an address) the stored size and filter mask."""
    address = _int(data, at, 8)
    if address == UNDEFINED:
        return None
    if size == 8:
        return address, geometry.chunk_bytes, 0
    return address, _int(data, at + 8, size - 12), _int(data, at + size - 4, 4)


# ---- fixed array ---------------------------------------------------------------------------------
async def fixed_array(read: Read, header_at: int, coords: Coords, geometry: Geometry) -> Found:
    header = await read(header_at, 28)
    if not checked(header, b"FAHD"):
        return {}
    entry, page_bits, count, block_at = header[6], header[7], _int(header, 8, 8), _int(header, 16, 8)
    if block_at == UNDEFINED:
        return dict.fromkeys(coords)  # no chunk was ever written
    wanted = {coord: geometry.linear(coord) for coord in coords}
    page = 1 << page_bits
    prefix = 14  # signature, version, client, header address
    if count <= page:  # one block of entries
        block = await read(block_at, prefix + count * entry + 4)
        if not checked(block, b"FADB"):
            return {}
        return {coord: _entry(block, prefix + at * entry, entry, geometry) for coord, at in wanted.items()}
    pages = -(-count // page)
    bitmap = (pages + 7) // 8
    first = block_at + prefix + bitmap + 4

    def page_span(number: int) -> tuple[int, int]:
        entries = min(page, count - number * page)
        return first + number * (page * entry + 4), entries * entry + 4

    needed = sorted({at // page for at in wanted.values()})
    block, *got = await asyncio.gather(
        read(block_at, prefix + bitmap + 4), *(read(*page_span(number)) for number in needed)
    )
    if not checked(block, b"FADB"):
        return {}
    pages_read = dict(zip(needed, got, strict=True))
    check = _Checked()
    found: Found = {}
    for coord, at in wanted.items():
        number = at // page
        if not block[prefix + number // 8] & (0x80 >> (number % 8)):
            found[coord] = None  # the page was never written: nor were its chunks
            continue
        data = pages_read[number]
        if not check(data):
            continue
        found[coord] = _entry(data, (at % page) * entry, entry, geometry)
    return found


# ---- extensible array ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Array:
    """An extensible array's header: its parameters, and the super blocks' table derived from them."""

    entry: int
    max_bits: int  # of the largest entry count
    index_entries: int  # entries held in the index block itself
    block_min: int  # entries of the smallest data blocks
    sblock_min_pointers: int
    page: int  # entries per data block page
    offset_size: int  # bytes of a block's "offset of its first entry"
    index_block: int

    @property
    def super_blocks(self) -> int:
        return 1 + self.max_bits - int(math.log2(self.block_min))

    def info(self, number: int) -> tuple[int, int, int, int]:
        """Super block `number`: (data blocks, entries per data block, first entry, first block)."""
        first = first_block = 0
        for before in range(number):
            blocks, entries = 1 << (before // 2), (1 << ((before + 1) // 2)) * self.block_min
            first += blocks * entries
            first_block += blocks
        return 1 << (number // 2), (1 << ((number + 1) // 2)) * self.block_min, first, first_block

    @property
    def direct_super_blocks(self) -> int:
        """Super blocks whose data blocks the index block points to directly."""
        return 2 * int(math.log2(self.sblock_min_pointers))


def _array_header(data: bytes) -> _Array | None:
    if not checked(data, b"EAHD"):
        return None
    return _Array(
        entry=data[6],
        max_bits=data[7],
        index_entries=data[8],
        block_min=data[9],
        sblock_min_pointers=data[10],
        page=1 << data[11],
        offset_size=(data[7] + 7) // 8,
        index_block=_int(data, 12 + 6 * 8, 8),
    )


async def extensible_array(read: Read, header_at: int, coords: Coords, geometry: Geometry) -> Found:
    array = _array_header(await read(header_at, 72))
    if array is None:
        return {}
    if array.index_block == UNDEFINED:
        return dict.fromkeys(coords)
    direct_blocks = 2 * (array.sblock_min_pointers - 1)
    sblocks = array.super_blocks - array.direct_super_blocks
    size = 14 + array.index_entries * array.entry + direct_blocks * 8 + sblocks * 8 + 4
    index = await read(array.index_block, size)
    if not checked(index, b"EAIB"):
        return {}
    block_pointers = 14 + array.index_entries * array.entry
    sblock_pointers = block_pointers + direct_blocks * 8
    found: Found = {}
    # where each chunk's entry is: (data block address, entry within it, its super block's info)
    in_blocks: dict[tuple[int, ...], tuple[int, int, int]] = {}
    in_sblocks: dict[tuple[int, ...], tuple[int, int, int]] = {}  # (super block address, number, rest)
    for coord in coords:
        at = geometry.linear(coord)
        if at < array.index_entries:
            found[coord] = _entry(index, 14 + at * array.entry, array.entry, geometry)
            continue
        rest = at - array.index_entries
        number = (rest // array.block_min + 1).bit_length() - 1
        blocks, per_block, first, first_block = array.info(number)
        within = rest - first
        if number < array.direct_super_blocks:
            address = _int(index, block_pointers + (first_block + within // per_block) * 8, 8)
            if address == UNDEFINED:
                found[coord] = None
            elif per_block > array.page:
                continue  # paged data blocks hang off super blocks only (h5py looks it up)
            else:
                in_blocks[coord] = (address, within % per_block, per_block)
        else:
            address = _int(index, sblock_pointers + (number - array.direct_super_blocks) * 8, 8)
            if address == UNDEFINED:
                found[coord] = None
            else:
                in_sblocks[coord] = (address, number, within)
    sblock_reads = sorted({(address, number) for address, number, _ in in_sblocks.values()})
    sblock_data = await asyncio.gather(*(read(a, _sblock_size(array, n)) for a, n in sblock_reads))
    sblock_of = dict(zip(sblock_reads, sblock_data, strict=True))
    check = _Checked()
    for coord, (address, number, within) in in_sblocks.items():
        data = sblock_of[(address, number)]
        if not check(data, b"EASB"):
            continue
        blocks, per_block, _, _ = array.info(number)
        pages = per_block // array.page if per_block > array.page else 0
        bitmap = blocks * ((pages + 7) // 8) if pages else 0
        block = within // per_block
        at = 14 + array.offset_size + bitmap + block * 8
        block_address = _int(data, at, 8)
        if block_address == UNDEFINED:
            found[coord] = None
            continue
        entry = within % per_block
        if not pages:
            in_blocks[coord] = (block_address, entry, per_block)
            continue
        page = entry // array.page
        init = block * pages + page
        if not data[14 + array.offset_size + init // 8] & (0x80 >> (init % 8)):
            found[coord] = None
            continue
        page_at = block_address + 14 + array.offset_size + 4 + page * (array.page * array.entry + 4)
        in_blocks[coord] = (page_at, entry % array.page, -array.page)  # negative: a page, no prefix
    spans = sorted({(address, per_block) for address, _, per_block in in_blocks.values()})

    def span(address: int, per_block: int) -> tuple[int, int]:
        if per_block < 0:
            return address, -per_block * array.entry + 4
        return address, 14 + array.offset_size + per_block * array.entry + 4

    data_of = dict(zip(spans, await asyncio.gather(*(read(*span(*each)) for each in spans)), strict=True))
    for coord, (address, entry, per_block) in in_blocks.items():
        data = data_of[(address, per_block)]
        if per_block < 0:
            if not check(data):
                continue
            found[coord] = _entry(data, entry * array.entry, array.entry, geometry)
        elif check(data, b"EADB"):
            found[coord] = _entry(data, 14 + array.offset_size + entry * array.entry, array.entry, geometry)
    return found


def _sblock_size(array: _Array, number: int) -> int:
    blocks, per_block, _, _ = array.info(number)
    pages = per_block // array.page if per_block > array.page else 0
    bitmap = blocks * ((pages + 7) // 8) if pages else 0
    return 14 + array.offset_size + bitmap + blocks * 8 + 4


# ---- version-2 B-tree ----------------------------------------------------------------------------
def _size_of(count: int) -> int:
    """Bytes HDF5 stores a count up to `count` in (H5VM_limit_enc_size)."""
    return (count.bit_length() - 1) // 8 + 1 if count else 1


@dataclass(frozen=True)
class _Tree:
    node_size: int
    record: int
    depth: int
    root: int
    root_records: int
    filtered: bool
    rank: int

    def pointers(self) -> dict[int, tuple[int, int]]:
        """Per depth of an internal node: the bytes of its child pointers' record count and total
        record count, as HDF5 derives them from the node size (H5B2__hdr_init)."""
        most = (self.node_size - 10) // self.record  # a leaf's
        count_size, cumulative = _size_of(most), most
        sizes = {}
        for depth in range(1, self.depth + 1):
            total_size = _size_of(cumulative) if depth > 1 else 0
            pointer = 8 + count_size + total_size
            most = (self.node_size - (10 + pointer)) // (self.record + pointer)
            cumulative = (most + 1) * cumulative + most
            sizes[depth] = (count_size, total_size)
        return sizes


async def btree2(read: Read, header_at: int, coords: Coords, geometry: Geometry) -> Found:
    header = await read(header_at, 38)
    if not checked(header, b"BTHD") or header[5] not in (10, 11):
        return {}
    tree = _Tree(
        node_size=_int(header, 6, 4),
        record=_int(header, 10, 2),
        depth=_int(header, 12, 2),
        root=_int(header, 16, 8),
        root_records=_int(header, 24, 2),
        filtered=header[5] == 11,
        rank=len(geometry.chunks),
    )
    if tree.root == UNDEFINED:
        return dict.fromkeys(coords)
    pointers = tree.pointers()
    wanted = {geometry.scaled(coord): coord for coord in coords}
    found: Found = {}
    frontier = [(tree.root, tree.root_records, tree.depth, sorted(wanted))]
    while frontier:
        nodes = await asyncio.gather(*(read(at, tree.node_size) for at, _, _, _ in frontier))
        deeper = []
        for (_, records, depth, keys), data in zip(frontier, nodes, strict=True):
            if data[:4] != (b"BTIN" if depth else b"BTLF"):
                continue
            count_size, total_size = pointers.get(depth, (0, 0))
            pointer = 8 + count_size + total_size
            used = 6 + records * tree.record + ((records + 1) * pointer if depth else 0)
            if lookup3(data[:used]) != _int(data, used, 4):
                continue
            scaled = [_record_key(data, 6 + n * tree.record, tree) for n in range(records)]
            children: dict[int, list[tuple[int, ...]]] = {}
            for key in keys:
                position = _bisect(scaled, key)
                if position < records and scaled[position] == key:
                    found[wanted[key]] = _record(data, 6 + position * tree.record, tree, geometry)
                elif depth:
                    children.setdefault(position, []).append(key)
                else:
                    found[wanted[key]] = None  # not in the tree: never written
            for position, under in children.items():
                at = 6 + records * tree.record + position * pointer
                deeper.append((_int(data, at, 8), _int(data, at + 8, count_size), depth - 1, under))
        frontier = deeper
    return found


def _bisect(keys: list[tuple[int, ...]], key: tuple[int, ...]) -> int:
    low, high = 0, len(keys)
    while low < high:
        middle = (low + high) // 2
        if keys[middle] < key:
            low = middle + 1
        else:
            high = middle
    return low


def _record_key(data: bytes, at: int, tree: _Tree) -> tuple[int, ...]:
    start = at + tree.record - 8 * tree.rank
    return tuple(_int(data, start + 8 * axis, 8) for axis in range(tree.rank))


def _record(data: bytes, at: int, tree: _Tree, geometry: Geometry) -> tuple[int, int, int]:
    address = _int(data, at, 8)
    if not tree.filtered:
        return address, geometry.chunk_bytes, 0
    size_bytes = tree.record - 8 - 4 - 8 * tree.rank
    return address, _int(data, at + 8, size_bytes), _int(data, at + 8 + size_bytes, 4)


READERS = {b"FAHD": fixed_array, b"EAHD": extensible_array, b"BTHD": btree2}


# ---- reads of one wave, merged ----------------------------------------------------------------------
WAVE_GAP = 256 * 1024  # index blocks this close share a request: the gap costs less than a round trip
WAVE_SPAN = 4 * 1024 * 1024


class WaveReader:
    """A file's index reads, those asked for in one turn of the event loop (one wave of a walk)
    merged into as few ranged GETs as lie close together. An extensible array's or a version-2
    B-tree's blocks are written among the chunks, as the dataset grows: a wave's nodes often lie
    a few chunks apart."""

    def __init__(self, handle: BlockFile) -> None:
        self.handle = handle
        self.fetched: dict[int, bytes] = {}  # reads kept for a second look (an index's start)
        self.pending: list[tuple[int, int, asyncio.Future[bytes]]] = []

    async def read_async(self, offset: int, length: int) -> bytes:
        if len(known := self.fetched.get(offset, b"")) >= length:
            return known[:length]
        length = max(0, min(length, self.handle.size - offset))
        if not self.handle.missing(offset, length):
            return self.handle.cached(offset, length)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        self.pending.append((offset, length, future))
        if len(self.pending) == 1:  # the first read of this turn: the others join it
            loop.call_soon(lambda: asyncio.ensure_future(self._flush()))
        return await future

    async def _flush(self) -> None:
        batch, self.pending = sorted(self.pending, key=lambda read: read[0]), []
        groups: list[list[tuple[int, int, asyncio.Future[bytes]]]] = []
        for read in batch:
            if groups:
                start, end = groups[-1][0][0], max(at + n for at, n, _ in groups[-1])
                if read[0] - end <= WAVE_GAP and read[0] + read[1] - start <= WAVE_SPAN:
                    groups[-1].append(read)
                    continue
            groups.append([read])
        await asyncio.gather(*(self._fetch(group) for group in groups))

    async def _fetch(self, group: list[tuple[int, int, asyncio.Future[bytes]]]) -> None:
        start = group[0][0]
        try:
            data = await self.handle.read_async(start, max(at + n for at, n, _ in group) - start)
        except BaseException as exc:
            for _, _, future in group:
                if not future.done():
                    future.set_exception(exc)
            raise
        for at, length, future in group:
            if not future.done():
                future.set_result(data[at - start : at - start + length])


# ---- where a dataset's chunk index starts ---------------------------------------------------------
V1_TREE = b"TREE"
HEADER_BYTES = 72  # the longest of the headers above (an extensible array's)


def kind_of(data: bytes) -> bytes:
    """Which index `data` starts: a version-1 B-tree node of chunks, a header above, or b""."""
    if is_chunk_node(data):
        return V1_TREE
    return data[:4] if data[:4] in READERS else b""


def index_start(handle: BlockFile, reads: list[tuple[int, int]]) -> tuple[bytes, int] | None:
    """(kind, address) of the chunk index, from the reads a dry-run lookup made (h5py reads the
    index's root or header first): the first cached read that starts an index; else the first
    read the cache could not answer, of a kind still unknown (b""), to be fetched."""
    for offset, _ in reads:
        if handle.missing(offset, 8):
            return b"", offset
        if kind := kind_of(handle.cached(offset, HEADER_BYTES)):
            return kind, offset
    return None


def geometry_of(node: Any) -> Geometry:
    """An h5py dataset's chunk geometry."""
    chunks = tuple(int(n) for n in node.chunks)
    maxshape = tuple(
        None if n is None else -(-int(n) // c) for n, c in zip(node.maxshape, chunks, strict=True)
    )
    return Geometry(chunks, maxshape, math.prod(chunks) * node.dtype.itemsize)
