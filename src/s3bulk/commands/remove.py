"""`rm`: delete one object, a prefix, or the keys a glob matches, 1,000 keys per request."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from s3bulk.commands.base import Command, JobPlan, Spec, patterns
from s3bulk.config import AwsSettings
from s3bulk.engine.job import Job
from s3bulk.engine.spec import EngineSpec
from s3bulk.errors import UsageError
from s3bulk.urls import parse_s3

ENGINE = EngineSpec(concurrency=16)  # DeleteObjects requests in flight per worker


@dataclass(frozen=True, kw_only=True)
class RemoveSpec(Spec):
    command: ClassVar[str] = "rm"
    target: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    partitioned_listing: bool | None = None
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        if not isinstance(self.target, str):
            raise TypeError(f"target must be an s3:// URL (str), not {type(self.target).__name__}")
        object.__setattr__(self, "include", patterns(self.include, "include"))
        object.__setattr__(self, "exclude", patterns(self.exclude, "exclude"))
        location = parse_s3(self.target)
        if not location.key and not self.target.rstrip().endswith("/"):
            raise UsageError(  # emptying a bucket must be spelled out
                f"refusing to delete every object in s3://{location.bucket} from {self.target!r}: "
                f"say s3://{location.bucket}/ (or s3://{location.bucket}/*) if that is what you want"
            )

    def places(self) -> tuple[str, str]:
        return self.target, ""

    def s3_locations(self) -> tuple[str, ...]:
        return (self.target,)

    def leaving_out(self, pattern: str) -> RemoveSpec:
        return replace(self, exclude=(*self.exclude, pattern))


class RemoveCommand(Command):
    name: ClassVar[str] = "rm"
    spec: ClassVar[type[Spec]] = RemoveSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        from s3bulk.plan.filters import Filters
        from s3bulk.removal import RemoveJob, RemoveOptions
        from s3bulk.sources.listing import partitioning_pays

        assert isinstance(spec, RemoveSpec)
        listing = spec.partitioned_listing
        options = RemoveOptions(
            Filters(spec.include, spec.exclude),
            spec.dry_run,
            spec.engine.concurrency,
            partitioning_pays(settings.resolved_endpoint) if listing is None else listing,
        )
        return RemoveJob(parse_s3(spec.target), settings, options)  # type: ignore[return-value]
