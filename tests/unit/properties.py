"""The rule every command that writes or deletes must keep, quantified over its OPTIONS (issue 62):
whatever the filters, windows, manifest, guards, comparison mode and direction, and whatever the
two sides hold (old and new times, grown and shrunk files, the same names with other bytes, odd
names), a job deletes nothing the source holds at any name the job maps to it, writes or deletes
nothing outside its scope, writes nothing but the source's bytes, and when it exits 0 has made
the destination hold the source within its scope.

Three parts, each usable alone:
- strategies (`cases`): a `World` (what each side holds) and the `Options` a command runs with;
- the oracle (`violations`): what the options allow, computed from both sides as they were
  before the run and after it, from the documented rules and not from the job's code (the
  globs by `fnmatch`, the window by its definition, the comparison modes by theirs);
- the runner (`check_case`) over a `Backend`, which lays a world out, runs a case and reads the
  sides back: `MemoryBackend` here (the engine running the real job on tests/unit/memory.py's
  store, a local side in a directory), MinIO and the command line in
  tests/integration/test_never_delete.py.

Another writer (`SideWriter`, over tests/unit/test_concurrent_writer.py's `Write`s) changes the
side a job writes and deletes at (sync's, cp's and mv's S3 destination, rm's target) between any
two requests (`MemoryS3.before`): the names it touched are left out of the oracle above and
judged by its own rule (`SideWriter.violations`): what it wrote that no listing or HEAD of the job
saw afterwards is neither deleted nor overwritten, but by the source's bytes at a name the job
copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import math
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from unittest import mock

from hypothesis import strategies as st
from memory import MemoryS3

from s3bulk._commands import command_for
from s3bulk._commands.base import JobPlan, Spec
from s3bulk._commands.check import CheckSpec
from s3bulk._commands.copy import CopySpec, MoveSpec
from s3bulk._commands.remove import RemoveSpec
from s3bulk._commands.sync import SyncSpec
from s3bulk._config import AwsSettings
from s3bulk._engine.driver import Engine
from s3bulk._engine.worker import EngineOptions
from s3bulk._errors import S3BulkError, UsageError
from s3bulk._report import Report

MiB = 1024**2
Y2020, Y2024, Y2025 = 1_577_836_800.0, 1_717_200_000.0, 1_748_736_000.0  # Jan 1, Jun 1, Jun 1
TIMES = (Y2020, Y2020 + 0.5, Y2024, Y2025, Y2025 + 1, Y2025 + 1.7)  # seconds apart matter
CUTS = (Y2020, Y2020 + 1, Y2024, Y2025 + 1, Y2025 + 2, 1_767_225_600.0)  # the last: 2026, before "now"
BODIES = (b"", b"a", b"b", b"ab", b"ba", b"abc", b"abd", b"hello", b"hellp", b"hello world!", b"x" * 40)
SIZE_CUTS = (0, 1, 2, 3, 5, 12, 40)
# name segments a file and a key can both be: odd to a shell, to URLs, to Unicode, to sorting
SEGMENTS = (
    "a",
    "a-b",
    "a b",
    "a+b",
    "c%41d",
    "é",
    "e\u0301",
    "日本",
    "x.txt",
    "y.TXT",
    "#1",
    "q?",
    "[1]",
    "*",
    "it's",
    "🙂",
    "a.",
    "-",
    "A",
    "d",
    "ctl\x1bm",
    "z" * 120,
)
# keys S3 holds and no file can be named by (refused on the way down), or markers of directories
S3_ONLY = ("a//b", "./x", "d/../y", "/abs", "d/", "m/")
PATTERNS = ("*.txt", "a*", "*/*", "d/*", "*é*", "*[1]*", "*b", "x*", "*", "?")
COMMANDS = ("sync", "sync", "sync", "sync", "mv", "mv", "cp", "check", "rm")
DIRECTIONS = ("upload", "download", "copy")


class Held(NamedTuple):
    """What one side holds at a name: its bytes, its time (a file's mtime, an object's
    LastModified) and, on a local source, whether it is a symbolic link (to a file of the tree,
    whose bytes and time these are)."""

    body: bytes
    mtime: float
    link: bool = False


@dataclass(frozen=True)
class World:
    source: dict[str, Held]
    destination: dict[str, Held]


@dataclass(frozen=True)
class Options:
    """One choice of every option a command takes that decides what it acts on."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    files_from: tuple[str, ...] | None = None  # the manifest's lines
    min_size: int | None = None
    max_size: int | None = None
    newer_than: float | None = None
    older_than: float | None = None
    mode: str = "mtime"  # sync
    delete: bool = False  # sync
    exact_timestamps: bool = False  # sync, downloads
    no_clobber: bool = False  # cp, mv
    if_size_differ: bool = False
    if_newer: bool = False
    max_delete: int | None = None  # sync, mv, rm
    dry_run: bool = False
    follow_symlinks: bool = False  # sync, cp, mv from a directory

    def __str__(self) -> str:
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}
        return ", ".join(f"{name}={value!r}" for name, value in given.items())


@dataclass(frozen=True)
class Case:
    command: str  # sync, mv, cp, check, rm
    direction: str  # upload, download, copy (rm: its target is an S3 source)
    world: World
    options: Options
    page_size: int = 1000  # keys per listing page, where the backend can say (the in-memory store)
    unordered: int | None = None  # listings in no key order, shuffled by this seed (the in-memory store)

    @property
    def local_pair(self) -> bool:
        """One side is a directory: keys ending in '/' are directories there, not entries."""
        return self.command != "rm" and self.direction != "copy"

    def __str__(self) -> str:
        pages = f" (pages of {self.page_size})" if self.page_size < 1000 else ""
        pages += f" (listed in no order, {self.unordered})" if self.unordered is not None else ""
        sides = f"{self.world.source}\n  {self.world.destination}"
        return f"{self.command} ({self.direction}){pages} {self.options}\n  {sides}"


class Places(NamedTuple):
    source: str  # a URL or a directory, ending in '/'
    destination: str
    manifest: str | None  # the --files-from file


class Outcome(NamedTuple):
    exit_code: int  # as the command line's: 0 done, 1 something failed or differs, 2 refused
    output: str
    differences: dict[str, set[str]] | None = None  # check: "missing"/"extra"/"differs" -> names
    deleted: set[str] | None = None  # destination names a DELETE was sent for (None: not seen)


# ---- strategies ----------------------------------------------------------------------------------


def _names(local: bool) -> st.SearchStrategy[str]:
    name = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join)
    return name if local else st.one_of(name, name, name, st.sampled_from(S3_ONLY))


def _without_conflicts(names: list[str]) -> list[str]:
    """Names a directory can hold at once: none is a directory of another ("a" and "a/b")."""
    kept: list[str] = []
    for name in names:
        if any(name.startswith(other + "/") or other.startswith(name + "/") for other in kept):
            continue
        kept.append(name)
    return kept


@st.composite
def _held(draw: st.DrawFn) -> Held:
    return Held(draw(st.sampled_from(BODIES)), draw(st.sampled_from(TIMES)))


@st.composite
def _counterpart(draw: st.DrawFn, source: Held) -> Held:
    """What the destination holds where the source holds `source`: its copy (of another time),
    the same size with other bytes, a grown or shrunk one, or anything."""
    kind = draw(st.sampled_from(("copy", "copy", "same size", "other", "any")))
    mtime = draw(st.sampled_from(TIMES))
    if kind == "copy":
        return Held(source.body, mtime)
    if kind == "same size":
        return Held(bytes((byte + 1) % 256 for byte in source.body), mtime)
    if kind == "other":
        return Held(source.body + b"+" if draw(st.booleans()) else source.body[:-1], mtime)
    return draw(_held())


@st.composite
def _window(draw: st.DrawFn) -> dict[str, Any]:
    low = draw(st.one_of(st.none(), st.sampled_from(SIZE_CUTS)))
    high = draw(st.one_of(st.none(), st.sampled_from(SIZE_CUTS)))
    if low is not None and high is not None and low > high:
        low, high = high, low
    newer = draw(st.one_of(st.none(), st.none(), st.sampled_from(CUTS)))
    older = draw(st.one_of(st.none(), st.none(), st.sampled_from(CUTS)))
    if newer is not None and older is not None and newer >= older:
        newer, older = (older, newer) if older < newer else (None, older)
    chosen = {"min_size": low, "max_size": high, "newer_than": newer, "older_than": older}
    return chosen if draw(st.integers(0, 3)) else {}  # a quarter of the cases have no window


@st.composite
def cases(draw: st.DrawFn, *, odd_keys: bool = True, s3_conflicts: bool = True) -> Case:
    """A command, a direction, two sides and options. `odd_keys`: S3 sides may hold keys no file
    can be named by and directory markers; `s3_conflicts`: an S3 side may hold both "a" and
    "a/b" (MinIO lists only one of them: its backend says False to both)."""
    command = draw(st.sampled_from(COMMANDS))
    direction = "copy" if command == "rm" else draw(st.sampled_from(DIRECTIONS))
    source_local, destination_local = direction == "upload", direction == "download"
    pool = draw(st.lists(_names(local=False), min_size=1, max_size=8, unique=True))
    local_names = _without_conflicts([name for name in pool if name not in S3_ONLY])

    def allowed(local: bool) -> list[str]:
        if local:
            return local_names
        names = pool if odd_keys else [name for name in pool if name not in S3_ONLY]
        return names if s3_conflicts else _without_conflicts(names)

    source: dict[str, Held] = {}
    for name in allowed(source_local):
        if draw(st.integers(0, 4)):  # most names are at the source
            source[name] = draw(_held())
    destination: dict[str, Held] = {}
    for name in allowed(destination_local):
        if name in source and draw(st.integers(0, 4)):
            destination[name] = draw(_counterpart(source[name]))
        elif name not in source and draw(st.booleans()):
            destination[name] = draw(_held())
    if source_local and source:  # links to files of the tree
        files = sorted(source)
        for name in draw(st.lists(st.sampled_from(local_names), max_size=2, unique=True)):
            if name not in source and _without_conflicts([*source, name]) == [*source, name]:
                source[name] = source[draw(st.sampled_from(files))]._replace(link=True)

    choices: dict[str, Any] = draw(_window())
    if draw(st.integers(0, 2)) == 0:
        choices["include"] = tuple(draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2)))
    if draw(st.integers(0, 2)) == 0:
        choices["exclude"] = tuple(draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2)))
    if draw(st.integers(0, 4)) == 0:
        named = draw(st.lists(st.sampled_from([*pool, "not-anywhere"]), min_size=1, max_size=4))
        choices["files_from"] = tuple(named)
    if command in ("sync", "mv", "cp", "rm"):
        choices["dry_run"] = draw(st.integers(0, 9)) == 0
    if command in ("sync", "mv", "rm") and draw(st.integers(0, 4)) == 0:
        choices["max_delete"] = draw(st.integers(0, 3))
    if command in ("sync", "mv", "cp") and source_local:
        choices["follow_symlinks"] = draw(st.booleans())
    if command == "sync":
        choices["mode"] = draw(st.sampled_from(("mtime", "size", "checksum")))
        choices["delete"] = draw(st.integers(0, 4)) > 0
        if direction == "download" and choices["mode"] == "mtime":
            choices["exact_timestamps"] = draw(st.booleans())
    if command in ("mv", "cp"):
        for guard in ("no_clobber", "if_size_differ", "if_newer"):
            choices[guard] = draw(st.integers(0, 3)) == 0
    page_size = draw(st.sampled_from((1, 2, 1000)))  # pages of one key: every merge crosses pages
    unordered = draw(st.one_of(st.none(), st.integers(0, 1000)))  # as S3 Express lists: sorted by s3bulk
    return Case(command, direction, World(source, destination), Options(**choices), page_size, unordered)


# ---- the oracle ----------------------------------------------------------------------------------


@dataclass
class Scope:
    """What the options select, by the documented rules: the globs and the manifest take names
    (`named`), the window an entry by its own size and time (`inside`)."""

    options: Options
    manifest: set[str] | None = field(init=False)

    def __post_init__(self) -> None:
        lines = self.options.files_from
        self.manifest = (
            None if lines is None else {line for line in lines if line and not line.startswith("#")}
        )

    def named(self, name: str) -> bool:
        options = self.options
        if options.include and not any(fnmatch.fnmatchcase(name, glob) for glob in options.include):
            return False
        if any(fnmatch.fnmatchcase(name, glob) for glob in options.exclude):
            return False
        return self.manifest is None or name in self.manifest

    def inside(self, held: Held) -> bool:
        options, size = self.options, len(held.body)
        if options.min_size is not None and size < options.min_size:
            return False
        if options.max_size is not None and size > options.max_size:
            return False
        if options.newer_than is not None and held.mtime < options.newer_than:
            return False
        return options.older_than is None or held.mtime < options.older_than


def _seconds(mtime: float) -> int:
    return math.floor(mtime)


def _same_by_mode(options: Options, source: Held, destination: Held) -> bool:
    """What "nothing to copy" means in each comparison mode, as sync documents it."""
    if len(source.body) != len(destination.body):
        return False
    if options.mode == "checksum":
        return source.body == destination.body
    if options.mode == "size":
        return True
    if options.exact_timestamps:
        return _seconds(source.mtime) == _seconds(destination.mtime)
    return _seconds(source.mtime) <= _seconds(destination.mtime)


def _guarded(options: Options, source: Held, there: Held | None) -> bool:
    """cp's and mv's -n, -s, -u: whether what is there is left as it is."""
    if there is None:
        return False
    if options.no_clobber or (options.if_size_differ and len(there.body) == len(source.body)):
        return True
    return options.if_newer and _seconds(source.mtime) <= _seconds(there.mtime)


def violations(
    case: Case, before: World, after: World, outcome: Outcome, left_out: frozenset[str] = frozenset()
) -> list[str]:
    """Every way the run broke the rule: what it deleted that the source holds, what it wrote or
    deleted outside its scope, bytes that are neither side's, and, when it exited 0, what it
    left undone. `left_out`: names another writer touched on the side the job writes at (rm's
    target, else the destination), which its own rule judges (`SideWriter.violations`)."""
    options, scope = case.options, Scope(case.options)
    s0, d0, s1, d1 = before.source, before.destination, after.source, after.destination
    if case.command == "rm":
        s0, s1 = _without(s0, left_out), _without(s1, left_out)
    else:
        d0, d1 = _without(d0, left_out), _without(d1, left_out)

    def entry(name: str) -> bool:
        return not (case.local_pair and name.endswith("/"))

    movable = {n for n in s0 if entry(n) and (options.follow_symlinks or not s0[n].link)}
    moving = {n for n in movable if scope.named(n) and scope.inside(s0[n])} - left_out
    done = outcome.exit_code == 0 and not options.dry_run
    found: list[str] = []
    if case.command == "rm":
        for name in s0:
            if name not in s1 and name not in moving:
                found.append(f"rm deleted {name!r}, outside its scope")
            elif name in s1 and s1[name] != s0[name]:
                found.append(f"rm changed {name!r}")
        if done:
            found += [f"exit 0, yet {n!r} is not deleted" for n in sorted(moving & s1.keys())]
        if options.dry_run and s1 != s0:
            found.append("a dry run changed the bucket")
        return found

    if (options.dry_run or case.command == "check") and (s1 != s0 or d1 != d0):
        found.append(
            f"{case.command} changed the source: {_changes(s0, s1)}; the destination: {_changes(d0, d1)}"
        )
    held = {n for n in s0 if entry(n)}  # every name the source holds: in the window or not, a link or not
    # a link not followed may lead to a directory: what the source holds under it is not known
    unknown = {n for n in held if s0[n].link and not options.follow_symlinks}

    def extra_at(name: str) -> bool:
        if not entry(name) or name in held or any(name.startswith(link + "/") for link in unknown):
            return False
        return scope.named(name) and scope.inside(d0[name])

    extra = {n for n in d0 if extra_at(n)}
    if case.command == "check":
        return found + _check_verdict(case, outcome, moving, extra, s0, d0)

    deletes = case.command == "sync" and options.delete
    if case.command != "mv" and s1 != s0:
        found.append(f"{case.command} changed its source: {_changes(s0, s1)}")
    for name in sorted(held & d0.keys() - d1.keys()):
        found.append(f"deleted {name!r} at the destination, which the source holds")
    for name in sorted((outcome.deleted or set()) & held):
        found.append(f"sent a DELETE for {name!r} at the destination, which the source holds")
    for name in sorted(d0.keys() | d1.keys()):
        was, now = d0.get(name), d1.get(name)
        if name in moving:
            if now is not None and now.body not in {s0[name].body, was.body if was else None}:
                found.append(f"{name!r} holds bytes neither side held: {now.body!r}")
        elif not (deletes and name in extra and now is None) and was != now:
            found.append(f"{name!r} changed at the destination, outside the job's scope: {was} -> {now}")
    if case.command == "mv":
        for name in sorted(s0.keys() - left_out):
            if name in s1:
                if s1[name] != s0[name] and not (s0[name].link and s1[name].link):  # a target may move
                    found.append(f"mv changed the source {name!r}")
            elif name not in moving:
                found.append(f"mv deleted the source {name!r}, outside its scope")
            elif name not in d1 or d1[name].body != s0[name].body:
                found.append(f"mv deleted the source {name!r}, which is not at its destination")
    if not done:
        return found
    for name in sorted(moving):
        now = d1.get(name)
        if case.command == "sync":
            if now is None or not _same_by_mode(options, s0[name], now):
                found.append(f"exit 0, yet {name!r} is not the source's ({options.mode}): {now}")
        elif _guarded(options, s0[name], d0.get(name)):
            if now != d0[name] or s1.get(name) != s0[name]:
                found.append(f"exit 0, yet {name!r}, left be by a guard, changed")
        elif now is None or now.body != s0[name].body or (case.command == "mv" and name in s1):
            found.append(f"exit 0, yet {name!r} was not {case.command}'d: {now}")
    if deletes and not left_out:  # another writer deleting meanwhile may hide one from a listing
        found += [f"exit 0, yet the extra {n!r} is still there" for n in sorted(extra & d1.keys())]
    return found


def _without(held: dict[str, Held], names: frozenset[str]) -> dict[str, Held]:
    return {name: thing for name, thing in held.items() if name not in names} if names else held


def _check_verdict(
    case: Case, outcome: Outcome, moving: set[str], extra: set[str], s0: dict[str, Held], d0: dict[str, Held]
) -> list[str]:
    """check names exactly what sync would act on: what the source's scope lacks there, what
    differs in bytes, and as extra only what sync --delete would delete."""
    there = {n for n in d0 if not (case.local_pair and n.endswith("/"))}
    refused = {n for n in moving & there if case.direction == "download" and not _file_name(n)}
    expected = {
        "missing": moving - there,
        "extra": extra,
        "differs": {n for n in moving & there - refused if s0[n].body != d0[n].body},
    }
    said = outcome.differences or {}
    found = []
    for kind, names in expected.items():
        if said.get(kind, set()) - (refused if kind == "differs" else set()) != names:
            found.append(f"check's {kind}: {sorted(said.get(kind, set()))}, expected {sorted(names)}")
    return found


def _file_name(key: str) -> bool:
    """Whether a key may name a file below a directory (else a download refuses it): no control
    character, no empty, "." or ".." segment, not absolute."""
    if any(ord(char) < 32 or ord(char) == 127 for char in key):
        return False
    return not any(part in ("", ".", "..") for part in key.split("/"))


def _changes(before: dict[str, Held], after: dict[str, Held]) -> str:
    return ", ".join(
        f"{name!r}: {before.get(name)} -> {after.get(name)}"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    )


# ---- the runner ----------------------------------------------------------------------------------


class Backend(Protocol):
    def prepare(self, case: Case) -> Places:
        """Both sides laid out as `case.world` says, and the manifest written."""

    def read(self, case: Case, places: Places) -> World:
        """What both sides hold now, each name with its bytes and time."""

    def run(self, case: Case, places: Places) -> Outcome: ...


def check_case(case: Case, backend: Backend, writer: SideWriter | None = None) -> Outcome:
    """Lay the case out, run it (with `writer` changing the side it writes at, where the
    backend takes one), and fail with every violation of the rule and of the writer's."""
    places = backend.prepare(case)
    before = backend.read(case, places)
    outcome = backend.run(case, places)
    after = backend.read(case, places)
    assert "Traceback" not in outcome.output, f"{case}\n{outcome.output}"
    touched = writer.touched if writer is not None else frozenset()
    found = violations(case, before, after, outcome, touched)
    if writer is not None:
        found += writer.violations(case, before, after)
    said = f"{case}\n  another writer: {writer}" if writer is not None else str(case)
    assert not found, f"{said}\nexit {outcome.exit_code}: {outcome.output}\n" + "\n".join(found)
    return outcome


class Writing(Protocol):
    """One act of another writer (tests/unit/test_concurrent_writer.py's `Write`): just before
    request `before` of the job, a new version of `key` (a name on the side), or its delete."""

    before: int
    key: str
    delete: bool


class SideWriter:
    """Another writer on the side a job writes and deletes at, when it is S3: `MemoryS3.before`,
    run before each request of the job. It records what it did to each name, and whether the
    job looked at that name afterwards (a listing of the side, a HEAD of the key): a version the
    job never saw is one it cannot have decided to delete or replace."""

    def __init__(self, writes: list[Writing]) -> None:
        self.writes = list(writes)
        self.count = 0
        self.bucket = self.prefix = ""
        self.s3: MemoryS3 | None = None
        self.last: dict[str, bytes | None] = {}  # name -> its bytes as the writer left it (None: deleted)
        self.seen_since: set[str] = set()  # names the job listed or looked at after the writer's act

    def __str__(self) -> str:
        return repr(self.writes)

    @staticmethod
    def side(case: Case) -> str | None:
        """The bucket whose objects the job writes or deletes (None: a directory; check writes
        nothing, so it has none)."""
        if case.command == "rm":
            return "src"
        if case.command == "check" or case.direction == "download":
            return None
        return "dst"

    def attach(self, case: Case, s3: MemoryS3) -> Callable[[str, str, str], None] | None:
        bucket = self.side(case)
        if bucket is None or not self.writes:
            return None
        self.bucket, self.prefix, self.s3 = bucket, f"{bucket[0]}/", s3
        return self.before

    def before(self, verb: str, bucket: str, key: str) -> None:
        """The writer's acts due before this request, then what this request looks at."""
        for write in self.writes:
            if write.before == self.count:
                self._act(write)
        self.count += 1
        if bucket == self.bucket and verb in ("LIST", "HEAD"):
            looked = key[len(self.prefix) :]
            self.seen_since |= {name for name in self.last if verb == "LIST" or name == looked}

    def _act(self, write: Writing) -> None:
        assert self.s3 is not None
        key = self.prefix + write.key
        if write.delete:
            self.s3.buckets.setdefault(self.bucket, {}).pop(key, None)
            self.s3.modified.pop((self.bucket, key), None)
            self.last[write.key] = None
        else:
            body = f"theirs|{write.key}|{self.count}".encode()
            self.s3.written(self.bucket, key, body)
            self.last[write.key] = body
        self.seen_since.discard(write.key)

    @property
    def touched(self) -> frozenset[str]:
        return frozenset(self.last)

    def violations(self, case: Case, before: World, after: World) -> list[str]:
        """What the job did to a version the writer wrote and the job never saw: deleted it, or
        replaced it by anything but the source's bytes at a name the job copies."""
        side = after.source if case.command == "rm" else after.destination
        scope, found = Scope(case.options), []
        for name, body in sorted(self.last.items()):
            if body is None or name in self.seen_since:
                continue
            now = side.get(name)
            if now is None:
                found.append(f"{case.command} deleted {name!r}, which another writer wrote after it looked")
            elif now.body != body:
                source = before.source.get(name)
                copies = case.command != "rm" and not case.options.dry_run and source is not None
                in_scope = copies and scope.named(name) and scope.inside(source)
                if not (in_scope and now.body == source.body):
                    said = f"{case.command} replaced {name!r}, which another writer wrote after it looked"
                    found.append(said)
        return found


def write_manifest(case: Case, directory: Path) -> str | None:
    if case.options.files_from is None:
        return None
    path = directory / "names.txt"
    path.write_text("".join(line + "\n" for line in case.options.files_from), encoding="utf-8")
    return str(path)


def lay_out_directory(root: Path, held: dict[str, Held]) -> None:
    """Files (and links to files of the tree) with their bytes and times."""
    root.mkdir(parents=True, exist_ok=True)
    for name, thing in held.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if thing.link:
            continue
        path.write_bytes(thing.body)
        os.utime(path, (thing.mtime, thing.mtime))
    for name, thing in held.items():
        if thing.link:
            target = next(other for other, each in held.items() if each == thing._replace(link=False))
            os.symlink(os.path.relpath(root / target, (root / name).parent), root / name)


def lay_out(
    case: Case, work: Path, url: Callable[[str], str], put: Callable[[str, str, Held], None]
) -> Places:
    """Both sides of the case: a local one as files under `work`, an S3 one ("src" or "dst", at
    `url(side)`) object by object through `put(side, name, held)`."""
    places = []
    for side, held, local in (
        ("src", case.world.source, case.direction == "upload"),
        ("dst", case.world.destination, case.direction == "download"),
    ):
        if local:
            lay_out_directory(work / side, held)
            places.append(f"{work / side}/")
            continue
        for name, thing in held.items():
            put(side, name, thing)
        places.append(url(side))
    return Places(places[0], places[1], write_manifest(case, work))


def read_world(places: Places, objects: Callable[[str, str], dict[str, Held]]) -> World:
    """What both places hold: a directory read here, a prefix through `objects(bucket, prefix)`."""

    def side(place: str) -> dict[str, Held]:
        if not place.startswith("s3://"):
            return read_directory(Path(place))
        bucket, prefix = place[5:].split("/", 1)
        return objects(bucket, prefix)

    return World(side(places.source), side(places.destination))


def read_directory(root: Path) -> dict[str, Held]:
    found = {}
    for directory, subdirectories, files in os.walk(root):
        for name in files + [
            each for each in subdirectories if os.path.islink(os.path.join(directory, each))
        ]:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            link = os.path.islink(path)
            try:
                with open(path, "rb") as file:
                    found[relative] = Held(file.read(), os.stat(path).st_mtime, link)
            except OSError:  # a link to nothing
                found[relative] = Held(b"", 0.0, link)
    return found


def spec_of(case: Case, places: Places) -> Spec:
    """The spec the API builds for the case (a UsageError: what the command line refuses)."""
    options = case.options
    window = {
        "min_size": options.min_size,
        "max_size": options.max_size,
        "newer_than": options.newer_than,
        "older_than": options.older_than,
        "include": options.include,
        "exclude": options.exclude,
        "files_from": places.manifest,
    }
    if case.command == "rm":
        return RemoveSpec(
            target=places.source, max_delete=options.max_delete, dry_run=options.dry_run, **window
        )
    both = {"source": places.source, "destination": places.destination, **window}
    if case.command == "check":
        return CheckSpec(**both)
    both |= {"dry_run": options.dry_run, "follow_symlinks": options.follow_symlinks}
    if case.command == "sync":
        return SyncSpec(
            **both,
            mode=options.mode,
            delete=options.delete,
            max_delete=options.max_delete,
            exact_timestamps=options.exact_timestamps,
        )
    guards = {name: getattr(options, name) for name in ("no_clobber", "if_size_differ", "if_newer")}
    if case.command == "mv":
        return MoveSpec(**both, **guards, max_delete=options.max_delete)
    return CopySpec(**both, **guards)


def flags_of(case: Case, places: Places) -> list[str]:
    """The command line a person types for the case."""
    from datetime import UTC, datetime

    options = case.options
    line = [case.command]
    for flag, value in (("--include", options.include), ("--exclude", options.exclude)):
        for glob in value:
            line += [flag, glob]
    for flag, number in (
        ("--min-size", options.min_size),
        ("--max-size", options.max_size),
        ("--max-delete", options.max_delete),
    ):
        if number is not None:
            line += [flag, str(number)]
    for flag, moment in (("--newer-than", options.newer_than), ("--older-than", options.older_than)):
        if moment is not None:
            line += [flag, datetime.fromtimestamp(moment, UTC).isoformat()]
    if places.manifest:
        line += ["--files-from", places.manifest]
    switches = {
        "--dry-run": options.dry_run,
        "--follow-symlinks": options.follow_symlinks,
        "--delete": options.delete,
        "--exact-timestamps": options.exact_timestamps,
        "--size-only": options.mode == "size",
        "--checksum": options.mode == "checksum",
        "-n": options.no_clobber,
        "-s": options.if_size_differ,
        "-u": options.if_newer,
    }
    line += [flag for flag, on in switches.items() if on]
    if case.command == "check":
        line.append("--json")
    return [*line, places.source] if case.command == "rm" else [*line, places.source, places.destination]


def differences(failures: list[tuple[str, str]], places: Places) -> dict[str, set[str]]:
    """check's verdicts (kind, name as a URL or path) as names both sides share."""
    said: dict[str, set[str]] = {}
    roots = (places.source, places.destination)
    for kind, name in failures:
        relative = next((name[len(root) :] for root in roots if name.startswith(root)), name)
        said.setdefault(kind, set()).add(relative)
    return said


class MemoryBackend:
    """The engine running each case's real job (the spec the API builds, its command's build and
    finish) on an in-memory S3 (tests/unit/memory.py), its local side a directory under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0
        self.s3 = MemoryS3()
        self.writer: SideWriter | None = None  # another writer, for the next case

    def prepare(self, case: Case) -> Places:
        self.count += 1
        self.s3 = MemoryS3()
        self.s3.page_size = case.page_size
        self.s3.unordered = case.unordered
        work = self.root / f"case{self.count}"
        shutil.rmtree(self.root, ignore_errors=True)  # the last case's files: they are read already
        work.mkdir(parents=True)

        def put(side: str, name: str, thing: Held) -> None:
            self.s3.put(side, f"{side[0]}/{name}", thing.body, thing.mtime)

        places = lay_out(case, work, lambda side: f"s3://{side}/{side[0]}/", put)
        if self.writer is not None:
            self.s3.before = self.writer.attach(case, self.s3)
        return places

    def read(self, case: Case, places: Places) -> World:
        return read_world(places, self._objects)

    def _objects(self, bucket: str, prefix: str) -> dict[str, Held]:
        return {
            key[len(prefix) :]: Held(body, float(math.floor(self.s3.time_of(bucket, key))))
            for key, body in self.s3.buckets.get(bucket, {}).items()
            if key.startswith(prefix)
        }

    def run(self, case: Case, places: Places) -> Outcome:
        try:
            spec = spec_of(case, places)
            report = asyncio.run(run_in_memory(spec, self.s3))
        except UsageError as exc:
            return Outcome(2, str(exc))
        except S3BulkError as exc:
            return Outcome(1, str(exc))
        verdicts = [(f.reason.partition(":")[0], f.source) for f in report.failures]
        output = "; ".join(f"{f.source}: {f.reason}" for f in report.failures) + report.aborted
        deleted = self._deleted(places.destination) if case.command == "sync" else None
        if case.command == "check":
            return Outcome(
                int(bool(report.failures) or bool(report.aborted)), output, differences(verdicts, places)
            )
        return Outcome(0 if report.ok else 1, output, None, deleted)

    def _deleted(self, place: str) -> set[str] | None:
        if not place.startswith("s3://"):
            return None
        bucket, prefix = place[5:].split("/", 1)
        return {
            key[len(prefix) :]
            for verb, where, key in self.s3.requests
            if verb == "DELETE" and where == bucket and key.startswith(prefix)
        }


@contextlib.contextmanager
def _storage_in(s3: MemoryS3) -> Iterator[None]:
    """Every storage a command makes by itself (preflights, rm's) on the in-memory store."""
    maker = s3.storage()
    with contextlib.ExitStack() as stack:
        for module in ("transfer", "sync", "remove"):
            stack.enter_context(mock.patch(f"s3bulk._commands.{module}.Storage", maker))
        yield


async def run_in_memory(spec: Spec, s3: MemoryS3) -> Report:
    """`spec` run as the runner runs it (build, the engine, finish), on the in-memory store."""
    command = command_for(spec)
    plan = JobPlan("", 1, 64 * MiB)
    with _storage_in(s3):
        job: Any = await command.build(command.settle(spec, plan), AwsSettings(), plan)
        maker = s3.storage()
        for holder in (getattr(getattr(job, "mover", None), "stores", None), getattr(job, "sides", None)):
            if holder is not None:
                holder.make = maker
        if hasattr(job, "stores"):
            job.stores.make = maker
        report = Report(command.name)
        await Engine("async", EngineOptions(concurrency=8, max_in_flight_bytes=64 * MiB)).run(job, report)
        await command.finish(spec, job, report, completed=True)
    return report
