"""The local side of a transfer: files written whole (with the object's time), read whole as
one version of themselves, and what is at a path; and a thread's write awaited to its end even
when its caller is cancelled."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from s3bulk._errors import ItemError
from s3bulk._stores.etags import etag_matches_bytes
from s3bulk._stores.multipart import version_of

if TYPE_CHECKING:
    import obstore

T = TypeVar("T")


async def write_in_thread(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a thread, awaited to its end even when the task is cancelled
    meanwhile, then cancelled: a thread cannot be stopped, and a temporary file it created after
    the download's cleanup ran was left behind (Ctrl-C of 2,000 x 1 MiB downloads left one to
    three `.s3bulk-part` files in 3 of 7 tries)."""
    future = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


def write_checked(
    path: str,
    data: bytes | memoryview | obstore.Bytes,
    mtime: float,
    etag: str,
    part_size: int,
    folder: int | None = None,
) -> tuple[int, bool | None]:
    """`write_file`, and whether the bytes match `etag` (None: not asked, or it cannot tell)."""
    written = write_file(path, data, mtime, folder)
    return written, etag_matches_bytes(memoryview(data), etag, part_size) if etag else None


def write_file(
    path: str, data: bytes | memoryview | obstore.Bytes, mtime: float = 0.0, folder: int | None = None
) -> int:
    """`data` into a new file at `path` (a name in the open directory `folder`, if given; never
    through a link), given the time `mtime` (when not 0) before it is closed."""
    descriptor = new_file(path, folder)
    try:
        written = os.write(descriptor, data)
        while written < len(data):  # a short write (a signal, a pipe-like filesystem): go on
            written += os.write(descriptor, memoryview(data)[written:])
        if mtime:
            os.utime(descriptor, (mtime, mtime))
    finally:
        os.close(descriptor)
    return written


def new_file(path: str, folder: int | None = None) -> int:
    """A new file at `path` (a name in the open directory `folder`, if given), empty, open to
    write: a file there is emptied, a link there is not followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    return os.open(path, flags, 0o666, dir_fd=folder)


def set_time(path: str, mtime: float, folder: int | None = None) -> None:
    if mtime:
        os.utime(path, (mtime, mtime), dir_fd=folder, follow_symlinks=False)


def read_unchanged(path: str) -> bytes:
    """The file's bytes, read whole, and known to be one version of it: a file written to while
    it is read (a log, a database, an editor's save) would be stored torn. Its size, inode,
    modification and change times are the same before and after the read, and as many bytes
    came as it holds (ctime changes on every write, and nobody can set it back)."""
    with open(path, "rb") as handle:
        before = os.fstat(handle.fileno())
        data = handle.read()
        after = os.fstat(handle.fileno())
    if len(data) != before.st_size or version_of(before) != version_of(after):
        raise ItemError(f"{path} changed while it was read", retryable=True)
    return data


def read_file(path: str, most: int = -1) -> bytes:
    """The file at `path`, or up to `most` bytes from its start."""
    with open(path, "rb") as handle:
        return handle.read(most)
