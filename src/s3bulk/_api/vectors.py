"""`s3bulk.verify_vectors` and `count_vectors`: embeddings checked back against their source,
and counted; commands that are no job (a few requests, answered at once)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from s3bulk._api.base import Location, Locations, Patterns, made, sync_twin
from s3bulk._commands.vectorspecs import CountVectorsSpec, VerifyVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._errors import require_extra

if TYPE_CHECKING:
    from s3bulk._vectors.verify import VerifyReport


async def verify_vectors_async(
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
