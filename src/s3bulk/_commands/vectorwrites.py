"""What the commands that write to S3 Vectors indexes share (vectors put, sync, copy, and delete's
notes): the engine settings of a write, where refused rows are listed, the put job built from a
spec's `VectorWrites` (a sync and a copy compose the put's writer, each with its own rows), and
the time and cost of the writes at the per-index limits."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from s3bulk._engine.spec import EngineSpec
from s3bulk._journal.local import private_directory, state_dir
from s3bulk._pricing import vectors_costs
from s3bulk._report import Report
from s3bulk._vectors.limits import time_at_limits

if TYPE_CHECKING:
    from s3bulk._commands.base import JobPlan, Spec
    from s3bulk._config import AwsSettings
    from s3bulk._sources.embeddings import EmbeddingSpec
    from s3bulk._vectors.indexes import IndexShape
    from s3bulk._vectors.job import PutVectorsJob

MiB = 1024**2
# A batch costs ~6 MB of the byte budget (its rows and their JSON), so 48 MiB keeps about eight
# PutVectors in flight: what a service that answers slowly needs to be kept busy (with 32 MiB,
# five, a load through 250 ms and 20 MB/s per connection took 24 s against 15 s), and what
# bounds memory when it answers slower still.
WRITE_ENGINE = EngineSpec(concurrency=16, max_attempts=8, max_in_flight_bytes=48 * MiB)


class Writes(Protocol):
    """A spec that writes vectors (`vectorspecs.VectorWrites` on a `Spec`)."""

    @property
    def vectors_per_second(self) -> float: ...
    @property
    def requests_per_second(self) -> float: ...
    @property
    def on_error(self) -> str: ...
    @property
    def rejects(self) -> str | None: ...
    @property
    def content_hash(self) -> bool: ...
    @property
    def engine(self) -> EngineSpec: ...
    @property
    def dry_run(self) -> bool: ...


def settle_rejects(command: Any, spec: Any, plan: JobPlan) -> Any:
    """A `Command.settle` for writers: the rejects file beside the job's journal, unless named."""
    return spec if spec.rejects else replace(spec, rejects=default_rejects_path(plan.job_id))


def put_job(
    spec: Writes,
    source: EmbeddingSpec | None,
    destination: tuple[str, tuple[str, ...]],
    settings: AwsSettings,
    shapes: dict[str, IndexShape],
    plan: JobPlan,
    **more: Any,
) -> PutVectorsJob:
    """The put job a spec's writes make into `destination` (bucket, indexes), from `source`
    (None: rows a copy lists), with `more` of `PutOptions` (a put's batch size, its files'
    own indexes)."""
    from s3bulk._vectors.job import PutOptions, PutVectorsJob

    assert spec.rejects is not None  # settled
    bucket, indexes = destination
    options = PutOptions(
        bucket=bucket,
        indexes=indexes,
        vectors_per_second=spec.vectors_per_second,
        requests_per_second=spec.requests_per_second,
        on_error=spec.on_error,
        rejects_path=spec.rejects,
        concurrency=spec.engine.concurrency,
        dry_run=spec.dry_run,
        content_hash=spec.content_hash,
        **more,
    )
    return PutVectorsJob(source, options, settings, shapes, workers=plan.workers)


def dry_run_note(report: Report, indexes: int, vectors_per_second: float, requests_per_second: float) -> str:
    """How long the writes a dry run counted (vectors put and deleted, in requests) take at the
    limits."""
    return time_at_limits(
        report.vectors_done + report.objects_deleted,
        report.objects_done,
        indexes,
        vectors_per_second,
        requests_per_second,
    )


def write_notes(report: Report, put: PutVectorsJob, spec: Spec) -> None:
    """What a put's (a sync's, a copy's) writes cost at the published prices and, before it runs
    (--dry-run), how long they take at the limits of the indexes it writes to."""
    dimension = max(shape.dimension for shape in put.shapes.values())
    report.notes.append(vectors_costs(report.vectors_done * 4 * dimension) + "; keys and metadata add theirs")
    if spec.dry_run:
        options = put.options
        report.notes.append(
            dry_run_note(
                report, len(options.indexes), options.vectors_per_second, options.requests_per_second
            )
        )


def default_rejects_path(job_id: str) -> str:
    """Next to the job's journal (so every run of a job appends to one list), or, for a job
    without a journal, in the current directory."""
    if not job_id:
        return os.path.abspath("s3bulk-rejects.jsonl")
    directory = state_dir()
    private_directory(directory)
    return str(directory / f"{job_id}.rejects.jsonl")
