"""The commands s3bulk runs on its engine, by name: each is a typed spec and a Command (how it
becomes a job). Adding one is a module here and a file in `cli/`; nothing else names it.

The modules hold specs and the small Command objects only; each job's implementation is loaded
when a job of that kind runs, so building a spec (or starting the CLI) stays cheap.
"""

from __future__ import annotations

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.copy import CopyCommand, CopySpec, MoveCommand, MoveSpec
from s3bulk._commands.gather import GatherCommand, GatherSpec
from s3bulk._commands.put_vectors import PutVectorsCommand, PutVectorsSpec
from s3bulk._commands.remove import RemoveCommand, RemoveSpec
from s3bulk._commands.sync import SyncCommand, SyncSpec
from s3bulk._errors import UsageError

COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        CopyCommand(),
        MoveCommand(),
        SyncCommand(),
        RemoveCommand(),
        PutVectorsCommand(),
        GatherCommand(),
    )
}


def command_named(name: str) -> Command:
    try:
        return COMMANDS[name]
    except KeyError:
        raise UsageError(f"unknown command {name!r}: s3bulk runs {', '.join(COMMANDS)}") from None


__all__ = [
    "COMMANDS",
    "Command",
    "CopySpec",
    "GatherSpec",
    "JobPlan",
    "MoveSpec",
    "PutVectorsSpec",
    "RemoveSpec",
    "Spec",
    "SyncSpec",
    "command_named",
]
