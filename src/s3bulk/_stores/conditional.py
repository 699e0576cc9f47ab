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

from s3bulk._errors import ItemError, changed_meanwhile

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
