"""What every job command (cp, mv, sync, rm) does around the API call: live progress, dry-run
and --json records, the summary, and the exit code. Also the --resume / --retry-failed switch."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import typer

from s3bulk.errors import UsageError
from s3bulk.progress import LiveProgress, json_line, print_summary
from s3bulk.report import Report

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

Start = Callable[
    [Callable[[Report], None], Callable[[list[dict[str, Any]]], None] | None], Coroutine[Any, Any, Report]
]


def continuation(
    command: str,
    resume: str | None,
    retry_failed: str | None,
    positional: list[str | None],
    overrides: dict[str, Any],
) -> Start | None:
    """The start function for --resume/--retry-failed, or None for a fresh job (whose positional
    arguments must then all be present)."""
    if resume and retry_failed:
        raise UsageError("--resume and --retry-failed exclude each other: pick one")
    job_id = resume or retry_failed
    if job_id is None:
        if any(value is None for value in positional):
            raise UsageError(f"missing arguments: see s3bulk {command} --help (or --resume JOB)")
        return None
    if any(value is not None for value in positional):
        raise UsageError(f"--resume/--retry-failed {job_id} reuses the job's own locations: drop them")
    mode = "resume" if resume else "retry-failed"

    def start(
        on_progress: Callable[[Report], None], on_records: Callable[[list[dict[str, Any]]], None] | None
    ) -> Coroutine[Any, Any, Report]:
        from s3bulk.runner import continue_job  # the engine loads only when a job runs

        return continue_job(
            job_id,
            mode,
            expect_command=command,
            overrides=overrides,
            on_progress=on_progress,
            on_records=on_records,
        )

    return start


def run_job(start: Start, *, verb: str, as_json: bool, dry_run: bool) -> int:
    """Run a job with live progress; print records, failures and the summary; return the exit code."""
    out = sys.stdout

    def print_records(records: list[dict[str, Any]]) -> None:
        for record in records:
            if as_json:
                json_line({"status": "ok", "dry_run": dry_run, **record}, out)
            elif record.get("destination"):
                out.write(f"(dryrun) {verb} {record['source']} {record['destination']}\n")
            else:
                out.write(f"(dryrun) rm {record['source']}\n")

    async def main(progress: LiveProgress) -> Report:
        # SIGTERM stops the job as Ctrl-C does: cleaned up, journaled, resumable
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, _cancel, asyncio.current_task())
        return await start(progress.update, print_records if (as_json or dry_run) else None)

    with LiveProgress(enabled=not as_json) as progress:
        report = asyncio.run(main(progress))
    if as_json:
        for failure in report.failures:
            status = "skipped" if failure.skipped else "failed"
            json_line({"status": status, **failure.__dict__}, out)
        json_line({"summary": report.to_dict() | {"failures": len(report.failures)}}, out)
    else:
        print_summary(report)
    return 0 if report.ok else 1


def _cancel(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()
