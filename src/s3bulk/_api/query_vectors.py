"""`s3bulk.query_vectors`: many queries against an index, as Parquet rows (`vectors query`)."""

from __future__ import annotations

from s3bulk._api.base import Location, Locations, Progress, run_spec, sync_twin
from s3bulk._commands.query_vectors import ENGINE as QUERY
from s3bulk._commands.query_vectors import QueryVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def query_vectors_async(
    sources: Locations,
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
