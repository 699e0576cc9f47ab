"""GETs of whole objects (up to 8 MiB) into files, handed to the native part in batches
(native/src/gets.rs).

Through obstore, each finished GET is handed from its runtime to the event loop on its own, and
that hand-off (a thread woken, the GIL taken from the loop) was most of a 4 KiB download's system
time: 13 futex calls per object. Here the GETs an event-loop turn asks for go over in one call,
a runtime thread of the native part sends them (signed as the signed client's requests are, to
the URL `S3Client.url` gives, with the headers its GETs carry), writes each body into its
temporary file with the object's time and checks it (from 16 KiB streamed to a writer thread
chunk by chunk; the ranges of a large object are written the same way at their offsets,
`get_range_into`): a whole object is asked for in checksum mode, and checked by the full-object
checksum its answer carries (CRC64NVME, CRC32C, CRC32, SHA-256, SHA-1), else hashed with MD5 (in
SIMD lanes with the bodies that ended with it) for its ETag. It lands the file when its size and
checksum or MD5 are right (a body cut short leaves no file), and one wake-up of the loop hands
back every outcome finished meanwhile. The landing is done there
because a file written and waiting for the loop's next wake-up is a temporary file a process
killed outright leaves behind (tests/integration/test_journal.py); a file that cannot land there (a
mismatch, a clash) is left to the storage seam, which also keeps the retries and the second
opinion on a mismatch. Its files are named in a directory the caller opened (`folder`, a
descriptor the native part holds a duplicate of: `folders.py` says why), or as paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING, Any, NamedTuple

import s3bulk_native
from s3bulk._errors import ItemError, S3Error
from s3bulk._stores import sessions
from s3bulk._stores.handover import Handover
from s3bulk._stores.objects import as_text, client_options
from s3bulk._stores.retry import log
from s3bulk._stores.s3 import quoted, refused_checks

if TYPE_CHECKING:
    from s3bulk._stores.s3 import S3Client


class Landing(NamedTuple):
    """Where a written file goes once it is right: to `target`, in its folder (replacing a file there when
    `replace`; else only if none appeared meanwhile, as `landing.land`), if `size` bytes came and
    their MD5 is `md5` (None: not checked)."""

    target: str
    replace: bool
    size: int
    md5: bytes | None


class GetJob(NamedTuple):
    """One GET as the native part takes it (native/src/gets.rs, `JobArg`: the same names)."""

    url: str
    region: str
    start: int | None  # None: the whole object
    end: int
    hashed: int | None
    folder: int | None  # an open directory `path` and the landing's target are names in (None: paths)
    path: str
    mtime: float
    hash: bool
    check: bool
    compute: str | None
    landing: Landing | None
    if_match: str | None = None  # the ETag the object must still have (412 otherwise)


class Outcome(NamedTuple):
    """What a GET wrote: its bytes, their MD5 (when hashed), whether they match the full-object
    checksum the answer carried (None: none came, or not asked), whether the file landed, and
    the checksum found of them (a range's, when asked; a whole object's, when one came)."""

    written: int
    md5: bytes | None
    checked: bool | None
    landed: bool
    checksum: bytes | None = None


class Gets(Handover[Outcome]):
    """One bucket's batch-fed GETs, for one event loop, sent as `client` sends its requests."""

    def __init__(self, client: S3Client, bucket: str, *, max_connections: int) -> None:
        self.settings = settings = client.settings
        self._client, self._bucket = client, bucket
        options = client_options(settings, max_connections, allow_http=True)
        self._credentials = settings.credentials()
        try:
            native = s3bulk_native.Gets(
                as_text(options), _handed(self._credentials), list(client.object_headers().items())
            )
        except ValueError as exc:  # no other GET would fare better: the job stops, once
            error = ItemError(f"cannot set up GETs from s3://{bucket}: {exc}", retryable=False)
            error.job_wide = True
            raise error from None
        super().__init__(native)
        # a directory bucket's GETs are signed with its session (`sessions.py`), the one set now
        self._session_bound = sessions.takes_session(settings, bucket, "key", "GET")
        self._session: sessions.Session | None = None
        # ticket -> (the file it writes, its folder, the key), until its outcome comes
        self._asked: dict[int, tuple[str, int | None, str]] = {}

    async def get_into(
        self,
        key: str,
        end: int,
        path: str,
        mtime: float,
        *,
        hash: bool,
        check: bool,
        landing: Landing | None = None,
        hashed: int | None = None,
        folder: int | None = None,
        if_match: str | None = None,
    ) -> Outcome:
        """The object's bytes, up to `end` of them (one more than expected tells that it grew),
        into a new file at `path` (in the open directory `folder`, if given, as the landing's
        target is) with the time `mtime` (0: now), landed as `landing` says. With
        `check`, asked for in checksum mode and checked by the checksum that comes; else (none
        came), hashed with MD5 when `hash`, or in parts as it is written when `hashed`
        (`hash_parts`); with `if_match`, only while the object has that ETag. OSError for the
        file; S3Error (412: it changed) or a retryable ItemError for the GET."""
        return await self._get(
            key, None, end, hashed, folder, path, mtime, hash, check, None, landing, if_match
        )

    async def get_range_into(
        self,
        key: str,
        start: int,
        end: int,
        path: str,
        hashed: int | None = None,
        checksum: str | None = None,
        folder: int | None = None,
        if_match: str | None = None,
    ) -> Outcome:
        """The object's bytes [start, end) written at offset `start` into the file at `path` (in
        the open directory `folder`, if given), which the caller made; `written` says how many
        (fewer: the object ended sooner). The caller checks the whole file: hashed as it is
        written when `hashed` (`hash_parts`), or by the CRCs of its ranges combined, each
        range's found when a `checksum` algorithm is named; with `if_match`, only while the
        object has that ETag, so that no range of another version is written beside it. OSError
        for the file (gone: a range still to come after the caller removed it); S3Error (412: it
        changed) or a retryable ItemError for the GET."""
        return await self._get(
            key, start, end, hashed, folder, path, 0.0, False, False, checksum, None, if_match
        )

    async def _get(
        self,
        key: str,
        start: int | None,
        end: int,
        hashed: int | None,
        folder: int | None,
        path: str,
        mtime: float,
        hash: bool,
        check: bool,
        compute: str | None,
        landing: Landing | None,
        if_match: str | None,
    ) -> Outcome:
        """The GET handed over, to the URL and signed for the region the signed client uses."""
        if self._session_bound:
            await self._in_session()
        url, region = self._client.url(self._bucket, key), self.settings.region_of(self._bucket)
        condition = quoted(if_match) if if_match else None
        job = GetJob(
            url, region, start, end, hashed, folder, path, mtime, hash, check, compute, landing, condition
        )
        outcome = await self._handed_once(job, path, folder, key)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "GET s3://%s/%s bytes %d-%d: %d bytes",
                self._bucket,
                key,
                start or 0,
                end - 1,
                outcome.written,
            )
        return outcome

    async def _handed_once(self, job: GetJob, path: str, folder: int | None, key: str) -> Outcome:
        """The GET's outcome; a directory bucket's refused for an expired session (a clock
        that differs) is sent once more in a new one."""
        for attempt in (1, 2):
            ticket = self._ticket()
            self._asked[ticket] = (path, folder, key)
            try:
                return await self._handed(ticket, (job,))
            except S3Error as error:
                if not (self._session_bound and error.code == "ExpiredToken") or attempt == 2:
                    raise
                if self._session is not None:
                    self._client.sessions.drop(self._bucket, self._session)
                await self._in_session()
        raise AssertionError("unreachable")

    async def _in_session(self) -> None:
        """The bucket's session (a new one when it is due) for the GETs handed over from now on."""
        session = await self._client.sessions.of(self._bucket)
        if session != self._session:
            keys, service = session.credentials, sessions.signing_service(self.settings)
            self._native.set_credentials(keys.access_key, keys.secret_key, None, (service, session.token))
            self._session = session

    def hash_parts(self, path: str, size: int, part_size: int, folder: int | None = None) -> int:
        """The file at `path` (in the open directory `folder`, if given; `size` bytes, made by
        the caller) is to be hashed in parts of `part_size` as the ranges given the id returned
        write into it (native/src/parthash.rs). Either `part_digests` or `forget_parts` must
        follow."""
        return int(self._native.hash_parts(path, size, part_size, folder))

    async def part_digests(self, hashed: int) -> list[bytes] | None:
        """The MD5 of each part of the file `hashed`, once its ranges have written every byte
        (None: it cannot tell). OSError when the file could not be read back."""
        digests: list[bytes] | None = await asyncio.to_thread(self._native.part_digests, hashed)
        return digests

    def forget_parts(self, hashed: int) -> None:
        """The file `hashed` will not be asked for: its download failed."""
        self._native.forget_parts(hashed)

    def _forget(self, ticket: int) -> None:
        """A cancelled caller's GET writes nothing from now on, and a file it wrote before is
        removed (one that landed is whole and stays). A worker whose driver was killed exits
        right after its cancellations, GETs still running: this keeps their files from being
        left behind. The ticket has been handed over by now: a caller cancelled in the turn it
        asked resumes after `_submit`, which that turn scheduled first."""
        self._native.cancel(ticket)
        path, folder, _ = self._asked.pop(ticket)
        _remove(path, folder)

    def _before_submit(self) -> None:
        """Fresh credentials, if botocore refreshed them (a directory bucket's: its session's,
        set by `_in_session`)."""
        if self._session_bound:
            return
        credentials = self.settings.credentials()
        if credentials is not None and credentials != self._credentials:
            self._native.set_credentials(credentials.access_key, credentials.secret_key, credentials.token)
            self._credentials = credentials

    def _settle(self, future: asyncio.Future[Outcome], outcome: Any) -> None:
        path, _, key = self._asked.pop(outcome.ticket)
        if isinstance(outcome, s3bulk_native.Written):
            landed, value = outcome.landed, outcome.checksum
            future.set_result(Outcome(outcome.written, outcome.md5, outcome.checked, landed, value))
        elif isinstance(outcome, s3bulk_native.DiskFailed):
            future.set_exception(OSError(outcome.errno, os.strerror(outcome.errno), path))
        elif isinstance(outcome, s3bulk_native.Refused):
            what = self._what(key)
            error = self._client.error(outcome.status, dict(outcome.headers), outcome.body, what)
            mode = {"x-amz-checksum-mode": "ENABLED"} if self.settings.asks_checksums else {}
            future.set_exception(refused_checks(error, self.settings, mode, b"", True, what) or error)
        else:
            url, what = self._client.url(self._bucket, key), self._what(key)
            future.set_exception(self._client.failure(url, what, outcome.message, outcome.unreachable))

    def _what(self, key: str) -> str:
        return f"get s3://{self._bucket}/{key}"

    def close(self) -> None:
        """Stop the GETs still running; once this returns, none writes a file any more, and the
        files of those whose callers were not told yet are gone."""
        super().close()
        for path, folder, _ in self._asked.values():  # none of these files will land
            _remove(path, folder)
        self._asked.clear()


def _handed(credentials: Any) -> tuple[str, str, str | None] | None:
    return (
        None if credentials is None else (credentials.access_key, credentials.secret_key, credentials.token)
    )


def _remove(path: str, folder: int | None) -> None:
    """The file a GET wrote, removed; its folder is still open, held by its download until the
    download ends, which is after this."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path, dir_fd=folder)
