"""The signed client's requests, sent by the native part (native/src/http.rs).

aiohttp and botocore's signer cost ~0.2 s to import, most of a short command's start-up: `ls`
of one key took 0.29 s, a bare obstore loop 0.05 s. object_store's HTTP client and SigV4 signer
(the crate under obstore, in the native part already for the batch GETs) send them instead, on a
runtime thread of their own: the requests one turn of the event loop asks for go over in one
call, and one wake-up of the loop hands back every answer finished meanwhile. What decides
(retries, error answers, regions) stays in Python, in `http.SignedHttp`.

A URL goes as it is written: a key with a "." or ".." path segment names that key, not another
(native/src/transport.rs says why that rules out reqwest). object_store's signer, though, signs
the path its URL parser resolved (`a/b` for `a/./b`), which the service refuses as an invalid
signature (Garage does; moto checks none): such a request is signed by botocore's signer, which
signs the path as sent, and sent here unsigned with those headers (`signs_as_sent`).
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from typing import NamedTuple

import s3bulk_native
from s3bulk._errors import ItemError
from s3bulk._stores.handover import Handover

Answer = tuple[int, dict[str, str], bytes]

# A path segment that is "." or "..", written plainly or escaped (the WHATWG URL rules).
_DOT_SEGMENT = re.compile(r"/(?:\.|%2e){1,2}(?=/|\?|$)", re.IGNORECASE)


class Signing(NamedTuple):
    """What SigV4 needs besides the request (native/src/http.rs, `SigningArg`: the same names):
    who signs, for which service and region, the body's SHA-256 when hashed already, and whether
    the payload is signed at all (else UNSIGNED-PAYLOAD, the body carrying its checksum)."""

    key_id: str
    secret_key: str
    token: str | None
    service: str
    region: str
    body_sha256: bytes | None
    sign_payload: bool


@dataclass(frozen=True)
class FileRange:
    """A request body that is `length` bytes of the file at `path` from `offset` (a multipart
    upload's part): the native part reads it as it sends it, so a part in flight holds a chunk
    or two of itself, not its whole size (native/src/filebody.rs). With `checksum` (an
    algorithm of `checksums.SENT`), it computes that too as it reads, and sends it."""

    path: str
    offset: int
    length: int
    checksum: str | None = None

    def read(self) -> bytes:
        """The bytes, for a request signed in Python (`signs_as_sent`)."""
        with open(self.path, "rb") as file:
            data = os.pread(file.fileno(), self.length, self.offset)
        if len(data) != self.length:  # as the native part says it (filebody.rs)
            raise ItemError(f"{self.path} shrank while it was being uploaded", retryable=False)
        return data


Body = bytes | bytearray | memoryview | FileRange


class Request(NamedTuple):
    """One request as the native part takes it (native/src/http.rs, `RequestArg`)."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | FileRange
    signing: Signing | None


def signs_as_sent(url: str) -> bool:
    """Whether object_store's signer signs the path of `url` as it is sent: no dot segment."""
    return _DOT_SEGMENT.search(url.partition("?")[0]) is None


class NativeFailure(Exception):
    """No answer came: `unreachable` when no connection was made."""

    def __init__(self, message: str, unreachable: bool) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class NativeHttp(Handover[Answer]):
    """One event loop's client (its runtime thread starts with it)."""

    def __init__(self, client_options: dict[str, str]) -> None:
        super().__init__(s3bulk_native.Http(client_options))

    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: Body,
        signing: Signing | None,
    ) -> Answer:
        """The answer (status, headers with names in lower case, body); NativeFailure when none
        came. Signed when `signing` is given. A bytes body is sent as it is, without a copy; a
        file's range is read as it is sent, and the checksum it was sent with is among the
        answer's headers, as the service echoes it (put there when the service did not)."""
        sent = body if isinstance(body, FileRange) else bytes(body)
        request = Request(method, url, list(headers.items()), sent, signing)
        return await self._handed(self._ticket(), (request,))

    def _settle(
        self, future: asyncio.Future[Answer], outcome: s3bulk_native.Reply | s3bulk_native.Unanswered
    ) -> None:
        if isinstance(outcome, s3bulk_native.Reply):
            answer = dict(outcome.headers)
            if outcome.checksum is not None:  # (header, value) of what a file's range was sent with
                answer.setdefault(*outcome.checksum)
            future.set_result((outcome.status, answer, outcome.body))
        else:
            future.set_exception(NativeFailure(outcome.message, outcome.unreachable))
