"""Run any command's job end to end: its spec, the engine fitted to the machine, the journal.

The runner knows the shapes every command shares (a typed spec, a Command that builds its job:
`s3bulk._commands`), never a command by name. The same code runs a fresh job, resumes one from
its journal (`--resume JOB`: skip what is done) and reruns only its failures (`--retry-failed
JOB`). Credentials are never part of a spec; each run resolves them from the environment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from s3bulk._commands import Command, JobPlan, Spec, command_for, command_named
from s3bulk._commands.base import SPEC_VERSION
from s3bulk._config import NO_KEYS, AwsSettings, CustomerKeys, cores
from s3bulk._engine.driver import Engine
from s3bulk._engine.strategies import DEFAULT_ENGINE, Strategy, choose, in_the_driver, within_open_files
from s3bulk._engine.worker import EngineOptions
from s3bulk._errors import ItemError, JobInterrupted, UsageError, require_extra
from s3bulk._journal.local import Journal, new_job_id
from s3bulk._journal.store import JOBS_PREFIX, StoreJournal, default_url
from s3bulk._report import RecordSink, Report, human_bytes
from s3bulk._stores.retry import RetryPolicy
from s3bulk._stores.storage import Storage

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


def plan_memory(
    max_memory: int, workers: int | None, max_in_flight_bytes: int, part_size: int, *, processes: bool = True
) -> MemoryPlan:
    """Fit the whole job under `max_memory` (interpreters, clients, bodies in flight): as many
    worker processes as can each hold one part in flight, else (or without `processes`) one
    worker inside the driver's process (no second interpreter at all); then the byte budget."""
    floor = IN_PROCESS_BASE_BYTES + int(BODY_OVERHEAD * part_size)
    if max_memory < floor:
        raise UsageError(
            f"--max-memory {human_bytes(max_memory)} is below the {human_bytes(floor)} a job needs: raise "
            f"it (the interpreter and its clients take about {human_bytes(IN_PROCESS_BASE_BYTES)}, "
            f"plus one {human_bytes(part_size)} part in flight; a smaller --part-size lowers that)"
        )
    in_process = MemoryPlan(
        0, max(MiB, min(max_in_flight_bytes, int((max_memory - IN_PROCESS_BASE_BYTES) / BODY_OVERHEAD)))
    )
    if not processes:
        return in_process
    per_worker = WORKER_BASE_BYTES + int(BODY_OVERHEAD * part_size)
    fitting = min(workers or cores(), (max_memory - DRIVER_BASE_BYTES) // per_worker)
    if workers and fitting < workers:
        raise UsageError(
            f"--workers {workers} does not fit in --max-memory {human_bytes(max_memory)} "
            f"(each worker process needs about {human_bytes(per_worker)}): use --workers {max(fitting, 1)}"
            + (" or drop --workers" if fitting < 2 else "")
        )
    if fitting < 2:  # one worker process costs more than none: run in the driver
        return in_process
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
        "request_payer": settings.request_payer,
        "checksum_algorithm": settings.checksum_algorithm,
        "unsigned_payload": settings.unsigned_payload,
        # an SSE-C key is not kept, only what tells it again (S3's own check: its MD5)
        "sse_c_md5": settings.sse_c.md5 if settings.sse_c else None,
        "sse_c_source_md5": settings.sse_c_source.md5 if settings.sse_c_source else None,
        "source": settings_spec(settings.source) if settings.source else None,
    }


def _overridden(spec: Spec, overrides: dict[str, Any]) -> Spec:
    """A journaled spec with what a rerun may change: engine settings, and a --max-delete cap
    (given again, it is this run's; not given, the job's own applies)."""
    engine = {name: value for name, value in overrides.items() if name != "max_delete"}
    spec = spec.with_engine(**engine)
    if overrides.get("max_delete") is not None and hasattr(spec, "max_delete"):
        spec = dataclasses.replace(spec, max_delete=overrides["max_delete"])  # type: ignore[call-arg]
    return spec


def restored_settings(saved: dict[str, Any], keys: CustomerKeys) -> AwsSettings:
    """The settings a journal recorded, with the SSE-C keys the job used given again: a key
    that is missing or is not the one the job started with is one line, before any request."""
    saved = dict(saved)
    source = saved.pop("source", None)
    # a relayed copy's source is read with the copy-source key
    given: dict[str, Any] = {
        "source": restored_settings(source, CustomerKeys(keys.source)) if source else None
    }
    for name, key, flag in (
        ("sse_c", keys.key, "--sse-c-key"),
        ("sse_c_source", keys.source, "--sse-c-copy-source-key"),
    ):
        recorded = saved.pop(f"{name}_md5", None)
        if recorded and key is None:
            raise UsageError(
                f"this job's objects use an SSE-C key, which journals do not keep: give {flag} again"
            )
        if key is not None and key.md5 != recorded:
            raise UsageError(
                f"{flag} is not the SSE-C key this job started with"
                if recorded
                else f"this job ran without {flag}: drop it"
            )
        given[name] = key
    return AwsSettings.from_env(**saved, **given)


async def execute(
    spec: Spec,
    settings: AwsSettings | None = None,
    *,
    journal: Journal | bool = True,
    mode: Mode = "run",
    on_progress: Callable[[Report], None] | None = None,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Report:
    """Run one command's job. `journal=True` starts a new journal (not for dry runs, nor for a
    command that keeps none); a Journal continues that job in `mode`."""
    command = command_for(spec)
    settings = settings or AwsSettings.from_env()
    if spec.needs_credentials():
        settings.credentials()  # fail fast, before any process starts, when there are none
    strategy, in_flight = _strategy(spec, command)
    strategy, crowded = within_open_files(strategy)
    handle = journal if isinstance(journal, Journal) else None
    new_journal = journal is True and command.journaled and not spec.dry_run
    job_id = handle.job_id if handle else new_job_id() if new_journal else ""
    ray = strategy.name == "ray"
    if ray and new_journal:
        spec = _with_store_journal(spec, job_id)
    plan = JobPlan(job_id, strategy.workers, in_flight)
    spec = command.settle(spec, plan)
    job = await command.build(spec, settings, plan)  # refused here: nothing is left behind
    if new_journal:
        handle = await _start_journal(command, spec, settings, job_id, in_store=ray)
    store_url = spec.engine.journal_url if ray and handle else None
    snapshot = await _begin_run(handle, mode, store_url, settings)
    resumable = tuple(handle.leftover_uploads()) if handle is not None and mode != "run" else ()
    kept = command.rows(spec, str(handle.path) if handle is not None and mode != "run" else None)
    if kept is not None:  # the command keeps its records itself (map's output=)
        on_records = kept.write
    options = EngineOptions(
        max_in_flight_bytes=in_flight,
        retry=RetryPolicy(max_attempts=spec.engine.attempts(settings)),
        record_items=_records_wanted(on_records),
        journal_path=str(handle.path) if handle else None,
        skip_done=mode != "run",
        track_items=ray,
        ray_address=spec.engine.ray_address if ray else None,
        journal_url=store_url,
        journal_run=handle.run if handle else 0,
        journal_snapshot=snapshot,
        resumable_uploads=resumable,
        bytes_per_second=spec.engine.bwlimit,
        requests_per_second=spec.engine.tpslimit,
        memory_capped=bool(spec.engine.max_memory),
    )
    report = _new_report(command, spec, job, handle, store_url)
    if crowded:
        report.notes.append(crowded)
    completed = False
    try:
        rows = handle.failed_items() if handle is not None and mode == "retry-failed" else None
        engine = Engine(strategy, options)
        await engine.run(job, report, on_progress, on_records, journal=handle, retry_rows=rows)
        completed = True
        if handle is not None and mode != "run":  # what this run did not go on with
            await _abort_leftover_uploads(handle, settings, report, len(resumable))
    except BaseException as exc:
        if kept is not None:
            kept.close(completed=False)
        await command.finish(spec, job, report, completed=False)
        if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
            raise _interrupted(command.cli_name, report, handle) from None
        raise
    finally:
        if handle is not None:
            handle.end_run(report, interrupted=not completed)
            handle.close()
    if kept is not None:
        kept.close()
    await command.finish(spec, job, report, completed=True)
    return report


async def _start_journal(
    command: Command, spec: Spec, settings: AwsSettings, job_id: str, *, in_store: bool
) -> Journal:
    """The new job's journal, holding its spec (never a credential); a ray job's is first
    written to the object store, which may refuse it before anything local exists."""
    document = {
        "version": SPEC_VERSION,
        "spec": spec.absolute().to_json(),
        "settings": settings_spec(settings),
    }
    if in_store and spec.engine.journal_url:
        store = StoreJournal(spec.engine.journal_url, settings)
        await asyncio.to_thread(store.write_spec, job_id, command.name, document)
    return Journal.create(command.name, document, job_id=job_id)


async def _begin_run(
    handle: Journal | None, mode: Mode, store_url: str | None, settings: AwsSettings
) -> str | None:
    """Open this run in the journal; a resumed ray job publishes what is done to the object
    store, where its workers elsewhere read it (the snapshot's URL)."""
    if handle is None:
        return None
    handle.begin_run(mode)
    if not store_url or mode == "run":
        return None
    handle.checkpoint()
    publish = StoreJournal(store_url, settings).publish_for_workers
    return await asyncio.to_thread(publish, handle.path, handle.run)


def _new_report(
    command: Command, spec: Spec, job: Any, handle: Journal | None, store_url: str | None
) -> Report:
    """The report the engine fills, holding what the job found before it started."""
    source, destination = spec.places()
    report = Report(
        command.verb(job),
        source=source,
        destination=destination,
        dry_run=spec.dry_run,
        requests=dict(getattr(job, "preflight_requests", {})),
        notes=list(getattr(job, "preflight_notes", [])),
        job_id=handle.job_id if handle else "",
    )
    if store_url:
        report.notes.append(f"journal also in {store_url} (from any machine: --resume {store_url})")
    return report


def _interrupted(name: str, report: Report, handle: Journal | None) -> JobInterrupted:
    """The one line an interrupted job leaves: what it did, and how to finish it."""
    known = report.total_known and report.objects_total
    total = f" of {report.objects_total:,}" if known else ""
    found = f" ({report.objects_total:,} found so far)" if report.objects_total and not known else ""
    if report.vectors_done and name == "vectors export":  # the index is listed as it goes: no total
        done = f"{report.vectors_done:,} vectors exported"
    elif report.vectors_done:  # a vectors job lists rows and finishes batches: count what it lists
        done = f"{report.vectors_done:,}{total} vectors stored{found}"
    else:
        done = f"{report.objects_done:,}{total} items done{found}"
    if report.uploads_kept:
        done += (
            f", {report.uploads_kept:,} multipart upload(s) kept for the resume "
            f"({human_bytes(report.bytes_kept)} stored, not sent again)"
        )
    if handle is None:
        return JobInterrupted(f"{name} stopped: {done}")
    return JobInterrupted(f"job {handle.job_id} ({name}) stopped: {done}", handle.job_id, name)


def _records_wanted(on_records: Callable[[list[dict[str, Any]]], None] | None) -> int:
    """Per-object records each worker sends: none without a callback, else all unless it is a
    RecordSink that wants only the first few."""
    if on_records is None:
        return 0
    first = on_records.first if isinstance(on_records, RecordSink) else None
    return sys.maxsize if first is None else first


async def _abort_leftover_uploads(
    handle: Journal, settings: AwsSettings, report: Report, offered: int
) -> None:
    """Multipart uploads that a run killed outright left on the server (they cost money until a
    lifecycle rule removes them): the run that resumes the job goes on with those of the files it
    uploads again (`multipart.upload_file`), and aborts the rest once it has finished."""
    leftovers = handle.leftover_uploads()
    if offered > len(leftovers):
        report.notes.append(
            f"went on with {offered - len(leftovers)} multipart upload(s) an earlier run left unfinished "
            "(their parts that hold the same bytes were kept)"
        )
    if not leftovers:
        return
    storage = Storage(settings, connections=8)
    aborted = []
    try:
        for bucket, key, upload_id in leftovers:
            try:
                await storage.abort_upload(bucket, key, upload_id)
            except ItemError:
                continue
            aborted.append(upload_id)
    finally:
        await storage.close()
        for kind, count in storage.meter.requests.items():
            report.requests[kind] = report.requests.get(kind, 0) + count
    handle.forget_uploads(aborted)
    if aborted:
        report.notes.append(f"aborted {len(aborted)} multipart upload(s) an earlier run left unfinished")


def _with_store_journal(spec: Spec, job_id: str) -> Spec:
    """A ray job also journals in the object store, beside its data unless --journal-url says
    where; listings of a bucket's root then leave the journal's own objects out."""
    chosen = spec.engine.journal_url
    url = f"{chosen.rstrip('/')}/{job_id}/" if chosen else default_url(spec.s3_locations(), job_id)
    if not url:
        return spec
    return spec.with_engine(journal_url=url).leaving_out(JOBS_PREFIX + "*")


def _strategy(spec: Spec, command: Command) -> tuple[Strategy, int]:
    """The engine's strategy and per-worker byte budget. The default engine sizes itself from
    the job: one worker in the driver's own process when the job's per-item Python work is small
    (`Command.python_bound`), one process per core when it is not, or what --workers says. Under
    --max-memory (`plan_memory`): fewer worker processes, or none (one worker in the driver's
    process), then a smaller budget; threads share one process's budget. The ray engine runs
    one worker per CPU of its cluster unless --workers says otherwise."""
    asked = spec.engine
    strategy = choose(asked.engine, asked.workers, asked.concurrency)
    if asked.engine == DEFAULT_ENGINE and asked.workers is None and not command.python_bound(spec):
        strategy = in_the_driver(strategy)
    reason = spec.one_worker_reason()
    if reason and (strategy.workers > 1 or not strategy.in_process):
        if asked.engine != DEFAULT_ENGINE or asked.workers is not None:
            raise UsageError(f"{reason}, so the job runs as one worker: drop --engine and --workers")
        strategy = in_the_driver(strategy)
    if strategy.name == "ray":
        require_extra("ray", "--engine ray")
        from s3bulk._engine.ray_launch import cluster_cpus, connect

        connect(asked.ray_address)  # first: a cluster out of reach leaves nothing behind
        if not strategy.workers:
            strategy = dataclasses.replace(strategy, workers=cluster_cpus())
        return strategy, asked.max_in_flight_bytes
    in_flight = asked.max_in_flight_bytes
    if asked.max_memory:
        wanted = None if strategy.in_process else asked.workers
        part = spec.part_size_for_memory()
        plan = plan_memory(asked.max_memory, wanted, in_flight, part, processes=not strategy.in_process)
        in_flight = plan.max_in_flight_bytes
        if strategy.in_process:  # threads of one process: they share what one worker may hold
            in_flight = max(MiB, in_flight // strategy.workers)
        elif plan.workers == 0:
            strategy = in_the_driver(strategy)
        else:
            strategy = dataclasses.replace(strategy, workers=plan.workers)
    return strategy, in_flight


async def continue_job(
    job_id: str,
    mode: Mode,
    *,
    expect_command: str | None = None,
    overrides: dict[str, Any] | None = None,
    keys: CustomerKeys = NO_KEYS,
    on_progress: Callable[[Report], None] | None = None,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Report:
    """Resume a job, or rerun its failures, from its journal: a local one by id, or one in the
    object store by its URL (a ray job's, from any machine). `overrides` replace engine settings;
    `keys` are the SSE-C keys the job was started with, which its journal does not keep."""
    if job_id.startswith("s3://"):
        job_id = await asyncio.to_thread(StoreJournal(job_id, AwsSettings.from_env()).import_into)
    journal = Journal.open(job_id)
    try:
        command = command_named(journal.command)
        if expect_command and command.name != expect_command:
            flag = "--resume" if mode == "resume" else "--retry-failed"
            raise UsageError(
                f"job {job_id} is a '{command.cli_name}' job: run s3bulk {command.cli_name} {flag} {job_id}"
            )
        document = journal.spec
        spec = _overridden(command.load_spec(document), overrides or {})
    except BaseException:
        journal.close()
        raise
    settings = restored_settings(document["settings"], keys)
    return await execute(
        spec, settings, journal=journal, mode=mode, on_progress=on_progress, on_records=on_records
    )
