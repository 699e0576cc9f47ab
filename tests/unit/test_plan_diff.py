"""The sync plan and the local walk, without a server: the merge-join of two listings, what
"changed" means in each mode, multipart ETags against local files, filters, and the walk order
that lets a local tree be merged with a listing. A server would add nothing to these."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator

import pytest

from s3bulk._plan.diff import Entry, ListingOrderError, decide, merge_join
from s3bulk._plan.filters import Filters
from s3bulk._sources.local import walk
from s3bulk._stores.etags import etag_matches_bytes, etag_matches_file

MiB = 1024**2


def entry(name: str, size: int = 1, mtime: float = 0.0, etag: str = "") -> Entry:
    return Entry(name, size, mtime, etag, name)


async def pages(*pages: list[Entry]) -> AsyncIterator[list[Entry]]:
    for page in pages:
        yield page


def joined(
    source: list[list[Entry]], destination: list[list[Entry]], chunk: int = 1000
) -> list[tuple[str, str]]:
    async def run() -> list[tuple[str, str]]:
        out = []
        async for chunk_ in merge_join(pages(*source), pages(*destination), chunk=chunk):
            out += [(a.relative if a else "-", b.relative if b else "-") for a, b in chunk_]
        return out

    return asyncio.run(run())


def test_merge_join_pairs_every_name_across_page_boundaries_and_empty_pages() -> None:
    source = [[entry("a"), entry("b")], [], [entry("d"), entry("f")]]
    destination = [[entry("b")], [entry("c"), entry("d")], [entry("e"), entry("g")]]
    assert joined(source, destination, chunk=2) == [
        ("a", "-"),
        ("b", "b"),
        ("-", "c"),
        ("d", "d"),
        ("-", "e"),
        ("f", "-"),
        ("-", "g"),
    ]
    assert joined([], [[entry("x")]]) == [("-", "x")]
    assert joined([[entry("x")]], []) == [("x", "-")]


@pytest.mark.parametrize("side", ["source", "destination"])
def test_a_listing_out_of_key_order_stops_the_merge(side: str) -> None:
    unordered = [[entry("b")], [entry("a")]]
    ordered = [[entry("a"), entry("b")]]
    source, destination = (unordered, ordered) if side == "source" else (ordered, unordered)
    with pytest.raises(ListingOrderError, match=f"the {side} listing is not in key order"):
        joined(source, destination)


def test_what_changed_means_in_each_mode() -> None:
    old, new = entry("k", 5, mtime=100, etag="e1"), entry("k", 5, mtime=200, etag="e2")
    assert decide(new, None, "mtime", local_side=False) == "copy"
    assert decide(entry("k", 6), entry("k", 5), "size", local_side=False) == "copy"
    assert decide(new, old, "size", local_side=False) == "same"
    assert decide(new, old, "mtime", local_side=False) == "copy"
    assert decide(old, new, "mtime", local_side=False) == "same"  # destination newer: done before
    assert decide(new, old, "checksum", local_side=False) == "copy"
    assert decide(old, entry("k", 5, etag="e1"), "checksum", local_side=False) == "same"
    assert decide(old, old, "checksum", local_side=True) == "check"  # a worker hashes the file


def test_exact_timestamps_copy_when_the_times_differ_either_way() -> None:
    """sync --exact-timestamps: a file touched after its download (newer than its object, the
    same size) is fetched again; one of the same whole second is not."""
    object_, touched = entry("k", 5, mtime=100.2), entry("k", 5, mtime=250.0)
    assert decide(object_, touched, "mtime", local_side=True) == "same"
    assert decide(object_, touched, "mtime", local_side=True, exact=True) == "copy"
    assert decide(object_, entry("k", 5, mtime=100.9), "mtime", local_side=True, exact=True) == "same"


def test_two_objects_whose_etags_differ_are_compared_by_checksum_where_one_may_tell() -> None:
    """Other ETags, the same size: a multipart ETag depends on the part size, so the objects'
    full-object checksums (HEADs) decide; so they do where listings name the same algorithm (S3
    names it for each object it keeps one for, whatever its ETag); single-part ETags with no
    algorithm listed, or other algorithms listed, differ as their bytes do."""
    crc = {"checksum": "CRC64NVME"}
    assert (
        decide(entry("k", 5, etag="a-2"), entry("k", 5, etag="b-3"), "checksum", local_side=False) == "check"
    )
    assert decide(entry("k", 5, etag="a"), entry("k", 5, etag="b-2"), "checksum", local_side=False) == "check"
    assert decide(entry("k", 5, etag="a"), entry("k", 5, etag="b"), "checksum", local_side=False) == "copy"
    both = entry("k", 5, etag="a")._replace(**crc), entry("k", 5, etag="b")._replace(**crc)
    assert decide(*both, "checksum", local_side=False) == "check"
    other = entry("k", 5, etag="b-2")._replace(checksum="SHA256")
    assert decide(both[0], other, "checksum", local_side=False) == "copy"


def test_etags_single_and_multipart_match_the_file_they_describe(tmp_path) -> None:
    data = os.urandom(2 * MiB + 123)
    path = tmp_path / "f"
    path.write_bytes(data)
    single = hashlib.md5(data).hexdigest()
    assert etag_matches_file(str(path), f'"{single}"', len(data), 8 * MiB)

    part = MiB  # a layout none of the common part sizes gives: found from size / parts
    digests = b"".join(hashlib.md5(data[i : i + part]).digest() for i in range(0, len(data), part))
    multipart = f"{hashlib.md5(digests).hexdigest()}-3"
    assert etag_matches_file(str(path), multipart, len(data), 8 * MiB)

    assert etag_matches_file(str(path), f"{hashlib.md5(b'x').hexdigest()}", len(data), 8 * MiB) is False
    assert etag_matches_file(str(path), "not-an-md5-kms", len(data), 8 * MiB) is None  # cannot tell

    # the same answers from bytes in memory (what a download checks before it lands)
    assert etag_matches_bytes(data, f'"{single}"') is True
    assert etag_matches_bytes(data, multipart) is True
    flipped = bytearray(data)
    flipped[MiB + 7] ^= 1
    assert etag_matches_bytes(bytes(flipped), multipart) is False
    assert etag_matches_bytes(bytes(flipped), single) is False
    assert etag_matches_bytes(data, "0123-not-md5") is None
    assert etag_matches_bytes(b"", hashlib.md5(b"").hexdigest()) is True


def test_filters_include_then_exclude_across_directories() -> None:
    filters = Filters(include=("*.txt",), exclude=("logs/*",))
    assert filters.accepts("a.txt") and filters.accepts("deep/dir/b.txt")
    assert not filters.accepts("logs/c.txt") and not filters.accepts("d.csv")
    assert not Filters() and Filters().accepts("anything")


def test_the_local_walk_is_in_s3_key_order(tmp_path) -> None:
    for name in ["a-b", "a/x", "a/y/z", "a0", "b"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"1")
    names = [e.relative for e in walk(str(tmp_path))]
    assert names == sorted(names, key=lambda n: n.encode()) == ["a-b", "a/x", "a/y/z", "a0", "b"]


def test_a_listing_side_left_behind_by_a_failed_merge_lets_the_event_loop_end() -> None:
    """sync lists one side ahead of the merge (`_prefetch`). When the other side's listing fails,
    the job ends with that side's queue full and its lister waiting to add a page; the event loop
    then cancels the lister once, which must end it (a lister that caught the cancel and waited
    again to hand it over hung `sync` for good after its error was printed)."""
    import threading

    from s3bulk._commands.sides import prefetch as _prefetch

    async def pages() -> AsyncIterator[list[Entry]]:
        for number in range(10):
            yield [Entry(f"{number:02d}", 1, 0.0, "", "")]

    async def merge_that_fails() -> object:
        side = _prefetch(pages(), depth=1)
        await anext(side)
        await asyncio.sleep(0.01)  # the lister fills the queue and waits to add the next page
        return side  # the failure leaves the side unclosed (its traceback holds it)

    ended = threading.Event()

    def run() -> None:
        asyncio.run(merge_that_fails())
        ended.set()

    threading.Thread(target=run, daemon=True).start()
    assert ended.wait(10), "the event loop never ended: the lister swallowed its cancel"
