"""Regression guard: the engine's CPU per item, against a bare loop doing the same work in the
same process, on an in-memory store (obstore's MemoryStore: no network, no server, no disk), so
what is left is what s3bulk adds per item: dispatch, the bounded pipeline, counting, retries'
bookkeeping, progress and the journal.

    python bench/engine_cost.py [--items 5000] [--rounds 5] [--max-overhead-us 60]

Both sides GET every object of the store with 64 requests in flight; the engine runs its default
shape for I/O-bound jobs (one worker in the driver's event loop, uvloop) with a journal. Rounds
alternate and the medians are compared. Exits 1 when the engine adds more than
--max-overhead-us microseconds of CPU per item: a benchmark-style check for `make bench`, not a
timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import obstore
from obstore.store import MemoryStore

from s3bulk._config import AwsSettings
from s3bulk._engine.driver import Engine
from s3bulk._engine.job import WorkerContext
from s3bulk._engine.loop import run_loop
from s3bulk._engine.strategies import choose, in_the_driver
from s3bulk._engine.worker import EngineOptions
from s3bulk._journal.local import Journal
from s3bulk._report import Report, WorkerStats

IN_FLIGHT = 64
BATCH = 1000  # items per descriptor, as a listing page
STORES: dict[int, MemoryStore] = {}  # by id: a job is pickled for its worker, a MemoryStore cannot be


def filled_store(items: int) -> MemoryStore:
    store = MemoryStore()
    body = os.urandom(4096)
    for index in range(items):
        obstore.put(store, f"k{index:08d}", body)
    return store


class MemoryGetJob:
    """GET every key of an in-memory store: a download without the network or the disk."""

    def __init__(self, store: MemoryStore, items: int) -> None:
        self.settings = AwsSettings()
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []
        self.store_id, self.items = id(store), items
        STORES[self.store_id] = store

    @property
    def store(self) -> MemoryStore:
        return STORES[self.store_id]

    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        for start in range(0, self.items, BATCH):
            yield (start, min(start + BATCH, self.items))

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        return iter(())

    async def open(self, ctx: WorkerContext) -> None:
        pass

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        start, end = descriptor
        items = [f"k{index:08d}" for index in range(start, end)]
        ctx.stats.objects_listed += len(items)
        yield items

    async def run(self, item: Any, ctx: WorkerContext) -> int:
        ctx.stats.requests["GET"] += 1
        return len(await (await obstore.get_async(self.store, item)).bytes_async())

    def item_id(self, item: Any) -> str:
        return str(item)

    def cost(self, item: Any) -> int:
        return 4096

    def describe(self, item: Any) -> tuple[str, str, int]:
        return str(item), "", 4096

    async def close(self, ctx: WorkerContext) -> None:
        pass


async def bare_loop(store: MemoryStore, items: int) -> int:
    """The cheapest shape that bounds what is in flight: 64 tasks taking keys from one iterator."""
    keys = iter([f"k{index:08d}" for index in range(items)])

    async def consumer() -> int:
        return sum([len(await (await obstore.get_async(store, key)).bytes_async()) for key in keys])

    return sum(await asyncio.gather(*(consumer() for _ in range(IN_FLIGHT))))


async def engine_run(store: MemoryStore, items: int, journal_dir: str) -> Report:
    journal = Journal.create("cost", {"version": 0, "spec": {}, "settings": {}}, Path(journal_dir))
    journal.begin_run("run")
    try:
        strategy = in_the_driver(choose("hybrid", None, IN_FLIGHT))
        options = EngineOptions(journal_path=str(journal.path), max_in_flight_bytes=16 * 1024**2)
        report = Report("cost")
        return await Engine(strategy, options).run(MemoryGetJob(store, items), report, journal=journal)
    finally:
        journal.close()


def cpu(action: Any) -> float:
    before = time.process_time()
    action()
    return time.process_time() - before


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-overhead-us", type=float, default=60.0)
    args = parser.parse_args()
    store = filled_store(args.items)
    loops, engines = [], []
    with tempfile.TemporaryDirectory() as home:
        for _ in range(args.rounds):
            loops.append(cpu(lambda: run_loop(bare_loop(store, args.items))))
            reports: list[Report] = []
            engines.append(cpu(lambda got=reports: got.append(run_loop(engine_run(store, args.items, home)))))
            assert reports[0].objects_done == args.items, reports[0]
    loop, engine = statistics.median(loops), statistics.median(engines)
    overhead_us = (engine - loop) / args.items * 1e6
    print(
        f"{args.items:,} items, medians of {args.rounds}: bare loop {loop / args.items * 1e6:.1f} us CPU "
        f"per item, engine {engine / args.items * 1e6:.1f} us ({engine / loop:.2f}x); the engine adds "
        f"{overhead_us:.1f} us per item (limit {args.max_overhead_us:g})"
    )
    return 0 if overhead_us <= args.max_overhead_us else 1


if __name__ == "__main__":
    sys.exit(main())
