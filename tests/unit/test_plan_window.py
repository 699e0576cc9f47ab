"""The size and time window's arithmetic (durations, bounds), without a server."""

from __future__ import annotations

import pytest

from s3bulk._cli.window import duration, window
from s3bulk._errors import UsageError

DAY = 86400


def test_durations_and_window_arithmetic() -> None:
    assert (
        duration("90", "--x") == 90
        and duration("1d12h", "--x") == 1.5 * DAY
        and duration("2w", "--x") == 14 * DAY
    )
    chosen = window(None, None, None, None, "7d", "30d", now=1_000_000_000.0)
    assert (
        chosen["older_than"] == 1_000_000_000.0 - 7 * DAY
        and chosen["newer_than"] == 1_000_000_000.0 - 30 * DAY
    )
    with pytest.raises(UsageError):
        duration("7 days", "--min-age")
