"""The Python API: plain functions with sync and async twins, like obstore's verbs.

report = s3bulk.copy("s3://src/data/", "s3://dst/data/")
assert report.ok, report.failures
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from s3bulk.config import AwsSettings
from s3bulk.engine.hybrid import HybridEngine
from s3bulk.engine.retry import RetryPolicy
from s3bulk.engine.worker import EngineOptions
from s3bulk.errors import UsageError
from s3bulk.plan.filters import Filters
from s3bulk.report import Report
from s3bulk.sources.listing import list_prefix, list_sequential, partitioning_pays
from s3bulk.stores.s3xml import ObjectInfo
from s3bulk.stores.signed import SignedClient
from s3bulk.transfers import CopyJob, CopyOptions
from s3bulk.urls import parse_location, parse_s3


@dataclass
class Listing:
    objects: list[ObjectInfo] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    report: Report = field(default_factory=lambda: Report("ls"))


async def ls_async(
    url: str,
    *,
    recursive: bool = True,
    concurrency: int = 16,
    partitioned: bool | None = None,
    settings: AwsSettings | None = None,
    report: Report | None = None,
) -> AsyncIterator[ObjectInfo | str]:
    """Stream the objects under an s3:// prefix in key order (recursive: many key ranges listed
    in parallel unless `partitioned` is False or, by default, the endpoint is on loopback), or one
    level of objects and sub-prefixes (str) when not recursive."""
    location = parse_s3(url)
    settings = settings or AwsSettings.from_env()
    if partitioned is None:
        partitioned = partitioning_pays(settings.resolved_endpoint)
    report = report if report is not None else Report("ls", source=url)
    client = SignedClient(settings, max_connections=concurrency)
    started = time.perf_counter()
    try:
        if recursive and partitioned:
            async for objects in list_prefix(client, location.bucket, location.key, concurrency=concurrency):
                report.objects_done += len(objects)
                report.bytes_done += sum(info.size for info in objects)
                for info in objects:
                    yield info
        else:
            delimiter = None if recursive else "/"
            async for page in list_sequential(client, location.bucket, location.key, delimiter=delimiter):
                for prefix in page.common_prefixes:
                    yield prefix
                report.objects_done += len(page.objects)
                report.bytes_done += sum(info.size for info in page.objects)
                for info in page.objects:
                    yield info
    finally:
        report.requests = dict(client.requests)
        report.wall_seconds = time.perf_counter() - started
        report.stage_seconds["list"] = report.wall_seconds
        await client.close()


def ls(
    url: str, *, recursive: bool = True, concurrency: int = 16, settings: AwsSettings | None = None
) -> Listing:
    """List a prefix into memory (use `ls_async` to stream very large listings)."""
    listing = Listing(report=Report("ls", source=url))

    async def collect() -> None:
        async for entry in ls_async(
            url, recursive=recursive, concurrency=concurrency, settings=settings, report=listing.report
        ):
            if isinstance(entry, str):
                listing.prefixes.append(entry)
            else:
                listing.objects.append(entry)

    asyncio.run(collect())
    return listing


async def copy_async(
    source: str,
    destination: str,
    *,
    include: tuple[str, ...] | list[str] = (),
    exclude: tuple[str, ...] | list[str] = (),
    dry_run: bool = False,
    workers: int | None = None,
    concurrency: int = 64,
    max_in_flight_bytes: int = 16 * 1024**2,
    part_size: int = 8 * 1024**2,
    multipart_threshold: int = 64 * 1024**2,
    copy_multipart_threshold: int = 5 * 1024**3,
    max_attempts: int = 6,
    partitioned_listing: bool | None = None,
    settings: AwsSettings | None = None,
    on_progress: Callable[[Report], None] | None = None,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Report:
    """Copy between local paths and S3 (upload, download, or server-side S3 → S3 copy).

    A trailing '/' on the source means everything under that prefix or directory."""
    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if part_size < 5 * 1024**2:
        raise UsageError("--part-size must be at least 5 MiB (the S3 minimum part size)")
    source_location = parse_location(source)
    destination_location = parse_location(destination)
    settings = settings or AwsSettings.from_env()
    settings.credentials()  # fail fast, before any process starts, when there are none
    if partitioned_listing is None:
        partitioned_listing = partitioning_pays(settings.resolved_endpoint)
    options = CopyOptions(
        filters=Filters(tuple(include), tuple(exclude)),
        dry_run=dry_run,
        part_size=part_size,
        multipart_threshold=multipart_threshold,
        copy_multipart_threshold=copy_multipart_threshold,
        concurrency=concurrency,
        partitioned_listing=partitioned_listing,
    )
    job = CopyJob(source_location, destination_location, settings, options)
    engine = HybridEngine(
        workers,
        EngineOptions(
            concurrency=concurrency,
            max_in_flight_bytes=max_in_flight_bytes,
            retry=RetryPolicy(max_attempts=max_attempts),
            record_items=on_records is not None,
        ),
    )
    report = Report(job.direction, source=source, destination=destination, dry_run=dry_run)
    return await engine.run(job, report, on_progress=on_progress, on_records=on_records)


def copy(source: str, destination: str, **options: Any) -> Report:
    """Synchronous twin of `copy_async`."""
    return asyncio.run(copy_async(source, destination, **options))
