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

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from s3bulk._commands.base import JobPlan, Spec
from s3bulk._commands.copy import copy_options, unchanged
from s3bulk._commands.sync import CheckItem, SyncBatch, SyncCommand, SyncJob, SyncSpec
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._errors import ItemError
from s3bulk._plan.diff import Entry, decide
from s3bulk._report import Failure
from s3bulk._stores.routes import WHOLE_BODY_MAX
from s3bulk._urls import Location, S3Location, parse_location


@dataclass(frozen=True, kw_only=True)
class CheckSpec(SyncSpec):
    command: ClassVar[str] = "check"
    mode: str = "checksum"


class Difference(NamedTuple):
    """What one name is at DST against SRC: "missing", "extra" or "differs" (with why)."""

    kind: str
    name: str
    size: int
    why: str = ""


class CheckCommand(SyncCommand):
    name: ClassVar[str] = "check"
    spec: ClassVar[type[Spec]] = CheckSpec
    journaled: ClassVar[bool] = False

    def python_bound(self, spec: Spec) -> bool:
        return True  # local files are hashed by the workers

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, CheckSpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        return CheckJob(source, destination, settings, copy_options(spec, settings, plan), mode="checksum")

    def verb(self, job: Job) -> str:
        return "check"


@dataclass
class CheckJob(SyncJob):
    async def preflight(self) -> dict[str, int]:
        return {}  # nothing is written: no bucket to check for it

    def _plan(self, chunk: list[tuple[Entry | None, Entry | None]]) -> SyncBatch:
        items: list[Any] = []
        problems: list[Failure] = []
        same = 0
        unlisted = self._unlisted
        for source, destination in chunk:
            if source is None:
                assert destination is not None
                if unlisted.covers(destination.relative):  # the source's side of it is not known
                    continue
                extra = _url(self.destination, destination.name)
                items.append(Difference("extra", extra, destination.size, "not at the source"))
                continue
            unlisted.saw(source)
            name = _url(self.source, source.name)
            if source.problem:
                problems.append(Failure(name, "", source.problem, skipped=not source.refused))
            elif destination is None:
                items.append(Difference("missing", name, source.size, "not at the destination"))
            elif source.size != destination.size:
                why = f"sizes {source.size:,} and {destination.size:,}"
                items.append(Difference("differs", name, source.size, why))
            elif (decision := decide(source, destination, "checksum", self._local_side)) == "same":
                same += 1
            elif decision == "check":  # the file's checksum, or both objects' (HEADs), decides
                etag = source.etag or destination.etag  # the S3 side's, when the other is a file
                items.append(CheckItem(self._transfer(source.relative, source.size, 0.0), etag))
            else:
                layouts = "-" in source.etag + destination.etag  # parts of other sizes: other ETags
                why = "ETags differ" + (" (or only their multipart layouts do)" if layouts else "")
                items.append(Difference("differs", name, source.size, why))
        return SyncBatch(tuple(items), same, tuple(problems))

    def cost(self, item: Any) -> int:
        """Nothing moves, but a file up to `WHOLE_BODY_MAX` is read whole to be hashed with others
        (`Storage.file_matches`): the byte budget bounds those reads."""
        if isinstance(item, CheckItem) and self._local_side and item.transfer.size <= WHOLE_BODY_MAX:
            return item.transfer.size
        return 0

    def describe(self, item: Any) -> tuple[str, str, int]:
        if isinstance(item, Difference):
            return item.name, "", item.size
        return super().describe(item)

    def item_id(self, item: Any) -> str:
        return item.name if isinstance(item, Difference) else super().item_id(item)

    async def run(self, item: Any, ctx: WorkerContext) -> int | BatchOutcome:
        if isinstance(item, Difference):
            raise ItemError(f"{item.kind}: {item.why}", retryable=False)
        assert isinstance(item, CheckItem)
        same = await self.sides_match(item)
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


def _url(location: Location, name: str) -> str:
    return f"s3://{location.bucket}/{name}" if isinstance(location, S3Location) else name


COMMANDS = (CheckCommand(),)  # found by the registry (s3bulk._commands)
