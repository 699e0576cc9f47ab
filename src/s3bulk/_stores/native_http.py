"""The signed client's requests, sent by the native part (native/src/http.rs).

aiohttp and botocore's signer cost ~0.2 s to import, most of a short command's start-up: `ls`
of one key took 0.29 s, a bare obstore loop 0.05 s. object_store's HTTP client and SigV4 signer
(the crate under obstore, in the native part already for the batch GETs) send them instead, on a
runtime thread of their own: the requests one turn of the event loop asks for go over in one
call, and one wake-up of the loop hands back every answer finished meanwhile. What decides
(retries, error answers, regions) stays in Python, in `http.SignedHttp`.

One thing it cannot send: a key with a "." or ".." path segment, which the URL parser under
every Rust HTTP client resolves away (escaped as %2E too), so the request would name another
key. Those keys go through aiohttp (`sendable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
from typing import Any

import s3bulk_native

# A path segment that is "." or "..", written plainly or escaped (the WHATWG URL rules).
_DOT_SEGMENT = re.compile(r"/(?:\.|%2e){1,2}(?=/|\?|$)", re.IGNORECASE)

Answer = tuple[int, dict[str, str], bytes]


def sendable(url: str) -> bool:
    """Whether the URL reaches the service as written: no dot segment in its path."""
    return _DOT_SEGMENT.search(url.partition("?")[0]) is None


class NativeFailure(Exception):
    """No answer came: `unreachable` when no connection was made."""

    def __init__(self, message: str, unreachable: bool) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class NativeHttp:
    """One event loop's client (its runtime thread starts with it)."""

    def __init__(self, client_options: dict[str, str]) -> None:
        self._native = s3bulk_native.Http(client_options)
        self._tickets = itertools.count()
        self._waiting: dict[int, asyncio.Future[Answer]] = {}
        self._queued: list[tuple[Any, ...]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | bytearray | memoryview,
        signing: tuple[tuple[str, str, str | None], str, str, str | None] | None,
    ) -> Answer:
        """The answer (status, headers with names in lower case, body); NativeFailure when none
        came. `signing`: ((key id, secret, token), service, region, body's hex SHA-256 or None)."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            loop.add_reader(self._native.fileno(), self._hand_over)
        ticket = next(self._tickets)
        future: asyncio.Future[Answer] = loop.create_future()
        self._waiting[ticket] = future
        if not self._queued:
            loop.call_soon(self._submit)
        self._queued.append((ticket, method, url, list(headers.items()), bytes(body), signing))
        try:
            return await future
        except asyncio.CancelledError:
            self._waiting.pop(ticket, None)  # its answer, when it comes, is dropped
            raise

    def _submit(self) -> None:
        """What this turn of the loop asked for, in one call (none once closed: `close` has
        cancelled their callers)."""
        queued, self._queued = self._queued, []
        if not self._closed:
            self._native.submit(queued)

    def _hand_over(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._native.fileno(), 4096)
        for ticket, status, headers, body, failure in self._native.take():
            future = self._waiting.pop(ticket, None)
            if future is None or future.done():
                continue
            if failure is None:
                future.set_result((status, dict(headers), body))
            else:
                unreachable, message = failure
                future.set_exception(NativeFailure(message, unreachable))

    def close(self) -> None:
        """Stop: requests not answered yet are dropped, and their callers cancelled."""
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._native.fileno())
        self._native.close()
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()
