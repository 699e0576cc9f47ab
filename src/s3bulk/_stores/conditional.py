"""Reads of one version of an object while another writer may change it (issue 62).

A transfer that takes several requests (ranges of a download, parts of a copy) would splice two
versions if the object were replaced between them: 60 MiB of one and 40 of the next, which no
check can tell when the object carries no checksum and its ETag is no MD5 (SSE-KMS). So every
request of a read names the version it reads by its ETag (If-Match, x-amz-copy-source-if-match),
and the service refuses the rest once the object changed (412). The read then begins again, of
the version a HEAD finds now, a few times at most; what was read of the one before is dropped.
What a transfer read is then known (`Version`), and mv deletes its source only while it is still
that (`commands.deletes.BatchDeleter`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from typing import NamedTuple, TypeVar

from s3bulk._errors import ItemError, UsageError, changed_meanwhile

T = TypeVar("T")
RESTARTS = 3  # reads of an object that changed each time, before its item fails


class Version(NamedTuple):
    """One version of an object, as a listing or a HEAD told it."""

    etag: str
    size: int
    mtime: float = 0.0  # seconds since the epoch (0: not known)


def version_of(head: dict[str, str]) -> Version:
    """The version a HEAD's headers (names in lower case) describe."""
    modified = head.get("last-modified")
    mtime = parsedate_to_datetime(modified).timestamp() if modified else 0.0
    return Version(head.get("etag", ""), int(head.get("content-length") or 0), mtime)


async def of_one_version(
    read: Callable[[Version], Awaitable[T]],
    listed: Version,
    now: Callable[[], Awaitable[Version]],
    what: str,
) -> T:
    """`read` of the version `listed` (each of its requests conditional on that ETag); when the
    service says the object changed since (412), `read` of the version `now` finds, from the
    start. An object that changes every time fails, named."""
    version = listed
    for _ in range(RESTARTS):
        try:
            return await read(version)
        except ItemError as error:
            if not changed_meanwhile(error):
                raise
        version = await now()
    raise ItemError(
        f"{what}: it changed {RESTARTS} times while it was read, each time before its last "
        "request (nothing of it was kept): run again once it is still",
        retryable=False,
    )


# ---- conditional writes (issue 66) --------------------------------------------------------------
# A write names what it may replace: nothing (If-None-Match: *, cp -n, and sync where the
# destination listed no such key) or the version listed (If-Match: its ETag, sync's overwrite), so
# that another writer's object, written between the listing and the write, is never replaced: the
# service refuses the write (412). S3, MinIO and moto take both on PutObject and
# CompleteMultipartUpload; a server that ignores them is found once (`Storage.write_conditions`).

NOTHING = ""  # `replaces` of a key the destination did not hold when listed


class WriteConditions(NamedTuple):
    """Which conditions on a write the destination honours (`Storage.write_conditions`)."""

    none_match: bool = False  # If-None-Match: * (refused where the key exists)
    match: bool = False  # If-Match: ETAG (refused where the key is another version, or none)
    copy: bool = False  # both on CopyObject too (else a server-side copy writes unconditioned)
    left: str = ""  # the probe key, where it could not be deleted

    def note(self) -> str:
        """What the report says of a destination that ignores some (empty: it honours both), and
        of a probe key left behind."""
        said = []
        ignored = [
            name
            for name, honoured in (("If-None-Match", self.none_match), ("If-Match", self.match))
            if not honoured
        ]
        if ignored:
            said.append(
                f"the destination ignores {' and '.join(ignored)} on writes: -n asks first (a HEAD), and "
                "a write between the listing and the overwrite is not detected"
            )
        if self.left:
            said.append(
                f"the probe of conditional writes could not delete {self.left}: delete it (s3bulk rm)"
            )
        return "; ".join(said)


def write_condition(replaces: str | None, honoured: WriteConditions, copy: bool = False) -> dict[str, str]:
    """The header a write carries so that it replaces only what `replaces` says (None: whatever
    is there, unconditioned; NOTHING: no object; else that ETag), where the service honours it
    (`copy`: the write is a CopyObject)."""
    if replaces is None or (copy and not honoured.copy):
        return {}
    if replaces == NOTHING:
        return {"If-None-Match": "*"} if honoured.none_match else {}
    return {"If-Match": f'"{replaces.strip(chr(34))}"'} if honoured.match else {}


def replaced_meanwhile(replaces: str) -> ItemError:
    """A conditional write the service refused (412): the destination changed since it was listed."""
    there = "another writer wrote an object there" if replaces == NOTHING else "another writer replaced it"
    return ItemError(
        f"changed since it was listed ({there}), so it is left as it is: run the job's failures again "
        "(--retry-failed) to copy over it",
        retryable=False,
    )


def asked_replaces(if_match: str | None, if_none_match: str | None) -> str | None:
    """What one write may replace, as --if-match ETAG / --if-none-match '*' (and the API's
    keywords) ask (`TransferItem.replaces`); None when neither is given."""
    if if_match is not None and if_none_match is not None:
        raise UsageError("--if-match and --if-none-match: give one of them")
    if if_none_match is not None:
        if if_none_match.strip() != "*":
            raise UsageError(f"--if-none-match {if_none_match!r}: only '*' (no object there) is taken")
        return NOTHING
    if if_match is not None:
        etag = if_match.strip().strip('"')
        if not etag:
            raise UsageError("--if-match: give the ETag of the object it may replace (s3bulk head shows it)")
        return etag
    return None


def not_as_asked(what: str, replaces: str) -> ItemError:
    """One write asked to replace only `replaces` (--if-match, --if-none-match) found otherwise."""
    there = (
        "an object is there (--if-none-match '*')"
        if replaces == NOTHING
        else f"the object there is not {replaces} (--if-match)"
    )
    return ItemError(f"{what}: PreconditionFailed: {there}: nothing was written", retryable=False)
