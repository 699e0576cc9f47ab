"""The driver's end of the conversation with one worker: a pipe to a process, a thread or a Ray
task, or a direct hand-off to a worker running in the driver's own event loop.

Both carry the same messages (`messages.py`) in order. A pipe pickles each message and wakes the
driver's loop through a file descriptor; an inline link puts the message in the worker's inbox,
or schedules its delivery to the driver, with no copy, no pickling and no extra thread. That is
what lets one process run a whole I/O-bound job at the cost of the work itself (the default on a
machine whose other cores the service or obstore's own threads use anyway).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from s3bulk._engine.messages import DriverGone

Deliver = Callable[[Any], bool]  # one message to the driver; False: say nothing more
Lost = Callable[[str], None]  # the worker is gone without a word (why)


class WorkerLink(Protocol):
    """What the driver holds of each worker's connection."""

    def send(self, message: Any) -> None:
        """A message to the worker; OSError or ValueError if it is gone."""

    def attach(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, lost: Lost) -> None:
        """From now on, call `deliver` with each message the worker sends, `lost` if it breaks."""

    def drain(self) -> None:
        """Deliver whatever has arrived and not been delivered yet."""

    def detach(self) -> None:
        """Deliver nothing more."""

    def close(self) -> None:
        """The driver is done with this worker; a worker still running stops (DriverGone)."""


class PipeLink:
    """A worker at the other end of a `multiprocessing` connection (a process, a thread, Ray)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.loop: asyncio.AbstractEventLoop | None = None
        self.deliver: Deliver = lambda message: False
        self.lost: Lost = lambda why: None

    def send(self, message: Any) -> None:
        self.conn.send(message)

    def attach(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, lost: Lost) -> None:
        self.loop, self.deliver, self.lost = loop, deliver, lost
        watch_pipe(loop, self.conn, self.drain)

    def drain(self) -> None:
        try:
            while self.conn.poll():
                if not self.deliver(self.conn.recv()):
                    return
        except (EOFError, OSError) as exc:
            self.lost(type(exc).__name__)

    def detach(self) -> None:
        if self.loop is not None and not self.conn.closed:
            self.loop.remove_reader(self.conn.fileno())
            self.loop = None

    def close(self) -> None:
        self.detach()
        self.conn.close()  # a thread worker sees EOF and stops


class InlineLink:
    """A worker that is a task of the driver's own event loop. The driver's messages go straight
    into its inbox; its messages are delivered to the driver by the loop, in order, as soon as the
    sending task yields (never inside it, so neither side runs in the middle of the other)."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.deliver: Deliver | None = None
        self.lost: Lost = lambda why: None
        self.early: list[Any] = []  # sent before the driver attached
        self.closed = False
        self.quiet = False  # the driver was told all it wants to hear

    def send(self, message: Any) -> None:
        if self.closed:
            raise OSError("the inline worker has stopped")
        self.inbox.put_nowait(message)

    def attach(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, lost: Lost) -> None:
        self.loop, self.deliver, self.lost = loop, deliver, lost
        early, self.early = self.early, []
        for message in early:
            loop.call_soon(self._deliver, message)

    def from_worker(self, message: Any) -> None:
        """The worker's `send`."""
        if self.loop is None:
            self.early.append(message)
        else:
            self.loop.call_soon(self._deliver, message)

    def _deliver(self, message: Any) -> None:
        if not self.quiet and self.deliver is not None and not self.deliver(message):
            self.quiet = True

    def drain(self) -> None:
        """Messages are delivered by the loop as they come: nothing waits here."""

    def detach(self) -> None:
        self.quiet = True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.inbox.put_nowait(DriverGone())


def watch_pipe(loop: asyncio.AbstractEventLoop, conn: Connection, callback: Callable[[], None]) -> None:
    """Call `callback` when the pipe has data, keeping the pipe in blocking mode.

    uvloop (libuv's uv_poll_init) switches a watched fd to non-blocking; a message that arrives in
    pieces would then fail recv() with EAGAIN, and a sender thread's send() likewise. The loop only
    polls this fd, it never reads it, so blocking mode is safe to restore.
    """
    loop.add_reader(conn.fileno(), callback)
    os.set_blocking(conn.fileno(), True)
