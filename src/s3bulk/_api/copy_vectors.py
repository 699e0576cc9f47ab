"""`s3bulk.copy_vectors`: indexes copied into others, elsewhere too (`vectors copy`)."""

from __future__ import annotations

from s3bulk._api.base import Location, Patterns, Progress, run_spec, sync_twin
from s3bulk._commands.copy_vectors import ENGINE as COPY
from s3bulk._commands.copy_vectors import CopyVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


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
