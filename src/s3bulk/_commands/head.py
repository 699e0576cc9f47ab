"""`head` (and `stat`): every attribute of one object, or of every object under a prefix, the
HEADs sent in parallel over a listing split into key ranges.

All a command is, in one module: the spec (what the user asked), the Command (how that becomes
a job) and the job (what a worker does with each object). The registry finds it by `COMMANDS`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, Job, WorkerContext
from s3bulk._engine.spec import EngineSpec
from s3bulk._report import WorkerStats
from s3bulk._sources.inventory import InventoryFile, Manifest, check_inventory, file_pages, load_inventory
from s3bulk._sources.listing import KeyRange, SingleObject, iter_range
from s3bulk._stores.attributes import described
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._stores.storage import Storage
from s3bulk._urls import S3Location, parse_s3

ENGINE = EngineSpec(engine="async", concurrency=32)  # HEADs are small: one process keeps up


@dataclass(frozen=True, kw_only=True)
class HeadSpec(Spec):
    command: ClassVar[str] = "head"
    target: str  # s3://bucket/key, or s3://bucket/prefix/ for every object below
    inventory: str | None = None  # an S3 Inventory of the bucket, in place of its listing
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        parse_s3(self.target)  # malformed: one line now
        check_inventory(self.inventory, self.target)

    def places(self) -> tuple[str, str]:
        return self.target, ""

    def s3_locations(self) -> tuple[str, ...]:
        return (self.target,)


class HeadCommand(Command):
    name: ClassVar[str] = "head"
    spec: ClassVar[type[Spec]] = HeadSpec
    journaled: ClassVar[bool] = False  # it changes nothing: run it again

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        assert isinstance(spec, HeadSpec)
        job = HeadJob(parse_s3(spec.target), settings)
        if spec.inventory is not None:
            job.manifest = await load_inventory(settings, spec.inventory, job.location.bucket)
        return job


@dataclass
class HeadJob:
    location: S3Location
    settings: AwsSettings
    partitioned_listing: bool | None = None  # key ranges where StartAfter is measured to seek
    preflight_requests: dict[str, int] = field(default_factory=dict)
    preflight_notes: list[str] = field(default_factory=list)
    manifest: Manifest | None = None  # --inventory's, checked: each data file one descriptor

    def __post_init__(self) -> None:
        self._storage: Storage | None = None

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_storage": None}

    # ---- driver side -------------------------------------------------------------------------
    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        if self.manifest is not None:  # no listing of the bucket
            for file in self.manifest.files:
                yield file
            return
        key = self.location.key
        yield KeyRange() if self.location.is_prefix else SingleObject(key)

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        return iter(())  # no journal: a head is run again whole

    # ---- worker side -------------------------------------------------------------------------
    async def open(self, ctx: WorkerContext) -> None:
        self._storage = Storage(self.settings, connections=64, retry=ctx.retrier)

    async def close(self, ctx: WorkerContext) -> None:
        if self._storage is not None:
            await self._storage.close()

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[ObjectInfo]]:
        assert self._storage is not None
        if isinstance(descriptor, SingleObject):  # HEAD it straight away: no listing needed
            yield [ObjectInfo(descriptor.key, 0, "", "")]
            return
        location = self.location
        if isinstance(descriptor, InventoryFile):
            async for objects in file_pages(self._storage, descriptor, location.key):
                ctx.stats.objects_listed += len(objects)
                yield objects
            return
        split = ctx.split if self.partitioned_listing is not False else None
        async for objects in iter_range(
            self._storage,
            location.bucket,
            location.key,
            descriptor,
            on_split=split,
            want_split=ctx.want_split,
            auto=self.partitioned_listing is None,
        ):
            ctx.stats.objects_listed += len(objects)
            yield objects

    async def run(self, item: ObjectInfo, ctx: WorkerContext) -> BatchOutcome:
        assert self._storage is not None
        url = f"s3://{self.location.bucket}/{item.key}"
        headers = await self._storage.head(self.location.bucket, item.key, checksums=True)
        found = described(headers)
        record = {"source": url, "size": found["size"], "attributes": found}
        return BatchOutcome([(item.key, found["size"], url)], [], (record,))

    def item_id(self, item: ObjectInfo) -> str:
        return item.key

    def cost(self, item: ObjectInfo) -> int:
        return 0

    def describe(self, item: ObjectInfo) -> tuple[str, str, int]:
        return f"s3://{self.location.bucket}/{item.key}", "", item.size


# What a HEAD answer holds, under the names users know from `aws s3api head-object`.
COMMANDS = (HeadCommand(),)  # found by the registry (s3bulk._commands)
