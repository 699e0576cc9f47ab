"""The newest HDF5 format's chunk indexes (`libver="latest"`), walked without a server: fixed
arrays, extensible arrays and version-2 B-trees, filtered or not, paged or not, find every chunk
where HDF5 stores it, and leave h5py nothing to look up."""

from __future__ import annotations

import asyncio
import itertools
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
from obstore.store import LocalStore

from s3bulk._arrays.files import FileRef
from s3bulk._arrays.gather import _describe_all, _Reading, _walk_indexes
from s3bulk._arrays.layouts import lookup3
from s3bulk._arrays.selection import parse_selection
from s3bulk._stores.blockfile import BlockFile

# name: (shape, chunks, maxshape, gzip, kind of index HDF5 chooses)
LAYOUTS = {
    "fixed-array": ((100, 40), (10, 10), None, True, b"FAHD"),
    "fixed-array-paged": ((400, 300), (10, 10), None, True, b"FAHD"),  # 1,200 entries: 2 pages
    "fixed-array-paged-plain": ((400, 300), (10, 10), None, False, b"FAHD"),
    "fixed-array-3d": ((20, 30, 7), (3, 4, 5), (40, 30, 7), True, b"FAHD"),
    "extensible-array": ((500, 20), (2, 10), (None, 20), True, b"EAHD"),
    "extensible-array-plain": ((3000, 4), (1, 4), (None, 4), False, b"EAHD"),
    "extensible-array-axis-1": ((6, 5000), (3, 2), (6, None), True, b"EAHD"),
    "extensible-array-paged": ((40000, 3), (1, 3), (None, 3), False, b"EAHD"),
    "btree-2": ((60, 70), (7, 9), (None, None), True, b"BTHD"),
    "btree-2-deep": ((400, 400), (4, 4), (None, None), True, b"BTHD"),  # 10,000 records: depth 2
    "btree-2-plain": ((800, 300), (4, 4), (None, None), False, b"BTHD"),
}


def _write(path: Path, shape: tuple[int, ...], chunks: tuple[int, ...], maxshape: object, gzip: bool) -> None:
    values = np.round(np.random.default_rng(0).normal(size=shape) * 10).astype("f4")
    with h5py.File(path, "w", libver="latest") as handle:
        options = {"compression": "gzip"} if gzip else {}
        handle.create_dataset("x", data=values, chunks=chunks, maxshape=maxshape, **options)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_newest_chunk_indexes_are_walked(tmp_path: Path, name: str) -> None:
    shape, chunks, maxshape, gzip, kind = LAYOUTS[name]
    path = tmp_path / f"{name}.h5"
    _write(path, shape, chunks, maxshape, gzip)
    size = path.stat().st_size
    ref = FileRef(str(path), str(tmp_path), path.name, size, "etag")
    each = _Reading(ref, BlockFile(LocalStore(str(tmp_path)), path.name, size, block_size=4096), None)
    asyncio.run(each.handle.prefetch(0, 4096))
    _describe_all([each], "x", parse_selection(""))
    assert each.start is not None and each.start[0] in (kind, b"")  # b"": its header lies past the head
    coords = list(each.coords)
    assert len(coords) == np.prod([-(-n // c) for n, c in zip(shape, chunks, strict=True)])
    asyncio.run(_walk_indexes([each]))
    assert each.coords == []  # nothing left for h5py
    assert each.index is not None
    raw = path.read_bytes()
    with h5py.File(path) as handle:
        data = handle["x"][...]
    for coord in coords:  # each chunk's bytes, where the walk found them, are that chunk's values
        info = each.index.chunk_info[coord]
        assert info is not None
        address, stored, mask = info
        assert mask == 0
        chunk = raw[address : address + stored]
        values = np.frombuffer(zlib.decompress(chunk) if gzip else chunk, "f4").reshape(chunks)
        within = tuple(slice(at, at + c) for at, c in zip(coord, chunks, strict=True))
        edge = data[within]
        assert np.array_equal(values[tuple(slice(0, n) for n in edge.shape)], edge), coord


def test_chunks_never_written_are_none_and_h5py_agrees(tmp_path: Path) -> None:
    """Sparse datasets: the chunks never written are None (they read as the fill value), in
    unwritten pages of a paged fixed array too, and elsewhere the walk agrees with h5py."""
    for maxshape in (None, (None, 300), (None, None)):
        path = tmp_path / f"sparse-{maxshape}.h5"
        with h5py.File(path, "w", libver="latest") as handle:
            sparse = handle.create_dataset(
                "x", shape=(400, 300), chunks=(10, 10), maxshape=maxshape, dtype="i2"
            )
            sparse[0:10] = 1
            sparse[395, 295] = 2
        size = path.stat().st_size
        ref = FileRef(str(path), str(tmp_path), path.name, size, "etag")
        each = _Reading(ref, BlockFile(LocalStore(str(tmp_path)), path.name, size, block_size=4096), None)
        asyncio.run(each.handle.prefetch(0, 4096))
        _describe_all([each], "x", parse_selection(""))
        coords = list(each.coords)
        asyncio.run(_walk_indexes([each]))
        assert each.coords == [] and each.index is not None
        with h5py.File(path) as handle:
            for coord in coords:
                info = handle["x"].id.get_chunk_info_by_coord(coord)
                want = None if info.byte_offset is None else (info.byte_offset, info.size, info.filter_mask)
                assert each.index.chunk_info[coord] == want, (maxshape, coord)
        written = [coord for coord in coords if each.index.chunk_info[coord] is not None]
        assert len(written) == 31, maxshape  # one row of 30 chunks, and the last chunk


def test_lookup3_is_jenkins_hashlittle() -> None:
    """lookup3.c's own test vectors: hashlittle("", 0) and of a sentence."""
    assert lookup3(b"") == 0xDEADBEEF
    assert lookup3(b"Four score and seven years ago") == 0x17770551
    for length in range(0, 40):  # every tail length: the checksum HDF5 wrote over its own header
        assert isinstance(lookup3(bytes(itertools.islice(itertools.cycle(b"hdf5"), length))), int)
