"""Objects in an archive tier (S3 Glacier Flexible Retrieval, Deep Archive): what tells that an
object is one, whether a restored copy of it is ready or on its way (`x-amz-restore`), the
RestoreObject request, and the one line a copy of such an object fails with.

A GET or a CopyObject of an archived object that has no restored copy is refused by S3
(`InvalidObjectState`, 403; CopyObject: `ObjectNotInActiveTierError`): s3bulk says what to do
instead of the service's words.
"""

from __future__ import annotations

import html
from typing import NamedTuple

from s3bulk._errors import ItemError, S3Error, UsageError

# the classes whose bytes a GET cannot read until a RestoreObject has made a copy of them
ARCHIVED = frozenset({"GLACIER", "DEEP_ARCHIVE"})
TIERS = ("Bulk", "Standard", "Expedited")
# what S3 answers a GET or a CopyObject of an archived object that has no restored copy
ARCHIVED_CODES = frozenset({"InvalidObjectState", "ObjectNotInActiveTierError"})


class RestoreState(NamedTuple):
    """What `x-amz-restore` says: a restore under way, or a restored copy ready until then."""

    ongoing: bool
    ready_until: str  # the expiry-date as the service wrote it ("" while ongoing)

    def to_json(self) -> dict[str, object]:
        return {"ongoing": self.ongoing, "ready_until": self.ready_until}


def restore_state(header: str) -> RestoreState | None:
    """`ongoing-request="false", expiry-date="Fri, 21 Dec 2012 00:00:00 GMT"` as a RestoreState;
    None for no header (never restored, or the copy expired)."""
    if not header:
        return None
    fields: dict[str, str] = {}
    for part in _fields(header):
        name, _, value = part.partition("=")
        fields[name.strip().lower()] = value.strip().strip('"')
    ongoing = fields.get("ongoing-request", "").lower() == "true"
    return RestoreState(ongoing, "" if ongoing else fields.get("expiry-date", ""))


def _fields(header: str) -> list[str]:
    """The header's name="value" pairs: split on the commas outside quotes (a date holds one)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in header:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def check_restore_options(days: int, tier: str) -> None:
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise UsageError(f"--days {days!r}: give the whole days the restored copy stays, 1 or more")
    if tier not in TIERS:
        raise UsageError(f"--tier {tier!r}: give one of {', '.join(TIERS)}")


def restore_body(days: int, tier: str) -> bytes:
    """A RestoreObject request: a copy kept `days`, made at `tier`'s speed and price."""
    return (
        '<RestoreRequest xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Days>{days}</Days><GlacierJobParameters><Tier>{html.escape(tier)}</Tier>"
        "</GlacierJobParameters></RestoreRequest>"
    ).encode()


def tier_refused(storage_class: str, tier: str) -> str:
    """Why `tier` cannot restore an object of `storage_class` ("" when it can)."""
    if storage_class == "DEEP_ARCHIVE" and tier == "Expedited":
        return "Deep Archive has no Expedited retrieval: give --tier Standard (12 h) or Bulk (48 h)"
    return ""


def archived(error: ItemError, url: str) -> ItemError:
    """A GET's or a copy's refusal of an archived object as the one line that says what to do
    (the service's InvalidObjectState says what is wrong, not how to get the bytes); any other
    error as it is."""
    if not isinstance(error, S3Error) or error.code not in ARCHIVED_CODES:
        return error
    where = f"in {error.storage_class}" if error.storage_class else "archived"
    return NotRestored(f"{where}: restore it first: s3bulk restore {url}", retryable=False)


class NotRestored(ItemError):
    """An archived object with no restored copy to read (cp --restored-only counts it, and goes on)."""
