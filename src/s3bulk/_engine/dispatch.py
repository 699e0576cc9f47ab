"""The driver's bookkeeping: which descriptors wait, which worker holds which, and what to do with
each message a worker sends. Pure state and decisions, no I/O of its own: it sends through each
worker's link and tells a `Listener` what happened, so it can be driven message by message by the
real driver (`driver.py`) or by a test with fake links.

Pull-based: a worker's `Want` gives it credits, and descriptors go to workers with credit, in
queue order. Workers hand work back (`Split`: cut key ranges, surplus pages) only while the queue
is short (`split_allowed`), so the queue, and the driver's memory, stay bounded. A worker that is
lost has its descriptors queued again at the front: with `track_items` (the ray engine) as a
`Redo` that skips the items it finished or handed on, so each item is done and counted once;
otherwise the loss is a crash that fails the job.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any, Protocol

from s3bulk._engine.job import Redo
from s3bulk._engine.messages import (
    Abort,
    Crash,
    Done,
    Finished,
    Progress,
    Split,
    SplitAllowed,
    Stopping,
    Want,
    Work,
)
from s3bulk._report import Failure, WorkerStats


class Link(Protocol):
    """A worker's end of the conversation, as the driver sees it."""

    def send(self, message: Any) -> None: ...


class Slot:
    """What the driver knows of one worker."""

    def __init__(self, index: int, link: Link) -> None:
        self.index = index
        self.link = link
        self.credit = 0  # descriptors it asked for and has not been sent
        self.assigned: dict[int, Any] = {}  # descriptor id -> descriptor it holds
        self.done = False  # said Done, or was lost


class Listener(Protocol):
    """What the driver does with the dispatcher's news."""

    def merge(self, delta: WorkerStats) -> None:
        """A worker's counts (and the driver's own, for work no worker is left to run)."""

    def aborting(self, reason: str) -> None:
        """The job stops: take no more descriptors from the source."""

    def gone(self, slot: Slot) -> None:
        """`slot` will say nothing more (Done, or lost)."""

    def woke(self) -> None:
        """The queue moved: a source waiting for room may go on."""

    def finished(self) -> None:
        """Every descriptor is done and the source is exhausted (or the job stopped)."""


class Dispatcher:
    def __init__(self, slots: list[Slot], listener: Listener, *, track_items: bool = False) -> None:
        self.slots = slots
        self.listener = listener
        self.track_items = track_items
        self.queue: collections.deque[tuple[int, Any]] = collections.deque()
        self.next_id = 0
        self.outstanding = 0  # descriptors queued or held by a worker, not yet finished
        self.source_done = False
        self.aborted = ""
        self.crashes: list[str] = []  # lost workers and worker exceptions: they fail the job
        self.redone: list[str] = []  # lost workers whose work others redid (track_items)
        # track_items: the item ids finished or handed on, per descriptor held (see Redo)
        self.handled: collections.defaultdict[int, set[str]] = collections.defaultdict(set)
        self.allowed = True  # what workers were last told of splitting
        self.broken: set[int] = set()  # workers whose link failed: their reader sees the loss
        # descriptors whose items are not all counted in the totals yet: those a worker lists
        # (a key range, a directory), until it says its expansion ended (`WorkerStats.expanded`)
        self.listing: set[int] = set()

    # ---- the source side ---------------------------------------------------------------------
    def enqueue(self, descriptor: Any, front: bool = False, *, counted: bool = False) -> None:
        self.next_id += 1
        self.outstanding += 1
        if not counted:
            self.listing.add(self.next_id)
        (self.queue.appendleft if front else self.queue.append)((self.next_id, descriptor))

    def add(self, descriptor: Any, *, counted: bool = False) -> None:
        """A descriptor from the job's source; `counted`: the source counted its items in the
        totals as it made it (a slice of a Parquet file's rows), so no worker's listing adds any."""
        self.enqueue(descriptor, counted=counted)
        self.dispatch()

    def source_exhausted(self) -> None:
        self.source_done = True
        self.dispatch()

    @property
    def all_done(self) -> bool:
        return self.source_done and self.outstanding == 0

    @property
    def all_listed(self) -> bool:
        """The source is exhausted and every descriptor's items are counted, so the job's totals
        are whole, not found so far (a split hands its parts back before its parent's expansion
        ends, over the same link). A stopped job's are what it found before it stopped."""
        return self.source_done and not self.aborted and not self.listing

    def split_allowed(self) -> bool:
        """Workers hand work back only while the queue is shorter than the number of workers."""
        return len(self.queue) < len(self.slots)

    # ---- sending -----------------------------------------------------------------------------
    def send(self, slot: Slot, message: Any) -> None:
        try:
            slot.link.send(message)
        except (OSError, ValueError):  # it died: its reader sees EOF and hands its work on
            self.broken.add(slot.index)

    def dispatch(self) -> None:
        """Descriptors to workers with credit; splitting welcomed or not; news to the listener."""
        for slot in self.slots:
            while slot.credit > 0 and self.queue and not slot.done and slot.index not in self.broken:
                descriptor_id, descriptor = self.queue.popleft()
                slot.credit -= 1
                slot.assigned[descriptor_id] = descriptor
                self.send(slot, Work(descriptor_id, descriptor, self.split_allowed()))
        if self.split_allowed() != self.allowed:
            self.allowed = not self.allowed
            for slot in self.live():
                self.send(slot, SplitAllowed(self.allowed))
        self.listener.woke()
        if self.all_done:
            self.listener.finished()

    def live(self) -> Iterable[Slot]:
        return (slot for slot in self.slots if not slot.done)

    def tell_all(self, message: Any) -> None:
        for slot in self.live():
            self.send(slot, message)

    # ---- what workers say --------------------------------------------------------------------
    def handle(self, slot: Slot, message: Any) -> None:
        match message:
            case Progress(delta):
                self.listing.difference_update(delta.expanded)
                for descriptor_id, item_id in delta.handled:
                    if descriptor_id in slot.assigned:
                        self.handled[descriptor_id].add(item_id)
                self.listener.merge(delta)
            case Want(credits):
                slot.credit += credits
            case Split(descriptors, parent, handed, narrowed):
                self._split(slot, descriptors, parent, handed, narrowed)
            case Finished(descriptor_id):
                slot.assigned.pop(descriptor_id, None)
                self.handled.pop(descriptor_id, None)
                self.outstanding -= 1
            case Stopping(reason):
                self.abort(reason)
            case Crash(reason):
                self.crashes.append(f"worker {slot.index}: {reason}")
            case Done():
                slot.done = True
                self.listener.gone(slot)
            case _:
                raise ValueError(f"worker {slot.index} said something unknown: {message!r}")
        self.dispatch()

    def _split(
        self, slot: Slot, descriptors: list[Any], parent: int, handed: list[str], narrowed: Any
    ) -> None:
        for descriptor in reversed(descriptors):  # at the front: idle workers want them now
            self.enqueue(descriptor, front=True)
        if self.track_items and parent in slot.assigned:
            self.handled[parent].update(handed)  # others run them: a redo must not
            if narrowed is not None:
                old = slot.assigned[parent]
                slot.assigned[parent] = Redo(narrowed, old.skip) if isinstance(old, Redo) else narrowed

    def abort(self, reason: str) -> None:
        """Stop handing out work; workers finish what runs and drop what waits."""
        if self.aborted:
            return
        self.aborted = reason
        self.outstanding -= len(self.queue)
        self.queue.clear()
        self.source_done = True
        self.listener.aborting(reason)
        self.tell_all(Abort())

    def lost(self, slot: Slot, why: str) -> None:
        """`slot` is gone without a Done (its process died, its connection broke)."""
        if slot.done:
            return
        slot.done = True
        self.listener.gone(slot)
        if not self.all_done:
            if self.track_items:
                skipped = sum(len(self.handled.get(key, ())) for key in slot.assigned)
                self.redone.append(
                    f"worker {slot.index} was lost ({why}): its {len(slot.assigned)} partition(s) were "
                    f"redone by the others without the {skipped} item(s) it had finished or handed on"
                )
            else:
                self.crashes.append(f"worker {slot.index} died unexpectedly ({why})")
            self._redo(slot)
            if all(each.done for each in self.slots):
                self._fail_what_is_left()
        self.dispatch()

    def _redo(self, slot: Slot) -> None:
        """The lost worker's descriptors, at the front of the queue, without what it finished."""
        for descriptor_id, descriptor in slot.assigned.items():
            self.outstanding -= 1
            skip = self.handled.pop(descriptor_id, set())
            if isinstance(descriptor, Redo):
                skip |= descriptor.skip
                descriptor = descriptor.descriptor
            counted = descriptor_id not in self.listing  # its items are in the totals already
            self.listing.discard(descriptor_id)
            self.enqueue(
                Redo(descriptor, frozenset(skip)) if skip else descriptor, front=True, counted=counted
            )
        slot.assigned.clear()

    def _fail_what_is_left(self) -> None:
        """No worker is left: what waits fails (and is journaled as failed, so it can be retried)."""
        left = WorkerStats()
        for _, descriptor in self.queue:
            left.failures.append(Failure(str(descriptor), "", "no worker left to run it"))
            left.failed_descriptors.append((descriptor, "no worker left to run it"))
            left.objects_failed += 1
        self.listener.merge(left)
        self.queue.clear()
        self.listing.clear()
        self.outstanding = 0
        self.source_done = True
