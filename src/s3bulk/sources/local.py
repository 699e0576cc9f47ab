"""Walk a local directory as a stream of (relative path, size) entries, lazily.

Entries are sorted by name within each directory (depth first), so a run is repeatable.
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
    problem: str = ""  # non-empty: not uploadable (symlink, unreadable directory)


def walk(root: str) -> Iterator[LocalEntry]:
    stack = [""]
    while stack:
        relative_dir = stack.pop()
        directory = os.path.join(root, relative_dir) if relative_dir else root
        try:
            with os.scandir(directory) as entries:
                listing = sorted(entries, key=lambda e: e.name.encode("utf-8", "surrogateescape"))
        except OSError as exc:
            yield LocalEntry(relative_dir or ".", 0, f"cannot read directory: {exc.strerror}")
            continue
        subdirs = []
        for entry in listing:
            relative = f"{relative_dir}/{entry.name}" if relative_dir else entry.name
            if entry.is_symlink():
                yield LocalEntry(relative, 0, "symbolic link not followed")
            elif entry.is_dir(follow_symlinks=False):
                subdirs.append(relative)
            elif entry.is_file(follow_symlinks=False):
                try:
                    size = entry.stat(follow_symlinks=False).st_size
                except OSError as exc:
                    yield LocalEntry(relative, 0, f"cannot stat: {exc.strerror}")
                    continue
                yield LocalEntry(relative, size)
            else:
                yield LocalEntry(relative, 0, "not a regular file")
        stack.extend(reversed(subdirs))
