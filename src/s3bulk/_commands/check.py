"""`check SRC DST`: compare two trees (prefixes or directories) and name what differs, is missing
at DST or is extra there, copying nothing (rclone's `check`); exit 1 if anything does.

It is sync's plan without sync's actions: the driver lists both sides in key order and merge-joins
them (`plan.diff`), and what it cannot settle from the listings (a local file against an ETag)
goes to the workers, which hash the file. Sizes always count; contents count as ETags (S3 to S3)
or as the file's MD5 against the ETag (the part size of a multipart ETag found as sync finds it).
An object whose ETag is no MD5 (SSE-KMS, SSE-C) against a local file cannot be proven equal: it
is named as "cannot tell". Nothing is journaled: a check is cheap to run again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.mover import Stores, url_of
from s3bulk._commands.sides import CheckItem, DiffBatch, Sides, SidesSpec, sides_match
from s3bulk._commands.transfer import Direction, TransferOptions, transfer_options, unchanged
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._errors import ItemError
from s3bulk._plan.diff import Entry, decide
from s3bulk._report import Failure, WorkerStats
from s3bulk._stores.routes import WHOLE_BODY_MAX
from s3bulk._urls import Location, parse_location


@dataclass(frozen=True, kw_only=True)
class CheckSpec(SidesSpec):
    command: ClassVar[str] = "check"


class Difference(NamedTuple):
    """What one name is at DST against SRC: "missing", "extra" or "differs" (with why)."""

    kind: str
    name: str
    size: int
    why: str = ""


class CheckCommand(Command):
    name: ClassVar[str] = "check"
    spec: ClassVar[type[Spec]] = CheckSpec
    journaled: ClassVar[bool] = False

    def python_bound(self, spec: Spec) -> bool:
        return True  # local files are hashed by the workers

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, CheckSpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        job = CheckJob(source, destination, settings, transfer_options(spec, settings, plan))
        await job.sides.read_inventories()
        return job

    def verb(self, job: Job) -> str:
        return "check"


@dataclass
class CheckJob:
    """The driver lists both sides and diffs them (`Sides`), by checksum; the workers settle what
    the listings cannot (`sides_match`) and name each difference as an item's failure."""

    source: Location
    destination: Location
    settings: AwsSettings
    options: TransferOptions
    sides: Sides = field(init=False)
    stores: Stores = field(init=False)
    preflight_requests: dict[str, int] = field(default_factory=dict, init=False)
    preflight_notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.sides = Sides(self.source, self.destination, self.settings, self.options)
        self.source, self.destination = self.sides.source, self.sides.destination
        self.stores = Stores(self.settings, self.options.concurrency * 2, self.options.spec.verify)

    @property
    def direction(self) -> Direction:
        return self.sides.direction

    def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        return self.sides.batches(stats, self._plan)

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        return iter(())  # nothing is journaled: a check is run again whole

    def _plan(self, chunk: list[tuple[Entry | None, Entry | None]]) -> DiffBatch:
        items: list[Any] = []
        problems: list[Failure] = []
        same = 0
        for source, destination in self.sides.in_scope(chunk):
            if source is None:  # the source's listing in full has no such name
                assert destination is not None
                extra = url_of(self.destination, destination.name)
                items.append(Difference("extra", extra, destination.size, "not at the source"))
                continue
            name = url_of(self.source, source.name)
            if source.problem:
                problems.append(Failure(name, "", source.problem, skipped=not source.refused))
            elif destination is None:
                items.append(Difference("missing", name, source.size, "not at the destination"))
            elif source.size != destination.size:
                why = f"sizes {source.size:,} and {destination.size:,}"
                items.append(Difference("differs", name, source.size, why))
            elif (decision := decide(source, destination, "checksum", self.sides.local_side)) == "same":
                same += 1
            elif decision == "check":  # the file's checksum, or both objects' (HEADs), decides
                etag = source.etag or destination.etag  # the S3 side's, when the other is a file
                try:
                    items.append(CheckItem(self.sides.transfer(source.relative, source.size, 0.0), etag))
                except ValueError as exc:  # a key no file may be named by (sync refuses it too)
                    problems.append(Failure(name, "", f"refused key: {exc}"))
            else:
                layouts = "-" in source.etag + destination.etag  # parts of other sizes: other ETags
                why = "ETags differ" + (" (or only their multipart layouts do)" if layouts else "")
                items.append(Difference("differs", name, source.size, why))
        return DiffBatch(tuple(items), same, tuple(problems))

    def cost(self, item: Any) -> int:
        """Nothing moves, but a file up to `WHOLE_BODY_MAX` is read whole to be hashed with others
        (`Storage.file_matches`): the byte budget bounds those reads."""
        if isinstance(item, CheckItem) and self.sides.local_side and item.transfer.size <= WHOLE_BODY_MAX:
            return item.transfer.size
        return 0

    def describe(self, item: Any) -> tuple[str, str, int]:
        if isinstance(item, Difference):
            return item.name, "", item.size
        transfer = item.transfer
        return (
            url_of(self.source, transfer.source),
            url_of(self.destination, transfer.destination),
            transfer.size,
        )

    def item_id(self, item: Any) -> str:
        return item.name if isinstance(item, Difference) else self.sides.item_id(item.transfer)

    # ---- worker side --------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self.stores.open(ctx)

    async def close(self, ctx: WorkerContext) -> None:
        await self.stores.close()

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        assert isinstance(descriptor, DiffBatch)
        yield self.sides.expand(descriptor, ctx, self.item_id)

    async def run(self, item: Any, ctx: WorkerContext) -> int | BatchOutcome:
        if isinstance(item, Difference):
            raise ItemError(f"{item.kind}: {item.why}", retryable=False)
        assert isinstance(item, CheckItem)
        same = await sides_match(item, self.sides, self.stores)
        if same is None and self.direction == "copy":
            raise ItemError(
                "differs: ETags differ (or only their multipart layouts do), and the objects keep no "
                "full-object checksum of one algorithm that could tell",
                retryable=False,
            )
        if same is None:
            raise ItemError(
                "cannot tell: the ETag is not an MD5 (SSE-KMS, SSE-C) and the object keeps no checksum",
                retryable=False,
            )
        if not same:
            raise ItemError(
                "differs: contents (the MD5 or checksum of one side is not the other's)", retryable=False
            )
        return unchanged(ctx, item.transfer.size)


COMMANDS = (CheckCommand(),)  # found by the registry (s3bulk._commands)
