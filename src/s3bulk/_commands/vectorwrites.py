"""What the commands that write to S3 Vectors indexes share (vectors put, sync, delete, copy): the
engine settings of a write, where bad rows are listed, the options and checks of the rates they
write at, of the indexes and segments they are given, and the time their writes take at the
per-index limits."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError
from s3bulk._flags import option
from s3bulk._journal.local import private_directory, state_dir
from s3bulk._pricing import vectors_costs
from s3bulk._report import Report
from s3bulk._stores.vectors import MAX_SEGMENTS
from s3bulk._vectors.limits import REQUESTS_PER_SECOND, VECTORS_PER_SECOND, time_at_limits

if TYPE_CHECKING:
    from s3bulk._commands.base import Spec
    from s3bulk._vectors.job import PutVectorsJob

MiB = 1024**2
# A batch costs ~6 MB of the byte budget (its rows and their JSON), so 48 MiB keeps about eight
# PutVectors in flight: what a service that answers slowly needs to be kept busy (with 32 MiB,
# five, a load through 250 ms and 20 MB/s per connection took 24 s against 15 s), and what
# bounds memory when it answers slower still.
WRITE_ENGINE = EngineSpec(concurrency=16, max_attempts=8, max_in_flight_bytes=48 * MiB)


FORMATS = (None, "parquet", "npy", "jsonl")  # None: by each file's suffix


def _rate(text: str, flag: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        rate = 0.0
    if not rate > 0:
        raise UsageError(f"{flag} {text}: give a positive rate")
    return rate


def vectors_per_second_field() -> Any:
    """A spec's per-index vectors/s, with its option (declared here once for every writer)."""
    flag = option(
        "--vectors-per-second",
        help="Per index, shared with puts and deletes: the service's write limit.",
        read=_rate,
        shown=lambda value: f"{value:g}",
        panel="speed",
    )
    return dataclasses.field(default=VECTORS_PER_SECOND, metadata=flag)


def requests_per_second_field() -> Any:
    """A spec's per-index PutVectors+DeleteVectors requests/s, with its option."""
    flag = option(
        "--requests-per-second",
        help="Per index: PutVectors and DeleteVectors together.",
        read=_rate,
        shown=lambda value: f"{value:g}",
        panel="speed",
    )
    return dataclasses.field(default=REQUESTS_PER_SECOND, metadata=flag)


def read_segments(text: str, flag: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_SEGMENTS:
        raise UsageError(f"{flag} {text}: ListVectors lists an index in 1 to {MAX_SEGMENTS} segments")
    return count


def segments_field() -> Any:
    """A spec's count of ListVectors segments listed side by side, with its option."""
    flag = option(
        "--segments",
        help="ListVectors segments listed side by side, per index (1-16).",
        read=read_segments,
        panel="speed",
    )
    return dataclasses.field(default=MAX_SEGMENTS, metadata=flag)


def check_format(format: str | None) -> None:
    if format not in FORMATS:
        raise UsageError(f"--format {format!r}: use parquet, npy or jsonl")


def check_targets(indexes: tuple[str, ...], vectors_per_second: float, requests_per_second: float) -> None:
    """Each index named once (several shard the keys by a hash), and rates that are rates."""
    if not indexes or len(set(indexes)) != len(indexes):
        raise UsageError("--index: name each index once (several shard the keys by a hash of the key)")
    for flag, rate in (
        ("--vectors-per-second", vectors_per_second),
        ("--requests-per-second", requests_per_second),
    ):
        if not rate > 0:
            raise UsageError(f"{flag} must be positive")


def dry_run_note(report: Report, indexes: int, vectors_per_second: float, requests_per_second: float) -> str:
    """How long the writes a dry run counted (vectors in requests) take at the limits."""
    return time_at_limits(
        report.vectors_done, report.objects_done, indexes, vectors_per_second, requests_per_second
    )


def write_notes(report: Report, put: PutVectorsJob, spec: Spec) -> None:
    """What a put's (or copy's) writes cost at the published prices and, before it runs
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
