"""`ls` of the API: kept apart from the other verbs (`s3bulk._api.*`), which run commands on the
engine, so that `s3bulk ls` loads only what a listing needs (with the signed client's native
requests, `ls` of one key: 0.20 s -> 0.13 s; a bare obstore loop takes 0.05 s)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from s3bulk._config import AwsSettings
from s3bulk._engine.loop import run_loop
from s3bulk._errors import S3Error, UsageError, as_builtin
from s3bulk._report import Report
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._urls import parse_s3

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Listing", "ls", "ls_async", "ls_pages", "ls_table"]


@dataclass
class Listing:
    """What `ls` found: iterate it (or take len) for its objects; `prefixes` for the next level."""

    objects: list[ObjectInfo] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    report: Report = field(default_factory=lambda: Report("ls"))

    def __iter__(self) -> Iterator[ObjectInfo]:
        return iter(self.objects)

    def __len__(self) -> int:
        return len(self.objects)


async def ls_async(
    url: str,
    *,
    recursive: bool = True,
    concurrency: int = 16,
    partitioned: bool | None = None,
    settings: AwsSettings | None = None,
    report: Report | None = None,
) -> AsyncIterator[ObjectInfo | str]:
    """Stream the objects under an s3:// prefix, recursive by default (unlike `s3bulk ls`): many
    key ranges listed in parallel, in key order, unless `partitioned` is False or, by default,
    they are measured not to pay (`_sources.listing._mostly_waiting` and `_seeks`);
    or one level of objects and sub-prefixes (str) when not recursive. A missing bucket raises
    a FileNotFoundError, a refusal a PermissionError, each an s3bulk.S3Error (`as_builtin`)."""
    pages = ls_pages(
        url,
        recursive=recursive,
        concurrency=concurrency,
        partitioned=partitioned,
        settings=settings,
        report=report,
    )
    try:
        async for prefixes, objects in pages:
            for prefix in prefixes:
                yield prefix
            for info in objects:
                yield info
    except S3Error as error:
        raise as_builtin(error) from None


async def ls_pages(
    url: str,
    *,
    recursive: bool = True,
    concurrency: int = 16,
    partitioned: bool | None = None,
    settings: AwsSettings | None = None,
    report: Report | None = None,
    inventory: str | None = None,
    restore_states: bool = False,
) -> AsyncIterator[tuple[list[str], list[ObjectInfo]]]:
    """`ls_async` a page at a time, (sub-prefixes, objects): what `s3bulk ls` prints from, as
    an async generator's step per key cost more than the key's own line. With `inventory` (an
    S3 Inventory's manifest.json, or its configuration's prefix), the objects its files list
    under the URL's prefix, in the inventory's order, with no LIST request on the bucket. With
    `restore_states`, each archived object's restore state (`ListedRestores`), as `head` shows it."""
    from s3bulk._sources.listing import list_prefix, list_sequential
    from s3bulk._sources.restores import ListedRestores
    from s3bulk._stores.storage import Storage

    location = parse_s3(url)
    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    settings = settings or AwsSettings.from_env()
    report = report if report is not None else Report("ls", source=url)
    client = Storage(settings, connections=concurrency)
    wanted = restore_states and inventory is None  # an inventory's rows carry no restore state
    client.client.restore_status = wanted
    restores = ListedRestores(client, location.bucket, concurrency=concurrency) if wanted else None
    started = time.perf_counter()
    try:
        if inventory is not None:
            async for objects in _inventoried(client, inventory, url):
                report.objects_done += len(objects)
                report.bytes_done += sum(info.size for info in objects)
                yield [], objects
        elif recursive and partitioned is not False:
            async for objects in list_prefix(
                client, location.bucket, location.key, concurrency=concurrency, auto=partitioned is None
            ):
                if restores is not None:
                    objects = await restores.filled(objects)
                report.objects_done += len(objects)
                report.bytes_done += sum(info.size for info in objects)
                yield [], objects
        else:
            delimiter = None if recursive else "/"
            async for page in list_sequential(client, location.bucket, location.key, delimiter=delimiter):
                objects = page.objects if restores is None else await restores.filled(page.objects)
                report.objects_done += len(objects)
                report.bytes_done += sum(info.size for info in objects)
                yield page.common_prefixes, objects
    finally:
        report.requests = dict(client.meter.requests)
        report.wall_seconds = time.perf_counter() - started
        report.stage_seconds["list"] = report.wall_seconds
        await client.close()


def ls(
    url: str,
    *,
    recursive: bool = True,
    concurrency: int = 16,
    partitioned: bool | None = None,
    settings: AwsSettings | None = None,
    report: Report | None = None,
) -> Listing:
    """Every object under an s3:// prefix, into memory: recursive by default, as a program most
    often wants (`s3bulk ls` lists one level unless -r, as `aws s3 ls` does); `recursive=False`
    lists one level, its sub-prefixes in `.prefixes`. `ls_async` streams very large listings.
    What the listing cost (requests, time) is in `.report`, the `report` given if one is."""
    listing = Listing(report=report or Report("ls", source=url))

    async def collect() -> None:
        async for entry in ls_async(
            url,
            recursive=recursive,
            concurrency=concurrency,
            partitioned=partitioned,
            settings=settings,
            report=listing.report,
        ):
            if isinstance(entry, str):
                listing.prefixes.append(entry)
            else:
                listing.objects.append(entry)

    run_loop(collect())
    return listing


async def _inventoried(client: Any, inventory: str, url: str) -> AsyncIterator[list[ObjectInfo]]:
    """The objects an inventory lists under `url`, its files read one after another."""
    from s3bulk._sources.inventory import check_inventory, inventory_pages, read_inventory

    location = parse_s3(url)
    check_inventory(inventory, url if url.endswith("/") else url + "/")
    manifest = await read_inventory(client, inventory, location.bucket)
    async for objects in inventory_pages(client, manifest, location.key):
        yield objects


TABLE_BATCH = 16_384  # rows per record batch `ls_table` hands on
_HANDED = 4  # batches listed ahead of the reader


def ls_table(
    url: str,
    *,
    concurrency: int = 16,
    partitioned: bool | None = None,
    settings: AwsSettings | None = None,
    report: Report | None = None,
    inventory: str | None = None,
) -> pa.RecordBatchReader:
    """Every object under an s3:// prefix as a pyarrow `RecordBatchReader` (key, size,
    last_modified as a UTC timestamp, etag, storage_class, checksum_algorithm, checksum_type),
    listed as it is read: `.read_all()`, `.read_pandas()`, or DuckDB's `FROM reader`. The
    listing runs on a thread of its own, a few batches ahead of the reader, so memory holds a
    few batches, not the listing; a reader that stops early (`close()`) stops it. With
    `inventory`, the rows come from that S3 Inventory (as `ls_pages` reads it), not a listing."""
    from s3bulk._errors import require_extra

    require_extra("parquet", "ls_table")
    import pyarrow as pa

    from s3bulk._sources.tables import listing_batch, listing_schema

    parse_s3(url)  # a URL that is no s3:// one: one line now, not from the thread
    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    handed: queue.Queue[Any] = queue.Queue(maxsize=_HANDED)
    stop = threading.Event()

    def hand(item: object) -> bool:
        while not stop.is_set():
            try:
                handed.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    async def produce() -> None:
        waiting: list[ObjectInfo] = []
        async for _prefixes, objects in ls_pages(
            url,
            concurrency=concurrency,
            partitioned=partitioned,
            settings=settings,
            report=report,
            inventory=inventory,
        ):
            waiting.extend(objects)
            if len(waiting) >= TABLE_BATCH:
                if not hand(listing_batch(waiting)):
                    return
                waiting = []
        if waiting:
            hand(listing_batch(waiting))

    def listing() -> None:
        try:
            run_loop(produce())
        except BaseException as exc:  # handed to the reader, which raises it
            hand(exc)
        hand(None)

    thread = threading.Thread(target=listing, name="s3bulk-ls-table", daemon=True)

    def batches() -> Iterator[pa.RecordBatch]:
        thread.start()
        try:
            while (item := handed.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            thread.join()

    return pa.RecordBatchReader.from_batches(listing_schema(), batches())
