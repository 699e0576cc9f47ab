"""`gather`: one selection out of many chunked HDF5 files, fetched as concurrent range reads.

It runs through the same runner and engine as every command, without a journal: a gather is
rerun whole (its result is one file, written via a temporary name and a rename).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, replace
from typing import ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, absolute, location, locations
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._report import Report

MiB = 1024**2
ENGINE = EngineSpec(engine="async", concurrency=64, max_in_flight_bytes=256 * MiB)


@dataclass(frozen=True, kw_only=True)
class GatherSpec(Spec):
    command: ClassVar[str] = "gather"
    sources: tuple[str, ...]  # URLs, s3://bucket/wtk/*.h5 globs, prefixes or local paths
    dataset: str
    selection: str = ":"  # numpy-style, e.g. ":,1234"
    output: str = "out.npy"  # .npy, .csv or .parquet
    combine: str = "concat"  # or "stack": a new first axis, one entry per file
    axis: int = 0
    scale: bool = False  # divide by each file's scale_factor
    cache: bool = True
    cache_dir: str | None = None  # None: ~/.cache/s3bulk/h5index
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("arrays", "s3bulk gather")
        from s3bulk._arrays.output import output_format

        object.__setattr__(self, "sources", locations(self.sources, "sources"))
        object.__setattr__(self, "output", location(self.output, "output"))
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", location(self.cache_dir, "cache_dir"))
        output_format(self.output)
        if self.combine not in ("concat", "stack"):
            raise UsageError(f"unknown combine {self.combine!r}: use concat or stack")
        if self.engine.engine == "ray":
            raise UsageError(
                "gather writes into one memory-mapped file on this machine, so --engine ray does not "
                "apply: use async or hybrid"
            )

    def places(self) -> tuple[str, str]:
        return " ".join(self.sources), self.output

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(each for each in self.sources if each.startswith("s3://"))

    def absolute(self) -> GatherSpec:
        return replace(self, output=absolute(self.output))


class GatherCommand(Command):
    name: ClassVar[str] = "gather"
    spec: ClassVar[type[Spec]] = GatherSpec
    journaled: ClassVar[bool] = False

    def python_bound(self, spec: Spec) -> bool:
        return True  # chunks are decompressed and selected in the workers

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        from s3bulk._arrays.gather import GatherOptions, partial_path, plan_gather
        from s3bulk._arrays.index import IndexCache
        from s3bulk._arrays.output import check_tabular, output_format

        assert isinstance(spec, GatherSpec)
        suffix = output_format(spec.output)
        options = GatherOptions(
            combine=spec.combine,
            axis=spec.axis,
            scale=spec.scale,
            cache_dir=(spec.cache_dir or str(IndexCache.default_directory())) if spec.cache else None,
        )
        partial = partial_path(spec.output)
        try:
            planned = await plan_gather(
                list(spec.sources),
                spec.dataset,
                spec.selection,
                partial,
                settings,
                options,
                check_shape=lambda shape: check_tabular(suffix, shape),
            )
        except BaseException:
            _remove(partial)
            raise
        job = planned.job
        job.preflight_requests, job.preflight_notes = planned.requests, planned.notes
        job.planned = planned
        return job

    def verb(self, job: Job) -> str:
        return "gather"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """Publish the output (or leave nothing behind): the file h5py reads itself, the .npy
        turned into .csv/.parquet if asked, renamed into place."""
        from s3bulk._arrays.gather import finish_gather
        from s3bulk._arrays.job import GatherJob
        from s3bulk._arrays.output import publish

        assert isinstance(spec, GatherSpec) and isinstance(job, GatherJob)
        planned = job.planned
        partial = planned.job.output_path
        try:
            if completed:
                gathered = await finish_gather(planned, spec.dataset, job.settings, report)
                publish(partial, spec.output, gathered.labels)
                report.notes.insert(0, f"wrote {spec.output}: shape {gathered.shape}, {gathered.dtype}")
        finally:
            _remove(partial)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


COMMANDS = (GatherCommand(),)  # found by the registry (s3bulk._commands)
