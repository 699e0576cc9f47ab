"""What every function of the Python API shares: the blocking twin of an async function (like
obstore's verbs, with the very signature), and a command's spec built from plain arguments and run.

Each function takes plain arguments (a str or a `Path` for a location, one glob or several), builds
the command's typed spec (`s3bulk._commands`), which checks them, and runs it (`s3bulk._runner`).
Its defaults are the spec's: written once, there."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, ParamSpec, TypeVar

from s3bulk._commands.base import Spec
from s3bulk._config import AwsSettings
from s3bulk._engine.loop import run_loop
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError
from s3bulk._report import Report

Progress = Callable[[Report], None] | None
Records = Callable[[list[dict[str, Any]]], None] | None
Location = str | os.PathLike[str]
Patterns = str | Iterable[str]
P = ParamSpec("P")
R = TypeVar("R")
RUN_OPTIONS = ("settings", "journal", "on_progress", "on_records")


def sync_twin(function: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, R]:
    """The blocking twin of an async API function, with its very signature (IDEs and type
    checkers see every parameter), run in a fresh event loop like obstore's sync verbs."""

    @functools.wraps(function)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
        return run_loop(function(*args, **kwargs))

    name = function.__name__.removesuffix("_async")
    blocking.__name__ = blocking.__qualname__ = name
    blocking.__doc__ = f"Synchronous twin of `{function.__name__}`.\n\n{function.__doc__ or ''}"
    return blocking


async def run_async(
    spec: Spec,
    *,
    settings: AwsSettings | None = None,
    journal: bool = True,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Run any command's spec (CopySpec, SyncSpec, RemoveSpec, ...): what each function of the API
    does once it has built its spec, and what the CLI calls."""
    from s3bulk._runner import execute

    return await execute(spec, settings, journal=journal, on_progress=on_progress, on_records=on_records)


run = sync_twin(run_async)


def spec_of(kind: type[Spec], engine: EngineSpec, arguments: dict[str, Any]) -> tuple[Spec, dict[str, Any]]:
    """A function's arguments as its command's spec (engine settings into an EngineSpec) and the
    options of the run itself (settings, journal, callbacks)."""
    options = dict(arguments)
    run_options = {name: options.pop(name) for name in RUN_OPTIONS if name in options}
    knobs = {name: options.pop(name) for name in EngineSpec.__dataclass_fields__ if name in options}
    return kind(engine=dataclasses.replace(engine, **knobs), **options), run_options


async def run_spec(kind: type[Spec], engine: EngineSpec, arguments: dict[str, Any]) -> Report:
    """A function's arguments (its `locals()`) as its command's spec, run."""
    if arguments.get("files_from") is not None:
        arguments = arguments | {"files_from": os.fspath(arguments["files_from"])}
    spec, run_options = spec_of(kind, engine, arguments)
    if getattr(spec, "show_attributes", False) and run_options.get("on_records") is None:
        raise UsageError("show_attributes=True puts each object's attributes in its record: pass on_records")
    return await run_async(spec, **run_options)
