"""The size and time options of cp, mv, sync and rm, written once: `with_window_options` adds
--min-size, --max-size, --newer-than, --older-than, --min-age and --max-age to a command and hands
it four values (bytes, and seconds since the epoch: an age becomes a time when the job is made,
so a resumed job keeps the same cut-off)."""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

import typer

from s3bulk._cli.options import SELECTION, in_panel, option_group
from s3bulk._config import parse_size
from s3bulk._errors import UsageError

_OPTIONS: dict[str, Any] = {
    "min_size_text": typer.Option(None, "--min-size", help="Only those of at least this size (1MiB)."),
    "max_size_text": typer.Option(None, "--max-size", help="Only those of at most this size."),
    "newer_than_text": typer.Option(None, "--newer-than", help="Only those modified since (ISO 8601)."),
    "older_than_text": typer.Option(None, "--older-than", help="Only those modified before (ISO 8601)."),
    "min_age_text": typer.Option(None, "--min-age", help="Only those at least this old (e.g. 7d, 12h, 30m)."),
    "max_age_text": typer.Option(None, "--max-age", help="Only those at most this old (e.g. 1d)."),
}
in_panel(SELECTION, *_OPTIONS.values())
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


# `command` with the size and time options added; called with `min_size`, `max_size`,
# `newer_than`, `older_than` (checked first: a bad value is one line and exit 2)
with_window_options = option_group(
    {name: (str | None, option) for name, option in _OPTIONS.items()},
    ("min_size", "max_size", "newer_than", "older_than"),
    lambda given: window(**given),
)


def window(
    min_size_text: str | None,
    max_size_text: str | None,
    newer_than_text: str | None,
    older_than_text: str | None,
    min_age_text: str | None,
    max_age_text: str | None,
    now: float | None = None,
) -> dict[str, Any]:
    now = time.time() if now is None else now
    if newer_than_text and max_age_text:
        raise UsageError("--newer-than and --max-age say the same thing: give one")
    if older_than_text and min_age_text:
        raise UsageError("--older-than and --min-age say the same thing: give one")
    newer = moment(newer_than_text, "--newer-than") if newer_than_text else None
    older = moment(older_than_text, "--older-than") if older_than_text else None
    if max_age_text:
        newer = now - duration(max_age_text, "--max-age")
    if min_age_text:
        older = now - duration(min_age_text, "--min-age")
    return {
        "min_size": parse_size(min_size_text, "--min-size") if min_size_text else None,
        "max_size": parse_size(max_size_text, "--max-size") if max_size_text else None,
        "newer_than": newer,
        "older_than": older,
    }


def duration(text: str, flag: str) -> float:
    """Seconds in '90', '45s', '30m', '12h', '7d', '2w' (parts may add up: '1d12h')."""
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?[smhdw]?)+", text.strip())
    if not parts:
        raise UsageError(f"{flag} {text!r}: give a duration such as 45s, 30m, 12h, 7d or 2w")
    return sum(
        float(number) * _UNITS[unit or "s"]
        for number, unit in re.findall(r"(\d+(?:\.\d+)?)([smhdw]?)", text.strip())
    )


def moment(text: str, flag: str) -> float:
    """Seconds since the epoch from ISO 8601 ('2026-01-31', '2026-01-31T10:00:00Z'); no zone
    means local time, as `find -newermt` reads it."""
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(f"{flag} {text!r}: give a time such as 2026-01-31 or 2026-01-31T10:00:00Z") from None
