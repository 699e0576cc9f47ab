"""--include / --exclude globs, matched against the key (or path) relative to the source, and
the size and time window (--min-size, --max-size, --newer-than, --older-than; --min-age and
--max-age become the last two when the job is made, so a resumed job keeps the same cut-offs).

Like s5cmd: with any --include, a key must match one of them; a key matching any --exclude is
left out (exclude wins). `*` matches across `/`, so `*.txt` selects text files at any depth.

The globs decide which names are in the job (`takes_name`): on both sides of a sync alike, since
a name is the same on both. The window is about one entry's size and time (`in_window`), which
differ between a file and its object (an object's LastModified is when it was written; a file
grows): it selects what is done to that entry, never whether its name exists. sync and check ask
each separately (`_commands/sides.py`); cp, mv and rm act on one side only and ask `accepts`.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from s3bulk._errors import UsageError


@dataclass(frozen=True)
class Filters:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    min_size: int | None = None  # bytes, inclusive
    max_size: int | None = None
    newer_than: float | None = None  # seconds since the epoch: modified at or after
    older_than: float | None = None  # modified before
    _include_re: re.Pattern[str] | None = field(default=None, init=False, compare=False, repr=False)
    _exclude_re: re.Pattern[str] | None = field(default=None, init=False, compare=False, repr=False)
    # asked once per listed key (`__bool__`, `windowed`): answered once, when made
    _windowed: bool = field(default=False, init=False, compare=False, repr=False)
    _any: bool = field(default=False, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        def compile_all(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
            if not patterns:
                return None
            return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns), re.DOTALL)

        object.__setattr__(self, "_include_re", compile_all(self.include))
        object.__setattr__(self, "_exclude_re", compile_all(self.exclude))
        bounds = (self.min_size, self.max_size, self.newer_than, self.older_than)
        object.__setattr__(self, "_windowed", any(bound is not None for bound in bounds))
        object.__setattr__(self, "_any", bool(self.include or self.exclude) or self._windowed)

    def __bool__(self) -> bool:
        return self._any

    @property
    def windowed(self) -> bool:
        """Whether sizes or times select too (then callers pass them to `accepts`)."""
        return self._windowed

    def accepts(self, relative: str, size: int | None = None, mtime: float | None = None) -> bool:
        """Whether the globs take the name and the window the entry's size and time."""
        return self.takes_name(relative) and self.in_window(size, mtime)

    def takes_name(self, relative: str) -> bool:
        """Whether --include/--exclude take the name into the job at all."""
        if self._include_re is not None and not self._include_re.match(relative):
            return False
        return self._exclude_re is None or not self._exclude_re.match(relative)

    def in_window(self, size: int | None, mtime: float | None) -> bool:
        if size is not None:
            if self.min_size is not None and size < self.min_size:
                return False
            if self.max_size is not None and size > self.max_size:
                return False
        if mtime is not None:
            if self.newer_than is not None and mtime < self.newer_than:
                return False
            if self.older_than is not None and mtime >= self.older_than:
                return False
        return True

    def __getstate__(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in _FIELDS}

    def __setstate__(self, state: dict[str, object]) -> None:
        for name in _FIELDS:
            object.__setattr__(self, name, state.get(name))
        object.__setattr__(self, "include", state.get("include") or ())
        object.__setattr__(self, "exclude", state.get("exclude") or ())
        self.__post_init__()


_FIELDS = ("include", "exclude", "min_size", "max_size", "newer_than", "older_than")


def check_window(
    min_size: int | None, max_size: int | None, newer_than: float | None, older_than: float | None
) -> None:
    """The size and time window of --min-size/--max-size/--newer-than/--older-than, checked."""
    for name, size in (("--min-size", min_size), ("--max-size", max_size)):
        if size is not None and size < 0:
            raise UsageError(f"{name} cannot be negative")
    if min_size is not None and max_size is not None and min_size > max_size:
        raise UsageError(f"--min-size {min_size} is above --max-size {max_size}: nothing would be selected")
    if newer_than is not None and older_than is not None and newer_than >= older_than:
        raise UsageError("--newer-than (or --max-age) is not before --older-than (or --min-age): none fits")
