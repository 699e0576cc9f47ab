"""`s3bulk jobs`: the journaled jobs, newest first, and how to continue them."""

from __future__ import annotations

import sys
import time

import typer

from s3bulk._cli.progress import json_line
from s3bulk._journal.local import list_jobs, state_dir
from s3bulk._text import printable


def jobs_command(
    as_json: bool = typer.Option(False, "--json", help="One JSON object per job."),
    limit: int = typer.Option(20, "--limit", help="Show at most this many jobs (0: all)."),
) -> int:
    """List journaled jobs: id, command, state, items done and failed."""
    jobs = list_jobs()
    shown = jobs[:limit] if limit else jobs
    out = sys.stdout
    if not jobs and not as_json:
        out.write(f"no jobs in {state_dir()}\n")
        return 0
    for job in shown:
        args = job.spec.get("spec") or job.spec.get("args", {})  # format 2, or 1
        named = (str(args[name]) for name in ("source", "target", "destination") if args.get(name))
        where = " ".join(printable(place) for place in named)  # a newline in one is no new job
        if as_json:
            json_line(
                {
                    "job_id": job.job_id,
                    "command": job.command,
                    "status": job.status,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(job.created)),
                    "runs": job.runs,
                    "done": job.done,
                    "failed": job.failed,
                    "args": args,
                },
                out,
            )
            continue
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(job.created))
        out.write(
            f"{job.job_id}  {created}  {job.command:<4}  {job.status:<11}  "
            f"done {job.done:,}  failed {job.failed:,}  {where}\n"
        )
        run = _cli_name(job.command)
        if job.status == "interrupted":
            out.write(f"    continue: s3bulk {run} --resume {job.job_id}\n")
        elif job.status == "failed":
            out.write(f"    rerun failures: s3bulk {run} --retry-failed {job.job_id}\n")
    return 0


def _cli_name(command: str) -> str:
    """How the user runs a journaled command (`vectors-copy` is `s3bulk vectors copy`)."""
    from s3bulk._commands import commands

    known = commands().get(command)
    return known.cli_name if known is not None else command


COMMANDS = {"jobs": jobs_command}  # found by s3bulk._cli: the commands this module adds
