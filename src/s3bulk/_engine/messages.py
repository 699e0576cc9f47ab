"""What the driver and its workers say to each other, one type per message.

Each travels over one duplex connection per worker (a pipe for processes and threads, a socket
for Ray tasks). They are NamedTuples: typed, matched with `match`, and pickled as cheaply as the
plain tuples they replace. The order of a conversation:

    worker  Want(2)                          "send me work": one credit per descriptor
    driver  Work(7, KeyRange(...), True)     a descriptor, and whether splitting is welcome
    worker  Split([...], 7, handed, narrowed)  part of descriptor 7 for idle workers
    worker  Progress(delta)                  counts since the last one (what finished, failed)
    worker  Finished(7)                      descriptor 7 is done: its items are all counted
    driver  Stop() / Abort() / Cancel()      end normally / start nothing new / cancel all now
    worker  Done()                           last word; Crash(why) if it died of an exception
"""

from __future__ import annotations

from typing import Any, NamedTuple

from s3bulk._report import WorkerStats


# ---- from the driver ---------------------------------------------------------------------------
class Work(NamedTuple):
    """A descriptor to expand and run, and whether handing work back is welcome right now."""

    id: int
    descriptor: Any
    split_allowed: bool


class SplitAllowed(NamedTuple):
    """The driver's queue became short (splits welcome) or long again (keep your work)."""

    allowed: bool


class Abort(NamedTuple):
    """The job stops (some worker's item said so): start nothing new, finish what runs."""


class Stop(NamedTuple):
    """No more work will come: finish what is queued, report, then say Done."""


class Cancel(NamedTuple):
    """The job was interrupted (Ctrl-C, SIGTERM): cancel what runs (each item cleans up after
    itself), report what finished, then say Done."""


# ---- from a worker -----------------------------------------------------------------------------
class Want(NamedTuple):
    """Credits: how many more descriptors this worker can take."""

    credits: int


class Split(NamedTuple):
    """Descriptors (key ranges, pages of items) for idle workers, cut from descriptor `parent`.
    `handed` names items they hold that `parent` would yield again if redone; `narrowed` is what
    is left of `parent` itself (None: unchanged)."""

    descriptors: list[Any]
    parent: int
    handed: list[str]
    narrowed: Any


class Progress(NamedTuple):
    """Counts since the last message: items done and failed, bytes, requests, records."""

    delta: WorkerStats


class Finished(NamedTuple):
    """Every item of descriptor `id` is finished and counted (in an earlier Progress)."""

    id: int


class Stopping(NamedTuple):
    """This worker's job asked the whole job to stop (a bad row, a job-wide error): `reason`."""

    reason: str


class Crash(NamedTuple):
    """The worker died of an exception: the job fails, and says why."""

    reason: str


class Done(NamedTuple):
    """The worker's last message."""


class Hello(NamedTuple):
    """A Ray worker's first message over its socket: which worker it is."""

    worker: int


# ---- inside a worker ---------------------------------------------------------------------------
class DriverGone(NamedTuple):
    """The worker's own note that its connection to the driver broke: stop at once."""


ToWorker = Work | SplitAllowed | Abort | Stop | Cancel
FromWorker = Want | Split | Progress | Finished | Stopping | Crash | Done
