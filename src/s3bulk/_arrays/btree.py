"""Find chunks in HDF5's version-1 chunk B-tree, for all files at once, one wave per tree level.

h5py (HDF5 1.10-2.0) answers `get_chunk_info_by_coord` by *iterating* the chunk index from its
first leaf until it meets the chunk, one blocking read per node under h5py's global lock: a cold
lookup near the end of a big dataset reads nearly every leaf, in series, file after file. The
B-tree itself (HDF5 spec, "Version 1 B-trees"; what h5py writes unless asked for the newest file
format) is a plain search tree: child i holds the chunks with key[i] <= offset < key[i + 1], and
a leaf's key i names its chunk's stored size and filter mask, its child pointer the address. So
the lookup is done here, from the root that h5py itself reads first (found by a dry run, which
also finds the newer indexes' headers: arrays/layouts.py), with
each level's nodes of every file fetched in one concurrent wave. A chunk the walk does not find
is looked up by h5py after all: a mistake here costs time, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from s3bulk._stores.blockfile import BlockFile


class Reads(Protocol):
    async def read_async(self, offset: int, length: int) -> bytes: ...


SIGNATURE = b"TREE"
RAW_DATA_NODE = 1
HEADER_BYTES = 24  # signature, type, level, entries used, left and right sibling (8-byte addresses)
MAX_ENTRIES = 1024  # far above any K h5py or HDF5 writes: a bigger count is not a node
USUAL_ENTRIES = 64  # 2K for HDF5's default K of 32: one read gets a whole node


@dataclass(frozen=True)
class TreeNode:
    level: int  # 0: children are chunks
    keys: list[tuple[int, ...]]  # chunk offsets bounding the children (entries + 1 of them), trailing 0
    sizes: list[int]  # per key: the stored size of the chunk it starts (leaves)
    masks: list[int]  # per key: the filters skipped for that chunk (leaves)
    children: list[int]  # file addresses: nodes one level down, or (leaves) chunks


def node_bytes(entries: int, rank: int) -> int:
    key = 8 + 8 * (rank + 1)  # chunk size, filter mask, offsets (the last one is the element offset)
    return HEADER_BYTES + entries * (key + 8) + key


def node_size(header: bytes, rank: int) -> int:
    """A node's length in bytes, from its first HEADER_BYTES (which hold its entry count)."""
    return node_bytes(min(int.from_bytes(header[6:8], "little"), MAX_ENTRIES), rank)


def parse_node(data: bytes, rank: int) -> TreeNode | None:
    """A raw-data B-tree node for a `rank`-D dataset, or None when `data` is not one (or is cut)."""
    if not is_chunk_node(data):
        return None
    level, entries = data[5], int.from_bytes(data[6:8], "little")
    if entries > MAX_ENTRIES or len(data) < node_bytes(entries, rank):
        return None
    key_size = 8 + 8 * (rank + 1)
    node = TreeNode(level, [], [], [], [])
    position = HEADER_BYTES
    for number in range(entries + 1):
        node.sizes.append(int.from_bytes(data[position : position + 4], "little"))
        node.masks.append(int.from_bytes(data[position + 4 : position + 8], "little"))
        offsets = data[position + 8 : position + key_size]
        node.keys.append(
            tuple(int.from_bytes(offsets[i : i + 8], "little") for i in range(0, len(offsets), 8))
        )
        position += key_size
        if number < entries:
            node.children.append(int.from_bytes(data[position : position + 8], "little"))
            position += 8
    return node


def needed_children(node: TreeNode, coords: Collection[tuple[int, ...]]) -> list[int]:
    """Children whose key interval holds any of the chunk offsets `coords` (each with the
    trailing 0 of HDF5's keys), compared as vectors as HDF5 does (H5D__btree_cmp3)."""
    chosen = []
    for number, child in enumerate(node.children):
        low, high = node.keys[number], node.keys[number + 1]
        if any(low <= coord < high for coord in coords):
            chosen.append(child)
    return chosen


async def read_node(handle: Reads, address: int, rank: int) -> TreeNode | None:
    """The node at `address`, in one request when it has at most the usual number of entries."""
    data = await handle.read_async(address, node_bytes(USUAL_ENTRIES, rank))
    if len(data) >= HEADER_BYTES and len(data) < node_size(data, rank):
        data = await handle.read_async(address, node_size(data, rank))
    return parse_node(data, rank)


def leaf_chunks(node: TreeNode, coords: set[tuple[int, ...]]) -> dict[tuple[int, ...], tuple[int, int, int]]:
    """The chunks of a leaf among `coords` (with trailing 0): (address, stored size, filter mask)."""
    return {
        key: (child, node.sizes[number], node.masks[number])
        for number, (key, child) in enumerate(zip(node.keys, node.children, strict=False))
        if key in coords
    }


def dry_run(handle: BlockFile, look_up: Callable[[], object]) -> list[tuple[int, int]]:
    """The reads h5py makes to look a chunk up, up to the first one the cache cannot answer (that
    one included): the lookup runs offline (a read the cache cannot answer fails), so it costs
    no request. Its first reads of an index are that index's root or header."""
    handle.reads, handle.offline = [], True
    try:
        look_up()
    except (OSError, RuntimeError, ValueError):
        pass  # expected: the dry run stops at the first block not yet fetched
    finally:
        reads, handle.reads, handle.offline = handle.reads or [], None, False
    return reads


def is_chunk_node(data: bytes) -> bool:
    return len(data) >= HEADER_BYTES and data[:4] == SIGNATURE and data[4] == RAW_DATA_NODE
