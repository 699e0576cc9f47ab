"""Run a command's job end to end: build it from its spec, pick the engine, keep the journal.

Every command is a spec, a plain JSON-able dict of what the user asked for, so the same code runs
a fresh job, resumes one from its journal (`--resume JOB`: skip what is done) and reruns only its
failures (`--retry-failed JOB`). Credentials are never part of a spec; each run resolves them
from the environment like any other run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from s3bulk.config import AwsSettings
from s3bulk.engine.driver import Engine
from s3bulk.engine.job import Job
from s3bulk.engine.retry import RetryPolicy, with_retries
from s3bulk.engine.strategies import DEFAULT_ENGINE, Strategy, choose, cores
from s3bulk.engine.worker import EngineOptions
from s3bulk.errors import ItemError, JobInterrupted, UsageError
from s3bulk.journal import Journal, new_job_id
from s3bulk.journal_store import JOBS_PREFIX, StoreJournal, default_url
from s3bulk.plan.filters import Filters
from s3bulk.report import RecordSink, Report, human_bytes
from s3bulk.sources.listing import partitioning_pays
from s3bulk.stores.signed import SignedClient
from s3bulk.urls import parse_location, parse_s3

Mode = Literal["run", "resume", "retry-failed"]
MiB = 1024**2

# What processes cost before any object data moves, as summed RSS (what `top` shows a user; a
# forked worker's shared pages count again in its own RSS), measured on this project's jobs:
# bench/RESULTS.md, "--max-memory". Bodies in flight cost about 2.5x their bytes at the peak
# (an upload part is read, signed, and partly buffered again by the socket's writer).
IN_PROCESS_BASE_BYTES = 72 * MiB  # the driver with its worker as a thread (engines async/serial)
DRIVER_BASE_BYTES = 64 * MiB  # the driver of worker processes
WORKER_BASE_BYTES = 56 * MiB  # each worker process
BODY_OVERHEAD = 2.5


@dataclass(frozen=True)
class MemoryPlan:
    workers: int  # worker processes; 0: one worker in the driver's own process
    max_in_flight_bytes: int


def plan_memory(max_memory: int, workers: int | None, max_in_flight_bytes: int, part_size: int) -> MemoryPlan:
    """Fit the whole job under `max_memory` (interpreters, clients, bodies in flight): as many
    worker processes as can each hold one part in flight, else one worker inside the driver's
    process (no second interpreter at all); then the byte budget that fits."""
    floor = IN_PROCESS_BASE_BYTES + int(BODY_OVERHEAD * part_size)
    if max_memory < floor:
        raise UsageError(
            f"--max-memory {human_bytes(max_memory)} is below the {human_bytes(floor)} a job needs: raise "
            f"it (the interpreter and its clients take about {human_bytes(IN_PROCESS_BASE_BYTES)}, "
            f"plus one {human_bytes(part_size)} part in flight; a smaller --part-size lowers that)"
        )
    per_worker = WORKER_BASE_BYTES + int(BODY_OVERHEAD * part_size)
    fitting = min(workers or cores(), (max_memory - DRIVER_BASE_BYTES) // per_worker)
    if workers and fitting < workers:
        raise UsageError(
            f"--workers {workers} does not fit in --max-memory {human_bytes(max_memory)} "
            f"(each worker process needs about {human_bytes(per_worker)}): use --workers {max(fitting, 1)}"
            + (" or drop --workers" if fitting < 2 else "")
        )
    if fitting < 2:  # one process worker costs more than none: run in the driver's process
        budget = int((max_memory - IN_PROCESS_BASE_BYTES) / BODY_OVERHEAD)
        return MemoryPlan(0, max(MiB, min(max_in_flight_bytes, budget)))
    budget = int(((max_memory - DRIVER_BASE_BYTES) // fitting - WORKER_BASE_BYTES) / BODY_OVERHEAD)
    return MemoryPlan(fitting, max(MiB, min(max_in_flight_bytes, budget)))


def settings_spec(settings: AwsSettings) -> dict[str, Any]:
    """What a resumed run needs to reach the same store: never any credential."""
    return {
        "profile": settings.profile,
        "region": settings.region,
        "endpoint_url": settings.resolved_endpoint if settings.endpoint_url else None,
        "vectors_endpoint_url": settings.vectors_endpoint_url,
        "verify_ssl": settings.verify_ssl,
        "anonymous": settings.anonymous,
    }


def _listing(args: dict[str, Any], settings: AwsSettings) -> bool:
    chosen = args.get("partitioned_listing")
    return partitioning_pays(settings.resolved_endpoint) if chosen is None else bool(chosen)


def _filters(args: dict[str, Any]) -> Filters:
    return Filters(tuple(args.get("include", ())), tuple(args.get("exclude", ())))


def build_job(command: str, args: dict[str, Any], settings: AwsSettings, in_flight: int = 16 * MiB) -> Job:
    from s3bulk.transfers import CopyJob, CopyOptions, parts_in_flight

    if args.get("concurrency", 1) < 1:
        raise UsageError("--concurrency must be at least 1")
    if command == "rm":
        from s3bulk.removal import RemoveJob, RemoveOptions, check_remove_target

        target = parse_s3(args["target"])
        check_remove_target(args["target"], target)
        options = RemoveOptions(
            _filters(args), args.get("dry_run", False), args["concurrency"], _listing(args, settings)
        )
        return RemoveJob(target, settings, options)
    if args.get("part_size", 8 * MiB) < 5 * MiB:
        raise UsageError("--part-size must be at least 5 MiB (the S3 minimum part size)")
    copy_options = CopyOptions(
        filters=_filters(args),
        dry_run=args.get("dry_run", False),
        part_size=args["part_size"],
        multipart_threshold=args["multipart_threshold"],
        copy_multipart_threshold=args["copy_multipart_threshold"],
        concurrency=args["concurrency"],
        partitioned_listing=_listing(args, settings),
        delete_source=command == "mv",
        follow_symlinks=args.get("follow_symlinks", False),
        guess_mime_type=args.get("guess_mime_type", True),
        keep_part_layout=command == "sync" and args.get("mode") == "checksum",
        part_concurrency=parts_in_flight(in_flight, args["part_size"]),
    )
    source, destination = parse_location(args["source"]), parse_location(args["destination"])
    if command == "sync":
        from s3bulk.syncing import SyncJob

        if args.get("mode", "mtime") not in ("mtime", "size", "checksum"):
            raise UsageError(f"unknown sync mode {args['mode']!r}: use mtime, size or checksum")
        return SyncJob(source, destination, settings, copy_options, mode=args["mode"], delete=args["delete"])
    return CopyJob(source, destination, settings, copy_options)


async def execute(
    command: str,
    args: dict[str, Any],
    settings: AwsSettings | None = None,
    *,
    journal: Journal | bool = True,
    mode: Mode = "run",
    on_progress: Callable[[Report], None] | None = None,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Report:
    """Run one command. `journal=True` starts a new journal (not for dry runs); a Journal
    continues an existing job in `mode`."""
    settings = settings or AwsSettings.from_env()
    settings.credentials()  # fail fast, before any process starts, when there are none
    strategy, in_flight = _strategy(args)
    new_journal = journal is True and not args.get("dry_run")
    job_id = journal.job_id if isinstance(journal, Journal) else new_job_id() if new_journal else ""
    if strategy.name == "ray" and new_journal:
        args = _with_store_journal(command, args, job_id)
    if command == VECTORS_PUT:
        from s3bulk.vectors.job import build_put_job, default_rejects_path

        args = {**args, "rejects": args.get("rejects") or default_rejects_path(job_id)}
        job: Job = await build_put_job(args, settings, strategy.workers)
    else:
        job = build_job(command, args, settings, in_flight)
        preflight = getattr(job, "preflight", None)
        if preflight is not None:  # before the journal: a refused job leaves nothing behind
            job.preflight_requests = await preflight()  # type: ignore[attr-defined]
    handle: Journal | None = None
    if isinstance(journal, Journal):
        handle = journal
    elif new_journal:
        spec_args = {name: _absolute(value) if name in LOCATIONS else value for name, value in args.items()}
        if command == VECTORS_PUT:
            spec_args["sources"] = [_absolute(path) for path in args["sources"]]
            if args.get("keys_file"):
                spec_args["keys_file"] = _absolute(args["keys_file"])
        spec = {"args": spec_args, "settings": settings_spec(settings)}
        if strategy.name == "ray" and args.get("journal_url"):  # first: it may be refused
            await asyncio.to_thread(
                StoreJournal(args["journal_url"], settings).write_spec, job_id, command, spec
            )
        handle = Journal.create(command, spec, job_id=job_id)
    ray = strategy.name == "ray"
    store_url = args.get("journal_url") if ray and handle else None
    snapshot = None
    if handle is not None:
        handle.begin_run(mode)
        if store_url and mode != "run":  # workers elsewhere read what is done from the store
            handle.checkpoint()
            publish = StoreJournal(store_url, settings).publish_for_workers
            snapshot = await asyncio.to_thread(publish, handle.path, handle.run)
    engine = Engine(
        strategy,
        EngineOptions(
            max_in_flight_bytes=in_flight,
            retry=RetryPolicy(max_attempts=args.get("max_attempts", 6)),
            record_items=_records_wanted(on_records),
            journal_path=str(handle.path) if handle else None,
            skip_done=mode != "run",
            track_items=ray,
            ray_address=args.get("ray_address") if ray else None,
            journal_url=store_url,
            journal_run=handle.run if handle else 0,
            journal_snapshot=snapshot,
        ),
    )
    source = args.get("source", args.get("target", " ".join(args.get("sources", ()))))
    report = Report(
        _verb(command, job),
        source=source,
        destination=args.get(
            "destination", "/".join((args.get("bucket", ""), *args.get("indexes", ()))).strip("/")
        ),
        dry_run=args.get("dry_run", False),
        requests=dict(getattr(job, "preflight_requests", {})),
        notes=list(getattr(job, "preflight_notes", [])),
    )
    if handle is None:
        try:
            return await engine.run(job, report, on_progress=on_progress, on_records=on_records)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise JobInterrupted(f"{_cli_name(command)} stopped: {_progress_text(report)}") from None
    report.job_id = handle.job_id
    if store_url:
        report.notes.append(f"journal also in {store_url} (from any machine: --resume {store_url})")
    finished = False
    try:
        if mode != "run":
            await _abort_leftover_uploads(handle, settings, report)
        rows = handle.failed_items() if mode == "retry-failed" else None
        await engine.run(job, report, on_progress, on_records, journal=handle, retry_rows=rows)
        finished = True
    except (asyncio.CancelledError, KeyboardInterrupt):
        name = _cli_name(command)
        raise JobInterrupted(
            f"job {handle.job_id} ({name}) stopped: {_progress_text(report)}; "
            f"finish it with: s3bulk {name} --resume {handle.job_id}",
            job_id=handle.job_id,
        ) from None
    finally:
        handle.end_run(report, interrupted=not finished)
        handle.close()
    return report


def _records_wanted(on_records: Callable[[list[dict[str, Any]]], None] | None) -> int:
    """Per-object records each worker sends: none without a callback, else all unless it is a
    RecordSink that wants only the first few."""
    if on_records is None:
        return 0
    first = on_records.first if isinstance(on_records, RecordSink) else None
    return sys.maxsize if first is None else first


def _cli_name(command: str) -> str:
    return "vectors put" if command == VECTORS_PUT else command


def _progress_text(report: Report) -> str:
    total = f" of {report.objects_total:,}" if report.objects_total else ""
    return f"{report.objects_done:,}{total} items done"


async def _abort_leftover_uploads(handle: Journal, settings: AwsSettings, report: Report) -> None:
    """Multipart uploads that a run killed outright left on the server (they cost money until a
    lifecycle rule removes them): the run that resumes the job aborts them."""
    leftovers = handle.leftover_uploads()
    if not leftovers:
        return
    client = SignedClient(settings, max_connections=8)
    aborted = []
    try:
        for bucket, key, upload_id in leftovers:
            try:
                await with_retries(
                    lambda bucket=bucket, key=key, upload_id=upload_id: client.abort_multipart_upload(
                        bucket, key, upload_id
                    ),
                    RetryPolicy(),
                )
            except ItemError:
                continue
            aborted.append(upload_id)
    finally:
        await client.close()
        for kind, count in client.requests.items():
            report.requests[kind] = report.requests.get(kind, 0) + count
    handle.forget_uploads(aborted)
    if aborted:
        report.notes.append(f"aborted {len(aborted)} multipart upload(s) an earlier run left unfinished")


LOCATIONS = ("source", "destination", "rejects")
VECTORS_PUT = "vectors-put"


def _with_store_journal(command: str, args: dict[str, Any], job_id: str) -> dict[str, Any]:
    """A ray job also journals in the object store, beside its data unless --journal-url says
    where; listings of a bucket's root then leave the journal's own objects out."""
    chosen = args.get("journal_url")
    url = f"{chosen.rstrip('/')}/{job_id}/" if chosen else default_url(args, job_id)
    if not url:
        return args
    args = {**args, "journal_url": url}
    if command != VECTORS_PUT:
        args["exclude"] = [*args.get("exclude", ()), JOBS_PREFIX + "*"]
    return args


def _strategy(args: dict[str, Any]) -> tuple[Strategy, int]:
    """The engine's strategy and per-worker byte budget, fitted under --max-memory if given
    (`plan_memory`): fewer worker processes, or none (the async engine's one worker in the
    driver's process), then a smaller budget; threads share one process's budget.
    The ray engine runs one worker per CPU of its cluster unless --workers says otherwise."""
    strategy = choose(args.get("engine") or DEFAULT_ENGINE, args.get("workers"), args["concurrency"])
    if strategy.name == "ray":
        if args.get("max_memory"):
            raise UsageError("--max-memory applies to one machine: with --engine ray, size the cluster")
        from s3bulk.engine.ray_launch import cluster_cpus, connect

        connect(args.get("ray_address"))  # first: a cluster out of reach leaves nothing behind
        if not strategy.workers:
            strategy = dataclasses.replace(strategy, workers=cluster_cpus())
        return strategy, args.get("max_in_flight_bytes", 16 * MiB)
    in_flight = args.get("max_in_flight_bytes", 16 * MiB)
    if args.get("max_memory"):
        asked = None if strategy.in_process else args.get("workers")
        plan = plan_memory(int(args["max_memory"]), asked, in_flight, args.get("part_size", 8 * MiB))
        in_flight = plan.max_in_flight_bytes
        if strategy.in_process:  # threads of one process: they share what one worker may hold
            in_flight = max(MiB, in_flight // strategy.workers)
        elif plan.workers == 0:
            strategy = choose("async", None, strategy.concurrency)
        else:
            strategy = dataclasses.replace(strategy, workers=plan.workers)
    return strategy, in_flight


def _absolute(location: str) -> str:
    """Local paths are journaled absolute, so a job resumes the same from any directory."""
    if "://" in location:
        return location
    absolute = os.path.abspath(os.path.expanduser(location))
    return absolute + "/" if location.endswith("/") and absolute != "/" else absolute


def _verb(command: str, job: Job) -> str:
    if command == VECTORS_PUT:
        return "vectors put"
    direction = getattr(job, "direction", "")
    if command == "cp":
        return direction
    return f"{command} ({direction})" if direction else command


async def continue_job(
    job_id: str,
    mode: Mode,
    *,
    expect_command: str | None = None,
    overrides: dict[str, Any] | None = None,
    on_progress: Callable[[Report], None] | None = None,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Report:
    """Resume a job, or rerun its failures, from its journal: a local one by id, or one in the
    object store by its URL (a ray job's, from any machine)."""
    if job_id.startswith("s3://"):
        job_id = await asyncio.to_thread(StoreJournal(job_id, AwsSettings.from_env()).import_into)
    journal = Journal.open(job_id)
    command = journal.command
    if expect_command and command != expect_command:
        journal.close()
        flag = "--resume" if mode == "resume" else "--retry-failed"
        raise UsageError(f"job {job_id} is a '{command}' job: run s3bulk {command} {flag} {job_id}")
    spec = journal.spec
    args = dict(spec["args"]) | {k: v for k, v in (overrides or {}).items() if v is not None}
    settings = AwsSettings.from_env(**spec["settings"])
    return await execute(
        command, args, settings, journal=journal, mode=mode, on_progress=on_progress, on_records=on_records
    )
