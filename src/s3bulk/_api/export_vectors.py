"""`s3bulk.export_vectors`: every vector of indexes into Parquet files (`vectors export`)."""

from __future__ import annotations

from s3bulk._api.base import Location, Patterns, Progress, run_spec, sync_twin
from s3bulk._commands.export_vectors import ENGINE as EXPORT
from s3bulk._commands.export_vectors import ExportVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


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
