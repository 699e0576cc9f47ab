"""`s3bulk vectors put|sync|export|copy|delete|query|verify|count|create-bucket|create-index`:
embeddings into S3 Vectors, kept equal to their source, out again, into another index, away,
and asked."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import typer

from s3bulk._cli.jobrun import (
    DryRunOption,
    JsonOption,
    QuietOption,
    ResumeOption,
    RetryFailedOption,
    StatsOption,
    continuation,
    run_job,
)
from s3bulk._cli.options import (
    EngineOption,
    JournalUrlOption,
    ProfileOption,
    RayAddressOption,
    RegionOption,
    WorkersOption,
    spec_options,
)
from s3bulk._cli.output import guarded
from s3bulk._cli.progress import json_line
from s3bulk._commands.copy_vectors import CopyVectorsSpec
from s3bulk._commands.delete_vectors import DeleteVectorsSpec
from s3bulk._commands.export_vectors import ExportVectorsSpec
from s3bulk._commands.query_vectors import QueryVectorsSpec
from s3bulk._commands.sync_vectors import SyncVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._engine.strategies import DEFAULT_ENGINE

app = typer.Typer(
    help="S3 Vectors in bulk at the per-index limits: load, sync, export, copy, delete, query, verify, "
    "count.",
    no_args_is_help=True,
)

BucketOption = typer.Option(..., "--bucket", help="The vector bucket.")
IndexesOption = typer.Option(
    ..., "--index", help="The index; repeat it to shard rows over several indexes by key."
)
IndexesSyncOption = typer.Option(
    None, "--index", help="The index; repeat it for several (keys sharded as vectors put shards them)."
)
VectorsEndpointOption = typer.Option(
    None, "--endpoint-url", help="S3 Vectors endpoint (default: AWS_ENDPOINT_URL_S3VECTORS or AWS)."
)
S3EndpointOption = typer.Option(
    None, "--s3-endpoint-url", help="S3 endpoint for s3:// sources (default: AWS_ENDPOINT_URL_S3 or AWS)."
)
SourcesArgument = typer.Argument(
    None, help="Parquet, .npy or .jsonl files, directories of them, or s3:// objects or prefixes/."
)
FormatOption = typer.Option(None, "--format", help="parquet, npy or jsonl (default: by file suffix).")
KeyColumnOption = typer.Option(
    None, "--key-column", help="Column (field) holding each vector's key (default: key, else id)."
)
VectorColumnOption = typer.Option(
    None,
    "--vector-column",
    help="Column (field) holding the vector (default: vector, else the one list-of-numbers column).",
)
MetadataOption = typer.Option(
    None, "--metadata-columns", help="Comma-separated columns stored as each vector's metadata."
)
KeysFileOption = typer.Option(None, "--keys-file", help=".npy: a text file with one key per row.")
KeyTemplateOption = typer.Option(
    None, "--key-template", help="Generate keys, e.g. '{file}:{row}' (a re-run overwrites the same keys)."
)


def _settings(
    endpoint_url: str | None, s3_endpoint_url: str | None, profile: str | None, region: str | None
) -> AwsSettings:
    settings = AwsSettings.from_env(
        profile=profile, region=region, endpoint_url=s3_endpoint_url, vectors_endpoint_url=endpoint_url
    )
    settings.check_profile()
    return settings


def _columns(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


@app.command("put")
@guarded
def put_command(
    sources: list[str] | None = SourcesArgument,
    bucket: str | None = typer.Option(None, "--bucket", help="The vector bucket."),
    index: list[str] | None = typer.Option(
        None, "--index", help="The index; repeat it to shard rows over several indexes by key."
    ),
    index_per_file: bool = typer.Option(
        False, "--index-per-file", help="Each file into the index named after it (films.parquet: films)."
    ),
    format: str | None = FormatOption,
    key_column: str | None = KeyColumnOption,
    vector_column: str | None = VectorColumnOption,
    metadata_columns: str | None = MetadataOption,
    keys_file: str | None = KeysFileOption,
    key_template: str | None = KeyTemplateOption,
    batch_size: int = typer.Option(500, "--batch-size", help="Vectors per PutVectors (at most 500)."),
    vectors_per_second: float = typer.Option(
        2500, "--vectors-per-second", help="Per index: the service's documented write limit."
    ),
    requests_per_second: float = typer.Option(1000, "--requests-per-second", help="Per index."),
    on_error: str = typer.Option(
        "abort", "--on-error", help="abort: stop at the first bad row; skip: load the rest, list bad rows."
    ),
    rejects: str | None = typer.Option(
        None,
        "--rejects",
        help="Where bad rows are listed, as JSON lines (default: next to the job's journal).",
    ),
    dry_run: bool = DryRunOption,
    engine: str | None = EngineOption,
    ray_address: str | None = RayAddressOption,
    journal_url: str | None = JournalUrlOption,
    workers: int | None = WorkersOption,
    concurrency: int = typer.Option(16, "--concurrency", help="PutVectors requests in flight per worker."),
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = VectorsEndpointOption,
    s3_endpoint_url: str | None = S3EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
) -> int:
    """Load embeddings at the per-index write limit (one process, or one per core when the limits
    together ask for more than one process builds)."""
    from s3bulk._api.vectors import put_vectors_async

    start = continuation(
        "vectors-put",
        resume,
        retry_failed,
        [
            " ".join(sources or ()) or None,
            bucket,
            " ".join(index or ()) or ("per file" if index_per_file else None),
        ],
        {"engine": engine, "workers": workers, "ray_address": ray_address},
    )
    if start is None:
        settings = _settings(endpoint_url, s3_endpoint_url, profile, region)
        assert sources and bucket and (index or index_per_file)

        def start(on_progress: Any, on_records: Any) -> Any:
            return put_vectors_async(
                sources,
                bucket,
                index or (),
                index_per_file=index_per_file,
                format=format,
                key_column=key_column,
                vector_column=vector_column,
                metadata_columns=_columns(metadata_columns),
                keys_file=keys_file,
                key_template=key_template,
                batch_size=batch_size,
                vectors_per_second=vectors_per_second,
                requests_per_second=requests_per_second,
                on_error=on_error,
                rejects=rejects,
                dry_run=dry_run,
                engine=engine or DEFAULT_ENGINE,
                workers=workers,
                ray_address=ray_address,
                journal_url=journal_url,
                concurrency=concurrency,
                settings=settings,
                on_progress=on_progress,
            )

    return run_job(start, verb="vectors put", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats)


@app.command("export")
@guarded
@spec_options(ExportVectorsSpec)
def export_command(
    destination: str | None = typer.Argument(
        None, help="A new or empty directory: INDEX/sSS-NNNNNN.parquet files go in it."
    ),
    bucket: str | None = typer.Option(None, "--bucket", help="The vector bucket."),
    index: list[str] | None = typer.Option(None, "--index", help="The index (repeat it for several)."),
    engine: str | None = EngineOption,
    concurrency: int = typer.Option(16, "--concurrency", help="Parts written at once per worker."),
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = VectorsEndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    given: dict[str, Any] | None = None,
) -> int:
    """Export keys, data and metadata to Parquet; --resume goes on from each segment's last file."""
    from s3bulk._api.vectors import export_vectors_async

    start = continuation(
        "vectors-export",
        resume,
        retry_failed,
        [destination, bucket, " ".join(index or ()) or None],
        {"engine": engine},
    )
    if start is None:
        settings = _settings(endpoint_url, None, profile, region)
        assert destination and bucket and index

        def start(on_progress: Any, on_records: Any) -> Any:
            return export_vectors_async(
                bucket,
                index,
                destination,
                **(given or {}),
                engine=engine or DEFAULT_ENGINE,
                concurrency=concurrency,
                settings=settings,
                on_progress=on_progress,
            )

    return run_job(start, verb="vectors export", as_json=as_json, dry_run=False, quiet=quiet, stats=stats)


@app.command("delete")
@guarded
@spec_options(DeleteVectorsSpec)
def delete_command(
    keys_from: list[str] | None = typer.Argument(
        None, help="Files of keys (one per line) or Parquet files (their key column)."
    ),
    bucket: str | None = typer.Option(None, "--bucket", help="The vector bucket."),
    index: list[str] | None = typer.Option(
        None, "--index", help="The index; several: each key from the index vectors put sent it to."
    ),
    dry_run: bool = DryRunOption,
    engine: str | None = EngineOption,
    concurrency: int = typer.Option(16, "--concurrency", help="DeleteVectors requests in flight per worker."),
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = VectorsEndpointOption,
    s3_endpoint_url: str | None = S3EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    given: dict[str, Any] | None = None,
) -> int:
    """Delete vectors by key or by a metadata filter, 500 per request, at the per-index write limit."""
    from s3bulk._api.vectors import delete_vectors_async

    given = given or {}
    start = continuation(
        "vectors-delete",
        resume,
        retry_failed,
        [bucket, " ".join(index or ()) or None],
        {"engine": engine},
    )
    if start is None:
        settings = _settings(endpoint_url, s3_endpoint_url, profile, region)
        assert bucket and index

        def start(on_progress: Any, on_records: Any) -> Any:
            return delete_vectors_async(
                bucket,
                index,
                keys_from or (),
                **given,
                dry_run=dry_run,
                engine=engine or DEFAULT_ENGINE,
                concurrency=concurrency,
                settings=settings,
                on_progress=on_progress,
            )

    return run_job(start, verb="vectors delete", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats)


@app.command("query")
@guarded
@spec_options(QueryVectorsSpec)
def query_command(
    sources: list[str] | None = SourcesArgument,
    bucket: str | None = typer.Option(None, "--bucket", help="The vector bucket."),
    index: str | None = typer.Option(None, "--index", help="The index."),
    output: str | None = typer.Option(
        None, "--output", "-o", help="A directory for the results' Parquet files."
    ),
    key_column: str | None = KeyColumnOption,
    vector_column: str | None = VectorColumnOption,
    engine: str | None = EngineOption,
    concurrency: int = typer.Option(4, "--concurrency", help="Chunks of 256 queries in flight per worker."),
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = VectorsEndpointOption,
    s3_endpoint_url: str | None = S3EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    given: dict[str, Any] | None = None,
) -> int:
    """Run a file of query vectors against an index; results as Parquet rows."""
    from s3bulk._api.vectors import query_vectors_async

    start = continuation(
        "vectors-query",
        resume,
        retry_failed,
        [" ".join(sources or ()) or None, bucket, index, output],
        {"engine": engine},
    )
    if start is None:
        settings = _settings(endpoint_url, s3_endpoint_url, profile, region)
        assert sources and bucket and index and output

        def start(on_progress: Any, on_records: Any) -> Any:
            return query_vectors_async(
                sources,
                bucket,
                index,
                output,
                **(given or {}),
                key_column=key_column,
                vector_column=vector_column,
                engine=engine or DEFAULT_ENGINE,
                concurrency=concurrency,
                settings=settings,
                on_progress=on_progress,
            )

    return run_job(start, verb="vectors query", as_json=as_json, dry_run=False, quiet=quiet, stats=stats)


@app.command("sync")
@guarded
@spec_options(SyncVectorsSpec)
def sync_command(
    sources: list[str] | None = SourcesArgument,
    bucket: str | None = typer.Option(None, "--bucket", help="The vector bucket."),
    index: list[str] | None = IndexesSyncOption,
    format: str | None = FormatOption,
    key_column: str | None = KeyColumnOption,
    vector_column: str | None = VectorColumnOption,
    metadata_columns: str | None = MetadataOption,
    vectors_per_second: float = typer.Option(
        2500, "--vectors-per-second", help="Per index, puts and deletes together: the service's limit."
    ),
    requests_per_second: float = typer.Option(1000, "--requests-per-second", help="Per index."),
    rejects: str | None = typer.Option(None, "--rejects", help="Where bad rows are listed (JSON lines)."),
    dry_run: bool = DryRunOption,
    engine: str | None = EngineOption,
    concurrency: int = typer.Option(16, "--concurrency", help="Requests in flight per worker."),
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = VectorsEndpointOption,
    s3_endpoint_url: str | None = S3EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    given: dict[str, Any] | None = None,
) -> int:
    """Make indexes equal to a source: put what is new or changed, --delete what it lacks."""
    from s3bulk._api.vectors import sync_vectors_async

    start = continuation(
        "vectors-sync",
        resume,
        retry_failed,
        [" ".join(sources or ()) or None, bucket, " ".join(index or ()) or None],
        {"engine": engine},
    )
    if start is None:
        settings = _settings(endpoint_url, s3_endpoint_url, profile, region)
        assert sources and bucket and index

        def start(on_progress: Any, on_records: Any) -> Any:
            return sync_vectors_async(
                sources,
                bucket,
                index,
                **(given or {}),
                format=format,
                key_column=key_column,
                vector_column=vector_column,
                metadata_columns=_columns(metadata_columns),
                vectors_per_second=vectors_per_second,
                requests_per_second=requests_per_second,
                rejects=rejects,
                dry_run=dry_run,
                engine=engine or DEFAULT_ENGINE,
                concurrency=concurrency,
                settings=settings,
                on_progress=on_progress,
            )

    return run_job(start, verb="vectors sync", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats)


@app.command("copy")
@guarded
@spec_options(CopyVectorsSpec)
def copy_command(
    bucket: str | None = typer.Option(None, "--bucket", help="The source's vector bucket."),
    index: list[str] | None = typer.Option(None, "--index", help="The source index (repeat it for several)."),
    to_index: list[str] | None = typer.Option(
        None, "--to-index", help="The destination index; repeat it to shard the vectors over several by key."
    ),
    rejects: str | None = typer.Option(
        None, "--rejects", help="Where refused vectors are listed (JSON lines)."
    ),
    dry_run: bool = DryRunOption,
    engine: str | None = EngineOption,
    concurrency: int = typer.Option(16, "--concurrency", help="Requests in flight per worker."),
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = VectorsEndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    given: dict[str, Any] | None = None,
) -> int:
    """Copy indexes into others (--create: with another metric), at the destination's limits."""
    from s3bulk._api.vectors import copy_vectors_async

    start = continuation(
        "vectors-copy",
        resume,
        retry_failed,
        [bucket, " ".join(index or ()) or None, " ".join(to_index or ()) or None],
        {"engine": engine},
    )
    if start is None:
        settings = _settings(endpoint_url, None, profile, region)
        assert bucket and index and to_index

        def start(on_progress: Any, on_records: Any) -> Any:
            return copy_vectors_async(
                bucket,
                index,
                to_index,
                **(given or {}),
                rejects=rejects,
                dry_run=dry_run,
                engine=engine or DEFAULT_ENGINE,
                concurrency=concurrency,
                settings=settings,
                on_progress=on_progress,
            )

    return run_job(start, verb="vectors copy", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats)


@app.command("verify")
@guarded
def verify_command(
    sources: list[str] = typer.Argument(..., help="The files the index was loaded from."),
    bucket: str = BucketOption,
    index: list[str] = IndexesOption,
    sample: int = typer.Option(1000, "--sample", help="Rows to check, chosen at random."),
    check_all: bool = typer.Option(False, "--all", help="Check every row instead of a sample."),
    seed: int = typer.Option(0, "--seed", help="Seed for the sample (the same seed checks the same rows)."),
    format: str | None = FormatOption,
    key_column: str | None = KeyColumnOption,
    vector_column: str | None = VectorColumnOption,
    metadata_columns: str | None = MetadataOption,
    keys_file: str | None = KeysFileOption,
    key_template: str | None = KeyTemplateOption,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    endpoint_url: str | None = VectorsEndpointOption,
    s3_endpoint_url: str | None = S3EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
) -> int:
    """Fetch a sample of rows back (GetVectors) and compare data and metadata with the source."""
    from s3bulk._api.vectors import verify_vectors_async

    report = asyncio.run(
        verify_vectors_async(
            sources,
            bucket,
            index,
            format=format,
            key_column=key_column,
            vector_column=vector_column,
            metadata_columns=_columns(metadata_columns),
            keys_file=keys_file,
            key_template=key_template,
            sample=None if check_all else sample,
            seed=seed,
            settings=_settings(endpoint_url, s3_endpoint_url, profile, region),
        )
    )
    if as_json:
        json_line(report.to_dict())
    else:
        sys.stdout.write(
            f"vectors verify: {report.matched:,} of {report.sampled:,} rows match, "
            f"{len(report.missing):,} missing, "
            f"{len(report.differ):,} differ, {report.invalid:,} invalid in the source (never loaded) "
            f"in {report.wall_seconds:.2f}s ({report.requests.get('GetVectors', 0):,} GetVectors)\n"
        )
        for key in report.missing[:20]:
            sys.stderr.write(f"missing: {key}\n")
        for key, what in report.differ[:20]:
            sys.stderr.write(f"differs: {key}: {what}\n")
    return 0 if report.ok else 1


@app.command("count")
@guarded
def count_command(
    bucket: str = BucketOption,
    index: list[str] = IndexesOption,
    segments: int = typer.Option(16, "--segments", help="Parallel ListVectors segments (1-16)."),
    endpoint_url: str | None = VectorsEndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
) -> int:
    """Count the vectors in each index (ListVectors, in parallel segments)."""
    from s3bulk._api.vectors import count_vectors_async

    settings = _settings(endpoint_url, None, profile, region)
    counts = asyncio.run(count_vectors_async(bucket, index, segments=segments, settings=settings))
    for name, number in counts.items():
        sys.stdout.write(f"{bucket}/{name}\t{number}\n")
    if len(counts) > 1:
        sys.stdout.write(f"total\t{sum(counts.values())}\n")
    return 0


@app.command("create-bucket")
@guarded
def create_bucket_command(
    bucket: str = typer.Argument(..., help="Name of the new vector bucket."),
    endpoint_url: str | None = VectorsEndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
) -> int:
    """Create a vector bucket."""
    from s3bulk._stores.vectors import VectorsClient

    async def create() -> None:
        client = VectorsClient(_settings(endpoint_url, None, profile, region))
        try:
            await client.create_vector_bucket(bucket)
        finally:
            await client.close()

    asyncio.run(create())
    sys.stdout.write(f"created vector bucket {bucket}\n")
    return 0


@app.command("create-index")
@guarded
def create_index_command(
    bucket: str = BucketOption,
    index: str = typer.Option(..., "--index", help="Name of the new index."),
    dimension: int = typer.Option(..., "--dimension", help="Values per vector (1-4096)."),
    metric: str = typer.Option("cosine", "--metric", help="cosine or euclidean."),
    non_filterable: list[str] = typer.Option(
        [],
        "--non-filterable",
        help="Metadata keys stored but not filterable (repeatable; lifts the 2 KB cap).",
    ),
    endpoint_url: str | None = VectorsEndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
) -> int:
    """Create an index (float32) in a vector bucket."""
    from s3bulk._errors import UsageError
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.digest import HASH_KEY

    if metric not in ("cosine", "euclidean"):
        raise UsageError(f"--metric {metric!r}: use cosine or euclidean")
    if not 1 <= dimension <= 4096:
        raise UsageError(f"--dimension {dimension}: S3 Vectors indexes hold 1 to 4096 values per vector")

    async def create() -> None:
        client = VectorsClient(_settings(endpoint_url, None, profile, region))
        try:
            # the content hash every s3bulk put adds (sync compares by it): not filterable, so
            # it takes nothing from the 2 KB of filterable metadata
            keys = tuple(dict.fromkeys([*non_filterable, HASH_KEY]))
            await client.create_index(bucket, index, dimension, metric, keys)
        finally:
            await client.close()

    asyncio.run(create())
    sys.stdout.write(f"created index {bucket}/{index} ({dimension} dimensions, {metric})\n")
    return 0


GROUPS = {"vectors": app}  # found by s3bulk._cli: the commands this module adds
