"""A read-only file over an object, read in large cached blocks: how h5py reads HDF5 metadata.

h5py asks for many small pieces (superblock, object headers, B-tree nodes of a few KiB), each a
blocking call under its global lock. Every miss here costs one round trip, so blocks are large
(1 MiB by default) and kept; a block prefetched for many files at once (the head of each file,
where h5py writes most metadata) turns most of those calls into memory reads. The file counts its
requests and bytes, so a report can say how much metadata reading cost.
"""

from __future__ import annotations

import asyncio
import io
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from s3bulk._config import AwsSettings
from s3bulk._lazy import lazy_module
from s3bulk._stores.reader import BACKGROUND

if TYPE_CHECKING:
    import obstore

    from s3bulk._stores.storage import Storage
else:
    obstore = lazy_module("obstore")

MiB = 1024**2


class SignedRanges:
    """Ranges of a bucket's objects through s3bulk's signed client, which follows no redirect
    and sends no credential to another host (obstore's client, which these reads went through
    before, followed a 307 elsewhere with the session token: issue 62). Its requests run on the
    readers' event loop (`reader.BACKGROUND`), whichever thread or loop asks."""

    def __init__(self, settings: AwsSettings, bucket: str, connections: int = 64) -> None:
        self.settings, self.bucket, self.connections = settings, bucket, connections
        self._storage: Storage | None = None

    async def _read(self, key: str, start: int, end: int) -> bytes:
        if self._storage is None:
            from s3bulk._stores.storage import Storage

            self._storage = Storage(self.settings, connections=self.connections)
        return bytes(await self._storage.read_range(f"s3://{self.bucket}", key, start, end))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return BACKGROUND.run(self._read(key, start, end))

    async def get_range_async(self, key: str, start: int, end: int) -> bytes:
        return await asyncio.wrap_future(BACKGROUND.start(self._read(key, start, end)))


def _get_range(store: Any, path: str, start: int, end: int) -> bytes:
    if isinstance(store, SignedRanges):
        return store.get_range(path, start, end)
    return bytes(obstore.get_range(store, path, start=start, end=end))  # a local file


async def _get_range_async(store: Any, path: str, start: int, end: int) -> bytes:
    if isinstance(store, SignedRanges):
        return await store.get_range_async(path, start, end)
    return bytes(await obstore.get_range_async(store, path, start=start, end=end))


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
        self.reads: list[tuple[int, int]] | None = None  # set to a list: record (offset, length) of reads
        self.offline = False  # a read that misses the cache fails instead of fetching (a dry run)

    def missing(self, offset: int, length: int) -> list[int]:
        """Blocks not cached among those holding [offset, offset + length)."""
        last = min(offset + length, self.size) - 1
        return [
            b for b in range(offset // self.block_size, last // self.block_size + 1) if b not in self.blocks
        ]

    def cached(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) clipped to the file, all from cached blocks."""
        saved, self.position = self.position, offset
        buffer = bytearray(max(0, min(length, self.size - offset)))
        try:
            self.readinto(buffer)
        finally:
            self.position = saved
        return bytes(buffer)

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

    def _span(self, first: int, last: int) -> tuple[int, int]:
        """The byte range of blocks first..last (inclusive)."""
        return first * self.block_size, min(self.size, (last + 1) * self.block_size)

    def _received(self, start: int, data: bytes, *, keep: bool = True) -> bytes:
        self.requests += 1
        self.bytes_read += len(data)
        if keep:
            self.seed(start, data)
        return data

    def _fetch(self, first: int, last: int) -> None:
        """Blocks first..last (inclusive) in one blocking ranged GET (h5py's reads)."""
        start, end = self._span(first, last)
        self._received(start, _get_range(self.store, self.path, start, end))

    async def prefetch(self, offset: int, length: int) -> None:
        """Fetch the blocks holding [offset, offset + length) that are not cached, in one request,
        without blocking: many files' prefetches make one concurrent wave."""
        missing = self.missing(offset, length)
        if missing:
            start, end = self._span(missing[0], missing[-1])
            self._received(start, await _get_range_async(self.store, self.path, start, end))

    async def read_async(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length): from cached blocks, or one GET of exactly that range
        (small reads far from anything h5py needs, such as B-tree nodes, need no whole block)."""
        length = max(0, min(length, self.size - offset))
        if not self.missing(offset, length):
            return self.cached(offset, length)
        data = await _get_range_async(self.store, self.path, offset, offset + length)
        return self._received(offset, data, keep=False)

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
        if self.reads is not None:
            self.reads.append((self.position, wanted))
        missing = self.missing(self.position, wanted)
        if missing and self.offline:
            raise OSError(f"{self.path}: bytes {self.position}+{wanted} are not cached (dry run)")
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
