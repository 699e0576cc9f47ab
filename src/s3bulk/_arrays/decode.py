"""Undo an HDF5 filter pipeline with numcodecs, outside h5py and its global lock.

Inflating is most of a gather's CPU. isal (Intel's ISA-L) inflates HDF5's zlib streams in ~8 ms
per 4.4 MB chunk where zlib takes ~15 ms, and releases the GIL while it does, so a pool of threads
decodes several chunks at once; the same bytes through h5py would decode one chunk at a time.
The filters here are the ones HDF5 itself ships and h5py writes (deflate, shuffle, fletcher32);
a dataset with any other filter is read through h5py instead, and the output says so.
"""

from __future__ import annotations

from collections.abc import Callable

import numcodecs
import numpy as np
from isal import isal_zlib

DEFLATE, SHUFFLE, FLETCHER32 = 1, 2, 3
FILTER_NAMES = {1: "deflate", 2: "shuffle", 3: "fletcher32", 4: "szip", 5: "nbit", 6: "scaleoffset"}
FILTER_NAMES |= {32000: "lzf", 32001: "blosc", 32004: "lz4", 32008: "bitshuffle", 32015: "zstd"}

Step = Callable[[bytes | memoryview], bytes]


def unsupported_filter(filters: list[tuple[int, int, tuple[int, ...], str]]) -> str | None:
    """Why this pipeline cannot be decoded here, or None."""
    for filter_id, _, _, name in filters:
        if filter_id not in (DEFLATE, SHUFFLE, FLETCHER32):
            return f"HDF5 filter {filter_id} ({FILTER_NAMES.get(filter_id, name or 'unknown')})"
    return None


def _step(filter_id: int, itemsize: int) -> Step:
    if filter_id == DEFLATE:
        return isal_zlib.decompress
    # Fletcher32 checks HDF5's trailing checksum and strips it
    codec = numcodecs.Shuffle(elementsize=itemsize) if filter_id == SHUFFLE else numcodecs.Fletcher32()
    return lambda data: codec.decode(data)


class ChunkDecoder:
    """Stored chunk bytes -> the chunk as an array of the chunk shape."""

    def __init__(
        self, filters: list[tuple[int, int, tuple[int, ...], str]], dtype: np.dtype, chunks: tuple[int, ...]
    ) -> None:
        self.dtype = dtype
        self.chunks = chunks
        # (position in the pipeline, step), in read order: the reverse of the write order
        self.steps = [(number, _step(f[0], dtype.itemsize)) for number, f in enumerate(filters)][::-1]

    def __call__(self, data: bytes | memoryview, filter_mask: int) -> np.ndarray:
        for number, step in self.steps:
            if not filter_mask & (1 << number):  # a set bit: this filter was skipped for this chunk
                data = step(data)
        return np.frombuffer(data, dtype=self.dtype).reshape(self.chunks)
