"""Where the CLI's words go, and what happens when nobody is there to read them.

- Lines for people pass through `printable`: a key can hold terminal escapes.
- stdout may be a pipe its reader closes early (`s3bulk cp ... | head -1`). A job must not fail,
  or stop half-way, because its log is no longer read: later writes are dropped and the exit code
  stays the job's. A listing, whose only product is its output, stops (`Guarded.broken`).
- stdout may refuse a write for another reason (a full disk, `> /dev/full`; an I/O error): later
  writes are dropped alike, and the command, whatever it is, ends with one line saying so and
  exit 1 (`written`), not a traceback, nor exit 0 with its output lost.
- Ctrl-C: typer turns a KeyboardInterrupt into a silent exit code; `guarded` commands turn it
  into `Interrupted`, whose line (naming the job and how to finish it) `cli.run` prints.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from s3bulk._errors import JobInterrupted, S3BulkError
from s3bulk._text import printable

F = TypeVar("F", bound=Callable[..., Any])


class Interrupted(S3BulkError):
    """Ctrl-C or SIGTERM stopped the command; str() says what was stopped and how to go on."""

    exit_code = 130


class Guarded:
    """A text stream whose writes are dropped once it refused one: its reader gone (EPIPE), or
    `failed` (ENOSPC, EIO, ...)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.broken = False
        self.failed: OSError | None = None  # why a write was refused, when not for a reader gone

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self.stream.write(text)
            except OSError as exc:
                self.lost(exc)
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except OSError as exc:
                self.lost(exc)

    def lost(self, exc: OSError) -> None:
        """Nothing more can be written: point the descriptor at /dev/null, so nothing (a flush at
        exit, a native library) can fail on it again."""
        self.broken = True
        if exc.errno != errno.EPIPE:
            self.failed = exc
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...
        return getattr(self.stream, name)


def install() -> None:
    """Guard stdout and stderr for the rest of the process (the CLI's entry point calls it)."""
    if not isinstance(sys.stdout, Guarded):
        sys.stdout = Guarded(sys.stdout)
    if not isinstance(sys.stderr, Guarded):
        sys.stderr = Guarded(sys.stderr)


def stdout_gone() -> bool:
    return isinstance(sys.stdout, Guarded) and sys.stdout.broken


def refused(exc: OSError) -> None:
    """stdout refused a write made past `Guarded` (bytes, to its buffer: `cat`): taken as one
    refused to it."""
    if isinstance(sys.stdout, Guarded):
        sys.stdout.lost(exc)


def written(code: int) -> int:
    """A command's exit code once what it wrote is flushed: when stdout refused a write (not
    for its reader gone), one line says so, and the code is at least 1."""
    sys.stdout.flush()
    failed = getattr(sys.stdout, "failed", None)
    if failed is None:
        return code
    sys.stderr.write(f"error: cannot write the output (stdout): {failed.strerror or failed}\n")
    return code or 1


def say(line: str, *, err: bool = False) -> None:
    """One line for people, with anything a terminal would act on escaped."""
    (sys.stderr if err else sys.stdout).write(printable(line) + "\n")


def guarded(command: F) -> F:
    """A typer command whose Ctrl-C reaches `cli.run` as `Interrupted` with its message."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except JobInterrupted as exc:  # its line names the command, not the Python call
            raise Interrupted(exc.in_the_shell()) from None
        except KeyboardInterrupt as exc:
            raise Interrupted(str(exc)) from None

    return run  # type: ignore[return-value]
