"""The byte budget (`_engine/budget.py`) and the worker's slots (`_engine/worker.py`): bytes in
flight bounded, waiters served in order, an item waiting on its own work gives its slot away;
without a server."""

from __future__ import annotations

import asyncio
import contextlib


def test_byte_budget_bounds_bytes_in_flight_and_lets_oversized_items_run_alone() -> None:
    from s3bulk._engine.budget import ByteBudget

    budget = ByteBudget(10)
    peak = 0
    running: list[int] = []

    async def item(cost: int) -> None:
        nonlocal peak
        held = await budget.acquire(cost)
        running.append(cost)
        peak = max(peak, budget.used)
        if cost > 10:
            assert running == [cost]  # an oversized item runs with nothing else in flight
        await asyncio.sleep(0.001)
        running.remove(cost)
        await budget.release(held)

    async def main() -> None:
        await asyncio.gather(*(item(cost) for cost in [4, 4, 4, 25, 3, 3, 3, 3, 9, 0]))

    asyncio.run(main())
    assert peak <= 10 and budget.used == 0


def test_byte_budget_serves_waiters_in_order_and_a_cancelled_waiter_holds_nothing() -> None:
    from s3bulk._engine.budget import ByteBudget

    async def main() -> None:
        budget = ByteBudget(10)
        await budget.acquire(8)
        order: list[str] = []

        async def wait(name: str, cost: int) -> None:
            await budget.acquire(cost)
            order.append(name)

        first, second, third = (asyncio.create_task(wait(n, c)) for n, c in (("a", 6), ("b", 2), ("c", 2)))
        await asyncio.sleep(0)
        assert order == []  # "b" fits beside the 8 held, but does not jump ahead of "a"
        first.cancel()
        for _ in range(3):  # the cancellation, then the grant, then "b" running on
            await asyncio.sleep(0)
        assert order == ["b"] and budget.used == 10  # with "a" gone, "b" fits and "c" waits
        await budget.release(8)
        await asyncio.gather(second, third)
        assert order == ["b", "c"] and budget.used == 4
        granted = asyncio.create_task(budget.acquire(7))
        await budget.release(2)  # room for 7 is handed over, then the task is cancelled
        granted.cancel()
        await asyncio.gather(granted, return_exceptions=True)
        assert budget.used == 2

    asyncio.run(main())


class _Phases:
    """How many items are sending requests, and how many have sent their last one, at most."""

    requesting = local = most_requesting = most_local = 0
    enough: asyncio.Event


class _LocalWorkJob:
    """Items that send a request, say they are done with requests, then wait for local work (as
    a download waits for its MD5 in the lanes) until 8 of them wait together."""

    def __init__(self, items: int) -> None:
        from s3bulk._config import AwsSettings

        self.settings = AwsSettings()
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []
        self.items = items

    async def partitions(self, stats):
        yield (0, self.items)

    def retry_partitions(self, rows):
        return iter(())

    async def open(self, ctx) -> None:
        _Phases.requesting = _Phases.local = _Phases.most_requesting = _Phases.most_local = 0
        _Phases.enough = asyncio.Event()

    async def expand(self, descriptor, ctx):
        yield list(range(*descriptor))

    async def run(self, item, ctx) -> int:
        from s3bulk._stores.retry import done_with_requests

        _Phases.requesting += 1
        _Phases.most_requesting = max(_Phases.most_requesting, _Phases.requesting)
        await asyncio.sleep(0.001)  # the request
        _Phases.requesting -= 1
        await done_with_requests()
        _Phases.local += 1
        _Phases.most_local = max(_Phases.most_local, _Phases.local)
        if _Phases.local >= 8:
            _Phases.enough.set()
        with contextlib.suppress(TimeoutError):  # bounded: a failing run still ends
            await asyncio.wait_for(_Phases.enough.wait(), 1.0)
        _Phases.local -= 1
        return 1

    def item_id(self, item) -> str:
        return str(item)

    def cost(self, item) -> int:
        return 1

    def describe(self, item):
        return str(item), "", 1

    async def close(self, ctx) -> None:
        pass


def test_an_item_done_with_requests_gives_its_slot_to_the_next() -> None:
    """With 4 requests in flight, items waiting only for work on this machine (a download's MD5
    in the lanes) let others send theirs: 8 wait together, while requests stay at 4."""
    from s3bulk._engine.driver import Engine
    from s3bulk._engine.loop import run_loop
    from s3bulk._engine.strategies import choose, in_the_driver
    from s3bulk._engine.worker import EngineOptions
    from s3bulk._report import Report

    strategy = in_the_driver(choose("hybrid", None, 4))
    report = run_loop(
        Engine(strategy, EngineOptions(max_in_flight_bytes=1024)).run(_LocalWorkJob(24), Report("t"))
    )
    assert report.objects_done == 24, report
    assert _Phases.most_requesting <= 4
    assert _Phases.most_local >= 8
