"""`vectors query`: many QueryVectors from a file of query vectors, results as Parquet rows,
and with --recall N the service's recall@k measured on N of them against exact neighbours.
The job (`s3bulk._vectors.query`) is loaded when one runs (numpy, pyarrow)."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from dataclasses import dataclass, replace
from typing import ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, absolute, location, locations
from s3bulk._commands.vectorspecs import KEEP_HASH, KEY_COLUMN, VECTOR_COLUMN, bucket_field, rate_field
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._flags import argument, count, option, verbatim
from s3bulk._report import Report
from s3bulk._vectors.filters import parse_filter

ENGINE = EngineSpec(concurrency=4, max_attempts=8)  # 4 chunks of 256 queries in flight


def _positive(text: str, flag: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise UsageError(f"{flag} {text}: give a count of 1 or more")
    return count


@dataclass(frozen=True, kw_only=True)
class QueryVectorsSpec(Spec):
    command: ClassVar[str] = "vectors-query"
    concurrency_help: ClassVar[str] = "Chunks of 256 queries in flight per worker."
    sources: tuple[str, ...] = dataclasses.field(
        metadata=argument("Parquet, .npy or .jsonl files of query vectors (or s3:// objects, prefixes/).")
    )
    bucket: str = bucket_field()
    index: str = dataclasses.field(metadata=option("--index", help="The index.", read=verbatim))
    output: str = dataclasses.field(
        metadata=option("--output", "-o", help="A directory for the results' Parquet files.", read=verbatim)
    )
    top_k: int = dataclasses.field(
        default=10, metadata=option("--top-k", "-k", help="Nearest neighbours per query.", read=_positive)
    )
    filter: str | None = dataclasses.field(
        default=None,
        metadata=option("--filter", help='A metadata filter, as JSON: \'{"genre": "news"}\'.', read=verbatim),
    )
    recall: int = dataclasses.field(
        default=0,
        metadata=option(
            "--recall",
            help="Check this many queries' answers against exact neighbours (lists the whole index).",
            read=count,
        ),
    )
    queries_per_second: float = rate_field(
        "--queries-per-second",
        "At most this many QueryVectors a second",
        0.0,
        zero="as fast as the service answers",
    )
    key_column: str | None = dataclasses.field(default=None, metadata=KEY_COLUMN)
    vector_column: str | None = dataclasses.field(default=None, metadata=VECTOR_COLUMN)
    content_hash: bool = dataclasses.field(default=False, metadata=KEEP_HASH)
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors query")
        object.__setattr__(self, "sources", locations(self.sources, "sources"))
        object.__setattr__(self, "output", location(self.output, "output"))
        if self.output.startswith("s3://"):
            raise UsageError("vectors query writes its results to a local directory (-o DIR)")
        if self.top_k < 1 or self.recall < 0:
            raise UsageError("--top-k 1 or more, --recall 0 or more")
        if self.filter is not None:
            parse_filter(self.filter)  # a mistake is one line now, not a 400 per query later

    def places(self) -> tuple[str, str]:
        return " ".join(self.sources), f"{self.bucket}/{self.index}"

    def needs_credentials(self) -> bool:
        return True

    def absolute(self) -> QueryVectorsSpec:
        return replace(
            self, sources=tuple(absolute(each) for each in self.sources), output=absolute(self.output)
        )


class QueryVectorsCommand(Command):
    name: ClassVar[str] = "vectors-query"
    spec: ClassVar[type[Spec]] = QueryVectorsSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The job, after reading the index's shape (dimension, metric) and the queries' columns."""
        from s3bulk._sources.embeddings import EmbeddingSpec, resolve_columns
        from s3bulk._vectors.indexes import index_shapes
        from s3bulk._vectors.query import QueryOptions, QueryVectorsJob

        assert isinstance(spec, QueryVectorsSpec)
        requests: collections.Counter[str] = collections.Counter()
        shape = (await index_shapes(settings, spec.bucket, (spec.index,), requests))[spec.index]
        source = EmbeddingSpec(
            spec.sources,
            key_column=spec.key_column or "",
            vector_column=spec.vector_column or "",
            key_template=None,
            settings=settings,
        )
        source, note = await asyncio.to_thread(resolve_columns, source)
        options = QueryOptions(
            spec.bucket,
            spec.index,
            spec.output,
            spec.top_k,
            spec.filter,
            spec.queries_per_second,
            spec.engine.concurrency,
            spec.content_hash,
        )
        job = QueryVectorsJob(source, options, settings, shape)
        job.preflight_requests = dict(requests)
        job.preflight_notes = [note] if note else []
        return job

    def verb(self, job: Job) -> str:
        return "vectors query"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """--recall N: the service's answers for N sampled queries against the exact ones."""
        from s3bulk._pricing import vectors_costs
        from s3bulk._vectors.query import QueryVectorsJob

        assert isinstance(spec, QueryVectorsSpec) and isinstance(job, QueryVectorsJob)
        report.notes.append(vectors_costs(queries=report.vectors_done))
        if completed and spec.recall and not report.failures:
            report.notes.append(await measured_recall(spec, job))


async def measured_recall(spec: QueryVectorsSpec, job: Job) -> str:
    """recall@k over `spec.recall` queries sampled from the source, in one line."""
    import numpy as np
    import pyarrow.dataset as ds

    from s3bulk._sources.embeddings import plan_slices, read_slice
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.query import QueryVectorsJob, exact_neighbours, recall_at_k

    assert isinstance(job, QueryVectorsJob)

    def sample() -> tuple[list[str], np.ndarray]:
        keys: list[str] = []
        rows: list[np.ndarray] = []
        for piece in plan_slices(job.source):
            for chunk in read_slice(piece, job.source, 4096):
                keys += chunk.keys
                rows.append(chunk.vectors)
        chosen = np.random.default_rng(0).permutation(len(keys))[: spec.recall]
        return [keys[n] for n in chosen], np.concatenate(rows)[chosen]

    keys, vectors = await asyncio.to_thread(sample)
    client = VectorsClient(job.settings, max_connections=16)
    try:
        exact = await exact_neighbours(client, spec.bucket, spec.index, job.shape.metric, vectors, spec.top_k)
    finally:
        await client.close()
    table = await asyncio.to_thread(lambda: ds.dataset(spec.output, format="parquet").to_table())
    answers: dict[str, list[str]] = collections.defaultdict(list)
    for query, key in zip(table.column("query").to_pylist(), table.column("key").to_pylist(), strict=True):
        answers[query].append(key)
    recall = recall_at_k(answers, dict(zip(keys, exact, strict=True)))
    return (
        f"recall@{spec.top_k} over {len(keys):,} sampled queries: {recall:.3f} "
        f"(exact neighbours by {job.shape.metric} distance over the whole index)"
    )


COMMANDS = (QueryVectorsCommand(),)  # found by the registry (s3bulk._commands)
