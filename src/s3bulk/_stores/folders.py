"""The directories downloads write in, opened once and used by their descriptors (`openat` and
friends), so that a directory swapped for a symbolic link while a job runs cannot send a file
elsewhere.

A path looked up again at every step is only as safe as the moment it was checked: `sync` and
`cp` checked each directory of the destination once, then wrote files into it by path, and a
directory swapped meanwhile for a link to elsewhere took 148 of them there. Here each directory
below the destination's root is opened from its parent's descriptor, one component at a time,
never through a link (`O_NOFOLLOW`), made if it is missing; a download then makes, writes, lands
and removes its file by name in that open directory (`landing.py`, and the native part's GETs,
`native/src/folder.rs`). Whatever the path turns into afterwards, the files go into the
directory that was opened, which was inside the root. A link inside the destination that the user
made to a directory inside it is followed as before: its target, resolved, must be inside the
root, and is then opened the same way, component by component from the root.

A worker keeps the directories it wrote in last open (`MOST_OPEN`), each held by the downloads
using it: one `openat` per directory, not per file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import OrderedDict
from collections.abc import Iterator

from s3bulk._errors import ItemError
from s3bulk._stores.landing import file_in_the_way, sweep_stale_parts

MOST_OPEN = 32  # directories a worker keeps open (more while more are in use at once)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_BELOW = _DIRECTORY | os.O_NOFOLLOW  # a component below the root: never through a link


class _Open:
    __slots__ = ("fd", "holds")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.holds = 0


class Folders:
    """One worker's open directories, by (root, the path below it)."""

    def __init__(self, most: int = MOST_OPEN) -> None:
        self._open: OrderedDict[tuple[str, str], _Open] = OrderedDict()
        self._most = most
        self._closing = False

    def hold(self, root: str, below: str) -> int:
        """The descriptor of directory `below` ('a/b', or '' for the root itself) under `root`,
        made if missing (and swept of the temporary files of processes gone, once per opening),
        open until as many `release`s as `hold`s. `root` is the user's (followed, as any path
        they give); each component below it is opened without following links, or through one
        the user made only where it leads to a directory inside the root. ItemError: it leads
        outside, or a file is in the way; OSError: it cannot be made or opened. (Two calls, not
        a context manager: this is once per download, and a generator's costs 3x the lookup.)"""
        key = (root, below)
        entry = self._open.get(key)
        if entry is None:
            entry = self._open[key] = _Open(self._opened(root, below))
            sweep_stale_parts(entry.fd)  # left by an earlier run killed outright
        else:
            self._open.move_to_end(key)
        entry.holds += 1
        return entry.fd

    def release(self, root: str, below: str) -> None:
        self._open[root, below].holds -= 1
        if self._closing or len(self._open) > self._most:
            self._close_unused()

    @contextlib.contextmanager
    def held(self, root: str, below: str) -> Iterator[int]:
        """`hold` until the block ends."""
        fd = self.hold(root, below)
        try:
            yield fd
        finally:
            self.release(root, below)

    def _opened(self, root: str, below: str) -> int:
        if not below:
            return _open_root(root)
        parent, _, name = below.rpartition("/")
        with self.held(root, parent) as parent_fd:
            return _open_below(parent_fd, name, root, below, self)

    def _close_unused(self) -> None:
        """The least recently used directories no download holds, closed down to `_most` (all
        of them once the worker closes)."""
        excess = len(self._open) - (0 if self._closing else self._most)
        if excess <= 0:
            return
        for key in [key for key, entry in self._open.items() if not entry.holds][:excess]:
            os.close(self._open.pop(key).fd)

    def close(self) -> None:
        """Close every directory; one a download still holds (a cancelled one, cleaning up),
        once it lets go."""
        self._closing = True
        self._close_unused()


def _open_root(root: str) -> int:
    os.makedirs(root, exist_ok=True)
    return os.open(root, _DIRECTORY)


def _open_below(parent_fd: int, name: str, root: str, below: str, folders: Folders) -> int:
    """Directory `name` in the open directory `parent_fd` (`below` under `root`), made if
    missing; a link in its place only to a directory inside the root."""
    for _ in range(2):
        try:
            return os.open(name, _BELOW, dir_fd=parent_fd)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # made meanwhile by another download
                os.mkdir(name, 0o777, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise
            if not _is_link(parent_fd, name):
                raise file_in_the_way(os.path.join(root, below)) or exc from None
            return _through_link(root, below, folders)
    return os.open(name, _BELOW, dir_fd=parent_fd)


def _through_link(root: str, below: str, folders: Folders) -> int:
    """The directory a link the user made inside the destination leads to, if it is inside the
    root: opened as its resolved path is, component by component from the root (so a link that
    changes meanwhile is refused, not followed)."""
    shown = os.path.join(root, below)
    inside = os.path.relpath(os.path.realpath(shown), os.path.realpath(root))
    if inside == os.pardir or inside.startswith(os.pardir + os.sep):
        raise ItemError(f"{shown} resolves outside the destination directory", retryable=False)
    with folders.held(root, "") as at:
        fd = os.dup(at)
    for name in [] if inside == os.curdir else inside.split(os.sep):
        try:
            next_fd = os.open(name, _BELOW, dir_fd=fd)
        except OSError as exc:
            why = f"{shown} leads nowhere that can be written: {exc.strerror}"
            raise ItemError(why, retryable=False) from None
        finally:
            os.close(fd)
        fd = next_fd
    return fd


def _is_link(parent_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


# ---- the upload side: files read, and mv's sources removed, below an opened directory -----------
_FILE = os.O_RDONLY | os.O_CLOEXEC
_PROC_FDS = "/proc/self/fd"


def open_below(root: str, relative: str, *, follow: bool = False) -> int:
    """A descriptor of file `relative` below `root`, opened from the root's descriptor one
    component at a time, never through a link (unless `follow`, --follow-symlinks: the user asked
    to follow them): a directory swapped for a link to elsewhere after the walk saw it makes the
    item fail by name, never a file outside the source read and uploaded. ItemError: a link on
    its way; OSError: as `open`."""
    parent = _parent_below(root, relative, follow)
    try:
        return _opened_in(parent, relative.rpartition("/")[2], root, relative, _FILE, follow)
    finally:
        os.close(parent)


def remove_below(root: str, relative: str, version: tuple[int, ...] | None, follow: bool = False) -> None:
    """mv's delete of file `relative` below `root`, by name in its directory opened as
    `open_below` opens it, only while it is `version` (its size, inode and times): another
    writer's file is kept (ItemError), and nothing outside the source is ever removed."""
    parent = _parent_below(root, relative, follow)
    name = relative.rpartition("/")[2]
    try:
        found = os.stat(name, dir_fd=parent, follow_symlinks=follow)
        now = (found.st_size, found.st_ino, found.st_mtime_ns, found.st_ctime_ns)
        if version is not None and now != version:
            raise ItemError(
                "it changed after it was read (the object holds the version before)", retryable=False
            )
        os.unlink(name, dir_fd=parent)
    finally:
        os.close(parent)


def descriptor_path(fd: int) -> str | None:
    """A path that names the open file `fd` whatever its own path becomes (Linux's
    /proc/self/fd/N, which the native part's reads open again), or None where there is none."""
    return f"{_PROC_FDS}/{fd}" if os.path.isdir(_PROC_FDS) else None


def _parent_below(root: str, relative: str, follow: bool) -> int:
    """The directory holding `relative`, opened from `root` one component at a time."""
    fd = os.open(root, _DIRECTORY)
    below = ""
    for name in relative.split("/")[:-1]:
        below = f"{below}/{name}" if below else name
        try:
            next_fd = _opened_in(fd, name, root, below, _DIRECTORY, follow)
        finally:
            os.close(fd)
        fd = next_fd
    return fd


def _opened_in(parent: int, name: str, root: str, below: str, flags: int, follow: bool) -> int:
    try:
        return os.open(name, flags | (0 if follow else os.O_NOFOLLOW), dir_fd=parent)
    except OSError as exc:
        if (
            follow
            or exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)
            or not _is_link(parent, name)
        ):
            raise
        shown = os.path.join(root, below)
        raise ItemError(
            f"{shown} is a symbolic link now (it was not when the source was walked): not followed, "
            "nothing outside the source is read",
            retryable=False,
        ) from None
