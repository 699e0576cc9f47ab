"""`sync`: make the destination hold what the source holds, transferring only what differs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from s3bulk.commands.base import JobPlan, Spec
from s3bulk.commands.copy import CopyCommand, CopySpec
from s3bulk.config import AwsSettings
from s3bulk.engine.job import Job
from s3bulk.errors import UsageError
from s3bulk.urls import parse_location

MODES = ("mtime", "size", "checksum")


@dataclass(frozen=True, kw_only=True)
class SyncSpec(CopySpec):
    command: ClassVar[str] = "sync"
    mode: str = "mtime"  # changed: sizes differ or the source is newer; "size"; "checksum"
    delete: bool = False  # also delete what the source lacks

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in MODES:
            raise UsageError(f"unknown sync mode {self.mode!r}: use mtime, size or checksum")


class SyncCommand(CopyCommand):
    name: ClassVar[str] = "sync"
    spec: ClassVar[type[Spec]] = SyncSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        from s3bulk.syncing import SyncJob
        from s3bulk.transfers import copy_options

        assert isinstance(spec, SyncSpec)
        source, destination = parse_location(spec.source), parse_location(spec.destination)
        options = copy_options(spec, settings, plan)
        job = SyncJob(source, destination, settings, options, mode=spec.mode, delete=spec.delete)  # type: ignore[arg-type]
        job.preflight_requests = await job.preflight()
        return job

    def verb(self, job: Job) -> str:
        return f"sync ({getattr(job, 'direction', '')})"
