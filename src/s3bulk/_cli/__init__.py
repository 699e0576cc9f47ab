"""The `s3bulk` command. Thin: parse options, call the API, print. No logic lives here."""

from __future__ import annotations

import contextlib
import gc
import importlib
import inspect
import os
import pkgutil
import sys
from typing import NamedTuple

import typer

from s3bulk._cli.output import Interrupted, guarded, install, written
from s3bulk._errors import S3BulkError, UsageError
from s3bulk._text import printable

app = typer.Typer(
    name="s3bulk",
    help="Bulk work on S3 that saturates the service, not the Python interpreter.",
    no_args_is_help=True,
    add_completion=True,  # s3bulk --install-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
COMMANDS: list[str] = []  # names, as registered below
GROUPS: dict[str, list[str]] = {}  # `s3bulk vectors put`: group name -> its commands


def _register(arguments: list[str]) -> None:
    """Every module of this package adds the commands it declares (`COMMANDS`: name -> function,
    `GROUPS`: name -> a typer app of subcommands): a new command is a new module, nothing else.

    A command whose module bears its name (`ls.py` for `s3bulk ls`) is registered alone: it then
    pays for its own imports, not for every command's (`ls` of one key: 0.20 s -> 0.15 s). Help,
    completion and the commands of modules named otherwise (`mv`, in `cp.py`) register all."""
    word = next((argument for argument in arguments if not argument.startswith("-")), None)
    names = [found.name for found in pkgutil.iter_modules(__path__)]
    if word in names:
        _register_module(word)
        if word in COMMANDS or word in GROUPS:
            return
    for name in names:
        _register_module(name)


def _register_module(name: str) -> None:
    if name in _REGISTERED:
        return
    _REGISTERED.add(name)
    module = importlib.import_module(f"{__name__}.{name}")
    for command_name, command in getattr(module, "COMMANDS", {}).items():
        entry = MENU[command_name]
        app.command(
            name=command_name,
            help=_help(command_name, command.__doc__),
            short_help=entry.summary,
            rich_help_panel=entry.panel,
            hidden=command_name in ALIASES,
        )(guarded(command))
        COMMANDS.append(command_name)
    for group_name, group in getattr(module, "GROUPS", {}).items():
        entry = MENU[group_name]
        for each in group.registered_commands:
            words = f"{group_name} {each.name}"
            each.help, each.short_help = (
                _help(words, each.callback.__doc__ if each.callback else ""),
                SUBMENU[words].summary,
            )
        app.add_typer(group, name=group_name, short_help=entry.summary, rich_help_panel=entry.panel)
        GROUPS[group_name] = [each.name or "" for each in group.registered_commands]
    _in_order()


_REGISTERED: set[str] = set()


class Entry(NamedTuple):
    """A command as `s3bulk --help` lists it, and the line its own help starts with."""

    panel: str
    summary: str  # one line of `s3bulk --help`
    example: str  # what a person most often types


TRANSFERS, SINGLE, BUCKETS, JOBS, BEYOND, MEASURE = (
    "Transfers",
    "One object, or a look at many",
    "Buckets",
    "Jobs",
    "Your function, vectors and arrays",
    "Measure",
)
# the listing's order: panels as people look for them, the everyday command first in each
MENU = {
    "cp": Entry(
        TRANSFERS, "Copy files and objects: up, down, S3 to S3", "s3bulk cp ./dir/ s3://bucket/prefix/"
    ),
    "sync": Entry(
        TRANSFERS, "Make DST hold what SRC holds, moving what differs", "s3bulk sync ./dir/ s3://bucket/p/"
    ),
    "mv": Entry(
        TRANSFERS, "Copy, then delete each source that was copied", "s3bulk mv s3://b/in/ s3://b/done/"
    ),
    "rm": Entry(TRANSFERS, "Delete a key, a prefix/ or a glob", "s3bulk rm s3://bucket/logs/2024/"),
    "check": Entry(
        TRANSFERS, "List what differs between two trees; copy nothing", "s3bulk check ./dir/ s3://b/p/"
    ),
    "restore": Entry(
        TRANSFERS,
        "Restore archived objects (Glacier, Deep Archive) under a prefix",
        "s3bulk restore s3://bucket/2019/ --days 7 --tier Bulk",
    ),
    "run": Entry(TRANSFERS, "Run a file of cp/mv/rm lines as one job", "s3bulk run commands.txt"),
    "ls": Entry(SINGLE, "List buckets, a level, or every key (-r)", "s3bulk ls s3://bucket/prefix/"),
    "cat": Entry(SINGLE, "Write an object to stdout", "s3bulk cat s3://bucket/key | head"),
    "pipe": Entry(SINGLE, "Upload stdin to an object", "tar c dir | s3bulk pipe s3://bucket/dir.tar"),
    "head": Entry(SINGLE, "Every attribute of an object (alias: stat)", "s3bulk head s3://bucket/key"),
    "stat": Entry(SINGLE, "Every attribute of an object (alias of head)", "s3bulk stat s3://bucket/key"),
    "presign": Entry(SINGLE, "Print a presigned URL for an object", "s3bulk presign s3://bucket/key"),
    "du": Entry(SINGLE, "Count objects and bytes under a prefix", "s3bulk du s3://bucket/prefix/"),
    "mb": Entry(BUCKETS, "Make a bucket", "s3bulk mb s3://bucket"),
    "rb": Entry(BUCKETS, "Remove a bucket (--force: empty it first)", "s3bulk rb --force s3://bucket"),
    "versioning": Entry(
        BUCKETS, "A bucket's versioning: enable, suspend, status", "s3bulk versioning enable s3://bucket"
    ),
    "multipart": Entry(
        BUCKETS, "Unfinished multipart uploads: list, abort", "s3bulk multipart ls s3://bucket/"
    ),
    "jobs": Entry(JOBS, "Journaled jobs: state, done, failed (resume them)", "s3bulk jobs"),
    "map": Entry(BEYOND, "Run your Python function over every object", "s3bulk map mymodule:fn s3://b/in/"),
    "vectors": Entry(
        BEYOND,
        "S3 Vectors in bulk: load, sync, export, delete, query",
        "s3bulk vectors put emb/ --bucket v --index i",
    ),
    "gather": Entry(
        BEYOND,
        "Read one selection out of many HDF5 files",
        "s3bulk gather 's3://b/wtk/*.h5' -d ws -s ':,42' -o x.npy",
    ),
    "bench": Entry(MEASURE, "Time a workload per engine and peer tool", "s3bulk bench download"),
    "doctor": Entry(MEASURE, "Measure a location; recommend settings", "s3bulk doctor s3://bucket/prefix/"),
}
# a group's commands (`s3bulk vectors put`): their line in the group's help, and an example
SUBMENU = {
    "vectors put": Entry(
        BEYOND, "Load embeddings at the per-index write limit", "s3bulk vectors put emb/ --bucket v --index i"
    ),
    "vectors export": Entry(
        BEYOND,
        "Export every vector of an index to Parquet, resumable",
        "s3bulk vectors export out/ --bucket v --index i",
    ),
    "vectors copy": Entry(
        BEYOND,
        "Copy an index into another (bucket, account, region; a new metric with --create)",
        "s3bulk vectors copy --bucket v --index i --to-index i2 --create --metric euclidean",
    ),
    "vectors delete": Entry(
        BEYOND,
        "Delete vectors by key or by metadata filter, at the per-index write limit",
        "s3bulk vectors delete gone.txt --bucket v --index i --dry-run",
    ),
    "vectors query": Entry(
        BEYOND,
        "Run many queries, results as Parquet rows; --recall checks them",
        "s3bulk vectors query q.parquet --bucket v --index i -k 10 -o results/",
    ),
    "vectors sync": Entry(
        BEYOND,
        "Make an index equal to a source: put what changed, --delete what is gone",
        "s3bulk vectors sync emb/ --bucket v --index i --delete --dry-run",
    ),
    "vectors verify": Entry(
        BEYOND,
        "Fetch a sample back and compare it with the source",
        "s3bulk vectors verify emb/ --bucket v --index i",
    ),
    "vectors count": Entry(
        BEYOND, "Count the vectors in each index", "s3bulk vectors count --bucket v --index i"
    ),
    "vectors create-bucket": Entry(BEYOND, "Create a vector bucket", "s3bulk vectors create-bucket v"),
    "vectors create-index": Entry(
        BEYOND,
        "Create an index in a vector bucket",
        "s3bulk vectors create-index --bucket v --index i --dimension 1024",
    ),
    "versioning enable": Entry(
        BUCKETS, "Keep every version of what is written or deleted", "s3bulk versioning enable s3://bucket"
    ),
    "versioning suspend": Entry(
        BUCKETS, "Keep no new versions (kept ones stay)", "s3bulk versioning suspend s3://bucket"
    ),
    "versioning status": Entry(
        BUCKETS, "Enabled, Suspended or never enabled", "s3bulk versioning status s3://bucket"
    ),
    "multipart ls": Entry(BUCKETS, "List unfinished multipart uploads", "s3bulk multipart ls s3://bucket/"),
    "multipart abort": Entry(
        BUCKETS, "Abort unfinished multipart uploads", "s3bulk multipart abort --older-than 7d s3://bucket/"
    ),
}
ALIASES = {"stat"}  # listed under the command they alias, not on a line of their own


def _help(name: str, docstring: str | None) -> str:
    """A command's help: its summary and example first, then what its docstring says."""
    entry = MENU.get(name) or SUBMENU[name]
    return f"{entry.summary}.\n\nExample: {entry.example}\n\n{inspect.cleandoc(docstring or '')}"


def _in_order() -> None:
    """The registered commands in MENU's order (typer lists them as registered)."""
    rank = {name: index for index, name in enumerate(MENU)}
    app.registered_commands.sort(key=lambda info: rank.get(info.name or "", len(rank)))
    app.registered_groups.sort(key=lambda info: rank.get(info.name or "", len(rank)))


def _print_version(value: bool) -> None:
    if value:
        from s3bulk._config import version_line

        sys.stdout.write(version_line() + "\n")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
    log_level: str | None = typer.Option(
        None, "--log-level", help="debug, info, warning or error: retries and waits (any command, anywhere)."
    ),
    log_file: str | None = typer.Option(None, "--log-file", help="Write the log there, not to stderr."),
    no_progress: bool = typer.Option(
        False, "--no-progress", help="No live line on a terminal, no periodic stats line elsewhere."
    ),
) -> None:
    """Bulk work on S3 that saturates the service, not the Python interpreter."""


# Options every command takes, anywhere on the line (`s3bulk cp --log-level debug a b`): taken out
# before typer parses the command, so no command has to declare them.
GLOBAL_OPTIONS = {"--log-level": True, "--log-file": True, "--no-progress": False}
LOG_LEVELS = ("debug", "info", "warning", "error")


def take_global_options(arguments: list[str]) -> tuple[list[str], dict[str, str]]:
    """(the other arguments, {option: value}) with the global options removed; after a bare
    `--` everything is an argument."""
    rest: list[str] = []
    found: dict[str, str] = {}
    words = iter(arguments)
    for word in words:
        if word == "--":
            rest.append(word)
            rest.extend(words)
            break
        name, equals, value = word.partition("=")
        if name not in GLOBAL_OPTIONS:
            rest.append(word)
            continue
        if GLOBAL_OPTIONS[name] and not equals:
            value = next(words, "")
            if not value:
                raise UsageError(f"{name} needs a value")
        found[name] = value
    return rest, found


# The account's options, which each command declares: written before the command (`s3bulk
# --profile p ls`, as aws takes them), they are moved to the end of its line.
ACCOUNT_OPTIONS = {"--profile": True, "--endpoint-url": True, "--region": True, "--no-verify-ssl": False}


def account_options_last(arguments: list[str]) -> list[str]:
    """The arguments with the account options that come before the command moved after it (to
    its end, or before a bare `--`), where the command's own parser reads them."""
    moved: list[str] = []
    index = 0
    while index < len(arguments):
        name, equals, _ = arguments[index].partition("=")
        if name not in ACCOUNT_OPTIONS:
            break
        taken = 2 if ACCOUNT_OPTIONS[name] and not equals else 1
        moved.extend(arguments[index : index + taken])
        index += taken
    rest = arguments[index:]
    if not moved or not rest:
        return arguments
    end = rest.index("--") if "--" in rest else len(rest)
    return [*rest[:end], *moved, *rest[end:]]


def apply_global_options(found: dict[str, str]) -> None:
    """--log-level/--log-file configure the standard `logging` of the "s3bulk" logger (retries,
    waits, give-ups; URLs, never credentials); --no-progress turns off progress output."""
    level = found.get("--log-level")
    if level is not None and level.lower() not in LOG_LEVELS:
        raise UsageError(f"--log-level {level!r}: use one of {', '.join(LOG_LEVELS)}")
    if level is not None or "--log-file" in found:
        import logging

        path = found.get("--log-file")
        handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("s3bulk")  # ours only: botocore's debug log prints signed headers
        logger.addHandler(handler)
        logger.setLevel((level or "info").upper())
    if "--no-progress" in found:
        from s3bulk._cli import progress

        progress.ENABLED = False


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (0 only when every object succeeded).

    The command owns this interpreter, so its collector runs less often: a listing makes a
    tuple per key and pages wait in queues, and with the default threshold (700 new objects)
    collections cost ~12% of an `ls -r`'s CPU. Cycles are still collected, a little later."""
    gc.set_threshold(10_000, 20, 20)
    install()
    return written(_run(sys.argv[1:] if argv is None else argv))


def _run(arguments: list[str]) -> int:
    try:
        arguments, found = take_global_options(arguments)
        arguments = account_options_last(arguments)
        apply_global_options(found)
        _register(arguments)
        result = app(args=arguments, prog_name="s3bulk", standalone_mode=False)
        return int(result or 0)
    except Interrupted as exc:
        detail = f": {printable(str(exc))}" if str(exc) else ""
        sys.stderr.write(f"interrupted{detail}\n")
        return exc.exit_code
    except S3BulkError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except typer.TyperException as exc:  # typer's (vendored click) usage errors: unknown flags etc.
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        sys.stderr.write(f"error: {printable(message)} (see: {_help_for(arguments)})\n")
        return int(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


def _help_for(arguments: list[str]) -> str:
    """The help that explains the mistake: the command's own, if the command exists."""
    words = [arg for arg in arguments if not arg.startswith("-")][:2]
    if not words or words[0] not in (*COMMANDS, *GROUPS):
        return "s3bulk --help"
    if len(words) > 1 and words[1] in GROUPS.get(words[0], ()):
        return f"s3bulk {words[0]} {words[1]} --help"
    return f"s3bulk {words[0]} --help"


def main() -> None:
    """Entry point. Exits with os._exit after flushing: a native runtime's threads can abort a
    normal interpreter shutdown after all work is done (docs/architecture.md, hazards),
    and the exit code must reflect the job, never that."""
    code = run()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, OSError):
            stream.flush()
    os._exit(code)
