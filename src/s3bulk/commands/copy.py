"""`cp` and `mv`: upload, download or server-side copy (mv then deletes each source that copied).

The spec is what the user asked for; the job (`s3bulk.transfers.CopyJob`) is loaded only when one
runs, so building a spec, or starting the CLI, imports none of the byte-moving code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from s3bulk.commands.base import Command, JobPlan, Spec, absolute, location, patterns
from s3bulk.config import AwsSettings
from s3bulk.engine.job import Job
from s3bulk.errors import UsageError
from s3bulk.urls import parse_location

MiB = 1024**2
GiB = 1024**3
MIN_PART = 5 * MiB  # S3's smallest part (but the last)


@dataclass(frozen=True, kw_only=True)
class CopySpec(Spec):
    command: ClassVar[str] = "cp"
    source: str
    destination: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    part_size: int = 8 * MiB
    multipart_threshold: int = 64 * MiB  # uploads and ranged downloads above this go in parts
    copy_multipart_threshold: int = 5 * GiB  # server-side copies above this use UploadPartCopy
    partitioned_listing: bool | None = None  # key ranges listed in parallel; None: decide
    follow_symlinks: bool = False
    guess_mime_type: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", location(self.source, "source"))
        object.__setattr__(self, "destination", location(self.destination, "destination"))
        object.__setattr__(self, "include", patterns(self.include, "include"))
        object.__setattr__(self, "exclude", patterns(self.exclude, "exclude"))
        parse_location(self.source), parse_location(self.destination)  # malformed: one line now
        if self.part_size < MIN_PART:
            raise UsageError("--part-size must be at least 5 MiB (the S3 minimum part size)")
        for name in ("multipart_threshold", "copy_multipart_threshold"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name.replace('_', '-')} cannot be negative")

    def places(self) -> tuple[str, str]:
        return self.source, self.destination

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(each for each in (self.destination, self.source) if each.startswith("s3://"))

    def absolute(self) -> CopySpec:
        return replace(self, source=absolute(self.source), destination=absolute(self.destination))

    def part_size_for_memory(self) -> int:
        return self.part_size

    def leaving_out(self, pattern: str) -> CopySpec:
        return replace(self, exclude=(*self.exclude, pattern))


@dataclass(frozen=True, kw_only=True)
class MoveSpec(CopySpec):
    command: ClassVar[str] = "mv"


class CopyCommand(Command):
    name: ClassVar[str] = "cp"
    spec: ClassVar[type[Spec]] = CopySpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        from s3bulk.transfers import CopyJob, copy_options

        assert isinstance(spec, CopySpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        job = CopyJob(source, destination, settings, copy_options(spec, settings, plan))
        job.preflight_requests = await job.preflight()
        return job

    def verb(self, job: Job) -> str:
        direction: str = getattr(job, "direction", "")
        return direction if self.name == "cp" else f"{self.name} ({direction})"


class MoveCommand(CopyCommand):
    name: ClassVar[str] = "mv"
    spec: ClassVar[type[Spec]] = MoveSpec
