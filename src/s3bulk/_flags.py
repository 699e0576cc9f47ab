"""How the command line names a spec's field (`Flag`), declared on the field itself: the CLI
makes each command's options from its spec's fields (`_cli/options.spec_options`), so an option
is written once. It sits at the bottom of the package so that a command which reads an option
itself without loading any job (ls's --list-ranges) takes the same declaration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from s3bulk._config import parse_size, parse_switch, size_text
from s3bulk._errors import UsageError


@dataclass(frozen=True)
class Flag:
    """How the command line names a spec field: its flags, its help, how its text reads (None: a
    switch, or a repeatable glob for a tuple), how its default shows in the help, and whether the
    flag says the field's opposite (--ignore-checksum sets `verify` False). `_cli/options.spec_options`
    makes every command's options from these, so an option is declared once, on its field."""

    flags: tuple[str, ...]
    help: str
    read: Callable[[str, str], Any] | None = None  # (text, flag) -> the field's value
    shown: Callable[[Any], str] | None = None  # the default as the help shows it ("8MiB")
    opposite: bool = False
    panel: str = "selection"  # selection, speed, job or account: the help's section
    positional: bool = False  # an argument, not an option (`flags` empty)


def verbatim(text: str, flag: str) -> str:
    """A text option read as it is written (a path)."""
    return text


def option(
    *flags: str,
    help: str,
    read: Callable[[str, str], Any] | None = None,
    shown: Callable[[Any], str] | None = None,
    opposite: bool = False,
    panel: str = "selection",
) -> dict[str, Flag]:
    """A field's metadata naming its command-line option (`Flag`)."""
    return {"option": Flag(flags, help, read, shown, opposite, panel)}


def argument(help: str) -> dict[str, Flag]:
    """A field's metadata naming it the command's argument (one or several, by the field's type)."""
    return {"option": Flag((), help, positional=True)}


def sized(*flags: str, help: str, panel: str = "speed") -> dict[str, Flag]:
    """An option that takes a size as people write it (8MiB, 64MB, 1048576)."""
    return option(*flags, help=help, read=parse_size, shown=size_text, panel=panel)


def three_way(*flags: str, help: str, panel: str = "speed") -> dict[str, Flag]:
    """An option that takes auto, on or off (a `bool | None` field: None decides)."""
    return option(*flags, help=help, read=parse_switch, shown=lambda value: "auto", panel=panel)


def count(text: str, flag: str) -> int:
    """A count as people write it (10000, 10,000, 10_000)."""
    try:
        return int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise UsageError(f"{flag} {text}: give a count, e.g. 10000") from None


INCLUDE = option("--include", help="Only names matching this glob (repeatable).")
EXCLUDE = option("--exclude", help="Leave out names matching this glob (repeatable).")
FILES_FROM = option(
    "--files-from",
    help="Only the names in this file (one per line, relative to SRC; - reads stdin).",
    read=verbatim,
)
INVENTORY = option(
    "--inventory",
    help="Take the objects from this S3 Inventory (s3://…/manifest.json, or the destination prefix of "
    "an inventory configuration: its newest manifest) instead of listing the source: no LIST request.",
    read=verbatim,
)
DESTINATION_INVENTORY = option(
    "--destination-inventory",
    help="sync and check: take the destination's objects from this S3 Inventory instead of listing it "
    "(the source's is --inventory); a key it lists is deleted only while it is the version listed.",
    read=verbatim,
)
PART_SIZE = sized("--part-size", help="Multipart part size.")
MAX_DELETE = option("--max-delete", help="Delete at most this many, then stop the job.", read=count)
LIST_RANGES = three_way(
    "--list-ranges",
    help="List key ranges in parallel: auto (where a StartAfter probe costs less than a page), on, off.",
)
