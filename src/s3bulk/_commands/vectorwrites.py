"""What the commands that write to S3 Vectors indexes share (vectors put, sync and delete): the
engine settings of a write, where bad rows are listed, the checks of the indexes and rates they
are given, and the time their writes take at the per-index limits."""

from __future__ import annotations

import os

from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError
from s3bulk._journal.local import private_directory, state_dir
from s3bulk._report import Report
from s3bulk._vectors.limits import time_at_limits

MiB = 1024**2
# A batch costs ~6 MB of the byte budget (its rows and their JSON), so 48 MiB keeps about eight
# PutVectors in flight: what a service that answers slowly needs to be kept busy (with 32 MiB,
# five, a load through 250 ms and 20 MB/s per connection took 24 s against 15 s), and what
# bounds memory when it answers slower still.
WRITE_ENGINE = EngineSpec(concurrency=16, max_attempts=8, max_in_flight_bytes=48 * MiB)


FORMATS = (None, "parquet", "npy", "jsonl")  # None: by each file's suffix


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


def default_rejects_path(job_id: str) -> str:
    """Next to the job's journal (so every run of a job appends to one list), or, for a job
    without a journal, in the current directory."""
    if not job_id:
        return os.path.abspath("s3bulk-rejects.jsonl")
    directory = state_dir()
    private_directory(directory)
    return str(directory / f"{job_id}.rejects.jsonl")
