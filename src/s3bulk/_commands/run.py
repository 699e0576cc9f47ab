"""`run FILE|-`: a file of commands, one per line (`cp SRC DST`, `mv SRC DST`, `rm URL`, as
`s5cmd run` takes them), run as one job: one journal (a resume skips the lines that were done),
one report, the lines in flight together on the engine.

Each line names one object or one file (a prefix or a glob is refused by line number: for those,
`s3bulk cp` lists in parallel). The driver reads the file a chunk at a time; a worker parses its
chunk, looks up the sizes the transfers need (a HEAD per object, a stat per file), and runs each
line with the storage seam's own operations: download, upload, server-side copy, batched delete.

A file of commands is text a person writes, and words a shell would split: s3bulk never writes
one from keys, which may hold a newline, a quote, anything but NUL (a key `x\nrm s3://b/VICTIM`
quoted into such a line split it, and its second line ran). What s3bulk hands over itself
(`s3bulk.fsspec`'s calls over many paths) is a file of items (`RunSpec.items`): one JSON array
`[verb, source, destination]` per line, written with every character past ASCII escaped, so no
key can end a line or be read as anything but itself; each place is taken exactly as named.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, NamedTuple

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.deletes import BatchDeleter
from s3bulk._commands.transfer import content_type
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._errors import ItemError, S3Error
from s3bulk._report import Failure, WorkerStats
from s3bulk._sources.manifest import check_manifest
from s3bulk._stores.attributes import NO_ATTRIBUTES
from s3bulk._stores.multipart import file_version
from s3bulk._stores.routes import Parts, bytes_held, upload_held
from s3bulk._stores.storage import Storage
from s3bulk._urls import local_target_path, parse_s3

MiB = 1024 * 1024
LINES_PER_CHUNK = 1000
VERBS = ("cp", "mv", "rm")


@dataclass(frozen=True, kw_only=True)
class RunSpec(Spec):
    command: ClassVar[str] = "run"
    commands_file: str  # the file of commands (stdin is first copied beside the journals)
    items: bool = False  # the file holds items ([verb, source, destination] in JSON), not commands
    part_size: int = Parts.size
    multipart_threshold: int = Parts.threshold

    def __post_init__(self) -> None:
        checked = check_manifest(self.commands_file, "s3bulk run", "one command per line")
        object.__setattr__(self, "commands_file", checked)

    def places(self) -> tuple[str, str]:
        return self.commands_file, ""

    def s3_locations(self) -> tuple[str, ...]:
        return ("s3://",)  # its lines name them: credentials are needed

    def part_size_for_memory(self) -> int:
        return self.part_size


class Line(NamedTuple):
    """One command of the file: its line number (its journal id), verb and places."""

    number: int
    verb: str
    source: str
    destination: str = ""
    size: int = 0  # found by the worker (HEAD, stat) before the line runs
    etag: str = ""
    mtime: float = 0.0
    exact: bool = False  # an item's: the destination is where it lands, never a directory to go in


@dataclass(frozen=True)
class Lines:
    """A work descriptor: a chunk of the file, (line number, text)."""

    lines: tuple[tuple[int, str], ...]

    def __str__(self) -> str:
        return f"lines {self.lines[0][0]}-{self.lines[-1][0]}" if self.lines else "no lines"


def parse_line(number: int, text: str) -> Line:
    """One line as a Line; ValueError names what is wrong with it."""
    words = shlex.split(text)
    verb, places = words[0], words[1:]
    if verb not in VERBS:
        raise ValueError(f"{verb!r} is not a command run takes: use {', '.join(VERBS)}")
    if any(place.startswith("-") for place in places):
        raise ValueError("options go on `s3bulk run` itself, not on its lines")
    wanted = 1 if verb == "rm" else 2
    if len(places) != wanted:
        raise ValueError(
            f"{verb} takes {wanted} location{'s' if wanted > 1 else ''}, this line has {len(places)}"
        )
    if places[0].endswith("/") or any(char in places[0] for char in "*?["):
        raise ValueError("one object or file per line: for a prefix or a glob use s3bulk cp/rm")
    if verb == "rm" and not places[0].startswith("s3://"):
        raise ValueError("rm removes objects: give s3://bucket/key")
    if verb != "rm" and not any(place.startswith("s3://") for place in places):
        raise ValueError("both places are local: run copies to, from or within S3")
    return Line(number, verb, places[0], places[1] if len(places) > 1 else "")


ITEM_VERBS = ("cp", "mv")


def item(verb: str, source: str, destination: str) -> str:
    """One line of a file of items (`RunSpec.items`): the JSON array, ASCII only, so that a
    newline, a carriage return or a line separator in a key is written as an escape."""
    return json.dumps([verb, source, destination], ensure_ascii=True) + "\n"


def parse_item(number: int, text: str) -> Line:
    """One line of a file of items as a Line; ValueError names what is wrong with it. Nothing in
    it is split, unquoted or read as a prefix or a glob: each place is the one named."""
    try:
        verb, source, destination = json.loads(text)
    except ValueError:
        raise ValueError("not an item: one JSON array [verb, source, destination] per line") from None
    if verb not in ITEM_VERBS:
        raise ValueError(f"{verb!r} is not a verb of an item: use {', '.join(ITEM_VERBS)}")
    places = (source, destination)
    if not all(isinstance(place, str) and place and "\x00" not in place for place in places):
        raise ValueError("an item names two places, each a non-empty text without NUL")
    if not any(place.startswith("s3://") for place in places):
        raise ValueError("both places are local: run copies to, from or within S3")
    return Line(number, verb, source, destination, exact=True)


class RunCommand(Command):
    name: ClassVar[str] = "run"
    spec: ClassVar[type[Spec]] = RunSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, RunSpec)
        parts = Parts(spec.part_size, 4, spec.multipart_threshold)
        return RunJob(settings, spec.commands_file, parts, spec.dry_run, items=spec.items)

    def verb(self, job: Job) -> str:
        return "run"


@dataclass
class RunJob:
    settings: AwsSettings
    commands_file: str
    parts: Parts
    dry_run: bool = False
    items: bool = False  # the file's lines are items (`parse_item`), not commands
    preflight_requests: dict[str, int] = field(default_factory=dict)
    preflight_notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._storage: Storage | None = None
        self._deleters: dict[str, BatchDeleter] = {}

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"_storage": None, "_deleters": {}}

    # ---- driver side -------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        chunk: list[tuple[int, str]] = []
        with open(self.commands_file, encoding="utf-8") as lines:
            for number, text in enumerate(lines, start=1):
                text = text.strip()
                if text and not text.startswith("#"):
                    chunk.append((number, text))
                if len(chunk) >= LINES_PER_CHUNK:
                    yield Lines(tuple(chunk))
                    chunk = []
                    await asyncio.sleep(0)
        if chunk:
            yield Lines(tuple(chunk))

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        wanted = {int(item_id) for batch in rows for item_id, _ in batch}
        with open(self.commands_file, encoding="utf-8") as lines:
            found = tuple(
                (number, text.strip()) for number, text in enumerate(lines, start=1) if number in wanted
            )
        if found:
            yield Lines(found)

    # ---- worker side -------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._storage = Storage(self.settings, connections=128, retry=ctx.retrier)

    async def close(self, ctx: WorkerContext) -> None:
        if self._storage is not None:
            await self._storage.close()

    @property
    def storage(self) -> Storage:
        assert self._storage is not None, "the job is not open in this worker"
        return self._storage

    async def expand(self, descriptor: Lines, ctx: WorkerContext) -> AsyncIterator[list[Line]]:
        stats = ctx.stats
        parsed = []
        parse = parse_item if self.items else parse_line
        for number, text in ctx.drop_done(list(descriptor.lines), lambda entry: str(entry[0])):
            try:
                parsed.append(parse(number, text))
            except ValueError as exc:
                stats.objects_failed += 1
                stats.failures.append(Failure(f"line {number}: {text}", "", str(exc)))
        gate = asyncio.Semaphore(32)

        async def sized(line: Line) -> Line | None:
            async with gate:
                try:
                    return await self._sized(line)
                except (ItemError, OSError) as exc:
                    stats.objects_failed += 1
                    reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
                    stats.failures.append(
                        Failure(line.source, line.destination, reason, item_id=str(line.number))
                    )
                    return None

        lines = [line for line in await asyncio.gather(*map(sized, parsed)) if line is not None]
        stats.objects_listed += len(lines)
        stats.bytes_listed += sum(line.size for line in lines)
        yield lines

    async def _sized(self, line: Line) -> Line:
        """The line with the size (ETag, time) of what it moves: a HEAD or a stat."""
        if line.verb == "rm":
            return line
        if line.source.startswith("s3://"):
            where = parse_s3(line.source)
            try:
                head = await self.storage.head(where.bucket, where.key)
            except S3Error as error:
                if error.status == 404:
                    raise ItemError(f"no such object: {line.source}", retryable=False) from None
                raise
            return line._replace(size=int(head.get("content-length") or 0), etag=head.get("etag", ""))
        found = os.stat(line.source)
        return line._replace(size=found.st_size, mtime=found.st_mtime)

    async def run(self, item: Line, ctx: WorkerContext) -> int | BatchOutcome:
        if self.dry_run:
            return item.size
        if item.verb == "rm":
            await self._remove(item.source)
            ctx.stats.objects_deleted += 1
            return 0
        moved, version = await self._copy(item)
        if item.verb == "mv":
            try:
                await self._remove(item.source, version)
            except (ItemError, OSError) as exc:
                why = exc.strerror if isinstance(exc, OSError) else str(exc)
                raise ItemError(f"copied, but the source was not deleted: {why}", retryable=False) from None
            ctx.stats.objects_deleted += 1
        return moved

    async def _copy(self, line: Line) -> tuple[int, str | tuple[int, ...]]:
        """The bytes a line moved, and the version of its source they are (an object's ETag, a
        file's `file_version`): mv deletes that version only."""
        source, destination = line.source, landing(line)
        if not destination.startswith("s3://"):  # a download
            where = parse_s3(source)
            got = await self.storage.download(
                where.bucket, where.key, destination, line.size, 0.0, self.parts, line.etag
            )
            return got.written, got.etag or line.etag
        there = parse_s3(destination)
        key = there.key
        if not source.startswith("s3://"):  # an upload
            version = file_version(source)
            attributes = NO_ATTRIBUTES.with_content_type(content_type(source))
            return await self.storage.upload(source, there.bucket, key, attributes, self.parts), version
        where = parse_s3(source)
        copy_parts = replace(self.parts, threshold=5 * 1024 * MiB)
        copied = await self.storage.copy(
            where.bucket, where.key, there.bucket, key, size=line.size, etag=line.etag, parts=copy_parts
        )
        return line.size, copied.etag

    async def _remove(self, place: str, version: str | tuple[int, ...] = "") -> None:
        """rm's delete of what a line names; mv's of its source, only while it is the version
        moved (`version`): what another writer wrote there since is kept."""
        if not place.startswith("s3://"):
            if version and file_version(place) != version:
                raise ItemError(
                    "it changed after it was read (the copy holds the version before)", retryable=False
                )
            os.unlink(place)
            return
        where = parse_s3(place)
        deleter = self._deleters.get(where.bucket)
        if deleter is None:
            deleter = self._deleters[where.bucket] = BatchDeleter(self.storage, where.bucket)
        await deleter.delete(where.key, version if isinstance(version, str) else "")

    def item_id(self, item: Line) -> str:
        return str(item.number)

    def cost(self, item: Line) -> int:
        if (
            self.dry_run
            or item.verb == "rm"
            or (item.source.startswith("s3://") and item.destination.startswith("s3://"))
        ):
            return 0  # nothing passes through: a delete, a server-side copy
        if item.source.startswith("s3://"):  # a download: a body streamed into its file is not held whole
            return bytes_held(parse_s3(item.source).key, item.size, item.etag, self.parts)
        return upload_held(parse_s3(item.destination).key, item.size, self.parts)  # an upload

    def describe(self, item: Line) -> tuple[str, str, int]:
        return item.source, item.destination, item.size

    def record(self, item: Line) -> dict[str, Any]:
        """The line as done: its verb, and where the object landed (a prefix or a directory
        given as the destination gets the source's name)."""
        landed = "" if item.verb == "rm" else landing(item)
        return {"source": item.source, "destination": landed, "size": item.size, "verb": item.verb}


def landing(line: Line) -> str:
    """Where a cp or mv line puts its object: the destination, or the source's name under it
    when it is a prefix (ends in /) or a directory (an item's: the destination, always)."""
    destination = line.destination
    if line.exact:
        return destination
    if not destination.startswith("s3://"):
        if destination.endswith(("/", os.sep)) or os.path.isdir(destination):
            return local_target_path(destination, os.path.basename(parse_s3(line.source).key))
        return destination
    there = parse_s3(destination)
    if there.key and not there.key.endswith("/"):
        return destination
    return f"s3://{there.bucket}/{there.key}{os.path.basename(line.source)}"


COMMANDS = (RunCommand(),)  # found by the registry (s3bulk._commands)
