"""The floor of a sync's per-key work in CPython (issue 67, item 3: what bounds the planner):
each side's listing entry made as bench_planner's store makes it (ObjectInfo), turned into the
merge's Entry, and the two walked side by side by name; nothing else (no checks, no filters, no
diff, no engine). What a planner that makes Python objects per key can reach at best:

    .venv/bin/python bench/bench_planner_floor.py
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from s3bulk._plan.diff import Entry
from s3bulk._stores.s3xml import ObjectInfo

N = 1_000_000
WHEN = "2026-11-27T10:00:00.000Z"


def side() -> Iterator[list[ObjectInfo]]:
    for start in range(0, N, 1000):
        yield [ObjectInfo(f"k/{n:010d}", n % 997, WHEN, f"{n:032x}") for n in range(start, start + 1000)]


def entries(pages: Iterator[list[ObjectInfo]]) -> Iterator[list[Entry]]:
    for page in pages:
        yield [Entry(info.key[2:], info.size, 1.0, info.etag, info.key) for info in page]


def merge(a: Iterator[list[Entry]], b: Iterator[list[Entry]]) -> int:
    same = 0
    for pa, pb in zip(a, b, strict=True):
        for x, y in zip(pa, pb, strict=True):
            if x.relative == y.relative and x.size == y.size:
                same += 1
    return same


def main() -> None:
    steps: tuple[tuple[str, Callable[[], int]], ...] = (
        ("listing entries only (one side)", lambda: sum(len(p) for p in side())),
        ("+ Entry (one side)", lambda: sum(len(p) for p in entries(side()))),
        ("two sides, Entry, merged by name", lambda: merge(entries(side()), entries(side()))),
    )
    for label, step in steps:
        cpu = time.process_time()
        step()
        cpu = time.process_time() - cpu
        print(f"{label}: {N / cpu:,.0f} keys per CPU-second ({cpu:.2f} s CPU for {N:,})")


if __name__ == "__main__":
    main()
