"""Walk a local directory as a stream of (relative path, size) entries, lazily.

Entries come in S3 key order: depth first, each directory's entries sorted by name with a
directory compared as ``name/``. That is exactly the order a ListObjectsV2 of the same tree
returns (``a-b`` before ``a/x`` because '-' < '/'), which `sync` needs to merge-join a local tree
with a listing without holding either in memory.
Symbolic links are not followed unless asked (`--follow-symlinks`): a link may point outside the
tree or loop, so by default they are reported as skipped. When followed, a link to a directory
that is already being walked (an ancestor: a loop) and a link to nothing are skipped and named.
A name that is not UTF-8 (a Latin-1 `caf\xe9.txt`) cannot be an S3 key: it is refused by name, and
the upload fails for it while the rest goes on. s3bulk's own temporary files (a download in
progress, or one a killed process left: `.NAME.PID-N.s3bulk-part`, `landing.is_temporary`) are
no file of the tree: a walk never yields them, so no upload or sync takes them, nor deletes
anything for them; a walk of a download's destination removes those whose process is gone.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from stat import S_ISDIR, S_ISLNK, S_ISREG

from s3bulk._errors import UsageError
from s3bulk._stores.landing import is_temporary, remove_if_stale
from s3bulk._text import NOT_UTF8, is_utf8


@dataclass(frozen=True)
class LocalEntry:
    relative: str  # '/'-separated, relative to the walk root
    size: int
    problem: str = ""  # non-empty: not uploadable (symlink, unreadable directory)
    mtime: float = 0.0
    refused: bool = False  # the problem fails the item (the user must act), not just skips it
    directory: bool = False  # a directory (that could not be read): it sorts as its name + '/'


LINK_NOT_FOLLOWED = "symbolic link not followed (--follow-symlinks follows it)"


class UnreadableRoot(UsageError):
    """The directory walked cannot be read at all: nothing of it is known, so nothing is done."""


def walk(root: str, follow_symlinks: bool = False, sweep: bool = False) -> Iterator[LocalEntry]:
    """The tree's entries in key order. A directory (or an entry) that cannot be read is an
    entry with a `problem` that the user must act on (`refused`): what it holds is unknown, and
    an upload that skipped it quietly, or a sync that then deleted its objects, would lose data.
    The root itself unreadable raises UnreadableRoot. s3bulk's temporary files are left out,
    and with `sweep` (a download's destination) those whose process is gone are removed."""
    # a stack of open directories, each an iterator over its sorted entries: a directory is
    # entered exactly where its name falls among its siblings
    stack: list[_Open] = []
    problem = _enter(root, "", stack, follow_symlinks)
    if problem:
        raise UnreadableRoot(f"{problem}: {root}")
    while stack:
        current = stack[-1]
        entry = next(current.entries, None)
        if entry is None:
            stack.pop()
            continue
        relative = f"{current.relative}/{entry.name}" if current.relative else entry.name
        if is_temporary(entry.name):  # s3bulk's own, never the tree's
            if sweep:
                remove_if_stale(entry.path)
            continue
        if not is_utf8(entry.name):  # os.fsdecode kept its bytes as surrogates: no key can hold them
            yield LocalEntry(relative, 0, NOT_UTF8, refused=True)
            continue
        if entry.is_symlink() and not follow_symlinks:
            yield LocalEntry(relative, 0, LINK_NOT_FOLLOWED)
            continue
        try:
            stat = entry.stat(follow_symlinks=follow_symlinks)
        except FileNotFoundError:
            yield LocalEntry(relative, 0, "broken symbolic link: its target does not exist")
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                yield LocalEntry(relative, 0, "symbolic link loop")
            else:  # a file or a directory: not known which, nor what it holds
                yield LocalEntry(relative, 0, _cannot("stat", exc), refused=True)
            continue
        if S_ISDIR(stat.st_mode):
            if (stat.st_dev, stat.st_ino) in {(opened.device, opened.inode) for opened in stack}:
                yield LocalEntry(relative, 0, "symbolic link loop: it leads back to a directory above it")
                continue
            problem = _enter(entry.path, relative, stack, follow_symlinks)
            if problem:
                yield LocalEntry(relative, 0, problem, refused=True, directory=True)
        elif S_ISREG(stat.st_mode):
            yield LocalEntry(relative, stat.st_size, mtime=stat.st_mtime)
        else:
            yield LocalEntry(relative, 0, "not a regular file")


@dataclass
class _Open:
    relative: str
    entries: Iterator[os.DirEntry[str]]
    device: int
    inode: int


def _enter(directory: str, relative: str, stack: list[_Open], follow_symlinks: bool) -> str:
    """Push a directory's sorted entries; returns a problem text when it cannot be read."""
    try:
        stat = os.stat(directory)
        with os.scandir(directory) as entries:
            listing = sorted(entries, key=lambda entry: _key_order(entry, follow_symlinks))
    except OSError as exc:
        return _cannot("read directory", exc)
    stack.append(_Open(relative, iter(listing), stat.st_dev, stat.st_ino))
    return ""


def _cannot(what: str, exc: OSError) -> str:
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return f"cannot {what}: {exc.strerror} (raise `ulimit -n`, or lower --concurrency)"
    return f"cannot {what}: {exc.strerror}"


def _key_order(entry: os.DirEntry[str], follow_symlinks: bool) -> str:
    try:
        is_dir = entry.is_dir(follow_symlinks=follow_symlinks)
    except OSError:
        is_dir = False
    return entry.name + "/" if is_dir else entry.name


def named_files(
    root: str, names: Iterable[str], follow_symlinks: bool = False
) -> Iterator[tuple[str, int, str, bool]]:
    """A manifest's names as files under `root`: (name, size, problem or "", refused) each,
    stat now, so that a file that is not there, or is no regular file, is that item's failure.
    A name is a file below the root, as a walk would find it: one that leads out of it (an
    absolute path, a `..`) is refused, and a link on its way is skipped as a walk skips it,
    unless links are followed (`--follow-symlinks`)."""
    links: dict[str, bool] = {}  # directories below the root looked at: whether each is a link
    for given in names:
        name = _below_root(given)
        if name is None:
            yield given, 0, "not below the source directory: --files-from names files relative to it", True
            continue
        if is_temporary(name.rpartition("/")[2]):
            yield name, 0, "a download s3bulk has in progress (or left), not a file of the tree", False
            continue
        if not follow_symlinks and _through_link(root, name, links):
            yield name, 0, LINK_NOT_FOLLOWED, False
            continue
        try:
            found = os.stat(os.path.join(root, name), follow_symlinks=follow_symlinks)
        except OSError as exc:
            yield name, 0, f"cannot read local file: {exc.strerror}", True
            continue
        if S_ISLNK(found.st_mode):
            yield name, 0, LINK_NOT_FOLLOWED, False
            continue
        problem = "" if S_ISREG(found.st_mode) else "not a regular file"
        yield name, found.st_size, problem, bool(problem)


def _below_root(name: str) -> str | None:
    """`name` as a path below the root ('a/./b' and 'a//b' as 'a/b', as a walk names it), or
    None when it leads out of it: absolute, or through '..'."""
    if name.startswith("/"):
        return None
    parts = [part for part in name.split("/") if part not in ("", ".")]
    return "/".join(parts) if parts and ".." not in parts else None


def _through_link(root: str, name: str, links: dict[str, bool]) -> bool:
    """Whether a directory on the way to `name` below `root` is a symbolic link."""
    directory = ""
    for part in name.split("/")[:-1]:
        directory = f"{directory}/{part}" if directory else part
        linked = links.get(directory)
        if linked is None:
            try:
                linked = links[directory] = S_ISLNK(os.lstat(os.path.join(root, directory)).st_mode)
            except OSError:
                linked = links[directory] = False  # nothing there: the stat of the file says so
        if linked:
            return True
    return False


def walked_again(
    root: str, failed: Iterable[tuple[str, int]], follow_symlinks: bool
) -> Iterator[tuple[str, int, str, bool]]:
    """The files of failed items (their names under `root`) to try again, as `named_files`
    gives them (a name a manifest gave is no safer the second time); a directory that could
    not be read then is walked now."""
    for name, _ in failed:
        below, path = _below_root(name), os.path.join(root, name)
        linked = not follow_symlinks and (os.path.islink(path) or _through_link(root, below or "", {}))
        if below is None or linked or not os.path.isdir(path):
            yield from named_files(root, [name], follow_symlinks)
            continue
        try:
            for entry in walk(path, follow_symlinks):
                yield f"{name}/{entry.relative}", entry.size, entry.problem, entry.refused
        except UnreadableRoot as exc:
            yield name, 0, str(exc), True


@dataclass(frozen=True)
class LocalBatch:
    """A work descriptor: local files (paths relative to `root`) to upload."""

    root: str
    entries: tuple[tuple[str, int, str, bool], ...]  # (relative path, size, problem or "", refused)

    def __str__(self) -> str:
        return f"{len(self.entries)} files under {self.root}"
