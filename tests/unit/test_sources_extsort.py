"""The external sort sync and check put an unordered listing through (`_sources/extsort.py`,
`listing.sorted_listing`, issue 66): every record once, in key order, from runs spilled to disk
when they do not fit one, the runs' files gone after."""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

from memory import MemoryS3, MemoryStorage

from s3bulk._sources.extsort import ExternalSort
from s3bulk._sources.listing import in_order_or_sorted, list_sequential, sorted_listing


def test_runs_spilled_to_disk_merge_back_in_key_order(tmp_path: Path) -> None:
    keys = [f"k{n:05d}-{random.random()}" for n in range(5_000)]
    shuffled = random.Random(7).sample(keys, len(keys))
    sort: ExternalSort[tuple[str, int]] = ExternalSort(
        key=lambda record: record[0], run_size=300, directory=str(tmp_path)
    )
    for start in range(0, len(shuffled), 999):
        sort.add((key, len(key)) for key in shuffled[start : start + 999])
    assert sort.runs == 16 and len(os.listdir(tmp_path)) == 1  # one directory of runs
    assert [key for key, _ in sort.sorted()] == sorted(keys)
    assert os.listdir(tmp_path) == []  # removed once merged


def test_a_listing_in_no_order_comes_sorted_and_an_ordered_one_as_it_is() -> None:
    s3 = MemoryS3()
    for n in range(2_500):
        s3.put("b", f"p/{n:05d}", b"x")
    s3.unordered, s3.page_size = 3, 1000
    storage = MemoryStorage(s3)

    async def keys_of(pages) -> list[str]:  # type: ignore[no-untyped-def]
        return [info.key for page in [page async for page in pages] for info in page]

    shuffled = asyncio.run(keys_of(page.objects async for page in list_sequential(storage, "b", "p/")))
    assert shuffled != sorted(shuffled) and sorted(shuffled) == [f"p/{n:05d}" for n in range(2_500)]
    assert asyncio.run(keys_of(sorted_listing(storage, "b", "p/"))) == sorted(shuffled)

    def ordered():  # type: ignore[no-untyped-def]
        return (page.objects async for page in list_sequential(storage, "b", "p/", ordered_for="the merge"))

    assert asyncio.run(
        keys_of(in_order_or_sorted(ordered(), lambda: sorted_listing(storage, "b", "p/")))
    ) == sorted(shuffled)
    s3.unordered = None
    listed = len(s3.requests)
    assert asyncio.run(
        keys_of(in_order_or_sorted(ordered(), lambda: sorted_listing(storage, "b", "p/")))
    ) == sorted(shuffled)
    assert len(s3.requests) - listed == 3  # in order: listed once, not sorted
