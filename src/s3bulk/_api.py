"""The Python API: plain functions with sync and async twins, like obstore's verbs.

report = s3bulk.copy("s3://src/data/", "s3://dst/data/")
assert report.ok, report.failures

Each function takes plain arguments (a str or a `Path` for a location, one glob or several), builds
the command's typed spec (`s3bulk._commands`), which checks them, and runs it (`s3bulk._runner`).
Its defaults are the spec's: written once, there.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import datetime
import functools
import os
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from s3bulk._commands import (
    CopySpec,
    GatherSpec,
    MoveSpec,
    PutVectorsSpec,
    RemoveSpec,
    Spec,
    SyncSpec,
)
from s3bulk._commands.base import location, locations, patterns
from s3bulk._commands.check import CheckSpec
from s3bulk._commands.gather import ENGINE as GATHER
from s3bulk._commands.put_vectors import ENGINE as VECTORS
from s3bulk._commands.remove import ENGINE as REMOVE
from s3bulk._config import AwsSettings
from s3bulk._engine.loop import run_loop
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError
from s3bulk._report import Report
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.s3xml import BucketInfo

if TYPE_CHECKING:
    import numpy as np

    from s3bulk._vectors.verify import VerifyReport

# The engine, the signed client and their HTTP stack are imported where used: every CLI command
# imports this module, and `gather` (obstore only) should not pay ~0.4 s for aiohttp. numpy too:
# its BLAS starts threads on import, and a driver with threads cannot fork its workers.

Progress = Callable[[Report], None] | None
Records = Callable[[list[dict[str, Any]]], None] | None
Location = str | os.PathLike[str]
Patterns = str | Iterable[str]
P = ParamSpec("P")
R = TypeVar("R")
COPY = EngineSpec()  # the engine defaults of cp, mv and sync
RUN_OPTIONS = ("settings", "journal", "on_progress", "on_records")


def _sync_twin(function: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, R]:
    """The blocking twin of an async API function, with its very signature (IDEs and type
    checkers see every parameter), run in a fresh event loop like obstore's sync verbs."""

    @functools.wraps(function)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
        return run_loop(function(*args, **kwargs))

    name = function.__name__.removesuffix("_async")
    blocking.__name__ = blocking.__qualname__ = name
    blocking.__doc__ = f"Synchronous twin of `{function.__name__}`.\n\n{function.__doc__ or ''}"
    return blocking


async def run_async(
    spec: Spec,
    *,
    settings: AwsSettings | None = None,
    journal: bool = True,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Run any command's spec (CopySpec, SyncSpec, RemoveSpec, ...): what each function below does
    once it has built its spec, and what the CLI calls."""
    from s3bulk._runner import execute

    return await execute(spec, settings, journal=journal, on_progress=on_progress, on_records=on_records)


run = _sync_twin(run_async)


def _spec(kind: type[Spec], engine: EngineSpec, arguments: dict[str, Any]) -> tuple[Spec, dict[str, Any]]:
    """A function's arguments as its command's spec (engine settings into an EngineSpec) and the
    options of the run itself (settings, journal, callbacks)."""
    options = dict(arguments)
    run_options = {name: options.pop(name) for name in RUN_OPTIONS if name in options}
    knobs = {name: options.pop(name) for name in EngineSpec.__dataclass_fields__ if name in options}
    return kind(engine=dataclasses.replace(engine, **knobs), **options), run_options


async def _run(kind: type[Spec], engine: EngineSpec, arguments: dict[str, Any]) -> Report:
    if arguments.get("files_from") is not None:
        arguments = arguments | {"files_from": os.fspath(arguments["files_from"])}
    spec, run_options = _spec(kind, engine, arguments)
    if getattr(spec, "show_attributes", False) and run_options.get("on_records") is None:
        raise UsageError("show_attributes=True puts each object's attributes in its record: pass on_records")
    return await run_async(spec, **run_options)


async def copy_async(
    source: Location,
    destination: Location,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = COPY.engine,
    workers: int | None = None,
    concurrency: int = COPY.concurrency,
    max_in_flight_bytes: int = COPY.max_in_flight_bytes,
    max_memory: int | None = None,
    part_size: int = CopySpec.part_size,
    multipart_threshold: int = CopySpec.multipart_threshold,
    copy_multipart_threshold: int = CopySpec.copy_multipart_threshold,
    max_attempts: int = COPY.max_attempts,
    bwlimit: int | None = None,
    tpslimit: float | None = None,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: datetime.datetime | float | None = None,
    older_than: datetime.datetime | float | None = None,
    follow_symlinks: bool = False,
    guess_mime_type: bool = True,
    attributes: Attributes = NO_ATTRIBUTES,
    show_attributes: bool = False,
    files_from: str | os.PathLike[str] | None = None,
    no_clobber: bool = False,
    verify: bool = True,
    if_size_differ: bool = False,
    if_newer: bool = False,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Copy between local paths and S3 (upload, download, or server-side S3 → S3 copy).

    A trailing '/' on the source means everything under that prefix or directory. `include` and
    `exclude` take one glob or a sequence of them. The job is journaled (see `resume_async`)
    unless `journal` is False or it is a dry run. `engine` is one of s3bulk.ENGINES (serial,
    threads, async, processes, hybrid, auto, ray). With engine="ray", `ray_address` names the
    cluster (default: a local Ray instance) and `journal_url` where the object-store journal
    goes (default: beside the data). Symbolic links in an uploaded tree are skipped unless
    `follow_symlinks`. `min_size`/`max_size` (bytes, inclusive) and `newer_than`/`older_than`
    (datetimes or seconds since the epoch) select by size and modification time (listings'
    LastModified, files' mtime). Uploads get a Content-Type guessed from the file name unless
    `guess_mime_type` is False or `attributes` names one; `attributes` (s3bulk.Attributes: the
    Content-* headers, metadata, storage class, encryption, ACL, tags) is set on every upload and
    copy (copies keep the source's Content-* and metadata unless it sets some). Downloads with
    `show_attributes` HEAD each object and put what it says in its record (`on_records`).
    `no_clobber`, `if_size_differ`, `if_newer` (s5cmd's -n, -s, -u) leave an existing destination
    alone unless every one given says to write over it; a missing one is always written.
    `bwlimit` (bytes/s) and `tpslimit` (requests/s) cap the whole job, all workers together.
    `files_from`: a file of names (one per line, relative to `source`) to copy instead of all.
    Downloads are checked against the object's ETag (its MD5, or the MD5 of its parts) and
    fetched again on a mismatch; `verify=False` skips that."""
    return await _run(CopySpec, COPY, locals())


async def move_async(
    source: Location,
    destination: Location,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = COPY.engine,
    workers: int | None = None,
    concurrency: int = COPY.concurrency,
    max_in_flight_bytes: int = COPY.max_in_flight_bytes,
    max_memory: int | None = None,
    part_size: int = CopySpec.part_size,
    multipart_threshold: int = CopySpec.multipart_threshold,
    copy_multipart_threshold: int = CopySpec.copy_multipart_threshold,
    max_attempts: int = COPY.max_attempts,
    bwlimit: int | None = None,
    tpslimit: float | None = None,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: datetime.datetime | float | None = None,
    older_than: datetime.datetime | float | None = None,
    follow_symlinks: bool = False,
    guess_mime_type: bool = True,
    attributes: Attributes = NO_ATTRIBUTES,
    show_attributes: bool = False,
    files_from: str | os.PathLike[str] | None = None,
    no_clobber: bool = False,
    verify: bool = True,
    if_size_differ: bool = False,
    if_newer: bool = False,
    max_delete: int | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Copy, then delete each source whose copy succeeded (a failed copy keeps its source).
    The options are `copy_async`'s, and `max_delete`: the job stops (one line, non-zero exit)
    before deleting more sources than that."""
    return await _run(MoveSpec, COPY, locals())


async def sync_async(
    source: Location,
    destination: Location,
    *,
    mode: str = SyncSpec.mode,
    delete: bool = False,
    allow_empty_source: bool = False,
    max_delete: int | None = None,
    files_from: str | os.PathLike[str] | None = None,
    verify: bool = True,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = COPY.engine,
    workers: int | None = None,
    concurrency: int = COPY.concurrency,
    max_in_flight_bytes: int = COPY.max_in_flight_bytes,
    max_memory: int | None = None,
    part_size: int = CopySpec.part_size,
    multipart_threshold: int = CopySpec.multipart_threshold,
    copy_multipart_threshold: int = CopySpec.copy_multipart_threshold,
    max_attempts: int = COPY.max_attempts,
    bwlimit: int | None = None,
    tpslimit: float | None = None,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: datetime.datetime | float | None = None,
    older_than: datetime.datetime | float | None = None,
    follow_symlinks: bool = False,
    guess_mime_type: bool = True,
    attributes: Attributes = NO_ATTRIBUTES,
    show_attributes: bool = False,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Make `destination` hold what `source` holds (both are prefixes/directories), copying only
    what differs. `mode` is "mtime" (sizes differ or the source is newer), "size" or "checksum";
    `delete` removes what the source lacks (refused when the source is empty or missing, unless
    `allow_empty_source`). Every other option is `copy_async`'s."""
    return await _run(SyncSpec, COPY, locals())


async def check_async(
    source: Location,
    destination: Location,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Compare two trees (prefixes or directories) without copying: the report's failures name
    each difference ("missing: ...", "extra: ...", "differs: ...") and `objects_unchanged` counts
    what is the same; `report.ok` is True when they hold the same."""
    return await _run(CheckSpec, COPY, locals() | {"journal": False})


async def remove_async(
    target: str,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    dry_run: bool = False,
    engine: str = REMOVE.engine,
    workers: int | None = None,
    concurrency: int = REMOVE.concurrency,
    max_attempts: int = REMOVE.max_attempts,
    bwlimit: int | None = None,
    tpslimit: float | None = None,
    ray_address: str | None = None,
    journal_url: str | None = None,
    partitioned_listing: bool | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: datetime.datetime | float | None = None,
    older_than: datetime.datetime | float | None = None,
    max_delete: int | None = None,
    files_from: str | os.PathLike[str] | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Delete one object, a prefix (ending in '/') or the keys matching a glob (`*`, `?`, `[...]`),
    1,000 keys per DeleteObjects request. `include`/`exclude`: one glob or a sequence of them.
    `max_delete`: delete at most that many, then stop the job (the report says why)."""
    return await _run(RemoveSpec, REMOVE, locals())


async def resume_async(
    job_id: str,
    *,
    engine: str | None = None,
    workers: int | None = None,
    max_memory: int | None = None,
    ray_address: str | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Continue a journaled job (killed, interrupted or failed), skipping every finished item.
    `engine`, `workers`, `max_memory` and `ray_address` replace the job's own when given."""
    from s3bulk._runner import continue_job

    overrides = {"engine": engine, "workers": workers, "max_memory": max_memory, "ray_address": ray_address}
    return await continue_job(
        job_id, "resume", overrides=overrides, on_progress=on_progress, on_records=on_records
    )


async def retry_failed_async(
    job_id: str,
    *,
    engine: str | None = None,
    workers: int | None = None,
    max_memory: int | None = None,
    ray_address: str | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Run only the items (and listings) that failed in a journaled job (options as `resume_async`)."""
    from s3bulk._runner import continue_job

    overrides = {"engine": engine, "workers": workers, "max_memory": max_memory, "ray_address": ray_address}
    return await continue_job(
        job_id, "retry-failed", overrides=overrides, on_progress=on_progress, on_records=on_records
    )


# ---- single objects and buckets (s3bulk._objects) --------------------------------------------
async def get_async(
    url: str,
    *,
    range: tuple[int, int] | None = None,
    version_id: str | None = None,
    settings: AwsSettings | None = None,
) -> bytes:
    """One object's bytes, fetched as concurrent ranges (for objects that fit in memory; `cat`
    and `get_to_file` stream), or only bytes [start, end) with `range=(start, end)`."""
    from s3bulk._objects import get_bytes, get_range

    settings = settings or AwsSettings.from_env()
    if range is not None:
        if version_id:
            raise UsageError("get(range=..., version_id=...): a version is read whole (or use open)")
        return await get_range(settings, url, *range)
    return await get_bytes(settings, url, version_id or "")


async def head_async(
    url: str, *, version_id: str | None = None, settings: AwsSettings | None = None
) -> dict[str, Any]:
    """Every attribute of one object (size, etag, content_type, metadata, storage_class, ...), as
    `s3bulk head --json` prints them."""
    from s3bulk._objects import head
    from s3bulk._stores.attributes import described

    return described(await head(settings or AwsSettings.from_env(), url, version_id or ""))


async def get_to_file_async(
    url: str,
    path: str | os.PathLike[str],
    *,
    version_id: str | None = None,
    settings: AwsSettings | None = None,
) -> int:
    """One object into a local file, as concurrent ranges written in order; returns its size.
    The file appears whole or not at all (written beside it, then renamed)."""
    from s3bulk._objects import cat

    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    handle = tempfile.NamedTemporaryFile(dir=directory, prefix=".s3bulk-", delete=False)  # noqa: SIM115
    try:
        with handle:

            async def write(data: memoryview) -> None:
                await asyncio.to_thread(handle.write, data)

            size = await cat(settings or AwsSettings.from_env(), url, write, version_id=version_id or "")
        os.replace(handle.name, target)
    except BaseException:
        os.unlink(handle.name)
        raise
    return size


async def put_async(
    url: str,
    data: bytes | str | os.PathLike[str] | Iterable[bytes],
    *,
    attributes: Attributes = NO_ATTRIBUTES,
    settings: AwsSettings | None = None,
) -> int:
    """Store one object from bytes, a local file's path, or an iterable of byte chunks (sent in
    parts as they come, memory bounded); returns the bytes sent."""
    from s3bulk._objects import put_stream

    if isinstance(data, (str, os.PathLike)):
        if not os.path.isfile(data):
            raise UsageError(
                f"no such file {os.fspath(data)!r}: a str is a local path; to store text, pass bytes"
            )
        with builtins.open(data, "rb") as handle:
            return await put_stream(
                settings or AwsSettings.from_env(), url, _reader(handle.read), attributes=attributes
            )
    chunks: Iterator[bytes] = iter(
        [bytes(data)] if isinstance(data, (bytes, bytearray, memoryview)) else data
    )
    return await put_stream(
        settings or AwsSettings.from_env(), url, _chunk_reader(chunks), attributes=attributes
    )


def _reader(read: Callable[[int], bytes]) -> Callable[[int], Coroutine[Any, Any, bytes]]:
    async def read_async(size: int) -> bytes:
        return await asyncio.to_thread(read, size)

    return read_async


def _chunk_reader(chunks: Iterator[bytes]) -> Callable[[int], Coroutine[Any, Any, bytes]]:
    """read(n) over an iterator of chunks of any size."""
    pending = bytearray()

    async def read(size: int) -> bytes:
        while len(pending) < size:
            chunk = next(chunks, None)
            if chunk is None:
                break
            pending.extend(chunk)
        taken = bytes(pending[:size])
        del pending[:size]
        return taken

    return read


def open(
    url: str,
    mode: str = "rb",
    *,
    attributes: Attributes = NO_ATTRIBUTES,
    buffer_size: int = 8 * 1024 * 1024,
    settings: AwsSettings | None = None,
) -> Any:
    """A file-like object on one object: "rb" reads (read, readinto, readline, seek, tell): a
    read somewhere new fetches `buffer_size` bytes, reading on streams the rest in one GET (an
    object replaced while it is read fails the read); "wb" uploads `buffer_size` parts as they
    fill and completes on close (leaving its `with` block by an exception aborts the upload).
    Writers set Content-* headers, metadata and tags from `attributes`."""
    from s3bulk._objects import open_object

    return open_object(settings or AwsSettings.from_env(), url, mode, attributes, buffer_size)


def presign(
    url: str, *, expires_in: int = 3600, method: str = "GET", settings: AwsSettings | None = None
) -> str:
    """A URL anyone can GET (or PUT, with method="PUT") the object with for `expires_in` seconds."""
    from s3bulk._objects import presign as sign

    return sign(settings or AwsSettings.from_env(), url, expires_in=expires_in, method=method)


async def list_buckets_async(*, settings: AwsSettings | None = None) -> list[BucketInfo]:
    """The account's buckets, (name, created) each."""
    from s3bulk._objects import list_buckets

    return await list_buckets(settings or AwsSettings.from_env())


async def make_bucket_async(
    url: str, *, region: str | None = None, settings: AwsSettings | None = None
) -> str:
    """Create a bucket (in `region`, default the settings' region); returns its name."""
    from s3bulk._objects import make_bucket

    return await make_bucket(settings or AwsSettings.from_env(), url, region)


async def remove_bucket_async(url: str, *, force: bool = False, settings: AwsSettings | None = None) -> str:
    """Remove a bucket; with `force`, delete every object in it first (the batched deleter)."""
    from s3bulk._objects import bucket_name, remove_bucket

    settings = settings or AwsSettings.from_env()
    bucket = bucket_name(url)
    if force:
        report = await remove_async(f"s3://{bucket}/", settings=settings, journal=False)
        if not report.ok:
            raise UsageError(
                f"s3://{bucket} still holds {report.objects_failed} objects that could not be deleted"
            )
    return await remove_bucket(settings, bucket)


check = _sync_twin(check_async)
get = _sync_twin(get_async)
head = _sync_twin(head_async)
get_to_file = _sync_twin(get_to_file_async)
put = _sync_twin(put_async)
list_buckets = _sync_twin(list_buckets_async)
make_bucket = _sync_twin(make_bucket_async)
remove_bucket = _sync_twin(remove_bucket_async)


copy = _sync_twin(copy_async)
move = _sync_twin(move_async)
sync = _sync_twin(sync_async)
remove = _sync_twin(remove_async)
resume = _sync_twin(resume_async)
retry_failed = _sync_twin(retry_failed_async)


async def put_vectors_async(
    sources: Location | Iterable[Location],
    bucket: str,
    index: str | Iterable[str],
    *,
    format: str | None = None,
    key_column: str | None = None,
    vector_column: str | None = None,
    metadata_columns: str | Iterable[str] = (),
    keys_file: Location | None = None,
    key_template: str | None = None,
    batch_size: int = PutVectorsSpec.batch_size,
    vectors_per_second: float = PutVectorsSpec.vectors_per_second,
    requests_per_second: float = PutVectorsSpec.requests_per_second,
    on_error: str = PutVectorsSpec.on_error,
    rejects: Location | None = None,
    engine: str = VECTORS.engine,
    workers: int | None = None,
    concurrency: int = VECTORS.concurrency,
    max_attempts: int = VECTORS.max_attempts,
    ray_address: str | None = None,
    journal_url: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Load embeddings from Parquet, .npy or JSON Lines files (local or s3://) into S3 Vectors.

    Each index gets `vectors_per_second` and `requests_per_second` (the service's documented
    per-index write limits), backing off when throttled; several indexes shard the rows by key.
    Without `vector_column`, a Parquet file's one list-of-numbers column holds the vectors (and
    a `key` or `id` column the keys). Bad rows stop the job (`on_error="abort"`) or are left out
    (`"skip"`); either way they are listed in the rejects file. The default engine runs one
    process while the indexes' limits together ask for no more than one process builds (~20 ms
    a batch), one per core above that (see s3bulk._commands.put_vectors)."""
    arguments = locals() | {
        "sources": locations(sources, "sources"),
        "indexes": patterns(index, "index"),
        "keys_file": None if keys_file is None else location(keys_file, "keys_file"),
        "rejects": None if rejects is None else location(rejects, "rejects"),
    }
    del arguments["index"]
    return await _run(PutVectorsSpec, VECTORS, arguments)


put_vectors = _sync_twin(put_vectors_async)


async def verify_vectors_async(
    sources: Location | Iterable[Location],
    bucket: str,
    index: str | Iterable[str],
    *,
    format: str | None = None,
    key_column: str | None = None,
    vector_column: str | None = None,
    metadata_columns: str | Iterable[str] = (),
    keys_file: Location | None = None,
    key_template: str | None = None,
    sample: int | None = 1000,
    seed: int = 0,
    settings: AwsSettings | None = None,
) -> VerifyReport:
    """Fetch `sample` random rows of the source back from the indexes (every row if None) and
    compare data bit for bit and metadata; the source is named as for `put_vectors_async`."""
    from s3bulk._sources.embeddings import EmbeddingSpec, resolve_columns
    from s3bulk._vectors.verify import verify_vectors as verify

    settings = settings or AwsSettings.from_env()
    source = EmbeddingSpec(
        locations(sources, "sources"),
        format=format,
        key_column=key_column or "",
        vector_column=vector_column or "",
        metadata_columns=tuple(patterns(metadata_columns, "metadata_columns")),
        keys_file=None if keys_file is None else location(keys_file, "keys_file"),
        key_template=key_template,
        settings=settings,
    )
    source = (await asyncio.to_thread(resolve_columns, source))[0]
    return await verify(source, bucket, patterns(index, "index"), settings, sample=sample, seed=seed)


verify_vectors = _sync_twin(verify_vectors_async)


async def count_vectors_async(
    bucket: str, index: str | Iterable[str], *, segments: int = 16, settings: AwsSettings | None = None
) -> dict[str, int]:
    """Vectors per index, by ListVectors in `segments` parallel segments (1 to 16)."""
    from s3bulk._vectors.verify import count_vectors as count

    return await count(settings or AwsSettings.from_env(), bucket, patterns(index, "index"), segments)


count_vectors = _sync_twin(count_vectors_async)


# ---- arrays ----------------------------------------------------------------------------------
async def gather_to_file_async(
    sources: Location | Iterable[Location],
    dataset: str,
    selection: str = GatherSpec.selection,
    output: Location = GatherSpec.output,
    *,
    combine: str = GatherSpec.combine,
    axis: int = 0,
    scale: bool = False,
    cache: bool = True,
    cache_dir: Location | None = None,
    engine: str = GATHER.engine,
    workers: int | None = None,
    concurrency: int = GATHER.concurrency,
    max_in_flight_bytes: int = GATHER.max_in_flight_bytes,
    max_attempts: int = GATHER.max_attempts,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Gather `selection` of `dataset` from HDF5 files (URLs, `s3://bucket/wtk/*.h5` globs,
    prefixes or local paths) into `output` (.npy, .csv or .parquet), via a temp file and a rename.

    Files are joined along `axis` of each file's part (`combine="concat"`), or stacked on a new
    first axis (`"stack"`). `scale=True` divides by each file's `scale_factor` attribute. Chunk
    indexes are cached under `cache_dir` (default: ~/.cache/s3bulk/h5index) by URL and ETag."""
    started = time.perf_counter()
    arguments = locals() | {"sources": locations(sources, "sources"), "journal": False}
    del arguments["started"]
    report = await _run(GatherSpec, GATHER, arguments)
    report.wall_seconds = time.perf_counter() - started
    return report


gather_to_file = _sync_twin(gather_to_file_async)


async def gather_async(
    sources: Location | Iterable[Location],
    dataset: str,
    selection: str = GatherSpec.selection,
    *,
    combine: str = GatherSpec.combine,
    axis: int = 0,
    scale: bool = False,
    cache: bool = True,
    cache_dir: Location | None = None,
    engine: str = GATHER.engine,
    workers: int | None = None,
    concurrency: int = GATHER.concurrency,
    max_in_flight_bytes: int = GATHER.max_in_flight_bytes,
    max_attempts: int = GATHER.max_attempts,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> np.ndarray:
    """`selection` of `dataset` across HDF5 files as one numpy array (options as in
    `gather_to_file_async`), e.g. `gather("s3://bucket/wtk/*.h5", "windspeed_100m", ":,1234")`."""
    import numpy as np

    arguments = locals() | {"sources": locations(sources, "sources"), "journal": False}
    del arguments["np"]
    with tempfile.TemporaryDirectory(prefix="s3bulk-gather-") as directory:
        arguments["output"] = os.path.join(directory, "result.npy")
        await _run(GatherSpec, GATHER, arguments)
        result: np.ndarray = np.load(arguments["output"])
        return result


gather = _sync_twin(gather_async)
