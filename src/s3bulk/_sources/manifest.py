"""Manifests (`--files-from FILE|-`): the names a job works on, one per line, relative to its
source, instead of a listing or a walk. Read a chunk at a time as the job asks for work, so a
manifest of a hundred million lines costs what one chunk costs; a manifest read from stdin is
first copied into the state directory, so that a resume can read it again."""

from __future__ import annotations

import asyncio
import heapq
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from s3bulk._errors import ItemError, UsageError
from s3bulk._sources.listing import Lister, find_object
from s3bulk._stores.s3xml import ObjectInfo

MANIFEST_CHUNK = 1000  # names per work descriptor


def manifest_chunks(path: str, size: int = MANIFEST_CHUNK) -> Iterator[list[str]]:
    """The manifest's names in chunks: each line without its line ending; empty lines and lines
    starting with '#' are left out (as rclone's --files-from reads them)."""
    chunk: list[str] = []
    with open(path, encoding="utf-8", newline="") as lines:
        for line in lines:
            name = line.rstrip("\r\n")
            if not name or name.startswith("#"):
                continue
            chunk.append(name)
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


SORT_RUN = 200_000  # names sorted in memory at once: the rest wait in sorted runs on disk


def sorted_names(path: str) -> Iterator[str]:
    """The manifest's names in order, each once, with bounded memory: runs of SORT_RUN names are
    sorted and written to temporary files, then merged (what `sort` does)."""
    with tempfile.TemporaryDirectory(prefix="s3bulk-manifest-") as scratch:
        runs: list[str] = []
        names: list[str] = []
        for chunk in manifest_chunks(path):
            names.extend(chunk)
            if len(names) >= SORT_RUN:
                runs.append(_write_run(scratch, len(runs), names))
                names = []
        runs.append(_write_run(scratch, len(runs), names))
        files = [open(run, encoding="utf-8") for run in runs]  # noqa: SIM115 -- closed below
        try:
            last = None
            for line in heapq.merge(*files):
                name = line[:-1]
                if name != last:
                    yield name
                    last = name
        finally:
            for handle in files:
                handle.close()


def _write_run(scratch: str, number: int, names: list[str]) -> str:
    path = os.path.join(scratch, f"run-{number}")
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(name + "\n" for name in sorted(names))
    return path


def check_manifest(path: str, flag: str = "--files-from", holds: str = "one name per line") -> str:
    """The manifest's absolute path; one line if it cannot be read."""
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise UsageError(f"{flag} {path}: no such file ({holds}, or - for stdin)")
    try:
        with open(full, encoding="utf-8") as handle:
            handle.read(4096)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{flag} {path}: cannot read it as UTF-8 text: {exc}") from None
    return full


def spool_stdin(directory: Path) -> str:
    """stdin copied into a file of `directory` (the journals' own), for `--files-from -`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"manifest-{uuid.uuid4().hex[:12]}.txt"
    with open(path, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1024 * 1024)
    return str(path)


@dataclass(frozen=True)
class NamedObjects:
    """A work descriptor: a manifest's chunk of keys (full keys), found by the worker."""

    keys: tuple[str, ...]

    def __str__(self) -> str:
        return f"{len(self.keys)} named objects from {self.keys[0]}" if self.keys else "no objects"


FIND_IN_FLIGHT = 32  # a manifest's objects looked up at once, per descriptor


async def look_up(client: Lister, bucket: str, keys: tuple[str, ...]) -> list[ObjectInfo | ItemError]:
    """The objects a manifest names, each found by `find_object` (what a window selects by, and
    what a copy needs), FIND_IN_FLIGHT at a time, in the manifest's order: an ItemError where
    one is not there (not retryable) or could not be looked up."""
    gate = asyncio.Semaphore(FIND_IN_FLIGHT)

    async def find(key: str) -> ObjectInfo | ItemError:
        async with gate:
            try:
                return await find_object(client, bucket, key)
            except ItemError as error:
                return error

    return list(await asyncio.gather(*(find(key) for key in keys)))
