"""The commands s3bulk runs on its engine, by name: each is a typed spec and a Command (how it
becomes a job), declared in a module of this package (`COMMANDS = (SomeCommand(),)`). Adding one
is a module here and a file in `_cli/`; nothing else names it: the registry finds it.

Building a spec, or starting the CLI, imports every command module, so they stay light: what
needs numpy (vectors, gather) is loaded when such a job runs.
"""

from __future__ import annotations

import importlib
import pkgutil

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.copy import CopySpec, MoveSpec
from s3bulk._commands.gather import GatherSpec
from s3bulk._commands.put_vectors import PutVectorsSpec
from s3bulk._commands.remove import RemoveSpec
from s3bulk._commands.sync import SyncSpec
from s3bulk._errors import UsageError


def _discover() -> dict[str, Command]:
    found: dict[str, Command] = {}
    for module in pkgutil.iter_modules(__path__):
        for command in getattr(importlib.import_module(f"{__name__}.{module.name}"), "COMMANDS", ()):
            found[command.name] = command
    return found


COMMANDS = _discover()


def command_named(name: str) -> Command:
    try:
        return COMMANDS[name]
    except KeyError:
        raise UsageError(f"unknown command {name!r}: s3bulk runs {', '.join(sorted(COMMANDS))}") from None


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
