"""Chunks decoded outside h5py equal h5py's reading of them, whole or a part picked out of the
shuffled bytes (one location of a WTK chunk without unshuffling the whole chunk)."""

from __future__ import annotations

import zlib
from pathlib import Path

import h5py
import numcodecs
import numpy as np
import pytest

from s3bulk._arrays.decode import ChunkDecoder

CHUNKS = (60, 40)
PARTS = [
    (slice(0, 60), slice(17, 18)),  # one location over the chunk's time steps: picked
    (slice(5, 50, 3), slice(39, 40)),  # strided
    (slice(59, 60), slice(0, 3)),  # a few values of one time step
    (slice(0, 60), slice(0, 40)),  # the whole chunk: unshuffled as before
    (slice(10, 40), slice(5, 30)),  # a large part: unshuffled as before
]


def _stored_chunk(path: Path, dtype: str, **options: object) -> tuple[bytes, list, np.ndarray]:
    """One chunk of a real HDF5 file as stored, its filter pipeline, and what h5py reads."""
    rng = np.random.default_rng(7)
    values = (rng.random((120, 80)) * 1000).astype(dtype)
    with h5py.File(path, "w") as handle:
        node = handle.create_dataset("v", data=values, chunks=CHUNKS, **options)
        plist = node.id.get_create_plist()
        filters = [plist.get_filter(n) for n in range(plist.get_nfilters())]
        _, stored = node.id.read_direct_chunk((60, 40))
    pipeline = [(int(f[0]), int(f[1]), tuple(int(v) for v in f[2]), f[3].decode()) for f in filters]
    return stored, pipeline, values[60:120, 40:80]


@pytest.mark.parametrize("dtype", ["<u2", ">i4", "<f8"])
@pytest.mark.parametrize("fletcher32", [False, True])
def test_a_part_of_a_shuffled_chunk_equals_h5py(
    tmp_path: Path, dtype: str, fletcher32: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored, pipeline, want = _stored_chunk(
        tmp_path / "c.h5", dtype, compression="gzip", shuffle=True, fletcher32=fletcher32
    )
    decoder = ChunkDecoder(pipeline, np.dtype(dtype), CHUNKS)
    unshuffled = []
    real = numcodecs.Shuffle.decode
    monkeypatch.setattr(numcodecs.Shuffle, "decode", lambda self, *a: unshuffled.append(1) or real(self, *a))
    assert np.array_equal(decoder(stored, 0), want)
    for source in PARTS:
        before = len(unshuffled)
        got = decoder.part(stored, 0, source)
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, want[source]), source
        small = got.size * 8 <= want.size
        assert len(unshuffled) - before == (0 if small else 1), source  # small parts: never unshuffled


def test_a_chunk_whose_shuffle_was_skipped_is_read_as_stored(tmp_path: Path) -> None:
    """Filter mask bit 0 set: HDF5 skipped the shuffle for this chunk (the bytes are plain)."""
    values = np.arange(CHUNKS[0] * CHUNKS[1], dtype="<u2").reshape(CHUNKS)
    shuffle, deflate = (2, 0, (2,), "shuffle"), (1, 0, (4,), "deflate")
    decoder = ChunkDecoder([shuffle, deflate], np.dtype("<u2"), CHUNKS)
    stored = zlib.compress(values.tobytes())
    assert np.array_equal(decoder.part(stored, 1, PARTS[0]), values[PARTS[0]])
