"""The `s3bulk` command. Thin: parse options, call the API, print. No logic lives here."""

from __future__ import annotations

import contextlib
import os
import sys

import typer

from s3bulk.cli import bench, cp, doctor, gather, jobs, ls, rm, sync, vectors
from s3bulk.errors import S3BulkError

app = typer.Typer(
    name="s3bulk",
    help="Bulk work on S3 that saturates the service, not the Python interpreter.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command(name="ls")(ls.ls_command)
app.command(name="cp")(cp.cp_command)
app.command(name="mv")(cp.mv_command)
app.command(name="sync")(sync.sync_command)
app.command(name="rm")(rm.rm_command)
app.command(name="jobs")(jobs.jobs_command)
app.command(name="bench")(bench.bench_command)
app.command(name="doctor")(doctor.doctor_command)
app.command(name="gather")(gather.gather_command)
app.add_typer(vectors.app, name="vectors")


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (0 only when every object succeeded)."""
    try:
        result = app(args=argv, prog_name="s3bulk", standalone_mode=False)
        return int(result or 0)
    except S3BulkError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except typer.TyperException as exc:  # typer's (vendored click) usage errors: unknown flags etc.
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        command = " ".join(arg for arg in (argv or sys.argv[1:])[:1] if not arg.startswith("-"))
        sys.stderr.write(f"error: {message} (see: s3bulk {command} --help)\n".replace("  ", " "))
        return int(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


def main() -> None:
    """Entry point. Exits with os._exit after flushing: a native runtime's threads can abort a
    normal interpreter shutdown after all work is done (ARCHITECTURE.md, known hazards), and the
    exit code must reflect the job, never that."""
    code = run()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, OSError):
            stream.flush()
    os._exit(code)
