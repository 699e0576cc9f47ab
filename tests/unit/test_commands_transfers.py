"""cp, mv and sync as jobs (`_commands/copy.py`, `sync.py`, `mover.py`, `sides.py`), run by the
engine on an in-memory store (`memory.py`): what each deletes, copies and leaves, without a
server. The end-to-end promises stay with the real servers' tests."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from memory import MemoryS3, MemoryStorage, _etag

from s3bulk._commands.base import JobPlan
from s3bulk._commands.copy import CopyJob, CopySpec
from s3bulk._commands.deletes import CHANGED_AFTER_LISTING, DeleteBatch, LocalDelete, run_delete_batch
from s3bulk._commands.sides import DiffBatch
from s3bulk._commands.sync import DELETE_PREFIX, SyncJob, SyncSpec, remove_as_listed
from s3bulk._commands.transfer import transfer_options
from s3bulk._config import AwsSettings
from s3bulk._engine.driver import Engine
from s3bulk._engine.worker import EngineOptions
from s3bulk._errors import ItemError
from s3bulk._journal.local import Journal
from s3bulk._report import Report
from s3bulk._urls import parse_location

MiB = 1024**2


def run(job: Any, s3: MemoryS3, journal: Journal | None = None, *, retry: bool = False) -> Report:
    """The job through the async engine, its storages (the driver's too) the in-memory ones;
    with a journal, journaled, and with `retry` a `--retry-failed` of its failures."""
    job.mover.stores.make = s3.storage()
    if hasattr(job, "sides"):
        job.sides.make = s3.storage()
    options = EngineOptions(
        concurrency=8,
        max_in_flight_bytes=64 * MiB,
        journal_path=str(journal.path) if journal else None,
        skip_done=retry,
        journal_run=journal.run if journal else 0,
    )
    rows = journal.failed_items() if journal is not None and retry else None
    engine = Engine("async", options)
    return asyncio.run(engine.run(job, Report("test"), journal=journal, retry_rows=rows))


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


def sync_job(source: str, destination: str, **choices: Any) -> SyncJob:
    """The job `sync --delete --size-only` builds from a spec of these choices."""
    spec = SyncSpec(
        source=source, destination=destination, partitioned_listing=False, mode="size", delete=True, **choices
    )
    options = transfer_options(spec, AwsSettings(), PLAN, max_delete=spec.max_delete)
    places = parse_location(spec.source), parse_location(spec.destination)
    return SyncJob(*places, AwsSettings(), options, mode="size", delete=True)


def test_a_retried_sync_deletes_only_what_its_own_fresh_listing_finds_extra(tmp_path: Path) -> None:
    """`sync --delete --retry-failed` (issue 62, hole 1): a delete that failed in the first run
    was retried from the journal's name alone, resting on that run's old listing. Meanwhile the
    source came to hold the name (and another writer rewrote the destination's object): the
    retry deleted it. Its deletes must rest on listings of both sides taken by this run: here
    q/x is kept (the source now holds x), and q/y, still extra, is deleted."""
    s3 = MemoryS3()
    s3.put("src", "p/a", b"a")
    for key in ("q/a", "q/x", "q/y"):
        s3.put("dst", key, b"old")
    s3.refuse[("dst", "q/x")] = s3.refuse[("dst", "q/y")] = "AccessDenied: a policy on this key"
    journal = Journal.create("sync", {}, directory=tmp_path)
    journal.begin_run("run")
    first = run(sync_job("s3://src/p/", "s3://dst/q/"), s3, journal)
    journal.end_run(first)
    assert (first.objects_failed, sorted(s3.buckets["dst"])) == (2, ["q/a", "q/x", "q/y"])

    s3.refuse.clear()
    s3.put("src", "p/x", b"the source's x")  # the name is the source's now
    s3.put("dst", "q/x", b"another writer's x")
    journal.begin_run("retry-failed")
    again = run(sync_job("s3://src/p/", "s3://dst/q/"), s3, journal, retry=True)
    journal.end_run(again)
    assert s3.buckets["dst"] == {"q/a": b"a", "q/x": b"another writer's x"}
    assert (again.objects_deleted, again.objects_failed) == (1, 0)


def test_a_batch_an_earlier_run_listed_deletes_nothing() -> None:
    """A descriptor journaled by a failed run (its workers gone before it ran) and run again by
    --retry-failed: its transfers run, its deletes fail by name, for a retry whose own listing
    decides them."""
    job = sync_job("s3://src/p/", "s3://dst/q/")
    earlier = DiffBatch((DeleteBatch("dst", (("q/x", 3),)), job.sides.transfer("a", 1, 0.0)), listing="gone")
    now = job._without_deletes(earlier)
    assert now.items == (job.sides.transfer("a", 1, 0.0),) and now.listing == job.listing
    assert [(failure.source, failure.item_id) for failure in now.problems] == [
        ("s3://dst/q/x", DELETE_PREFIX + "q/x")
    ]


def test_sync_deletes_a_local_file_only_while_it_is_the_file_listed(tmp_path: Path) -> None:
    """sync --delete of a download removes an extra file only while its size and time are those
    its walk found: a file another writer rewrote since is kept, its item failing by name."""
    extra = tmp_path / "extra.txt"
    extra.write_bytes(b"listed")
    listed = os.stat(extra)
    extra.write_bytes(b"written since the walk")
    with pytest.raises(ItemError, match="changed after it was listed"):
        remove_as_listed(LocalDelete(str(extra), listed.st_size, listed.st_mtime))
    assert extra.read_bytes() == b"written since the walk"
    now = os.stat(extra)
    remove_as_listed(LocalDelete(str(extra), now.st_size, now.st_mtime))
    assert not extra.exists()


def test_a_directory_swapped_for_a_link_mid_upload_sends_nothing_from_outside(tmp_path: Path) -> None:
    """A directory of an upload's source swapped for a link to elsewhere once the walk has seen
    it (here, as the first object is sent): files were read by path, and those still to go were
    read through the link and uploaded, outside's bytes under the source's names. Read through a
    descriptor opened below the root, component by component, each goes as it was or fails by
    name: nothing from outside is uploaded; mv removes nothing outside either."""
    source, outside = tmp_path / "src", tmp_path / "outside"
    (source / "d").mkdir(parents=True)
    outside.mkdir()
    for number in range(20):
        (source / "d" / f"f{number:02d}").write_bytes(b"mine %d" % number)
        (outside / f"f{number:02d}").write_bytes(b"SECRET %d" % number)
    s3 = MemoryS3()

    def swap(verb: str, bucket: str, key: str) -> None:
        if verb == "PUT" and not (source / "moved").exists():
            (source / "d").rename(source / "moved")
            (source / "d").symlink_to(outside, target_is_directory=True)

    s3.before = swap
    report = run(copy_job(f"{source}/", "s3://dst/q/", delete_source=True), s3)
    stored = s3.buckets.get("dst", {})
    assert stored and all(body.startswith(b"mine ") for body in stored.values()), stored
    assert {key: body for key, body in stored.items()} == {
        f"q/d/f{int(body.split()[1]):02d}": body for body in stored.values()
    }
    # the rest not read; those sent not removed either, their directory being a link now
    assert report.objects_failed == 20 and report.objects_deleted == 0
    assert sorted(path.name for path in outside.iterdir()) == [f"f{number:02d}" for number in range(20)]
    assert len(list((source / "moved").iterdir())) == 20
    assert all("is a symbolic link now" in failure.reason for failure in report.failures)


def test_rm_deletes_a_key_on_its_listed_etag_where_deleteobjects_takes_it() -> None:
    """rm's batches name each key's listed ETag: S3 refuses the key another writer wrote since
    its listing (kept, the item failing by name), deletes the rest, and a key gone meanwhile
    counts as deleted; no request more than the DeleteObjects."""
    s3 = MemoryS3()
    for key in ("p/a", "p/b", "p/c"):
        s3.put("b", key, b"listed " + key.encode())
    listed = tuple((key, _etag(body)) for key, body in s3.buckets["b"].items())
    s3.put("b", "p/b", b"another writer's")
    del s3.buckets["b"]["p/c"]
    batch = DeleteBatch("b", (("p/a", 1), ("p/b", 1), ("p/c", 1)), listed)
    outcome = asyncio.run(run_delete_batch(MemoryStorage(s3), batch, dry_run=False))
    assert [key for key, _, _ in outcome.done] == ["p/a", "p/c"]
    assert [(failure.item_id, failure.reason) for failure in outcome.failures] == [
        ("p/b", CHANGED_AFTER_LISTING)
    ]
    assert s3.buckets["b"] == {"p/b": b"another writer's"}
    assert [verb for verb, _, _ in s3.requests] == ["DELETE"] * 3  # one per key, in the stand-in


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
