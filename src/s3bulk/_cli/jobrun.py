"""What every job command (cp, mv, sync, rm) does around the API call: live progress, dry-run
and --json records, the summary, and the exit code. Also the --resume / --retry-failed switch."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import typer

from s3bulk._cli.options import JOB, SPEED, in_panel
from s3bulk._cli.progress import SHOWN_OBJECTS, LiveProgress, json_line, object_line, print_summary
from s3bulk._config import NO_KEYS, CustomerKeys
from s3bulk._engine.loop import run_loop
from s3bulk._errors import UsageError
from s3bulk._report import RecordSink, Report
from s3bulk._sources.tables import records_batch

if TYPE_CHECKING:
    from s3bulk._runner import Mode
from s3bulk._text import printable

ResumeOption = typer.Option(
    None,
    "--resume",
    help="Continue job JOB (see 's3bulk jobs') where it stopped; a ray job also by its journal's "
    "s3:// URL, from any machine.",
)
RetryFailedOption = typer.Option(None, "--retry-failed", help="Run only the items job JOB failed.")
MaxMemoryOption = typer.Option(
    None, "--max-memory", help="Cap the whole job's memory, e.g. 128MB (fewer workers, smaller buffers)."
)
JsonOption = typer.Option(False, "--json", help="One JSON line per object and a summary line.")
DryRunOption = typer.Option(False, "--dry-run", help="Print what would be done; change nothing.")
QuietOption = typer.Option(False, "--quiet", "-q", help="Print errors only.")
PlanOption = typer.Option(
    None,
    "--output",
    help="With --dry-run: write the plan (action, source, destination, size per object) to "
    "FILE.parquet, .csv or .arrow instead of printing it, to read with DuckDB or pandas.",
    metavar="FILE",
)
StatsOption = typer.Option(
    False, "--stats", help="Also print requests, the engine and where the time went (long jobs do)."
)
in_panel(JOB, ResumeOption, RetryFailedOption, JsonOption, DryRunOption, QuietOption, StatsOption, PlanOption)
in_panel(SPEED, MaxMemoryOption)

Start = Callable[
    [Callable[[Report], None], Callable[[list[dict[str, Any]]], None] | None], Coroutine[Any, Any, Report]
]


def continuation(
    command: str,
    resume: str | None,
    retry_failed: str | None,
    positional: list[str | None],
    overrides: dict[str, Any],
    keys: CustomerKeys = NO_KEYS,
) -> Start | None:
    """The start function for --resume/--retry-failed, or None for a fresh job (whose positional
    arguments must then all be present)."""
    if resume and retry_failed:
        raise UsageError("--resume and --retry-failed exclude each other: pick one")
    job_id = resume or retry_failed
    if job_id is None:
        if any(value is None for value in positional):
            shown = command.replace("-", " ")  # vectors-put is run as `s3bulk vectors put`
            raise UsageError(f"missing arguments: see s3bulk {shown} --help (or --resume JOB)")
        return None
    if any(value is not None for value in positional):
        raise UsageError(f"--resume/--retry-failed {job_id} reuses the job's own locations: drop them")
    mode: Mode = "resume" if resume else "retry-failed"

    def start(
        on_progress: Callable[[Report], None], on_records: Callable[[list[dict[str, Any]]], None] | None
    ) -> Coroutine[Any, Any, Report]:
        from s3bulk._runner import continue_job  # the engine loads only when a job runs

        return continue_job(
            job_id,
            mode,
            expect_command=command,
            overrides=overrides,
            keys=keys,
            on_progress=on_progress,
            on_records=on_records,
        )

    return start


def run_job(
    start: Start,
    *,
    verb: str,
    as_json: bool,
    dry_run: bool,
    quiet: bool = False,
    stats: bool = False,
    command: str = "",
    output: str | None = None,
) -> int:
    """Run a job with live progress; print records, failures and the summary; return the exit code.
    `verb` names what each object undergoes (dry-run lines), `command` the CLI command (default:
    `verb`) that --resume and --retry-failed belong to.

    Output is in proportion to the job, like `aws s3 cp`: the first objects one line each, then a
    summary line; requests, the engine and where the time went for long jobs or with --stats.
    --quiet leaves errors only; --json gives one line per object and a summary line; `output`
    (with --dry-run) a table of the plan, written as the records come."""
    out = sys.stdout
    shown = 0
    progress = LiveProgress(enabled=not (as_json or quiet))
    plan = _plan_table(output, dry_run, as_json)

    def print_records(records: list[dict[str, Any]]) -> None:
        nonlocal shown
        if plan is not None:
            plan.write(records_batch([planned(verb, record) for record in records], plan.schema))
            return
        for record in records:
            if as_json:
                json_line({"status": "ok", "dry_run": dry_run, **record}, out)
            elif dry_run:  # every line, as aws s3 prints them: "(dryrun) upload: ./a to s3://b/a"
                progress.write(printable(f"(dryrun) {object_line(verb, record)}"), out)
            elif shown < SHOWN_OBJECTS:
                shown += 1
                progress.write(printable(object_line(verb, record)), out)

    async def main(progress: LiveProgress) -> Report:
        # SIGTERM stops the job as Ctrl-C does: cleaned up, journaled, resumable
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, _cancel, asyncio.current_task())
        first = None if as_json or dry_run else SHOWN_OBJECTS
        sink = None if quiet and not (as_json or plan) else RecordSink(print_records, first=first)
        return await start(progress.update, sink)

    with progress:
        try:
            report = run_loop(main(progress))
        except BaseException:
            if plan is not None:
                plan.close(completed=False)
            raise
    if plan is not None:
        plan.close(completed=report.ok)
    if as_json:
        for failure in report.failures:
            status = "skipped" if failure.skipped else "failed"
            json_line({"status": status, **failure.__dict__}, out)
        json_line({"summary": report.to_dict() | {"failures": len(report.failures)}}, out)
    else:
        print_summary(report, command or verb, stats=stats, quiet=quiet)
    return 0 if report.ok else 1


def _plan_table(output: str | None, dry_run: bool, as_json: bool) -> Any:
    """The table `--output` names for a --dry-run's plan (None without one)."""
    if output is None:
        return None
    if not dry_run:
        raise UsageError(f"--output {output} writes the plan of a --dry-run: add --dry-run")
    if as_json:
        raise UsageError("--output writes the plan as a table, --json prints it: pick one")
    from s3bulk._sources.tables import TableWriter, plan_schema

    return TableWriter(output, plan_schema())


def planned(verb: str, record: dict[str, Any]) -> dict[str, Any]:
    """A dry-run record as a row of the plan: what would be done to which object."""
    if record.get("skipped"):
        action = "skip"
    elif not record.get("destination"):
        action = "delete"
    else:
        action = verb
    return {"action": action, **record}


def _cancel(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()
