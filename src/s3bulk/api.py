"""The Python API: plain functions with sync and async twins, like obstore's verbs.

report = s3bulk.copy("s3://src/data/", "s3://dst/data/")
assert report.ok, report.failures
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from s3bulk.config import AwsSettings
from s3bulk.report import Report
from s3bulk.urls import parse_s3

if TYPE_CHECKING:
    import numpy as np

    from s3bulk.stores.s3xml import ObjectInfo

# The engine, the signed client and their HTTP stack are imported where used: every CLI command
# imports this module, and `gather` (obstore only) should not pay ~0.4 s for aiohttp. numpy too:
# its BLAS starts threads on import, and a driver with threads cannot fork its workers.

MiB = 1024**2


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
    from s3bulk.sources.listing import list_prefix, list_sequential, partitioning_pays
    from s3bulk.stores.signed import SignedClient

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


Progress = Callable[[Report], None] | None
Records = Callable[[list[dict[str, Any]]], None] | None


def _engine_args(
    engine: str,
    workers: int | None,
    concurrency: int,
    max_in_flight_bytes: int,
    max_memory: int | None,
    max_attempts: int,
    ray_address: str | None,
    journal_url: str | None,
) -> dict[str, Any]:
    return {
        "ray_address": ray_address,
        "journal_url": journal_url,
        "engine": engine,
        "workers": workers,
        "concurrency": concurrency,
        "max_in_flight_bytes": max_in_flight_bytes,
        "max_memory": max_memory,
        "max_attempts": max_attempts,
    }


async def copy_async(
    source: str,
    destination: str,
    *,
    include: tuple[str, ...] | list[str] = (),
    exclude: tuple[str, ...] | list[str] = (),
    dry_run: bool = False,
    engine: str = "hybrid",
    workers: int | None = None,
    concurrency: int = 64,
    max_in_flight_bytes: int = 16 * MiB,
    max_memory: int | None = None,
    part_size: int = 8 * MiB,
    multipart_threshold: int = 64 * MiB,
    copy_multipart_threshold: int = 5 * 1024**3,
    max_attempts: int = 6,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    follow_symlinks: bool = False,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
    _command: str = "cp",
    _extra: dict[str, Any] | None = None,
) -> Report:
    """Copy between local paths and S3 (upload, download, or server-side S3 → S3 copy).

    A trailing '/' on the source means everything under that prefix or directory. The job is
    journaled (see `resume_async`) unless `journal` is False or it is a dry run. `engine` is one
    of s3bulk.ENGINES (serial, threads, async, processes, hybrid, auto, ray); see engine/strategies.py.
    With engine="ray", `ray_address` names the cluster (default: a local Ray instance) and
    `journal_url` where the object-store journal goes (default: beside the data).
    Symbolic links in an uploaded tree are skipped unless `follow_symlinks`."""
    args = {
        "source": source,
        "destination": destination,
        "include": list(include),
        "exclude": list(exclude),
        "dry_run": dry_run,
        "part_size": part_size,
        "multipart_threshold": multipart_threshold,
        "copy_multipart_threshold": copy_multipart_threshold,
        "partitioned_listing": partitioned_listing,
        "follow_symlinks": follow_symlinks,
        **_engine_args(
            engine,
            workers,
            concurrency,
            max_in_flight_bytes,
            max_memory,
            max_attempts,
            ray_address,
            journal_url,
        ),
        **(_extra or {}),
    }
    from s3bulk.runner import execute

    return await execute(
        _command, args, settings, journal=journal, on_progress=on_progress, on_records=on_records
    )


async def move_async(source: str, destination: str, **options: Any) -> Report:
    """Copy, then delete each source whose copy succeeded (a failed copy keeps its source)."""
    return await copy_async(source, destination, _command="mv", **options)


async def sync_async(
    source: str, destination: str, *, mode: str = "mtime", delete: bool = False, **options: Any
) -> Report:
    """Make `destination` hold what `source` holds (both are prefixes/directories), copying only
    what differs. `mode` is "mtime" (sizes differ or the source is newer), "size" or "checksum";
    `delete` removes what the source lacks. Every other option is `copy_async`'s."""
    return await copy_async(
        source, destination, _command="sync", _extra={"mode": mode, "delete": delete}, **options
    )


async def remove_async(
    target: str,
    *,
    include: tuple[str, ...] | list[str] = (),
    exclude: tuple[str, ...] | list[str] = (),
    dry_run: bool = False,
    engine: str = "hybrid",
    workers: int | None = None,
    concurrency: int = 16,
    max_attempts: int = 6,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Delete one object, a prefix (ending in '/') or the keys matching a glob (`*`, `?`, `[...]`),
    1,000 keys per DeleteObjects request."""
    args = {
        "target": target,
        "include": list(include),
        "exclude": list(exclude),
        "dry_run": dry_run,
        "partitioned_listing": partitioned_listing,
        **_engine_args(engine, workers, concurrency, 0, None, max_attempts, ray_address, journal_url),
    }
    from s3bulk.runner import execute

    return await execute(
        "rm", args, settings, journal=journal, on_progress=on_progress, on_records=on_records
    )


async def resume_async(job_id: str, **options: Any) -> Report:
    """Continue a journaled job (killed, interrupted or failed), skipping every finished item."""
    from s3bulk.runner import continue_job

    return await continue_job(job_id, "resume", **options)


async def retry_failed_async(job_id: str, **options: Any) -> Report:
    """Run only the items (and listings) that failed in a journaled job."""
    from s3bulk.runner import continue_job

    return await continue_job(job_id, "retry-failed", **options)


def copy(source: str, destination: str, **options: Any) -> Report:
    """Synchronous twin of `copy_async`."""
    return asyncio.run(copy_async(source, destination, **options))


def move(source: str, destination: str, **options: Any) -> Report:
    """Synchronous twin of `move_async`."""
    return asyncio.run(move_async(source, destination, **options))


def sync(source: str, destination: str, **options: Any) -> Report:
    """Synchronous twin of `sync_async`."""
    return asyncio.run(sync_async(source, destination, **options))


def remove(target: str, **options: Any) -> Report:
    """Synchronous twin of `remove_async`."""
    return asyncio.run(remove_async(target, **options))


def resume(job_id: str, **options: Any) -> Report:
    """Synchronous twin of `resume_async`."""
    return asyncio.run(resume_async(job_id, **options))


def retry_failed(job_id: str, **options: Any) -> Report:
    """Synchronous twin of `retry_failed_async`."""
    return asyncio.run(retry_failed_async(job_id, **options))


async def put_vectors_async(
    sources: str | list[str],
    bucket: str,
    index: str | list[str],
    *,
    format: str | None = None,
    key_column: str = "key",
    vector_column: str = "vector",
    metadata_columns: tuple[str, ...] | list[str] = (),
    keys_file: str | None = None,
    key_template: str | None = None,
    batch_size: int = 500,
    vectors_per_second: float = 2500,
    requests_per_second: float = 1000,
    on_error: str = "abort",
    rejects: str | None = None,
    engine: str = "async",
    workers: int | None = None,
    concurrency: int = 16,
    max_attempts: int = 8,
    ray_address: str | None = None,
    journal_url: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Load embeddings from Parquet, .npy or JSON Lines files (local or s3://) into S3 Vectors.

    Each index gets `vectors_per_second` and `requests_per_second` (the service's documented
    per-index write limits), backing off when throttled; several indexes shard the rows by key.
    Bad rows stop the job (`on_error="abort"`) or are left out (`"skip"`); either way they are
    listed in the rejects file. One process is the default (`engine="async"`): building a batch
    costs ~20 ms, so it keeps well ahead of one index's limit (see s3bulk.vectors.job)."""
    args = {
        "sources": [sources] if isinstance(sources, str) else list(sources),
        "bucket": bucket,
        "indexes": [index] if isinstance(index, str) else list(index),
        "format": format,
        "key_column": key_column,
        "vector_column": vector_column,
        "metadata_columns": list(metadata_columns),
        "keys_file": keys_file,
        "key_template": key_template,
        "batch_size": batch_size,
        "vectors_per_second": vectors_per_second,
        "requests_per_second": requests_per_second,
        "on_error": on_error,
        "rejects": rejects,
        **_engine_args(engine, workers, concurrency, 64 * MiB, None, max_attempts, ray_address, journal_url),
    }
    from s3bulk.runner import execute

    return await execute("vectors-put", args, settings, journal=journal, on_progress=on_progress)


def put_vectors(sources: str | list[str], bucket: str, index: str | list[str], **options: Any) -> Report:
    """Synchronous twin of `put_vectors_async`."""
    return asyncio.run(put_vectors_async(sources, bucket, index, **options))


# ---- arrays ----------------------------------------------------------------------------------
async def gather_to_file_async(
    sources: str | list[str],
    dataset: str,
    selection: str = ":",
    output: str = "out.npy",
    *,
    combine: str = "concat",
    axis: int = 0,
    scale: bool = False,
    cache: bool = True,
    cache_dir: str | None = None,
    engine: str = "async",
    workers: int | None = None,
    concurrency: int = 64,
    max_in_flight_bytes: int = 256 * MiB,
    max_attempts: int = 6,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Gather `selection` of `dataset` from HDF5 files (URLs, `s3://bucket/wtk/*.h5` globs,
    prefixes or local paths) into `output` (.npy, .csv or .parquet), via a temp file and a rename.

    Files are joined along `axis` of each file's part (`combine="concat"`), or stacked on a new
    first axis (`"stack"`). `scale=True` divides by each file's `scale_factor` attribute. Chunk
    indexes are cached under `cache_dir` (default: ~/.cache/s3bulk/h5index) by URL and ETag."""
    from s3bulk.arrays.gather import GatherOptions, gather_into, partial_path
    from s3bulk.arrays.index import IndexCache
    from s3bulk.arrays.output import check_tabular, output_format, publish

    suffix = output_format(output)
    options = GatherOptions(
        combine=combine,
        axis=axis,
        scale=scale,
        cache_dir=(cache_dir or str(IndexCache.default_directory())) if cache else None,
        engine=engine,
        workers=workers,
        concurrency=concurrency,
        max_in_flight_bytes=max_in_flight_bytes,
        max_attempts=max_attempts,
    )
    settings = settings or AwsSettings.from_env()
    partial = partial_path(output)
    started = time.perf_counter()
    try:
        gathered = await gather_into(
            [sources] if isinstance(sources, str) else list(sources),
            dataset,
            selection,
            partial,
            settings,
            options,
            check_shape=lambda shape: check_tabular(suffix, shape),
            on_progress=on_progress,
        )
        publish(partial, output, gathered.labels)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    report = gathered.report
    report.destination = output
    report.wall_seconds = time.perf_counter() - started
    report.notes.insert(0, f"wrote {output}: shape {gathered.shape}, {gathered.dtype}")
    return report


def gather_to_file(
    sources: str | list[str], dataset: str, selection: str = ":", output: str = "out.npy", **options: Any
) -> Report:
    """Synchronous twin of `gather_to_file_async`."""
    return asyncio.run(gather_to_file_async(sources, dataset, selection, output, **options))


async def gather_async(
    sources: str | list[str], dataset: str, selection: str = ":", **options: Any
) -> np.ndarray:
    """`selection` of `dataset` across HDF5 files as one numpy array (options as in
    `gather_to_file_async`), e.g. `gather("s3://bucket/wtk/*.h5", "windspeed_100m", ":,1234")`."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="s3bulk-gather-") as directory:
        path = os.path.join(directory, "result.npy")
        await gather_to_file_async(sources, dataset, selection, path, **options)
        return np.load(path)


def gather(sources: str | list[str], dataset: str, selection: str = ":", **options: Any) -> np.ndarray:
    """Synchronous twin of `gather_async`."""
    return asyncio.run(gather_async(sources, dataset, selection, **options))
