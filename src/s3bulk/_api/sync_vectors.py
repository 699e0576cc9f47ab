"""`s3bulk.sync_vectors`: indexes made equal to a source (`s3bulk vectors sync`)."""

from __future__ import annotations

from s3bulk._api.base import Location, Locations, Patterns, Progress, run_spec, sync_twin
from s3bulk._commands.sync_vectors import ENGINE as SYNC
from s3bulk._commands.sync_vectors import SyncVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def sync_vectors_async(
    sources: Locations,
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
    segments: int = SyncVectorsSpec.segments,
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


sync_vectors = sync_twin(sync_vectors_async)
