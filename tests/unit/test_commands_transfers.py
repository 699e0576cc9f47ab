"""cp, mv and sync as jobs (`_commands/copy.py`, `sync.py`, `mover.py`, `sides.py`), run by the
engine on an in-memory store (`memory.py`): what each deletes, copies and leaves, without a
server. The end-to-end promises stay with the real servers' tests."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memory import MemoryS3

from s3bulk._commands.base import JobPlan
from s3bulk._commands.copy import CopyJob, CopySpec
from s3bulk._commands.sync import SyncJob, SyncSpec
from s3bulk._commands.transfer import transfer_options
from s3bulk._config import AwsSettings
from s3bulk._engine.driver import Engine
from s3bulk._engine.worker import EngineOptions
from s3bulk._report import Report
from s3bulk._urls import parse_location

MiB = 1024**2


def run(job: Any, s3: MemoryS3) -> Report:
    """The job through the async engine, its storages (the driver's too) the in-memory ones."""
    job.mover.stores.make = s3.storage()
    if hasattr(job, "sides"):
        job.sides.make = s3.storage()
    engine = Engine("async", EngineOptions(concurrency=8, max_in_flight_bytes=64 * MiB))
    return asyncio.run(engine.run(job, Report("test")))


PLAN = JobPlan("", 1, 64 * MiB)


def copy_job(source: str, destination: str, *, delete_source: bool = False, **choices: Any) -> CopyJob:
    """The job `cp` (or with `delete_source` `mv`) builds from a spec of these choices."""
    spec = CopySpec(source=source, destination=destination, partitioned_listing=False, **choices)
    options = transfer_options(spec, AwsSettings(), PLAN, delete_source=delete_source)
    return CopyJob(parse_location(source), parse_location(destination), AwsSettings(), options)


def test_mv_deletes_only_the_sources_whose_copy_succeeded() -> None:
    s3 = MemoryS3()
    for name in "abcde":
        s3.put("src", f"p/{name}", name.encode() * 10)
    s3.refuse[("dst", "q/c")] = "AccessDenied: a bucket policy on this key"
    report = run(copy_job("s3://src/p/", "s3://dst/q/", delete_source=True), s3)
    assert (report.objects_done, report.objects_failed, report.objects_deleted) == (4, 1, 4)
    assert sorted(s3.buckets["src"]) == ["p/c"]  # kept: its copy failed
    assert sorted(s3.buckets["dst"]) == ["q/a", "q/b", "q/d", "q/e"]
    assert s3.buckets["dst"]["q/a"] == b"a" * 10


def test_a_source_whose_delete_fails_is_the_item_s_failure_not_a_silent_success() -> None:
    s3 = MemoryS3()
    s3.put("src", "p/a", b"a")
    s3.refuse[("src", "p/a")] = "AccessDenied: delete not allowed"
    report = run(copy_job("s3://src/p/", "s3://dst/q/", delete_source=True), s3)
    assert (report.objects_done, report.objects_failed, report.objects_deleted) == (0, 1, 0)
    assert "copied, but the source was not deleted" in report.failures[0].reason
    assert s3.buckets["src"] == {"p/a": b"a"} and s3.buckets["dst"] == {"q/a": b"a"}


def test_no_clobber_leaves_what_is_there_and_counts_it_unchanged() -> None:
    s3 = MemoryS3()
    s3.put("src", "p/a", b"new")
    s3.put("src", "p/b", b"new")
    s3.put("dst", "q/a", b"old")
    report = run(copy_job("s3://src/p/", "s3://dst/q/", no_clobber=True), s3)
    assert (report.objects_done, report.objects_unchanged) == (1, 1)
    assert s3.buckets["dst"] == {"q/a": b"old", "q/b": b"new"}
    assert ("COPY", "dst", "q/a") not in s3.requests


def test_a_download_lands_each_object_under_the_directory(tmp_path: Path) -> None:
    s3 = MemoryS3()
    s3.put("src", "p/a.txt", b"alpha")
    s3.put("src", "p/d/b.txt", b"beta")
    s3.put("src", "p/../up.txt", b"would escape")
    report = run(copy_job("s3://src/p/", f"{tmp_path}/out/"), s3)
    assert (report.objects_done, report.objects_failed) == (2, 1)
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"alpha"
    assert (tmp_path / "out" / "d" / "b.txt").read_bytes() == b"beta"
    assert not (tmp_path / "up.txt").exists()


def test_sync_delete_copies_what_differs_and_deletes_what_the_source_lacks() -> None:
    s3 = MemoryS3()
    for key, body in {"p/same": b"1", "p/changed": b"22", "p/new": b"3"}.items():
        s3.put("src", key, body)
    for key, body in {"q/same": b"1", "q/changed": b"1", "q/extra": b"x"}.items():
        s3.put("dst", key, body)
    spec = SyncSpec(
        source="s3://src/p/", destination="s3://dst/q/", partitioned_listing=False, mode="size", delete=True
    )
    options = transfer_options(spec, AwsSettings(), PLAN, max_delete=spec.max_delete)
    places = parse_location(spec.source), parse_location(spec.destination)
    job = SyncJob(*places, AwsSettings(), options, mode="size", delete=True)
    report = run(job, s3)
    assert s3.buckets["dst"] == {"q/same": b"1", "q/changed": b"22", "q/new": b"3"}
    assert (report.objects_unchanged, report.objects_deleted) == (1, 1)
    assert ("COPY", "dst", "q/same") not in s3.requests


def test_a_listing_that_never_waits_does_not_run_ahead_of_the_copies() -> None:
    """Pages a listing hands back to idle workers (`ObjectBatch`) stop once the driver's queue
    holds one: from a store that answers without waiting (this one, or a cache), the worker
    never let the driver's answer in, and the whole listing went to the queue before the first
    copy (at 10^6 keys, 353 MiB: bench/bench_planner.py)."""
    s3 = MemoryS3()
    for n in range(20_000):
        s3.put("src", f"k/{n:05d}", b"")
    listed_at_first_copy: list[int] = []

    def watch(verb: str, bucket: str, key: str) -> None:
        if verb == "COPY" and not listed_at_first_copy:
            listed_at_first_copy.append(sum(1 for request in s3.requests if request[0] == "LIST"))

    s3.before = watch
    report = run(copy_job("s3://src/k/", "s3://dst/k/"), s3)
    assert report.objects_done == 20_000
    assert listed_at_first_copy[0] <= 4  # of 20 pages
