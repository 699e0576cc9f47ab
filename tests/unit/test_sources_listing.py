"""Listing in key ranges without a server (`_sources/listing.py`, on an in-memory lister): every
key exactly once, in key order, whatever the keys; a split listing that comes out of order stops;
auto ranges probe only where a page is mostly the round trip; a page reads the same by either
parser, and its times to the second (`_stores/s3xml.py`)."""

from __future__ import annotations

import asyncio
import itertools
import selectors
import types
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import quote_plus
from xml.sax.saxutils import escape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s3bulk._errors import ItemError
from s3bulk._sources.listing import (
    KeyRange,
    ListingOutOfOrder,
    iter_range,
    list_prefix,
    list_sequential,
)
from s3bulk._stores import s3xml
from s3bulk._stores.s3xml import PAGES_WITHOUT_PROGRESS, ListPage, ObjectInfo


def test_a_range_journaled_before_exclusive_bounds_lists_the_same_keys() -> None:
    """Ranges in journals written by earlier versions ended at `upto` inclusive: read back, they
    must still hold that key and nothing after it."""
    import pickle

    from s3bulk._sources.listing import KeyRange

    old = object.__new__(KeyRange)  # as pickle rebuilds it from a journal's state
    old.__setstate__({"after": "p/a", "upto": "p/c"})
    assert pickle.loads(pickle.dumps(old)) == old
    assert (old.after, old.first) == ("p/a", None)
    assert old.before is not None and old.before > "p/c" and not "p/c" < "p/c0" < old.before


class MemoryLister:
    """ListObjectsV2 over a sorted list of keys, `page` keys a page (a unit test's service: the
    ranges' logic against many key shapes in milliseconds). `reversed_pages` lists pages that
    continue a listing (StartAfter or a token) in reverse, as a server out of order would."""

    def __init__(self, keys: list[str], page: int, reversed_pages: bool = False) -> None:
        self.keys, self.page, self.reversed_pages = sorted(set(keys)), page, reversed_pages

    async def list_objects_v2(
        self,
        bucket: str,
        prefix: str = "",
        *,
        start_after: str | None = None,
        continuation_token: str | None = None,
        delimiter: str | None = None,
        max_keys: int = 1000,
    ) -> ListPage:
        after = continuation_token or start_after or ""
        found = [key for key in self.keys if key.startswith(prefix) and key > after][
            : min(max_keys, self.page) + 1
        ]
        listed = [ObjectInfo(key, 0, "", "") for key in found[: min(max_keys, self.page)]]
        if self.reversed_pages and (continuation_token or start_after) and max_keys > 1:
            listed.reverse()
        more = len(found) > len(listed)
        return ListPage(listed, [], more, max(o.key for o in listed) if more else None)


_SHAPED = st.lists(st.text("ab/09~", min_size=1, max_size=6), max_size=120)


@settings(max_examples=300, deadline=None)
@given(keys=_SHAPED, page=st.integers(1, 7), prefix=st.sampled_from(["", "a", "a/", "b0"]))
def test_ranges_list_every_key_once_in_order_whatever_the_keys(
    keys: list[str], page: int, prefix: str
) -> None:
    """However the key space is cut (boundaries that are keys themselves, prefixes of other
    keys, empty ranges), the ranges tile it: every key once, in order."""
    lister = MemoryLister(keys, page)

    async def listed() -> list[str]:
        pages = list_prefix(lister, "b", prefix, concurrency=4, max_ranges=8)
        return [info.key async for objects in pages for info in objects]

    assert asyncio.run(listed()) == [key for key in lister.keys if key.startswith(prefix)]


def test_a_listing_that_split_stops_when_a_later_page_comes_out_of_order() -> None:
    """After the first range handed parts on, its own later pages must rise too: listed on,
    they would repeat the keys handed away."""
    lister = MemoryLister([f"p/{i:03d}/{j}" for i in range(20) for j in range(5)], 5, reversed_pages=True)
    handed: list[KeyRange] = []

    async def first_range() -> None:
        async for _ in iter_range(
            lister, "b", "p/", KeyRange(), on_split=lambda ranges, **_: handed.extend(ranges)
        ):
            pass

    with pytest.raises(ListingOutOfOrder, match="key ranges need key order"):
        asyncio.run(first_range())
    assert handed


class TimedLister(MemoryLister):
    """A MemoryLister that answers after a service's delays: `work` seconds for a page that holds
    keys, plus `round_trip` for any answer; it counts StartAfter probes (MaxKeys=1)."""

    def __init__(self, keys: list[str], *, work: float, round_trip: float) -> None:
        super().__init__(keys, 100)
        self.work, self.round_trip, self.probes = work, round_trip, 0

    async def list_objects_v2(self, bucket: str, prefix: str = "", **options: Any) -> ListPage:
        page = await super().list_objects_v2(bucket, prefix, **options)
        self.probes += options.get("max_keys") == 1 and options.get("start_after") is not None
        await asyncio.sleep(self.round_trip + (self.work if page.objects else 0.0))
        return page


class _VirtualClock(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when it would wait: a sleep of 20 ms takes 20 ms of
    its time and none of the machine's, so the listing's timings (read by `_auto_listing` from
    this clock) are the lister's delays alone, whatever the load on the machine's cores."""

    def __init__(self) -> None:
        self.now = 0.0
        clock = self

        class Instant(selectors.DefaultSelector):
            def select(self, timeout: float | None = None) -> Any:
                if timeout:
                    clock.now += timeout
                return super().select(0)

        super().__init__(Instant())

    def time(self) -> float:
        return self.now


def _auto_listing(lister: TimedLister, bucket: str) -> tuple[list[str], int]:
    """The keys an auto listing returns and how many key ranges it listed, timed on a virtual
    clock (the round trips and the work are the lister's, not the machine's scheduling)."""
    ranges = 0

    async def listed() -> list[str]:
        keys = []
        async for objects in list_prefix(lister, bucket, "p/", auto=True, max_ranges=8):
            keys += [info.key for info in objects]
        return keys

    real = iter_range

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal ranges
        ranges += 1
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch, asyncio.Runner(loop_factory=_VirtualClock) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, _VirtualClock)
        patch.setattr("s3bulk._sources.listing.iter_range", counted)
        patch.setattr("s3bulk._sources.listing.time", types.SimpleNamespace(perf_counter=loop.time))
        keys = runner.run(listed())
    return keys, ranges


def test_auto_ranges_skip_the_probes_where_a_page_is_mostly_the_services_work() -> None:
    """A server on this machine (MinIO): a page is its work, an empty listing answers at once.
    Ranges cannot pay there, and its StartAfter probes cost as much as ten pages: none is sent."""
    keys = [f"p/{i:03d}/{j}" for i in range(20) for j in range(50)]
    lister = TimedLister(keys, work=0.05, round_trip=0.0)
    assert _auto_listing(lister, "local-work") == (sorted(keys), 1)
    assert lister.probes == 0


def test_auto_ranges_split_where_a_page_is_mostly_the_round_trip() -> None:
    """A far service that seeks: probes are sent, and the listing splits into ranges."""
    keys = [f"p/{i:03d}/{j}" for i in range(20) for j in range(50)]
    lister = TimedLister(keys, work=0.0, round_trip=0.02)
    listed, ranges = _auto_listing(lister, "far-seeks")
    assert listed == sorted(keys)
    assert lister.probes > 0 and ranges > 1


_KEYS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


def _page(keys: list[str], *, url: bool, checksum: bool, spaced: bool) -> bytes:
    """A ListObjectsV2 page as AWS writes it (or pretty-printed, which the fast reader declines)."""
    gap = "\n  " if spaced else ""
    entries = "".join(
        f"<Contents>{gap}<Key>{quote_plus(key) if url else escape(key)}</Key>{gap}"
        f"<LastModified>2026-11-23T22:31:0{i % 10}.{i:03d}Z</LastModified>{gap}"
        f"<ETag>&quot;{i:032x}&quot;</ETag>{gap}"
        + (
            "<ChecksumAlgorithm>CRC64NVME</ChecksumAlgorithm><ChecksumType>FULL_OBJECT</ChecksumType>"
            if checksum
            else ""
        )
        + f"<Size>{i * 7}</Size><StorageClass>STANDARD</StorageClass></Contents>"
        for i, key in enumerate(keys)
    )
    encoding = "<EncodingType>url</EncodingType>" if url else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>b</Name><Prefix></Prefix><NextContinuationToken>a&amp;b==</NextContinuationToken>"
        f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>1000</MaxKeys>{encoding}<IsTruncated>true</IsTruncated>"
        f"{entries}</ListBucketResult>"
    ).encode()


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(_KEYS, max_size=20), url=st.booleans(), checksum=st.booleans(), spaced=st.booleans())
def test_a_listing_page_reads_the_same_by_either_parser(
    keys: list[str], url: bool, checksum: bool, spaced: bool
) -> None:
    """The one-expression reader of a page (5x faster) must agree with ElementTree on every key."""
    if not url:  # what plain XML carries (the rest: tests/unit/test_stores_s3xml.py)
        keys = [key for key in keys if not s3xml._NOT_XML.search(key) and not set(key) & {"\r", "\ufffd"}]
    body = _page(keys, url=url, checksum=checksum, spaced=spaced)
    page = s3xml.parse_list_objects_v2(body, url_asked=url)
    assert page == s3xml._parse_page_tree(body, url_asked=url)
    assert [info.key for info in page.objects] == keys
    assert page.next_token == "a&b==" and page.is_truncated
    assert [info.etag for info in page.objects] == [f"{i:032x}" for i in range(len(keys))]
    assert [info.checksum_algorithm for info in page.objects] == ["CRC64NVME" if checksum else ""] * len(keys)
    assert (s3xml._parse_regular_page(body, url) is None) == (spaced and bool(keys))


def test_listing_times_parse_to_the_second_they_name() -> None:
    moments = ("2026-11-23T22:31:04.907Z", "2026-11-23T22:31:04Z", "2026-11-23T22:31:04.123456+02:00")
    for moment in (*moments, *moments[::-1], moments[0], moments[0], ""):  # each asked again, kept or not
        expected = datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp() if moment else 0.0
        assert s3xml.epoch_seconds(moment) == pytest.approx(expected, abs=1e-6)


class ScriptedLister:
    """A service that answers every request with the next page of `pages` (keys, or (keys,
    prefixes); each says more follows until the script ends), under a token never given before:
    listings that go nowhere, or that repeat a key."""

    def __init__(self, pages: Iterable[list[ObjectInfo] | tuple[list[ObjectInfo], list[str]]]) -> None:
        self.pages = itertools.islice(pages, 10 * PAGES_WITHOUT_PROGRESS)  # "forever", ended for a test
        self.requests = 0

    async def list_objects_v2(self, bucket: str, prefix: str = "", **options: Any) -> ListPage:
        if options.get("max_keys") == 1:  # a range's probe: nothing beyond, so no split
            return ListPage([], [], False, None)
        self.requests += 1
        page = next(self.pages, None)
        if page is None:
            return ListPage([], [], False, None)
        objects, prefixes = page if isinstance(page, tuple) else (page, [])
        return ListPage(objects, prefixes, True, f"token-{self.requests}")


def _infos(*keys: str, size: int = 0) -> list[ObjectInfo]:
    return [ObjectInfo(key, size, "", "") for key in keys]


def _listed(lister: ScriptedLister, how: str) -> list[str]:
    """The keys (and prefixes) a listing yields: list_prefix (ls -r, cp), list_sequential as sync
    lists (in order), or list_sequential with a delimiter (ls)."""

    async def run() -> list[str]:
        if how == "ranges":
            return [info.key async for objects in list_prefix(lister, "b", "") for info in objects]
        ordered_for = "sync needs order" if how == "ordered" else ""
        found = []
        async for page in list_sequential(lister, "b", "", delimiter="/", ordered_for=ordered_for):
            found += page.common_prefixes + [info.key for info in page.objects]
        return found

    return asyncio.run(run())


HOW = ["ranges", "ordered", "sequential"]


@pytest.mark.parametrize("how", HOW)
def test_empty_pages_that_say_more_follows_are_passed_over_while_they_end(how: str) -> None:
    """S3 answers pages with no key and IsTruncated (delete markers, folded prefixes): a run of
    them short of the bound is listed through."""
    pages = [_infos("a"), *[[]] * (PAGES_WITHOUT_PROGRESS - 1), _infos("b", "c"), [], _infos("d")]
    assert _listed(ScriptedLister(pages), how) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("how", HOW)
def test_empty_pages_that_say_more_follows_forever_stop_the_listing(how: str) -> None:
    lister = ScriptedLister(itertools.chain([_infos("a")], itertools.repeat([])))
    with pytest.raises(
        ItemError, match=r"1,000 pages in a row brought nothing.*the listing does not advance"
    ):
        _listed(lister, how)
    assert lister.requests == 1 + PAGES_WITHOUT_PROGRESS


@pytest.mark.parametrize("how", HOW)
def test_the_same_page_again_under_fresh_tokens_stops_the_listing(how: str) -> None:
    lister = ScriptedLister(itertools.repeat(_infos("a", "b")))
    with pytest.raises(ItemError, match=r"listed the same page again.*the listing does not advance"):
        _listed(lister, how)
    assert lister.requests <= 3


def test_a_cycle_of_pages_under_fresh_tokens_stops_a_listing_in_no_order() -> None:
    """Pages out of order (as S3 Express lists) that come round again: seen within twice the cycle."""
    cycle = [_infos("m", "n"), _infos("c", "d"), _infos("x", "y")]
    lister = ScriptedLister(itertools.cycle(cycle))
    with pytest.raises(ItemError, match="listed the same page again"):
        _listed(lister, "ranges")
    assert lister.requests <= 2 * len(cycle) + 2


@pytest.mark.parametrize("how", HOW)
def test_a_page_that_begins_with_the_entry_the_one_before_ended_with_lists_it_once(how: str) -> None:
    """As a server whose StartAfter takes the key itself lists: every key once, counted once."""
    pages = [_infos("a", "b"), _infos("b", "c"), _infos("c", "c", "d"), _infos("d")]
    assert _listed(ScriptedLister(pages), how) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("how", HOW)
def test_a_key_listed_twice_as_two_objects_stops_the_listing(how: str) -> None:
    pages = [_infos("a", "b"), _infos("b", size=9) + _infos("c")]
    with pytest.raises(ListingOutOfOrder, match="lists 'b' twice in a row, as two different objects"):
        _listed(ScriptedLister(pages), how)


def test_a_prefix_listed_again_on_the_next_page_is_listed_once() -> None:
    pages = [(_infos("a"), ["p/"]), ([], ["p/"]), ([], ["p/", "q/"]), (_infos("z"), [])]
    assert _listed(ScriptedLister(pages), "sequential") == ["p/", "a", "q/", "z"]
