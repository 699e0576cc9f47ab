"""The job-wide caps without a server: each worker keeps its share."""

from __future__ import annotations

from s3bulk._engine.worker import EngineOptions, TimedGate, _caps
from s3bulk._report import WorkerStats

MiB = 1024 * 1024


def test_each_worker_keeps_its_share() -> None:
    options = EngineOptions(workers=4, requests_per_second=100, bytes_per_second=40 * MiB)
    requests, transfer = _caps(options, WorkerStats())
    assert isinstance(requests, TimedGate) and isinstance(transfer, TimedGate)
    assert requests.bucket.rate == 25 and transfer.bucket.rate == 10 * MiB
    assert _caps(EngineOptions(), WorkerStats()) == (None, None)
