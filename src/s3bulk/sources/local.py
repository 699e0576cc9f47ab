"""Walk a local directory as a stream of (relative path, size) entries, lazily.

Entries come in S3 key order: depth first, each directory's entries sorted by name with a
directory compared as ``name/``. That is exactly the order a ListObjectsV2 of the same tree
returns (``a-b`` before ``a/x`` because '-' < '/'), which `sync` needs to merge-join a local tree
with a listing without holding either in memory.
Symbolic links are not followed: a link may point outside the tree or loop; they are reported as
skipped instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class LocalEntry:
    relative: str  # '/'-separated, relative to the walk root
    size: int
    problem: str = ""
    mtime: float = 0.0  # non-empty: not uploadable (symlink, unreadable directory)


def walk(root: str) -> Iterator[LocalEntry]:
    # a stack of open directories, each an iterator over its sorted entries: a directory is
    # entered exactly where its name falls among its siblings
    stack: list[tuple[str, Iterator[os.DirEntry[str]]]] = []
    problem = _enter(root, "", stack)
    if problem:
        yield LocalEntry(".", 0, problem)
    while stack:
        relative_dir, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        relative = f"{relative_dir}/{entry.name}" if relative_dir else entry.name
        if entry.is_symlink():
            yield LocalEntry(relative, 0, "symbolic link not followed")
        elif entry.is_dir(follow_symlinks=False):
            problem = _enter(entry.path, relative, stack)
            if problem:
                yield LocalEntry(relative, 0, problem)
        elif entry.is_file(follow_symlinks=False):
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError as exc:
                yield LocalEntry(relative, 0, f"cannot stat: {exc.strerror}")
                continue
            yield LocalEntry(relative, stat.st_size, mtime=stat.st_mtime)
        else:
            yield LocalEntry(relative, 0, "not a regular file")


def _enter(directory: str, relative: str, stack: list[tuple[str, Iterator[os.DirEntry[str]]]]) -> str:
    """Push a directory's sorted entries; returns a problem text when it cannot be read."""
    try:
        with os.scandir(directory) as entries:
            listing = sorted(entries, key=_key_order)
    except OSError as exc:
        return f"cannot read directory: {exc.strerror}"
    stack.append((relative, iter(listing)))
    return ""


def _key_order(entry: os.DirEntry[str]) -> str:
    try:
        is_dir = entry.is_dir(follow_symlinks=False)
    except OSError:
        is_dir = False
    return entry.name + "/" if is_dir else entry.name
