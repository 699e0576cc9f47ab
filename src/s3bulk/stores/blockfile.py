"""A read-only file over an object, read in large cached blocks: how h5py reads HDF5 metadata.

h5py asks for many small pieces (superblock, object headers, B-tree nodes of a few KiB), each a
blocking call under its global lock. Every miss here costs one round trip, so blocks are large
(1 MiB by default) and kept; a block prefetched for many files at once (the head of each file,
where h5py writes most metadata) turns most of those calls into memory reads. The file counts its
requests and bytes, so a report can say how much metadata reading cost.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from typing import Any

import obstore

MiB = 1024**2


class BlockFile(io.RawIOBase):
    def __init__(
        self, store: Any, path: str, size: int, *, block_size: int = MiB, max_blocks: int = 256
    ) -> None:
        self.store = store
        self.path = path
        self.size = size
        self.block_size = block_size
        self.max_blocks = max_blocks
        self.blocks: OrderedDict[int, bytes] = OrderedDict()
        self.position = 0
        self.requests = 0
        self.bytes_read = 0

    def seed(self, offset: int, data: bytes) -> None:
        """Keep bytes fetched elsewhere (a prefetch wave): whole blocks only."""
        first = -(-offset // self.block_size)
        for block in range(first, (offset + len(data)) // self.block_size + 1):
            start = block * self.block_size - offset
            piece = data[start : start + self.block_size]
            if len(piece) == min(self.block_size, self.size - block * self.block_size) and piece:
                self._keep(block, piece)

    def _keep(self, block: int, data: bytes) -> None:
        self.blocks[block] = data
        self.blocks.move_to_end(block)
        while len(self.blocks) > self.max_blocks:
            self.blocks.popitem(last=False)

    def _fetch(self, first: int, last: int) -> None:
        """Blocks first..last (inclusive) in one ranged GET."""
        start = first * self.block_size
        end = min(self.size, (last + 1) * self.block_size)
        data = bytes(obstore.get_range(self.store, self.path, start=start, end=end))
        self.requests += 1
        self.bytes_read += len(data)
        for block in range(first, last + 1):
            offset = block * self.block_size - start
            self._keep(block, data[offset : offset + self.block_size])

    def _block(self, block: int) -> bytes:
        if block not in self.blocks:
            self._fetch(block, block)
        self.blocks.move_to_end(block)
        return self.blocks[block]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), max(0, self.size - self.position))
        if wanted == 0:
            return 0
        first, last = self.position // self.block_size, (self.position + wanted - 1) // self.block_size
        missing = [block for block in range(first, last + 1) if block not in self.blocks]
        if missing:
            self._fetch(missing[0], missing[-1])
        done = 0
        while done < wanted:
            block, within = divmod(self.position + done, self.block_size)
            data = self._block(block)
            piece = data[within : within + wanted - done]
            view[done : done + len(piece)] = piece
            done += len(piece)
        self.position += done
        return done

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = base + offset
        return self.position

    def tell(self) -> int:
        return self.position
