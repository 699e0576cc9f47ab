"""HDF5 chunk discovery without a server: the B-tree walk finds the chunks h5py finds."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np


def test_b_tree_walk_finds_chunks_as_h5py_does(tmp_path: Path) -> None:
    """A 3-level chunk B-tree (10,000 chunks): the level-by-level walk finds every chunk where
    h5py does, reading a few nodes per level, and leaves h5py nothing to look up."""
    import asyncio

    from obstore.store import LocalStore

    from s3bulk._arrays.files import FileRef
    from s3bulk._arrays.gather import _describe_all, _Reading, _walk_indexes
    from s3bulk._arrays.layouts import V1_TREE
    from s3bulk._arrays.selection import parse_selection
    from s3bulk._stores.blockfile import BlockFile

    path = tmp_path / "deep.h5"
    with h5py.File(path, "w") as handle:
        handle.create_dataset("data", data=np.arange(40_000, dtype="i4").reshape(200, 200), chunks=(2, 2))
    size = path.stat().st_size
    ref = FileRef(str(path), str(tmp_path), path.name, size, "etag")
    each = _Reading(ref, BlockFile(LocalStore(str(tmp_path)), path.name, size, block_size=4096), None)
    asyncio.run(each.handle.prefetch(0, 4096))
    _describe_all([each], "data", parse_selection("::37,5"))
    assert each.start is not None and each.start[0] == V1_TREE and len(each.coords) == 6
    coords = each.coords
    asyncio.run(_walk_indexes([each]))
    assert each.coords == []  # nothing left for h5py
    assert each.index is not None
    with h5py.File(path) as handle:
        for coord in coords:
            info = handle["data"].id.get_chunk_info_by_coord(coord)
            assert each.index.chunk_info[coord] == (info.byte_offset, info.size, info.filter_mask)
    assert each.handle.requests < 20  # a few nodes per level, not one request per lookup
