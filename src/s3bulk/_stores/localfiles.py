"""The local side of a transfer: files written whole (with the object's time), read whole as
one version of themselves, and what is at a path; and a thread's write awaited to its end even
when its caller is cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
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
    path: str, data: bytes | memoryview | obstore.Bytes, mtime: float, etag: str, part_size: int
) -> tuple[int, bool | None]:
    """`write_file`, and whether the bytes match `etag` (None: not asked, or it cannot tell)."""
    written = write_file(path, data, mtime)
    return written, etag_matches_bytes(memoryview(data), etag, part_size) if etag else None


def write_file(path: str, data: bytes | memoryview | obstore.Bytes, mtime: float = 0.0) -> int:
    """`data` into a new file at `path`, given the time `mtime` (when not 0) before it is closed."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        written = os.write(descriptor, data)
        while written < len(data):  # a short write (a signal, a pipe-like filesystem): go on
            written += os.write(descriptor, memoryview(data)[written:])
        if mtime:
            os.utime(descriptor, (mtime, mtime))
    finally:
        os.close(descriptor)
    return written


def set_time(path: str, mtime: float) -> None:
    if mtime:
        os.utime(path, (mtime, mtime))


def kind(path: str) -> str | None:
    """ "directory" (or a link to one), "other", or None when nothing is at `path`: one lstat
    when nothing is there, as for most downloads."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            mode = os.stat(path).st_mode
    return "directory" if stat.S_ISDIR(mode) else "other"


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
