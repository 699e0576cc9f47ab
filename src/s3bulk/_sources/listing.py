"""List one prefix with many requests in flight by splitting the key space into ranges.

S3 pages a listing 1,000 keys at a time and each page needs the previous page's token, so a plain
paginator is a chain of round trips. But `StartAfter` lets a listing begin anywhere, so the key
space can be cut into ranges listed side by side (`KeyRange`). The cut points are not known in
advance; they are discovered from the data:

1. The first page of a range shows how keys are shaped: its keys share a common prefix ``C``.
2. For each character position ``q`` above the page's varying part, one ``MaxKeys=1`` probe asks
   "is there any key beyond this page at level ``q``?" (all probes at once, one round trip).
3. The highest such level is where the remaining keys fan out; the characters the page uses there
   give the boundaries (``list/001``, ``list/002``, ... for numbered keys; ``1``..``f`` for hex).

Every new range splits again after its own first page while more parallelism is wanted, so skewed
key spaces are refined where the keys are. A range ``[list/001, list/002)`` is listed with the
Prefix ``list/001``, so the service itself says where it ends. Correctness does not depend on the
guesses: the ranges always tile the key space exactly, each key is listed once, and a bad guess
only costs an empty range's single request.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from s3bulk._errors import ItemError, JobAborted, S3Error
from s3bulk._sources.extsort import ExternalSort
from s3bulk._stores.s3xml import Advance, ListPage, ObjectInfo, Repeats, repeated
from s3bulk._urls import is_directory_bucket


class Lister(Protocol):
    """What listing needs of a store: one ListObjectsV2 page (stores.storage.Storage)."""

    async def list_objects_v2(
        self,
        bucket: str,
        prefix: str = "",
        *,
        start_after: str | None = None,
        continuation_token: str | None = None,
        delimiter: str | None = None,
        max_keys: int = 1000,
    ) -> ListPage: ...


MAX_PROBE_LEVELS = 12
MAX_FANOUT = 48


# Whether key ranges pay for a bucket, as measured at the first split attempt in this process
# (--list-ranges auto): bucket -> verdict. Where they do not, the probes are paid once, not once
# per range.
_RANGES_PAY: dict[str, bool] = {}
ROUND_TRIP_SHARE = 0.2  # ranges pay when the round trip is at least this share of a page's time
SEEK_ROUND_TRIPS = 1.5  # ... and a StartAfter probe costs at most this many round trips
ROUND_TRIP_PREFIX = "~s3bulk-round-trip~/"  # listed to time a round trip: no keys live there


class ListingOutOfOrder(JobAborted):
    """The service listed a key at or before one it had listed already. S3 lists in key order,
    S3 Express directory buckets do not: whatever relies on order (key ranges, sync and check's
    merge of two sorted listings) must stop rather than skip, copy or delete the wrong keys."""


class ListingCheck:
    """Follows the pages of one listing: drops an entry listed again right after itself (a page
    that begins with the entry the one before ended with, as servers whose StartAfter takes the
    key itself do), says when keys stop rising, and stops a listing whose pages bring no new key
    (`advanced`)."""

    __slots__ = ("advance", "last", "last_prefix", "previous", "where")

    def __init__(self, where: str, after: str | None = None) -> None:
        self.where = where
        self.last = after or ""
        self.previous: ObjectInfo | None = None  # the entry whose key is `last` (None: `after`)
        self.last_prefix = ""  # a delimiter listing's last prefix
        self.advance = Advance(f"list {where}")

    def rising(self, objects: list[ObjectInfo]) -> list[ObjectInfo] | None:
        """The page without the entries listed again right after themselves, or None when a
        key does not rise."""
        last = self.last
        for info in objects:
            if info.key <= last:
                return self._without_repeats(objects)
            last = info.key
        if objects:
            self.last, self.previous = last, objects[-1]
        return objects

    def _without_repeats(self, objects: list[ObjectInfo]) -> list[ObjectInfo] | None:
        kept = []
        last, previous = self.last, self.previous
        for info in objects:
            if info.key > last:
                kept.append(info)
                last, previous = info.key, info
            elif info.key != last:
                return None
            elif previous is not None and info != previous:
                raise self._twice(info)
        self.last, self.previous = last, previous
        return kept

    def unrepeated(self, objects: list[ObjectInfo]) -> list[ObjectInfo]:
        """For a listing in no order: the page without the entries that repeat the one just
        before them."""
        previous, kept = self.previous, []
        for info in objects:
            if previous is None or info.key != previous.key:
                kept.append(info)
            elif info != previous:
                raise self._twice(info)
            previous = info
        self.previous = previous
        return kept

    def _twice(self, info: ObjectInfo) -> ListingOutOfOrder:
        """A key listed again right after itself as another object: which one is it? S3 lists
        a key once, in any order."""
        return ListingOutOfOrder(
            f"list {self.where}: the service lists {_quoted(info.key)} twice in a row, as two different "
            "objects; stopping rather than guess which one it holds"
        )

    def new_prefixes(self, prefixes: list[str]) -> list[str]:
        """A delimiter listing's prefixes without one that repeats the prefix just before it."""
        if prefixes and prefixes[0] == self.last_prefix:
            prefixes = prefixes[1:]
        if prefixes:
            self.last_prefix = prefixes[-1]
        return prefixes

    def advanced(self, objects: list[ObjectInfo], truncated: bool, prefixes: Sequence[str] = ()) -> None:
        """Raise when this page (its repeats dropped) makes a listing that does not advance
        (`s3xml.Advance`): a page listed before under a fresh token, which `Repeats` of tokens
        does not see, or too many truncated pages in a row without a key."""
        keys = (objects[0].key, objects[-1].key, len(objects)) if objects else ("", "", 0)
        mark = (*keys, *prefixes[:1], *prefixes[-1:], len(prefixes)) if objects or prefixes else None
        self.advance.page(mark, truncated)

    def refuse(self, objects: list[ObjectInfo], needs: str) -> ListingOutOfOrder:
        after = self.last
        for info in objects:
            if info.key < after:
                return ListingOutOfOrder(
                    f"{self.where} lists keys out of order ({_quoted(info.key)} after {_quoted(after)}), "
                    f"as S3 Express directory buckets do: {needs}"
                )
            after = info.key
        return ListingOutOfOrder(f"{self.where} lists keys out of order: {needs}")


def _quoted(key: str) -> str:
    from s3bulk._text import printable

    return repr(printable(key))


RANGES_NEED_ORDER = "key ranges need key order, so list with --list-ranges off"


@dataclass(frozen=True)
class KeyRange:
    """Keys k under a listing prefix with ``after < k`` (or ``first <= k``) and ``k < before``
    (None: unbounded on that side).

    A range handed on by a split starts at a boundary *inclusive* (`first`), so that the range
    below it can end where its own narrowed listing ends: a range ``[keys/001, keys/002)`` is
    exactly the keys beginning with ``keys/001``, listed with that Prefix, and the service says
    "no more" on its last page instead of the client paying a request past the boundary (which
    cost a second request per range and a page of keys read only to be dropped)."""

    after: str | None = None
    before: str | None = None
    first: str | None = None

    def __setstate__(self, state: dict[str, str | None]) -> None:
        """Ranges journaled by s3bulk before `first` and `before` ended at ``upto`` inclusive:
        the keys up to ``u`` are the keys before ``u + "\\0"``, the next string after it."""
        if "upto" in state:
            upto = state.pop("upto")
            state = {"after": state.get("after"), "before": None if upto is None else upto + "\0"}
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def __str__(self) -> str:
        if self.first is not None:
            start = f"from {self.first!r}"
        else:
            start = f"after {self.after!r}" if self.after else "from the first"
        end = f"before {self.before!r}" if self.before else "to the last"
        return f"keys {start} {end}"


@dataclass(frozen=True)
class SingleObject:
    """A descriptor naming one key (no trailing '/'): listed with MaxKeys=1 to learn its size."""

    key: str

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class ObjectBatch:
    """A work descriptor: one listed page (keys and sizes), handed from the worker that listed it
    to an idle one, so work spreads across processes even when the key space cannot be split."""

    objects: tuple[ObjectInfo, ...]

    def __str__(self) -> str:
        return (
            f"{len(self.objects)} listed objects from {self.objects[0].key}" if self.objects else "no objects"
        )


async def find_object(client: Lister, bucket: str, key: str) -> ObjectInfo:
    """One object's listing entry (size, time, ETag) from a MaxKeys=1 listing, which costs what a
    HEAD costs and needs no other permission than the listing does. ItemError if it is absent."""
    page = await client.list_objects_v2(bucket, key, max_keys=1)
    if page.objects and page.objects[0].key == key:
        return page.objects[0]
    directory, _, name = key.rpartition("/")
    if any(mark in name for mark in "*?["):  # a glob, as `rm` takes and aws s3 does not
        prefix = f"s3://{bucket}/{directory}/" if directory else f"s3://{bucket}/"
        hint = f"cp and sync take no globs: {prefix} --include '{name}'"
    else:
        hint = "for everything under a prefix, end the URL with '/'"
    raise ItemError(f"no such object: s3://{bucket}/{key} ({hint})", retryable=False)


# called with the ranges handed on and, as `narrowed`, what is left of the range being listed
SplitHook = Callable[..., None]


def _common_prefix(first: str, last: str) -> str:
    size = 0
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        size += 1
    return first[:size]


def _successor(char: str) -> str | None:
    code = ord(char) + 1
    if 0xD800 <= code <= 0xDFFF:
        code = 0xE000
    return chr(code) if code <= 0x10FFFF else None


def _probe_points(prefix: str, keys: list[str], before: str | None) -> list[tuple[int, str]]:
    """(level, StartAfter) pairs asking whether keys exist beyond the page at each level."""
    last = keys[-1]
    common = _common_prefix(keys[0], last)
    top = min(len(common) + 1, len(last))
    points = []
    for level in range(len(prefix), top)[:MAX_PROBE_LEVELS]:
        successor = _successor(last[level])
        if successor is None:
            continue
        point = last[:level] + successor
        if before is not None and point >= before:
            continue
        points.append((level, point))
    return points


def _fanout(level: int, keys: list[str], before: str | None) -> list[str]:
    """Boundaries at `level`, from the characters the page itself uses at or below that level."""
    last = keys[-1]
    alphabet = sorted({char for key in keys for char in key[level:]} | {last[level]})
    stem = last[:level]
    boundaries = [stem + char for char in alphabet if char > last[level]]
    if before is not None:
        boundaries = [b for b in boundaries if b < before]
    if len(boundaries) > MAX_FANOUT:
        step = len(boundaries) / MAX_FANOUT
        boundaries = [boundaries[int(i * step)] for i in range(MAX_FANOUT)]
    return boundaries


async def discover_split(
    client: Lister, bucket: str, prefix: str, objects: list[ObjectInfo], before: str | None
) -> tuple[list[str], float | None]:
    """Boundaries that cut the rest of a range (after the page `objects`) into non-empty parts,
    and what the fastest probe took (None: nothing was probed)."""
    keys = [info.key for info in objects]
    points = _probe_points(prefix, keys, before)
    if not points:
        return [], None
    probes = (client.list_objects_v2(bucket, prefix, start_after=point, max_keys=1) for _, point in points)
    replies = await asyncio.gather(*map(_timed, probes))
    fastest = min(seconds for _, seconds in replies)
    for (level, _), (reply, _) in zip(points, replies, strict=True):
        if reply.objects and (before is None or reply.objects[0].key < before):
            return _fanout(level, keys, before), fastest
    return [], fastest


async def _timed(request: Awaitable[ListPage]) -> tuple[ListPage, float]:
    started = time.perf_counter()
    page = await request
    return page, time.perf_counter() - started


async def time_round_trip(client: Lister, bucket: str, prefix: str) -> float:
    """What a listing of a prefix nobody uses takes: the network and the service's fixed cost,
    no work behind it. Timed alone: sent beside the probes, it waited behind them where they are
    expensive (MinIO), and looked like a far service."""
    return (await _timed(client.list_objects_v2(bucket, f"{prefix}{ROUND_TRIP_PREFIX}", max_keys=1)))[1]


def _mostly_waiting(round_trip: float, page_seconds: float) -> bool:
    """--list-ranges auto: whether a page's time is mostly the round trip (a far service, or one
    that answers many requests at once) rather than the service's own work on cores it may share
    with us (a server on this machine). Only then can ranges, which overlap round trips, pay."""
    return round_trip >= ROUND_TRIP_SHARE * page_seconds


def _seeks(round_trip: float, probe: float) -> bool:
    """--list-ranges auto: whether a StartAfter probe costs little more than the round trip
    itself (a seek), not a walk restarted for every range (MinIO reads and sorts a directory
    again). "No more than a page" was not enough: MinIO at 20 ms answered a probe in 50 ms
    against a page's 90, and its ranges then took 3x the one chain."""
    return probe <= SEEK_ROUND_TRIPS * round_trip


def _narrowest(prefix: str, after: str | None, before: str | None) -> str:
    """The longest Prefix every key ``after < k < before`` begins with. Between ``keys/001/x``
    and ``keys/002`` that is ``keys/001``: listed with it, the service ends the range itself."""
    if after is None or before is None:
        return prefix
    common = _common_prefix(after, before)
    size = len(common)
    if len(before) == size + 1 and len(after) > size and _successor(after[size]) == before[size]:
        return after[: size + 1]
    return common


def _below(objects: list[ObjectInfo], before: str | None) -> tuple[list[ObjectInfo], bool]:
    """The page's objects before `before`, and whether the page reached it (the range ends)."""
    if before is None or not objects or objects[-1].key < before:
        return objects, False
    return objects[: bisect.bisect_left(objects, before, key=lambda info: info.key)], True


async def iter_range(
    client: Lister,
    bucket: str,
    prefix: str,
    key_range: KeyRange,
    *,
    on_split: SplitHook | None = None,
    want_split: Callable[[], bool] = lambda: True,
    auto: bool = False,
    ordered_for: str = "",
) -> AsyncIterator[list[ObjectInfo]]:
    """Pages of one range. After its first full page (with `auto`, its second: the first pays
    for a cold connection) it may hand the rest of its range, cut into parts, to `on_split` and
    keep only the first part for itself; with `auto`, only where the service is measured to
    reward it (`_mostly_waiting`, `_seeks`). While enough ranges run (`want_split` says no), and
    after a split (the part it kept may still hold most of the keys), it asks again on its next
    page.

    Each request lists the narrowest Prefix that holds the rest of the range (`_narrowest`), so
    a range usually ends on the service's "no more" rather than on a page that crosses into the
    next range.

    A range that relies on key order (one of a split listing, or all of it for `ordered_for`,
    which says what needs the order) stops with ListingOutOfOrder when the service lists out of
    order; a whole listing not yet split just stops splitting. An S3 Express directory bucket
    takes no StartAfter and lists in no order: it is never split."""
    if is_directory_bucket(bucket):
        on_split = None
    after, before = key_range.after, key_range.before
    token: str | None = None
    # the Prefix listed now: from `first` inclusive, its own keys first; else the narrowest
    within = key_range.first if key_range.first is not None else _narrowest(prefix, after, before)
    may_split = on_split is not None
    warm_up = 1 if auto and bucket not in _RANGES_PAY else 0  # pages listed before the first attempt
    check = ListingCheck(f"s3://{bucket}/{prefix}", after)
    ordered = True  # until a whole listing not yet split comes out of order
    repeats = Repeats()
    while True:
        started = time.perf_counter()
        page: ListPage = await client.list_objects_v2(
            bucket, within, start_after=after if token is None else None, continuation_token=token
        )
        page_seconds = time.perf_counter() - started
        objects = check.rising(page.objects) if ordered else check.unrepeated(page.objects)
        refused = None  # raised once the page is known not to be one listed before
        if objects is None:
            if ordered_for or key_range != KeyRange() or before is not None:  # a range, or split
                refused = check.refuse(page.objects, ordered_for or RANGES_NEED_ORDER)
            ordered = may_split = False  # one listing, in whatever order it comes
            objects = check.unrepeated(page.objects)
        finished = not page.is_truncated  # truncated, a page has its token (`S3Client`)
        if not finished and (page.next_token == token or repeats.seen(page.next_token)):
            raise repeated(f"list s3://{bucket}/{within}")
        check.advanced(objects, page.is_truncated)
        if refused is not None:
            raise refused
        objects, reached = _below(objects, before)
        if objects:
            yield objects
            after = objects[-1].key
        elif after is None:  # nothing begins with `first`, not even `first` itself
            after = within
        token = page.next_token
        if reached:
            return
        if finished:
            rest = _narrowest(prefix, after, before)
            if rest.startswith(within):  # every key left in the range would begin with `within`
                return
            within, token = rest, None  # the keys beginning with `first` are listed: the rest
            continue
        if warm_up:
            warm_up -= 1
            continue
        if not (may_split and objects) or (auto and _RANGES_PAY.get(bucket) is False):
            may_split = False
        elif want_split():  # else enough ranges run now: ask again on the next page
            assert on_split is not None
            # --list-ranges auto: the first attempt in this process measures whether ranges pay
            # for the bucket; where they do not, what it takes to know is paid once, not per range.
            measure = auto and bucket not in _RANGES_PAY
            round_trip = await time_round_trip(client, bucket, prefix) if measure else 0.0
            if measure and not _mostly_waiting(round_trip, page_seconds):
                _RANGES_PAY[bucket] = may_split = False  # known without probes (on MinIO, 10 pages' time)
                continue
            try:
                boundaries, probe = await discover_split(client, bucket, prefix, objects, before)
            except S3Error as exc:
                if exc.status != 400:
                    raise
                # a store that refuses StartAfter (S3 Express, and one whose listing is in no
                # order before a page shows it) is listed as one range, as it lists
                _RANGES_PAY[bucket] = may_split = False
                continue
            if measure and probe is not None:
                _RANGES_PAY[bucket] = _seeks(round_trip, probe)
            may_split = bool(boundaries) and (not auto or _RANGES_PAY.get(bucket, True))
            if may_split:
                bounds = [*boundaries, before]
                handed = [KeyRange(before=bounds[i + 1], first=bounds[i]) for i in range(len(boundaries))]
                on_split(handed, narrowed=replace(key_range, before=boundaries[0]))
                before = boundaries[0]
                rest = _narrowest(prefix, after, before)
                if rest != within and rest.startswith(within):  # the service then ends the range
                    within, token = rest, None


class _Node:
    """A range in key order; pages wait in a small queue so output can be emitted sorted."""

    __slots__ = ("key_range", "next", "queue")

    def __init__(self, key_range: KeyRange) -> None:
        self.key_range = key_range
        self.queue: asyncio.Queue[list[ObjectInfo] | BaseException | None] = asyncio.Queue(maxsize=2)
        self.next: _Node | None = None


async def list_prefix(
    client: Lister,
    bucket: str,
    prefix: str,
    *,
    concurrency: int = 16,
    max_ranges: int = 64,
    auto: bool = False,
    ordered_for: str = "",
) -> AsyncIterator[list[ObjectInfo]]:
    """All objects under `prefix`, in key order, listed over up to `max_ranges` parallel ranges
    (with `auto`, where StartAfter is measured to be a seek; see `iter_range`).

    Memory stays bounded: each range holds at most two pages before it waits for the reader.
    """
    semaphore = asyncio.Semaphore(concurrency)
    head = _Node(KeyRange())
    active = 0
    tasks: set[asyncio.Task[None]] = set()

    class _Limited:
        """The client, with requests gated by the listing's in-flight limit."""

        async def list_objects_v2(self, *args: object, **kwargs: object) -> ListPage:
            async with semaphore:
                return await client.list_objects_v2(*args, **kwargs)  # type: ignore[arg-type]

    limited = _Limited()

    def start(node: _Node) -> None:
        nonlocal active
        active += 1
        task = asyncio.create_task(run(node))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def run(node: _Node) -> None:
        nonlocal active

        def split(ranges: list[KeyRange], narrowed: KeyRange | None = None) -> None:
            after = node
            for key_range in ranges:
                new = _Node(key_range)
                new.next, after.next = after.next, new
                after = new
                start(new)

        failure: Exception | None = None
        try:
            async for objects in iter_range(
                limited,
                bucket,
                prefix,
                node.key_range,
                on_split=split,
                want_split=lambda: active < max_ranges,
                auto=auto,
                ordered_for=ordered_for,
            ):
                await node.queue.put(objects)
        except Exception as exc:  # handed to the reader, which raises it in order
            failure = exc
        finally:
            active -= 1
        # Cancelled, the task has left above: the reader is gone, and a put into its full queue
        # would wait forever (it hung the end of a sync whose listing had failed).
        if failure is not None:
            await node.queue.put(failure)
        await node.queue.put(None)

    start(head)
    node: _Node | None = head
    try:
        while node is not None:
            while (item := await node.queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
            node = node.next
    finally:
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def list_sequential(
    client: Lister, bucket: str, prefix: str, *, delimiter: str | None = None, ordered_for: str = ""
) -> AsyncIterator[ListPage]:
    """A plain paginator (used for delimiter listings, with --list-ranges off, and as the
    benchmark's baseline). The next page is requested before this one is handed on, so whatever
    the caller does with a page (print it, plan its items) overlaps the service's time for the
    next one. With `ordered_for`, keys out of order stop it (ListingOutOfOrder)."""
    check = ListingCheck(f"s3://{bucket}/{prefix}")
    repeats = Repeats()

    def fetch(token: str | None) -> asyncio.Task[ListPage]:
        return asyncio.ensure_future(
            client.list_objects_v2(bucket, prefix, continuation_token=token, delimiter=delimiter)
        )

    pending = fetch(None)
    try:
        while True:
            page = await pending
            objects = check.rising(page.objects) if ordered_for else check.unrepeated(page.objects)
            refused = check.refuse(page.objects, ordered_for) if objects is None else None
            if objects is None:
                objects = check.unrepeated(page.objects)
            more = page.is_truncated  # truncated, a page has its token (`S3Client`)
            if more and repeats.seen(page.next_token):
                raise repeated(f"list s3://{bucket}/{prefix}")
            prefixes = check.new_prefixes(page.common_prefixes)
            check.advanced(objects, more, prefixes)  # a page listed before says so, not "out of order"
            if refused is not None:
                raise refused
            if more:
                pending = fetch(page.next_token)
            yield page._replace(objects=objects, common_prefixes=prefixes)
            if not more:
                return
    finally:
        if not pending.done():
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)


# Keys an ordered listing holds back before handing any on: a listing in no order shows it within
# these (all of them in order by chance: 1 in 1,000! for a shuffled one), and is sorted instead
LOOKAHEAD_KEYS = 1000


async def in_order_or_sorted(
    pages: AsyncIterator[list[ObjectInfo]],
    sorted_pages: Callable[[], AsyncIterator[list[ObjectInfo]]],
    lookahead: int = LOOKAHEAD_KEYS,
) -> AsyncIterator[list[ObjectInfo]]:
    """A listing as `pages` gives it, in key order (sync and check merge two such); where the
    service lists out of order within its first `lookahead` keys (held back until then: S3
    Express, and stores like it, already on the first page), the listing read again whole and
    sorted (`sorted_listing`). Out of order later, after pages were handed on in order, it
    stops, as `ListingOutOfOrder` says: nothing was acted on out of order."""
    held: list[list[ObjectInfo]] | None = []  # None once handed on
    count = 0
    try:
        async for page in pages:
            if held is None:
                yield page
                continue
            held.append(page)
            count += len(page)
            if count >= lookahead:
                handed, held = held, None
                for each in handed:
                    yield each
    except ListingOutOfOrder:
        if held is None:
            raise
    else:
        for each in held or []:
            yield each
        return
    async for page in sorted_pages():
        yield page


async def sorted_listing(
    client: Lister, bucket: str, prefix: str, *, page_size: int = 1000
) -> AsyncIterator[list[ObjectInfo]]:
    """A listing in whatever order the service gives it, sorted (`sorted_pages`)."""
    listed = (page.objects async for page in list_sequential(client, bucket, prefix))
    async for page in sorted_pages(listed, f"s3://{bucket}/{prefix}", page_size=page_size):
        yield page


async def sorted_pages(
    pages: AsyncIterator[list[ObjectInfo]], where: str, *, page_size: int = 1000
) -> AsyncIterator[list[ObjectInfo]]:
    """Objects in any order (a listing, an inventory's files), read to their end into an
    external sort (`extsort.ExternalSort`: memory bounded whatever the count), then handed on in
    key order, `page_size` entries at a time. Nothing is handed on before the last page came: a
    listing that fails on the way gives nothing to act on. A key given twice as the same object
    is handed on once; as two different objects, it stops the listing."""
    sort: ExternalSort[ObjectInfo] = ExternalSort(key=_key_of)
    try:
        async for objects in pages:
            if len(objects) > 64:  # sorting a run and writing it is ~0.1 s per 100,000
                await asyncio.to_thread(sort.add, objects)
            else:
                sort.add(objects)
        previous: ObjectInfo | None = None
        out: list[ObjectInfo] = []
        for info in sort.sorted():
            if previous is not None and info.key == previous.key:
                if info != previous:
                    raise ListingCheck(where)._twice(info)
                continue
            out.append(info)
            previous = info
            if len(out) >= page_size:
                yield out
                out = []
        if out:
            yield out
    finally:
        sort.close()


def _key_of(info: ObjectInfo) -> str:
    return info.key
