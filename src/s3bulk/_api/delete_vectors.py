"""`s3bulk.delete_vectors`: vectors out of indexes, by key or by filter (`vectors delete`)."""

from __future__ import annotations

from s3bulk._api.base import Location, Locations, Patterns, Progress, run_spec, sync_twin
from s3bulk._commands.delete_vectors import ENGINE as DELETE
from s3bulk._commands.delete_vectors import DeleteVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def delete_vectors_async(
    bucket: str,
    index: Patterns,
    keys_from: Locations = (),
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
