"""Undo an HDF5 filter pipeline outside h5py and its global lock, with well-kept decoders.

Inflating is most of a gather's CPU. isal (Intel's ISA-L) inflates HDF5's zlib streams in ~8 ms
per 4.4 MB chunk where zlib takes ~15 ms, and releases the GIL while it does, so a pool of threads
decodes several chunks at once; the same bytes through h5py would decode one chunk at a time.
The other common filters (hdf5plugin's set: LZF, Blosc, Blosc2, Zstd, LZ4, Bitshuffle, BZip2,
and SZIP through libaec) are decoded by imagecodecs, whose codecs release the GIL too, in the
framing each HDF5 filter writes (LZ4's and Bitshuffle's blocks, SZIP's 4-byte size); Blosc2's
chunks are frames that python-blosc2 reads. What no decoder here reads (scale-offset, n-bit,
any other plugin) is read through h5py instead, and the output says so.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

DEFLATE, SHUFFLE, FLETCHER32, SZIP, NBIT, SCALEOFFSET = 1, 2, 3, 4, 5, 6
BZIP2, LZF, BLOSC, LZ4, BITSHUFFLE, ZSTD, BLOSC2 = 307, 32000, 32001, 32004, 32008, 32015, 32026
FILTER_NAMES = {1: "deflate", 2: "shuffle", 3: "fletcher32", 4: "szip", 5: "nbit", 6: "scaleoffset"}
FILTER_NAMES |= {307: "bzip2", 32000: "lzf", 32001: "blosc", 32004: "lz4", 32008: "bitshuffle"}
FILTER_NAMES |= {32015: "zstd", 32026: "blosc2"}

Step = Callable[[Any], Any]  # bytes-like in, bytes-like out
Filter = tuple[int, int, tuple[int, ...], str]  # (id, flags, client values, name)


def unsupported_filter(filters: list[Filter]) -> str | None:
    """Why this pipeline cannot be decoded here, or None."""
    for filter_id, _, _, name in filters:
        if filter_id not in DECODERS:
            return f"HDF5 filter {filter_id} ({FILTER_NAMES.get(filter_id, name or 'unknown')})"
    return None


def _deflate(values: tuple[int, ...], itemsize: int) -> Step:
    from isal import isal_zlib

    return lambda data: isal_zlib.decompress(data)


def _shuffle(values: tuple[int, ...], itemsize: int) -> Step:
    import numcodecs

    codec = numcodecs.Shuffle(elementsize=itemsize)
    return lambda data: codec.decode(data)


def _fletcher32(values: tuple[int, ...], itemsize: int) -> Step:
    import numcodecs

    codec = numcodecs.Fletcher32()  # checks HDF5's trailing checksum and strips it
    return lambda data: codec.decode(data)


def _szip(values: tuple[int, ...], itemsize: int) -> Step:
    """HDF5's SZIP: the chunk's size (4 bytes, little-endian), then libaec's stream; the values
    are the ones HDF5 set when it wrote it (options, pixels per block, bits per pixel, per line)."""
    import imagecodecs

    mask, per_block, bits, per_line = values[:4]
    return lambda data: imagecodecs.szip_decode(data, mask, per_block, bits, per_line, header=True)


def _lzf(values: tuple[int, ...], itemsize: int) -> Step:
    import imagecodecs

    size = values[2] if len(values) > 2 else 0  # the chunk's bytes, as h5py's LZF filter notes them
    return lambda data: imagecodecs.lzf_decode(data, out=size or None)


def _imagecodecs(name: str) -> Callable[[tuple[int, ...], int], Step]:
    def make(values: tuple[int, ...], itemsize: int) -> Step:
        import imagecodecs

        decode = getattr(imagecodecs, name)
        return lambda data: decode(data)

    return make


def _bitshuffle(values: tuple[int, ...], itemsize: int) -> Step:
    """Bitshuffle's HDF5 framing: uncompressed, the bit-shuffled blocks as they are; compressed
    (LZ4, Zstd), the size (8 bytes, big-endian) and block size in bytes (4), then each block's
    compressed length (4) and bytes, and the last elements (fewer than 8) as they are."""
    import imagecodecs

    element = values[2] if len(values) > 2 else itemsize
    block = values[3] if len(values) > 3 else 0
    compression = values[4] if len(values) > 4 else 0
    if compression == 0:
        return lambda data: imagecodecs.bitshuffle_decode(data, itemsize=element, blocksize=block)
    unpack = imagecodecs.lz4_decode if compression == 2 else imagecodecs.zstd_decode

    def decode(data: Any) -> Any:
        total, block_bytes = struct.unpack_from(">QI", data)
        elements, per_block = total // element, block_bytes // element
        pieces, position = [], 12
        for first in range(0, elements - elements % 8, per_block):
            length = struct.unpack_from(">I", data, position)[0]
            size = min(per_block, (elements - elements % 8) - first) * element
            pieces.append(unpack(data[position + 4 : position + 4 + length], out=size))
            position += 4 + length
        leftover = bytes(data[position : position + (elements % 8) * element])
        shuffled = b"".join(pieces) + leftover
        return imagecodecs.bitshuffle_decode(shuffled, itemsize=element, blocksize=per_block)

    if compression not in (2, 3):
        raise ValueError(f"bitshuffle compression {compression} is neither LZ4 (2) nor Zstd (3)")
    return decode


def _blosc2(values: tuple[int, ...], itemsize: int) -> Step:
    """hdf5-blosc2 writes each chunk as a frame (a b2nd array, or a super-chunk)."""

    def decode(data: Any) -> Any:
        import blosc2

        frame = blosc2.from_cframe(bytes(data), copy=False)
        if isinstance(frame, blosc2.NDArray):
            return np.ascontiguousarray(frame[...]).tobytes()
        return b"".join(frame.decompress_chunk(number) for number in range(frame.nchunks))

    return decode


DECODERS: dict[int, Callable[[tuple[int, ...], int], Step]] = {
    DEFLATE: _deflate,
    SHUFFLE: _shuffle,
    FLETCHER32: _fletcher32,
    SZIP: _szip,
    BZIP2: _imagecodecs("bz2_decode"),
    LZF: _lzf,
    BLOSC: _imagecodecs("blosc_decode"),
    LZ4: _imagecodecs("lz4h5_decode"),
    BITSHUFFLE: _bitshuffle,
    ZSTD: _imagecodecs("zstd_decode"),
    BLOSC2: _blosc2,
}


class ChunkDecoder:
    """Stored chunk bytes -> the chunk as an array of the chunk shape (or a part of it)."""

    def __init__(self, filters: list[Filter], dtype: np.dtype, chunks: tuple[int, ...]) -> None:
        self.dtype = dtype
        self.chunks = chunks
        # (position in the pipeline, step), in read order: the reverse of the write order
        self.steps = [
            (number, DECODERS[filter_id](tuple(values), dtype.itemsize))
            for number, (filter_id, _, values, _) in enumerate(filters)
        ][::-1]
        # shuffle written first (so undone last), as h5py and netCDF write it: a part can be
        # picked out of the shuffled bytes without unshuffling the whole chunk
        shuffled_last = bool(filters) and filters[0][0] == SHUFFLE and dtype.itemsize > 1
        self.shuffle_at = 0 if shuffled_last else None

    def __call__(self, data: Any, filter_mask: int) -> np.ndarray:
        return np.frombuffer(self._undo(data, filter_mask, self.steps), dtype=self.dtype).reshape(self.chunks)

    def part(self, data: Any, filter_mask: int, source: tuple[slice, ...]) -> np.ndarray:
        """The chunk's part `source` (a view or a copy). One location of a chunk of 2190 x 1000
        is 1/1000 of it: its bytes are picked out of the shuffled chunk, where unshuffling the
        whole chunk cost about a third of the chunk's decoding (deflate the rest)."""
        picked = math.prod(
            len(range(*each.indices(size))) for each, size in zip(source, self.chunks, strict=True)
        )
        whole = math.prod(self.chunks)
        if self.shuffle_at is None or filter_mask & 1 or picked * PICK_FRACTION > whole:
            return self(data, filter_mask)[source]
        shuffled = self._undo(data, filter_mask, self.steps[:-1])
        planes = np.frombuffer(shuffled, dtype=np.uint8).reshape(self.dtype.itemsize, *self.chunks)
        picked_planes = planes[(slice(None), *source)]  # byte k of each picked element, per k
        values = np.empty(picked_planes.shape[1:], dtype=self.dtype)
        values.view(np.uint8).reshape(*values.shape, self.dtype.itemsize)[...] = np.moveaxis(
            picked_planes, 0, -1
        )
        return values

    @staticmethod
    def _undo(data: Any, filter_mask: int, steps: list[tuple[int, Step]]) -> Any:
        for number, step in steps:
            if not filter_mask & (1 << number):  # a set bit: this filter was skipped for this chunk
                data = step(data)
        return data


PICK_FRACTION = 8  # a part up to 1/8 of a chunk is picked out of the shuffled bytes
