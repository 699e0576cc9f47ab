"""The Python side of the native part's batched hand-over (native/src/wake.rs), shared by the
batch GETs (`gets`) and the signed client's requests (`native_http`).

Each request gets a ticket and a future. The requests one turn of the event loop asks for go to
the native part in one `submit` call, scheduled by the first of them; the native part writes one
byte to a socket when outcomes wait, and one wake-up of the loop (`_hand_over`) settles every
future whose outcome has come.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from typing import Any, Generic, TypeVar

from s3bulk._errors import ItemError

R = TypeVar("R")


class Handover(Generic[R]):
    """One event loop's requests to a native object with `fileno`, `submit`, `take` and
    `close`. Subclasses say what an outcome means (`_settle`)."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self._tickets = itertools.count()
        self._waiting: dict[int, asyncio.Future[R]] = {}  # until its outcome comes or it is cancelled
        self._queued: list[tuple[Any, ...]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def _ticket(self) -> int:
        return next(self._tickets)

    async def _handed(self, ticket: int, fields: tuple[Any, ...]) -> R:
        """The outcome of the request (ticket, *fields), submitted with the others of this turn.
        Cancelled, its caller is gone: `_forget` it (its outcome, when it comes, is dropped).
        A cancel can also come after the outcome was handed over, before the caller resumed:
        then there is nothing to forget, and the cancel still ends the caller."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            loop.add_reader(self._native.fileno(), self._hand_over)
        future: asyncio.Future[R] = loop.create_future()
        self._waiting[ticket] = future
        if not self._queued:
            loop.call_soon(self._submit)
        self._queued.append((ticket, *fields))
        try:
            return await future
        except asyncio.CancelledError:
            if self._waiting.pop(ticket, None) is not None:  # no outcome yet
                self._forget(ticket)
            raise

    def _forget(self, ticket: int) -> None:
        """What a cancelled caller's request leaves to undo (nothing, unless a subclass says)."""

    def _submit(self) -> None:
        """What this turn of the loop asked for, in one call (none once closed: `close` has
        cancelled their callers). This runs as a callback of the loop, where an exception
        reaches no caller: a request the native part refuses (a negative size, a value that is
        not what it takes) fails its own caller, and the others go on, each alone."""
        queued, self._queued = self._queued, []
        if self._closed:
            return
        try:
            self._before_submit()
            self._native.submit(queued)
        except Exception as exc:
            if len(queued) == 1:
                self._fail(queued[0][0], exc)
                return
            for request in queued:
                try:
                    self._native.submit([request])
                except Exception as each:
                    self._fail(request[0], each)

    def _fail(self, ticket: int, exc: Exception) -> None:
        future = self._waiting.pop(ticket, None)
        if future is not None and not future.done():
            error = ItemError(
                f"a request the native part cannot take: {type(exc).__name__}: {exc}", retryable=False
            )
            future.set_exception(error)

    def _before_submit(self) -> None:
        """Anything the native part must know before these requests (fresh credentials, say)."""

    def _hand_over(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._native.fileno(), 4096)
        for outcome in self._native.take():
            future = self._waiting.pop(outcome.ticket, None)
            if future is not None and not future.done():
                self._settle(future, outcome)

    def _settle(self, future: asyncio.Future[R], outcome: Any) -> None:
        """`outcome` is one of the native part's typed outcomes (`s3bulk_native.Reply`, ...)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop: requests not finished are dropped, and their callers cancelled."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._native.fileno())
        self._native.close()
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()
