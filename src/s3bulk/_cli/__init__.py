"""The `s3bulk` command. Thin: parse options, call the API, print. No logic lives here."""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pkgutil
import sys

import typer

from s3bulk._cli.output import Interrupted, guarded, install
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
        app.command(name=command_name)(guarded(command))
        COMMANDS.append(command_name)
    for group_name, group in getattr(module, "GROUPS", {}).items():
        app.add_typer(group, name=group_name)
        GROUPS[group_name] = [each.name or "" for each in group.registered_commands]


_REGISTERED: set[str] = set()


def _print_version(value: bool) -> None:
    if value:
        from s3bulk import __version__

        sys.stdout.write(f"s3bulk {__version__}\n")
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
    arguments = sys.argv[1:] if argv is None else argv
    try:
        arguments, found = take_global_options(arguments)
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
