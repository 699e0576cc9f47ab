"""`s3bulk.put_vectors`: embeddings into S3 Vectors indexes (`s3bulk vectors put`)."""

from __future__ import annotations

from s3bulk._api.base import Location, Locations, Patterns, Progress, run_spec, sync_twin
from s3bulk._commands.put_vectors import ENGINE as PUT
from s3bulk._commands.put_vectors import PutVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def put_vectors_async(
    sources: Locations,
    bucket: str,
    index: Patterns = (),
    *,
    index_per_file: bool = False,
    format: str | None = None,
    key_column: str | None = None,
    vector_column: str | None = None,
    metadata_columns: Patterns | None = None,
    keys_file: Location | None = None,
    key_template: str | None = None,
    batch_size: int = PutVectorsSpec.batch_size,
    vectors_per_second: float = PutVectorsSpec.vectors_per_second,
    requests_per_second: float = PutVectorsSpec.requests_per_second,
    on_error: str = PutVectorsSpec.on_error,
    rejects: Location | None = None,
    content_hash: bool = False,
    dry_run: bool = False,
    engine: str = PUT.engine,
    workers: int | None = None,
    concurrency: int = PUT.concurrency,
    max_attempts: int | None = PUT.max_attempts,
    ray_address: str | None = None,
    journal_url: str | None = None,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Load embeddings from Parquet, .npy or JSON Lines files (local or s3://) into S3 Vectors.

    Each index gets `vectors_per_second` and `requests_per_second` (the service's documented
    per-index write limits), backing off when throttled; several indexes shard the rows by key;
    `index_per_file` loads each file into the index named after it (`films-2024.parquet` into
    `films-2024`), each at its own limits, in one job. Without `vector_column`, a Parquet file's one
    list-of-numbers column holds the vectors (and a `key` or `id` column the keys). Bad rows stop
    the job (`on_error="abort"`) or are left out (`"skip"`); either way they are listed in the
    rejects file. Each vector's metadata is the row's `metadata_columns`, and its content hash
    (`s3bulk_hash`, what `sync_vectors` compares by) only where the index declares that key
    non-filterable (as `vectors create-index` makes it), or with `content_hash=True`. The
    default engine runs one process while the indexes' limits together ask for no more than one
    process builds, one per core above that (see s3bulk._commands.put_vectors)."""
    return await run_spec(
        PutVectorsSpec,
        PUT,
        {
            "sources": sources,
            "bucket": bucket,
            "indexes": index,
            "index_per_file": index_per_file,
            "format": format,
            "key_column": key_column,
            "vector_column": vector_column,
            "metadata_columns": metadata_columns,
            "keys_file": keys_file,
            "key_template": key_template,
            "batch_size": batch_size,
            "vectors_per_second": vectors_per_second,
            "requests_per_second": requests_per_second,
            "on_error": on_error,
            "rejects": rejects,
            "content_hash": content_hash,
            "dry_run": dry_run,
            "engine": engine,
            "workers": workers,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "ray_address": ray_address,
            "journal_url": journal_url,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
        },
    )


put_vectors = sync_twin(put_vectors_async)
