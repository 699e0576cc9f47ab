"""`vectors export`: every vector of one or more indexes into Parquet files, listed in parallel
segments, resumable. The job (`s3bulk._vectors.export`) is loaded when one runs (numpy,
pyarrow)."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, absolute, location, patterns
from s3bulk._commands.vectorspecs import KEEP_HASH, bucket_field, indexes_field, segments_field
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._flags import argument, sized
from s3bulk._report import Report
from s3bulk._stores.vectors import MAX_SEGMENTS

MiB = 1024**2
# Segments list side by side; parts of 16 MiB of vectors each (4,096 of 1,024 values) are
# written as they fill, so memory holds about a part and a page per segment (16 of each, at
# most), whatever the index's size; the budget lets a few parts per segment wait to be written.
ENGINE = EngineSpec(concurrency=16, max_attempts=8, max_in_flight_bytes=256 * MiB)


@dataclass(frozen=True, kw_only=True)
class ExportVectorsSpec(Spec):
    command: ClassVar[str] = "vectors-export"
    concurrency_help: ClassVar[str] = "Parts written at once per worker."
    destination: str = dataclasses.field(
        metadata=argument("A new or empty directory: INDEX/sSS-NNNNNN.parquet files go in it.")
    )
    bucket: str = bucket_field()
    indexes: tuple[str, ...] = indexes_field()
    segments: int = segments_field()
    part_size: int = dataclasses.field(
        default=16 * MiB,
        metadata=sized("--part-size", help="Vectors' bytes per Parquet file (float32 values x 4)."),
    )
    content_hash: bool = dataclasses.field(default=False, metadata=KEEP_HASH)
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors export")
        object.__setattr__(self, "indexes", patterns(self.indexes, "index"))
        object.__setattr__(self, "destination", location(self.destination, "destination"))
        if not self.indexes or len(set(self.indexes)) != len(self.indexes):
            raise UsageError("--index: name each index once")
        if self.destination.startswith("s3://"):
            raise UsageError("vectors export writes to a local directory; copy it on with s3bulk cp")
        if not 1 <= self.segments <= MAX_SEGMENTS:
            raise UsageError(f"segments={self.segments}: ListVectors lists an index in 1 to {MAX_SEGMENTS}")
        if self.part_size < MiB:
            raise UsageError(f"--part-size {self.part_size}: at least 1MiB")

    def places(self) -> tuple[str, str]:
        return "/".join((self.bucket, *self.indexes)), self.destination

    def needs_credentials(self) -> bool:
        return True

    def absolute(self) -> ExportVectorsSpec:
        return replace(self, destination=absolute(self.destination))


class ExportVectorsCommand(Command):
    name: ClassVar[str] = "vectors-export"
    spec: ClassVar[type[Spec]] = ExportVectorsSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The job, after reading each index's shape (a wrong name stops here) and claiming the
        destination for this job: a directory another export wrote is refused (resume that job,
        or choose another), so no two listings mix in one place."""
        from s3bulk._vectors.export import ExportOptions, ExportVectorsJob
        from s3bulk._vectors.indexes import index_shapes

        assert isinstance(spec, ExportVectorsSpec)
        requests: collections.Counter[str] = collections.Counter()
        shapes = await index_shapes(settings, spec.bucket, spec.indexes, requests)
        claim(spec.destination, plan.job_id)
        options = ExportOptions(
            spec.bucket, spec.indexes, spec.destination, spec.segments, spec.part_size, spec.content_hash
        )
        job = ExportVectorsJob(options, settings, shapes)
        job.preflight_requests = dict(requests)
        return job

    def verb(self, job: Job) -> str:
        return "vectors export"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """A whole export says so in its marker: nothing is left to resume there."""
        assert isinstance(spec, ExportVectorsSpec)
        if completed and not report.failures:
            mark(spec.destination, report.job_id, finished=True)


def claim(destination: str, job_id: str) -> None:
    """Mark `destination` as this job's, or refuse it: it holds another export's files, or
    anything else."""
    from s3bulk._vectors.export import MARKER

    directory = Path(destination)
    marker = directory / MARKER
    if marker.exists():
        written = json.loads(marker.read_text())
        owner = written.get("job", "")
        if job_id and owner == job_id:
            return  # this job's own, resumed
        if written.get("finished"):
            raise UsageError(f"{destination} holds a finished export: export into a new or empty directory")
        if not owner:
            raise UsageError(
                f"{destination} holds an unfinished export that kept no journal (journal=False): "
                "export into a new or empty directory"
            )
        raise UsageError(
            f"{destination} holds an unfinished export: resume it (s3bulk vectors export --resume {owner}), "
            "or export into a new or empty directory"
        )
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"{destination} is not empty: export into a new or empty directory")
    directory.mkdir(parents=True, exist_ok=True)
    mark(destination, job_id)


def mark(destination: str, job_id: str, *, finished: bool = False) -> None:
    """The destination's marker: which job writes there, and whether it finished."""
    from s3bulk._vectors.export import MARKER

    marker = Path(destination) / MARKER
    temporary = marker.with_name(f"{MARKER}.partial")
    temporary.write_text(json.dumps({"job": job_id, "finished": finished}) + "\n")
    os.replace(temporary, marker)


COMMANDS = (ExportVectorsCommand(),)  # found by the registry (s3bulk._commands)
