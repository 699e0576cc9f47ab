"""The driver's dispatcher, message by message, with fake links instead of worker processes: pull
dispatch, splits and hand-overs, a lost worker's work redone without what it finished, abort."""

from __future__ import annotations

from typing import Any

from s3bulk._engine.dispatch import Dispatcher, Slot
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
from s3bulk._report import WorkerStats


class FakeLink:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.broken = False

    def send(self, message: Any) -> None:
        if self.broken:
            raise OSError("broken pipe")
        self.sent.append(message)

    def take(self) -> list[Any]:
        sent, self.sent = self.sent, []
        return sent


class Recorder:
    """The Listener: what the driver would do, written down."""

    def __init__(self) -> None:
        self.merged: list[WorkerStats] = []
        self.aborted: list[str] = []
        self.gone_slots: list[int] = []
        self.done = 0

    def merge(self, delta: WorkerStats) -> None:
        self.merged.append(delta)

    def aborting(self, reason: str) -> None:
        self.aborted.append(reason)

    def gone(self, slot: Slot) -> None:
        self.gone_slots.append(slot.index)

    def woke(self) -> None:
        pass

    def finished(self) -> None:
        self.done += 1


def dispatcher(workers: int, track_items: bool = False) -> tuple[Dispatcher, list[Slot], Recorder]:
    recorder = Recorder()
    slots = [Slot(index, FakeLink()) for index in range(workers)]
    return Dispatcher(slots, recorder, track_items=track_items), slots, recorder


def works(slot: Slot) -> list[Work]:
    link = slot.link
    assert isinstance(link, FakeLink)
    return [message for message in link.take() if isinstance(message, Work)]


def finish(dispatch: Dispatcher, slot: Slot, *ids: int) -> None:
    for descriptor_id in ids:
        dispatch.handle(slot, Finished(descriptor_id))


def test_descriptors_go_to_workers_with_credit_in_order() -> None:
    dispatch, (first, second), recorder = dispatcher(2)
    for name in "abcde":
        dispatch.add(name)
    assert works(first) == [] and works(second) == []  # nobody asked yet
    dispatch.handle(first, Want(2))
    dispatch.handle(second, Want(1))
    assert [work.descriptor for work in works(first)] == ["a", "b"]
    assert [work.descriptor for work in works(second)] == ["c"]
    dispatch.handle(second, Want(5))
    assert [work.descriptor for work in works(second)] == ["d", "e"]
    dispatch.source_exhausted()
    assert recorder.done == 0  # five are held, none finished
    finish(dispatch, first, 1, 2)
    finish(dispatch, second, 3, 4, 5)
    assert recorder.done >= 1 and dispatch.all_done


def test_splits_go_to_idle_workers_first_and_splitting_is_welcomed_only_while_the_queue_is_short() -> None:
    dispatch, (busy, idle), _ = dispatcher(2)
    dispatch.add("whole range")
    dispatch.handle(busy, Want(1))
    (work,) = works(busy)
    assert work.split_allowed  # an empty queue: hand work back
    dispatch.add("next")
    dispatch.add("after")
    assert SplitAllowed(False) in busy.link.take()  # type: ignore[attr-defined]
    dispatch.handle(busy, Split(["left half", "right half"], work.id, [], None))
    dispatch.handle(idle, Want(2))
    assert [each.descriptor for each in works(idle)] == ["left half", "right half"]  # before "next"


def test_a_lost_worker_s_descriptors_are_redone_without_what_it_finished_or_handed_on() -> None:
    dispatch, (lost, other), recorder = dispatcher(2, track_items=True)
    dispatch.add("range")
    dispatch.add("batch")
    dispatch.handle(lost, Want(2))
    range_work, _ = works(lost)
    finished = WorkerStats()
    finished.handled = [(range_work.id, "k1"), (range_work.id, "k2")]
    dispatch.handle(lost, Progress(finished))
    dispatch.handle(lost, Split(["rest of range"], range_work.id, ["k9"], "narrowed range"))
    dispatch.source_exhausted()
    dispatch.lost(lost, "EOFError")
    assert recorder.gone_slots == [0]
    dispatch.handle(other, Want(3))
    redone = [each.descriptor for each in works(other)]
    assert Redo("narrowed range", frozenset({"k1", "k2", "k9"})) in redone
    assert "batch" in redone and "rest of range" in redone
    assert dispatch.crashes == [] and "worker 0 was lost (EOFError)" in dispatch.redone[0]
    finish(dispatch, other, *list(other.assigned))
    assert dispatch.all_done


def test_without_item_tracking_a_lost_worker_is_a_crash_and_the_last_one_fails_what_waits() -> None:
    dispatch, (only,), recorder = dispatcher(1)
    dispatch.add("a")
    dispatch.add("b")
    dispatch.handle(only, Want(1))
    dispatch.lost(only, "exit code -9")
    assert dispatch.crashes == ["worker 0 died unexpectedly (exit code -9)"]
    (left,) = recorder.merged
    assert left.objects_failed == 2 and {str(d) for d, _ in left.failed_descriptors} == {"a", "b"}
    assert dispatch.all_done and recorder.done >= 1


def test_abort_stops_handing_out_work_and_tells_every_live_worker() -> None:
    dispatch, (asker, quiet), recorder = dispatcher(2)
    for name in "abcd":
        dispatch.add(name)
    dispatch.handle(asker, Want(1))
    (work,) = works(asker)
    dispatch.handle(asker, Stopping("row 7 is bad"))
    assert recorder.aborted == ["row 7 is bad"] and dispatch.aborted == "row 7 is bad"
    assert Abort() in quiet.link.take()  # type: ignore[attr-defined]
    dispatch.handle(quiet, Want(4))
    assert works(quiet) == []  # the queue was dropped
    dispatch.handle(asker, Stopping("again"))
    assert recorder.aborted == ["row 7 is bad"]  # once
    finish(dispatch, asker, work.id)
    assert dispatch.all_done


def test_crashes_done_and_broken_links() -> None:
    dispatch, (crashing, breaking), recorder = dispatcher(2)
    dispatch.handle(crashing, Crash("ZeroDivisionError: oops"))
    dispatch.handle(crashing, Done())
    assert dispatch.crashes == ["worker 0: ZeroDivisionError: oops"] and recorder.gone_slots == [0]
    breaking.link.broken = True  # type: ignore[attr-defined]
    dispatch.handle(breaking, Want(1))
    dispatch.add("x")
    assert 1 in dispatch.broken and list(breaking.assigned.values()) == ["x"]  # sent before it broke
    dispatch.lost(breaking, "EOFError")  # its reader sees the break; nobody is left to run "x"
    (left,) = recorder.merged
    assert [failure.source for failure in left.failures] == ["x"] and dispatch.all_done


def expanded(*ids: int) -> Progress:
    return Progress(WorkerStats(expanded=list(ids)))


def test_the_totals_are_whole_only_once_the_source_is_exhausted_and_every_descriptor_listed() -> None:
    """What the live line and Ctrl-C's line call found so far ("2,560+") or the total."""
    dispatch, (worker, other), _ = dispatcher(2)
    dispatch.add("range a")
    dispatch.add("rows 0-5000 of a.parquet", counted=True)  # its source counted them
    dispatch.handle(worker, Want(1))
    (work,) = works(worker)
    dispatch.source_exhausted()
    assert not dispatch.all_listed  # handed out, still being listed
    dispatch.handle(worker, Split(["range b"], work.id, [], None))  # told before its parent ends
    dispatch.handle(worker, expanded(work.id))
    assert not dispatch.all_listed  # the split's part waits in the queue
    dispatch.handle(other, Want(1))
    (part,) = works(other)
    assert part.descriptor == "range b" and not dispatch.all_listed
    dispatch.handle(other, expanded(part.id))
    assert dispatch.all_listed and not dispatch.all_done  # listed whole (the slice too), not finished


def test_a_stopped_job_s_totals_are_what_it_found_before_it_stopped() -> None:
    dispatch, (worker,), _ = dispatcher(1)
    dispatch.add("range")
    dispatch.handle(worker, Want(1))
    (work,) = works(worker)
    dispatch.handle(worker, Stopping("a bad row"))
    dispatch.handle(worker, expanded(work.id))  # its expansion broke off
    assert dispatch.source_done and not dispatch.all_listed
