"""Prefetch the parts of chunk B-trees a selection will walk, for all files at once.

h5py finds a chunk by walking the dataset's chunk B-tree (HDF5's version-1 B-tree, what h5py
writes unless asked for the newest file format), one blocking read per node under its global lock:
with nodes scattered through a file, a cold index costs a round trip per node per file, in series.
This module only *reads ahead*: it parses the nodes (format: HDF5 spec, "Version 1 B-trees")
to learn which children hold the needed chunks, so those blocks can be fetched for every file in
one concurrent wave per tree level. h5py then does the real lookups from cache; whatever this
gets wrong costs a round trip, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from s3bulk.stores.blockfile import BlockFile

SIGNATURE = b"TREE"
RAW_DATA_NODE = 1
HEADER_BYTES = 24  # signature, type, level, entries used, left and right sibling (8-byte addresses)
MAX_ENTRIES = 1024  # far above any K h5py or HDF5 writes: a bigger count is not a node


@dataclass(frozen=True)
class TreeNode:
    level: int  # 0: children are chunks
    keys: list[tuple[int, ...]]  # chunk offsets bounding the children (entries + 1 of them)
    children: list[int]  # file addresses


def node_bytes(entries: int, rank: int) -> int:
    key = 8 + 8 * (rank + 1)  # chunk size, filter mask, offsets (the last one is the element offset)
    return HEADER_BYTES + entries * (key + 8) + key


def node_size(header: bytes, rank: int) -> int:
    """A node's length in bytes, from its first HEADER_BYTES (which hold its entry count)."""
    return node_bytes(min(int.from_bytes(header[6:8], "little"), MAX_ENTRIES), rank)


def parse_node(data: bytes, rank: int) -> TreeNode | None:
    """A raw-data B-tree node for a `rank`-D dataset, or None when `data` is not one (or is cut)."""
    if len(data) < HEADER_BYTES or data[:4] != SIGNATURE or data[4] != RAW_DATA_NODE:
        return None
    level, entries = data[5], int.from_bytes(data[6:8], "little")
    if entries > MAX_ENTRIES or len(data) < node_bytes(entries, rank):
        return None
    key_size = 8 + 8 * (rank + 1)
    keys, children = [], []
    position = HEADER_BYTES
    for number in range(entries + 1):
        offsets = data[position + 8 : position + key_size]
        keys.append(tuple(int.from_bytes(offsets[i : i + 8], "little") for i in range(0, len(offsets), 8)))
        position += key_size
        if number < entries:
            children.append(int.from_bytes(data[position : position + 8], "little"))
            position += 8
    return TreeNode(level, keys, children)


def needed_children(node: TreeNode, coords: list[tuple[int, ...]]) -> list[int]:
    """Children whose key interval holds any of the chunk offsets `coords` (each with the
    trailing 0 of HDF5's keys). Child i holds the chunks with key[i] <= offset < key[i + 1],
    compared as vectors (H5D__btree_cmp3)."""
    chosen = []
    for number, child in enumerate(node.children):
        low, high = node.keys[number], node.keys[number + 1]
        if any(low <= coord < high for coord in coords):
            chosen.append(child)
    return chosen


def find_root(handle: BlockFile, look_up: Callable[[], object]) -> int | None:
    """The root node's address: the first B-tree node h5py reads when it looks a chunk up. The
    lookup runs as a dry run (a read the cache cannot answer fails), so it costs no request."""
    handle.reads, handle.offline = [], True
    try:
        look_up()
    except (OSError, RuntimeError, ValueError):
        pass  # expected: the dry run stops at the first block not yet fetched
    finally:
        reads, handle.reads, handle.offline = handle.reads or [], None, False
    for offset, _ in reads:
        if not handle.missing(offset, HEADER_BYTES) and parse_header(handle.cached(offset, HEADER_BYTES)):
            return offset
    return None


def parse_header(data: bytes) -> bool:
    return len(data) >= HEADER_BYTES and data[:4] == SIGNATURE and data[4] == RAW_DATA_NODE
