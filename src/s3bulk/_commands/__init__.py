"""The commands s3bulk runs on its engine, by name: each is a typed spec and a Command (how it
becomes a job), declared in a module of this package (`COMMANDS = (SomeCommand(),)`). Adding one
is a module here and a file in `_cli/`; nothing else names it: the registry finds it.

A job loads only its own command's module (`command_for`: the one that declares its spec), so a
`cp` does not import `sync`, `gather` or `map`; a name alone (a journal's, to resume it) loads
them all once (`commands`). Command modules stay light either way: what needs numpy (vectors,
gather) is loaded when such a job runs.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._errors import UsageError


@functools.cache
def commands() -> dict[str, Command]:
    """Every command, by name: each module of this package imported once."""
    found: dict[str, Command] = {}
    for module in pkgutil.iter_modules(__path__):
        for command in getattr(importlib.import_module(f"{__name__}.{module.name}"), "COMMANDS", ()):
            found[command.name] = command
    return found


def command_named(name: str) -> Command:
    try:
        return commands()[name]
    except KeyError:
        raise UsageError(f"unknown command {name!r}: s3bulk runs {', '.join(sorted(commands()))}") from None


def command_for(spec: Spec) -> Command:
    """The command that runs `spec`, from the module that declares the spec's class (already
    imported: the spec was made from it), without importing any other command's."""
    declared: tuple[Command, ...] = getattr(importlib.import_module(type(spec).__module__), "COMMANDS", ())
    return next((command for command in declared if command.name == spec.command), None) or command_named(
        spec.command
    )


__all__ = ["Command", "JobPlan", "Spec", "command_for", "command_named", "commands"]
