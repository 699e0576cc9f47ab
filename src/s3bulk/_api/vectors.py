"""Embeddings into S3 Vectors, kept equal to their source, out again, into another index, away,
asked, and checked back (`s3bulk vectors put|sync|export|copy|delete|query|verify|count`).

Each function names its arguments one by one to its command's spec (`_commands/*_vectors.py`,
whose fields declare every option once; `tests/unit/test_api_specs.py` holds the two equal). The
API says `index` (one or several) where a spec holds `indexes`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from s3bulk._api.base import Location, Patterns, Progress, made, run_spec, sync_twin
from s3bulk._commands.copy_vectors import ENGINE as COPY
from s3bulk._commands.copy_vectors import CopyVectorsSpec
from s3bulk._commands.delete_vectors import ENGINE as DELETE
from s3bulk._commands.delete_vectors import DeleteVectorsSpec
from s3bulk._commands.export_vectors import ENGINE as EXPORT
from s3bulk._commands.export_vectors import ExportVectorsSpec
from s3bulk._commands.put_vectors import ENGINE as PUT
from s3bulk._commands.put_vectors import PutVectorsSpec
from s3bulk._commands.query_vectors import ENGINE as QUERY
from s3bulk._commands.query_vectors import QueryVectorsSpec
from s3bulk._commands.sync_vectors import ENGINE as SYNC
from s3bulk._commands.sync_vectors import SyncVectorsSpec
from s3bulk._commands.vectorspecs import CountVectorsSpec, VerifyVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._errors import require_extra
from s3bulk._report import Report

if TYPE_CHECKING:
    from s3bulk._vectors.verify import VerifyReport

Sources = Location | Iterable[Location]


async def put_vectors_async(
    sources: Sources,
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


async def verify_vectors_async(
    sources: Sources,
    bucket: str,
    index: Patterns,
    *,
    format: str | None = None,
    key_column: str | None = None,
    vector_column: str | None = None,
    metadata_columns: Patterns | None = None,
    keys_file: Location | None = None,
    key_template: str | None = None,
    sample: int | None = 1000,
    seed: int = 0,
    settings: AwsSettings | None = None,
) -> VerifyReport:
    """Fetch `sample` random rows of the source back from the indexes (every row if None) and
    compare data bit for bit and metadata; the source is named as for `put_vectors_async`, and
    what is left out is read as the last put into the indexes read it."""
    spec = made(
        VerifyVectorsSpec,
        {
            "sources": sources,
            "bucket": bucket,
            "indexes": index,
            "format": format,
            "key_column": key_column,
            "vector_column": vector_column,
            "metadata_columns": metadata_columns,
            "keys_file": keys_file,
            "key_template": key_template,
            "sample": sample,
            "seed": seed,
        },
    )
    return await verify_spec(spec, settings or AwsSettings.from_env())


async def verify_spec(spec: VerifyVectorsSpec, settings: AwsSettings) -> VerifyReport:
    """`vectors verify` of a spec (the CLI's, or `verify_vectors_async`'s): the source read as
    the spec names it and, where it leaves that out, as the last put into the indexes read it."""
    require_extra("vectors", "s3bulk vectors verify")
    from s3bulk._sources.embeddings import resolve_columns
    from s3bulk._vectors.columns import recalled
    from s3bulk._vectors.verify import verify_vectors as verify

    reading, note = recalled(spec.reading(), settings, spec.bucket, spec.indexes)
    source = (await asyncio.to_thread(resolve_columns, spec.embedding_spec(settings, reading)))[0]
    report = await verify(source, spec.bucket, spec.indexes, settings, sample=spec.rows, seed=spec.seed)
    report.notes += [note] if note else []
    return report


verify_vectors = sync_twin(verify_vectors_async)


async def count_vectors_async(
    bucket: str,
    index: Patterns,
    *,
    segments: int = CountVectorsSpec.segments,
    settings: AwsSettings | None = None,
) -> dict[str, int]:
    """Vectors per index, by ListVectors in `segments` parallel segments (1 to 16)."""
    spec = made(CountVectorsSpec, {"bucket": bucket, "indexes": index, "segments": segments})
    return await count_spec(spec, settings or AwsSettings.from_env())


async def count_spec(spec: CountVectorsSpec, settings: AwsSettings) -> dict[str, int]:
    """`vectors count` of a spec (the CLI's, or `count_vectors_async`'s)."""
    require_extra("vectors", "s3bulk vectors count")
    from s3bulk._vectors.verify import count_vectors as count

    return await count(settings, spec.bucket, spec.indexes, spec.segments)


count_vectors = sync_twin(count_vectors_async)


async def export_vectors_async(
    bucket: str,
    index: Patterns,
    destination: Location,
    *,
    segments: int = ExportVectorsSpec.segments,
    part_size: int | str = ExportVectorsSpec.part_size,
    content_hash: bool = False,
    engine: str = EXPORT.engine,
    concurrency: int = EXPORT.concurrency,
    max_attempts: int | None = EXPORT.max_attempts,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Every vector of the indexes (key, float32 data, metadata as JSON text, without s3bulk's
    content hash unless `content_hash`) into Parquet files under `destination`
    (`INDEX/sSS-NNNNNN.parquet`, about `part_size` of vectors each), each index listed in
    `segments` ListVectors segments side by side. A killed export resumes from the last file of
    each segment (`s3bulk.resume`); `vectors put` of the files loads them back."""
    return await run_spec(
        ExportVectorsSpec,
        EXPORT,
        {
            "bucket": bucket,
            "indexes": index,
            "destination": destination,
            "segments": segments,
            "part_size": part_size,
            "content_hash": content_hash,
            "engine": engine,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
        },
    )


export_vectors = sync_twin(export_vectors_async)


async def delete_vectors_async(
    bucket: str,
    index: Patterns,
    keys_from: Sources = (),
    *,
    files_from: Location | None = None,
    filter: str | None = None,
    key_column: str | None = None,
    max_delete: int | None = None,
    vectors_per_second: float = DeleteVectorsSpec.vectors_per_second,
    requests_per_second: float = DeleteVectorsSpec.requests_per_second,
    dry_run: bool = False,
    engine: str = DELETE.engine,
    concurrency: int = DELETE.concurrency,
    max_attempts: int | None = DELETE.max_attempts,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Delete the keys that `keys_from` names (text files, one key per line, or Parquet files'
    key column), that `files_from` lists, or whose metadata matches `filter` (JSON, as
    QueryVectors takes it: '{"genre": "drama"}'; each index listed whole, the matches kept for a
    resume), 500 per DeleteVectors, at each index's write limits (shared with puts). Several
    indexes: each key from the index `put_vectors` sent it to (a filter's, where it was found).
    `max_delete`: delete at most that many, then stop the job; `dry_run`: count them, and the
    report's notes say how long the deletes take at the limits."""
    return await run_spec(
        DeleteVectorsSpec,
        DELETE,
        {
            "bucket": bucket,
            "indexes": index,
            "keys_from": keys_from,
            "files_from": files_from,
            "filter": filter,
            "key_column": key_column,
            "max_delete": max_delete,
            "vectors_per_second": vectors_per_second,
            "requests_per_second": requests_per_second,
            "dry_run": dry_run,
            "engine": engine,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
        },
    )


delete_vectors = sync_twin(delete_vectors_async)


async def query_vectors_async(
    sources: Sources,
    bucket: str,
    index: str,
    output: Location,
    *,
    top_k: int = QueryVectorsSpec.top_k,
    filter: str | None = None,
    recall: int = QueryVectorsSpec.recall,
    queries_per_second: float = QueryVectorsSpec.queries_per_second,
    key_column: str | None = None,
    vector_column: str | None = None,
    content_hash: bool = False,
    engine: str = QUERY.engine,
    concurrency: int = QUERY.concurrency,
    max_attempts: int | None = QUERY.max_attempts,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """One QueryVectors per query vector of `sources` (read as `put_vectors` reads rows; the
    key column names each query), the `top_k` answers written as Parquet rows (query, rank, key,
    distance, metadata as JSON, without s3bulk's content hash unless `content_hash`) under
    `output`. `recall=N`: N queries' answers are checked against the exact neighbours over the
    whole index; the report's notes give recall@k."""
    return await run_spec(
        QueryVectorsSpec,
        QUERY,
        {
            "sources": sources,
            "bucket": bucket,
            "index": index,
            "output": output,
            "top_k": top_k,
            "filter": filter,
            "recall": recall,
            "queries_per_second": queries_per_second,
            "key_column": key_column,
            "vector_column": vector_column,
            "content_hash": content_hash,
            "engine": engine,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
        },
    )


query_vectors = sync_twin(query_vectors_async)


async def sync_vectors_async(
    sources: Sources,
    bucket: str,
    index: Patterns,
    *,
    format: str | None = None,
    key_column: str | None = None,
    vector_column: str | None = None,
    metadata_columns: Patterns | None = None,
    keys_file: Location | None = None,
    key_template: str | None = None,
    delete: bool = False,
    max_delete: int | None = None,
    allow_empty_source: bool = False,
    vectors_per_second: float = SyncVectorsSpec.vectors_per_second,
    requests_per_second: float = SyncVectorsSpec.requests_per_second,
    on_error: str = SyncVectorsSpec.on_error,
    rejects: Location | None = None,
    content_hash: bool = False,
    dry_run: bool = False,
    engine: str = SYNC.engine,
    concurrency: int = SYNC.concurrency,
    max_attempts: int | None = SYNC.max_attempts,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Make the indexes equal to the source (named as for `put_vectors_async`; what is left out
    read as the last put into the indexes read it): put what is new or changed, leave what is
    equal (by the content hash where the vectors carry it; the others are read back to
    compare), and with `delete` remove what the source lacks, at most `max_delete`, never all of
    it from an empty source unless `allow_empty_source`. A second run right after finds
    nothing to do."""
    return await run_spec(
        SyncVectorsSpec,
        SYNC,
        {
            "sources": sources,
            "bucket": bucket,
            "indexes": index,
            "format": format,
            "key_column": key_column,
            "vector_column": vector_column,
            "metadata_columns": metadata_columns,
            "keys_file": keys_file,
            "key_template": key_template,
            "delete": delete,
            "max_delete": max_delete,
            "allow_empty_source": allow_empty_source,
            "vectors_per_second": vectors_per_second,
            "requests_per_second": requests_per_second,
            "on_error": on_error,
            "rejects": rejects,
            "content_hash": content_hash,
            "dry_run": dry_run,
            "engine": engine,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
        },
    )


sync_vectors = sync_twin(sync_vectors_async)


async def copy_vectors_async(
    bucket: str,
    index: Patterns,
    to_index: Patterns,
    *,
    to_bucket: str | None = None,
    create: bool = False,
    metric: str | None = None,
    non_filterable: Patterns = (),
    source_profile: str | None = None,
    source_region: str | None = None,
    source_endpoint_url: str | None = None,
    segments: int = CopyVectorsSpec.segments,
    vectors_per_second: float = CopyVectorsSpec.vectors_per_second,
    requests_per_second: float = CopyVectorsSpec.requests_per_second,
    on_error: str = CopyVectorsSpec.on_error,
    rejects: Location | None = None,
    content_hash: bool = False,
    dry_run: bool = False,
    engine: str = COPY.engine,
    concurrency: int = COPY.concurrency,
    max_attempts: int | None = COPY.max_attempts,
    journal: bool = True,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Every vector of `index` (several: all of them) in `bucket` into `to_index` (several: the
    vectors sharded over them by key, as `put_vectors` shards) in `to_bucket` (default: the
    same bucket), with the metadata the user gave (the content hash written again only as
    `put_vectors` writes it). The source may be in another account or region (`source_profile`,
    `source_region`, `source_endpoint_url`); `create` makes a missing destination with the
    source's dimension and its `metric` and `non_filterable` keys unless these are given: how an
    index's metric or non-filterable keys change. Written at the destination's write limits; a
    resumed copy lists the source again and sends only what it has not stored."""
    return await run_spec(
        CopyVectorsSpec,
        COPY,
        {
            "bucket": bucket,
            "indexes": index,
            "to_indexes": to_index,
            "to_bucket": to_bucket,
            "create": create,
            "metric": metric,
            "non_filterable": non_filterable,
            "source_profile": source_profile,
            "source_region": source_region,
            "source_endpoint_url": source_endpoint_url,
            "segments": segments,
            "vectors_per_second": vectors_per_second,
            "requests_per_second": requests_per_second,
            "on_error": on_error,
            "rejects": rejects,
            "content_hash": content_hash,
            "dry_run": dry_run,
            "engine": engine,
            "concurrency": concurrency,
            "max_attempts": max_attempts,
            "journal": journal,
            "settings": settings,
            "on_progress": on_progress,
        },
    )


copy_vectors = sync_twin(copy_vectors_async)
