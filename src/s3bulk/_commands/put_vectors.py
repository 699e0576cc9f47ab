"""`vectors put`: embeddings from Parquet, .npy or JSON Lines files into S3 Vectors indexes.

The job (`s3bulk._vectors.job`) is loaded when one runs: it needs numpy, whose BLAS starts threads
on import, and the registry imports every command's module (a driver with threads cannot fork
its workers; engine/launch.py).
"""

from __future__ import annotations

import asyncio
import collections
import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, absolute, locations, patterns
from s3bulk._commands.vectorwrites import (
    WRITE_ENGINE,
    check_format,
    check_targets,
    default_rejects_path,
    write_notes,
)
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._report import Report
from s3bulk._vectors.limits import MAX_VECTORS_PER_REQUEST, REQUESTS_PER_SECOND, VECTORS_PER_SECOND

if TYPE_CHECKING:
    from s3bulk._sources.embeddings import EmbeddingSpec

ENGINE = WRITE_ENGINE
# What one process builds, signs and sends (orjson bodies, ~50 us of CPU per 1024-float vector
# here, hashed in a thread of its own): when the indexes' limits together ask for no more, one
# process keeps ahead of them.
ONE_PROCESS_VECTORS_PER_SECOND = 20_000.0
# One process keeps more than a core busy (its event loop, a thread writing and hashing bodies,
# the service's side of each request). On fewer cores than this a second process gained ~10%
# for 2.3x the memory (each holds numpy, pyarrow and its bodies), so it gets one.
CORES_FOR_PROCESSES = 4


@dataclass(frozen=True, kw_only=True)
class PutVectorsSpec(Spec):
    command: ClassVar[str] = "vectors-put"
    sources: tuple[str, ...]
    bucket: str
    indexes: tuple[str, ...]  # several: rows sharded over them by key
    index_per_file: bool = False  # each file into the index named after it, in place of `indexes`
    format: str | None = None  # parquet, npy or jsonl; None: by each file's suffix
    key_column: str | None = None  # None: `key`, else `id` (Parquet)
    vector_column: str | None = None  # None: `vector`, else the one list-of-numbers column
    metadata_columns: tuple[str, ...] = ()
    keys_file: str | None = None  # .npy: one key per line
    key_template: str | None = None  # generated keys, e.g. "{file}:{row}"
    batch_size: int = MAX_VECTORS_PER_REQUEST
    vectors_per_second: float = VECTORS_PER_SECOND  # per index
    requests_per_second: float = REQUESTS_PER_SECOND  # per index
    on_error: str = "abort"  # or "skip": bad rows go to the rejects file, the rest loads
    rejects: str | None = None  # None: next to the job's journal
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors put")
        object.__setattr__(self, "sources", locations(self.sources, "sources"))
        object.__setattr__(self, "indexes", patterns(self.indexes, "index"))
        object.__setattr__(self, "metadata_columns", patterns(self.metadata_columns, "metadata_columns"))
        if self.on_error not in ("abort", "skip"):
            raise UsageError(f"--on-error {self.on_error!r}: use abort or skip")
        if not 1 <= self.batch_size <= MAX_VECTORS_PER_REQUEST:
            raise UsageError(
                f"--batch-size {self.batch_size}: PutVectors takes 1 to {MAX_VECTORS_PER_REQUEST} vectors"
            )
        if self.index_per_file and self.indexes:
            raise UsageError("--index-per-file names each file's index after the file: leave out --index")
        if not self.index_per_file:
            check_targets(self.indexes, self.vectors_per_second, self.requests_per_second)
        check_format(self.format)

    def places(self) -> tuple[str, str]:
        return " ".join(self.sources), "/".join((self.bucket, *self.indexes))

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(each for each in self.sources if each.startswith("s3://"))

    def needs_credentials(self) -> bool:
        return True  # S3 Vectors, whatever the sources

    def absolute(self) -> PutVectorsSpec:
        return replace(
            self,
            sources=tuple(absolute(each) for each in self.sources),
            keys_file=absolute(self.keys_file) if self.keys_file else None,
            rejects=absolute(self.rejects) if self.rejects else None,
        )


class PutVectorsCommand(Command):
    name: ClassVar[str] = "vectors-put"
    spec: ClassVar[type[Spec]] = PutVectorsSpec

    def python_bound(self, spec: Spec) -> bool:
        """Bodies are built from arrays in Python (~6 MB each): one process per core only when
        the asked rate is more than one process builds (a limit lifted, many indexes) and the
        machine has the cores for more than one."""
        assert isinstance(spec, PutVectorsSpec)
        asked = spec.vectors_per_second * len(spec.indexes)
        return asked > ONE_PROCESS_VECTORS_PER_SECOND and (os.cpu_count() or 1) >= CORES_FOR_PROCESSES

    def settle(self, spec: Spec, plan: JobPlan) -> Spec:
        assert isinstance(spec, PutVectorsSpec)
        return spec if spec.rejects else replace(spec, rejects=default_rejects_path(plan.job_id))

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The job, after reading each index's shape (so a wrong name or a dimension mismatch
        stops the job before anything is read or sent) and finding the columns the user did
        not name."""
        from s3bulk._sources.embeddings import EmbeddingSpec, resolve_columns
        from s3bulk._vectors.indexes import index_shapes
        from s3bulk._vectors.job import PutOptions, PutVectorsJob

        assert isinstance(spec, PutVectorsSpec) and spec.rejects is not None  # settled
        source = EmbeddingSpec(
            spec.sources,
            format=spec.format,
            key_column=spec.key_column or "",
            vector_column=spec.vector_column or "",
            metadata_columns=spec.metadata_columns,
            keys_file=spec.keys_file,
            key_template=spec.key_template,
            settings=settings,
        )
        source, note = await asyncio.to_thread(resolve_columns, source)
        options = PutOptions(
            bucket=spec.bucket,
            indexes=spec.indexes,
            batch_size=spec.batch_size,
            vectors_per_second=spec.vectors_per_second,
            requests_per_second=spec.requests_per_second,
            on_error=spec.on_error,
            rejects_path=spec.rejects,
            concurrency=spec.engine.concurrency,
            dry_run=spec.dry_run,
        )
        if spec.index_per_file:
            owners = await asyncio.to_thread(_file_indexes, source)
            indexes = tuple(dict.fromkeys(index for _, index in owners))
            options = replace(options, indexes=indexes, file_indexes=owners)
        requests: collections.Counter[str] = collections.Counter()
        shapes = await index_shapes(settings, options.bucket, options.indexes, requests)
        job = PutVectorsJob(source, options, settings, shapes, workers=plan.workers)
        job.preflight_requests = dict(requests)
        job.preflight_notes = [note] if note else []
        return job

    def verb(self, job: Job) -> str:
        return "vectors put"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """What the load costs and, before it runs (--dry-run), how long it takes at the limits."""
        from s3bulk._vectors.job import PutVectorsJob

        assert isinstance(spec, PutVectorsSpec) and isinstance(job, PutVectorsJob)
        write_notes(report, job, spec)


def _file_indexes(source: EmbeddingSpec) -> tuple[tuple[str, str], ...]:
    """(path, index) of every source file, its index named after it. Blocking: lists and walks."""
    from s3bulk._sources.embeddings import find_files
    from s3bulk._vectors.indexes import index_for_file

    return tuple((path, index_for_file(path)) for path, _, _ in find_files(source))


COMMANDS = (PutVectorsCommand(),)  # found by the registry (s3bulk._commands)
