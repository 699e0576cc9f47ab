"""What every function of the Python API shares: the blocking twin of an async function (like
obstore's verbs, with the very signature), and a command's spec built from plain arguments and run.

Each function takes plain arguments (a str or a `Path` for a location, one glob or several), builds
the command's typed spec (`s3bulk._commands`), which checks them, and runs it (`s3bulk._runner`).
Its defaults are the spec's: written once, there."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import difflib
import functools
import inspect
import numbers
import os
import re
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, ParamSpec, TypeVar

from s3bulk._commands.base import Spec
from s3bulk._config import AwsSettings, parse_size
from s3bulk._engine.loop import run_loop
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import S3Error, UsageError, as_builtin
from s3bulk._report import Report

Progress = Callable[[Report], None] | None
Records = Callable[[list[dict[str, Any]]], None] | None
Location = str | os.PathLike[str]
Locations = Location | Iterable[Location]  # one location or several
Patterns = str | Iterable[str]
P = ParamSpec("P")
R = TypeVar("R")
RUN_OPTIONS = ("settings", "journal", "on_progress", "on_records")
_SIZED = re.compile(r"size|bytes|threshold|memory|bwlimit")  # numbers of bytes: "8MiB" reads


def known(given: Iterable[str], accepted: Iterable[str], function: str) -> None:
    """A keyword the function does not take is named as Python would, under the name the user
    called (`s3bulk.copy`, not the coroutine behind it), with the nearest one it does take."""
    names = list(accepted)
    for name in given:
        if name not in names:
            near = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"s3bulk.{function}() got an unexpected keyword argument {name!r}{hint}")


def called_as(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function whose wrong arguments are named as the user called it (`s3bulk.copy`, not the
    coroutine or the function behind it), with the nearest keyword it does take."""

    def named(function: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            known(kwargs, signature.parameters, name)
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"s3bulk.{name}(): {exc}") from None
            return function(*args, **kwargs)

        return checked

    return named


def with_builtin_errors(function: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """An async API function whose service errors are raised as Python's file functions raise
    theirs (`errors.as_builtin`: a 404 a FileNotFoundError, a 403 a PermissionError), each
    still an s3bulk.S3Error with its one line. Its blocking twin raises the same."""

    @functools.wraps(function)
    async def public(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await function(*args, **kwargs)
        except S3Error as error:
            raise as_builtin(error) from None

    return public


def sync_twin(function: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, R]:
    """The blocking twin of an async API function, with its very signature (IDEs and type
    checkers see every parameter), run in a fresh event loop like obstore's sync verbs. Called
    where an event loop already runs (a notebook cell, an async function), it cannot block that
    loop: it says to await the async function instead."""
    name = function.__name__.removesuffix("_async")

    @called_as(name)
    @functools.wraps(function)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # none: this call runs its own
            try:
                return run_loop(function(*args, **kwargs))
            except S3Error as error:
                raise as_builtin(error) from None
        raise UsageError(
            f"s3bulk.{name}() blocks, and an event loop runs here: use await s3bulk.{function.__name__}(...)"
        )

    blocking.__name__ = blocking.__qualname__ = name
    blocking.__doc__ = f"Synchronous twin of `{function.__name__}`.\n\n{function.__doc__ or ''}"
    return blocking


@with_builtin_errors
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


def as_numbers(arguments: dict[str, Any], *kinds: type[Any]) -> dict[str, Any]:
    """Numbers given as the CLI takes them (part_size="8MiB", concurrency="10") read as numbers,
    and a value of the wrong type named, before a spec compares it with anything."""
    fields = {name: f.type for kind in kinds for name, f in kind.__dataclass_fields__.items()}
    return {name: _number(name, value, str(fields.get(name, ""))) for name, value in arguments.items()}


def _number(name: str, value: Any, annotation: str) -> Any:
    counted = {"int", "float"} & set(annotation.replace("|", " ").split())
    if not counted or value is None or "str" in annotation:
        return value
    if isinstance(value, str) and name in ("newer_than", "older_than"):  # "2026-11-01T00:00:00Z"
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"{name}={value!r}: give a time, e.g. 2026-11-01T00:00:00Z") from None
    if isinstance(value, str):
        if "int" in counted and _SIZED.search(name):
            return parse_size(value, name)
        try:
            return int(value) if "int" in counted else float(value)
        except ValueError:
            raise UsageError(f"{name}={value!r}: expected a number") from None
    if not isinstance(value, numbers.Real | datetime.datetime):  # numpy's integers are Real too
        raise TypeError(f"{name} must be a number (or a str such as '8MiB'), not {type(value).__name__}")
    return value


def spec_of(kind: type[Spec], engine: EngineSpec, arguments: dict[str, Any]) -> tuple[Spec, dict[str, Any]]:
    """A function's arguments as its command's spec (engine settings into an EngineSpec) and the
    options of the run itself (settings, journal, callbacks)."""
    options = as_numbers(arguments, kind, EngineSpec)
    run_options = {name: options.pop(name) for name in RUN_OPTIONS if name in options}
    knobs = {name: options.pop(name) for name in EngineSpec.__dataclass_fields__ if name in options}
    return kind(engine=dataclasses.replace(engine, **knobs), **options), run_options


def made(kind: Callable[..., R], arguments: dict[str, Any]) -> R:
    """A function's arguments, named one by one, as the spec of a command that is no job
    (vectors verify, count): its numbers read as the CLI reads them, its checks run."""
    return kind(**as_numbers(arguments, kind))  # type: ignore[arg-type]


async def run_spec(kind: type[Spec], engine: EngineSpec, arguments: dict[str, Any]) -> Report:
    """A function's arguments, named one by one, as its command's spec, run."""
    if arguments.get("files_from") is not None:
        arguments = arguments | {"files_from": os.fspath(arguments["files_from"])}
    spec, run_options = spec_of(kind, engine, arguments)
    if getattr(spec, "show_attributes", False) and run_options.get("on_records") is None:
        raise UsageError("show_attributes=True puts each object's attributes in its record: pass on_records")
    return await run_async(spec, **run_options)
