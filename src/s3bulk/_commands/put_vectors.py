"""`vectors put`: embeddings from Parquet, .npy or JSON Lines files into S3 Vectors indexes.

The job (`s3bulk._vectors.job`) is loaded when one runs: it needs numpy, whose BLAS starts threads
on import, and the registry imports every command's module (a driver with threads cannot fork
its workers; engine/launch.py).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.vectorspecs import (
    EmbeddingSource,
    VectorWrites,
    batch_size_field,
    check_batch_size,
    indexes_field,
)
from s3bulk._commands.vectorwrites import WRITE_ENGINE, put_job, settle_rejects, write_notes
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._flags import option
from s3bulk._report import Report

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
class PutVectorsSpec(VectorWrites, EmbeddingSource, Spec):
    command: ClassVar[str] = "vectors-put"
    concurrency_help: ClassVar[str] = "PutVectors requests in flight per worker."
    indexes: tuple[str, ...] = indexes_field(default=())  # or each file's own (--index-per-file)
    index_per_file: bool = dataclasses.field(  # each file into the index named after it
        default=False,
        metadata=option(
            "--index-per-file", help="Each file into the index named after it (films.parquet: films)."
        ),
    )
    batch_size: int = batch_size_field()
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors put")
        super().__post_init__()
        check_batch_size(self.batch_size)
        if self.index_per_file and self.indexes:
            raise UsageError("--index-per-file names each file's index after the file: leave out --index")
        self.check_writes(None if self.index_per_file else self.indexes)

    def absolute(self) -> PutVectorsSpec:
        return super().absolute().with_absolute_rejects()


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

    settle = settle_rejects

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The job, after reading each index's shape (so a wrong name or a dimension mismatch
        stops the job before anything is read or sent) and finding the columns the user did
        not name. How it reads the source is remembered for each index (`_vectors/columns.py`):
        a sync or a verify that leaves the columns out reads it the same way."""
        from s3bulk._sources.embeddings import resolve_columns
        from s3bulk._vectors.columns import remember
        from s3bulk._vectors.indexes import index_shapes

        assert isinstance(spec, PutVectorsSpec)
        source, note = await asyncio.to_thread(resolve_columns, spec.embedding_spec(settings))
        indexes, more = spec.indexes, dict[str, Any](batch_size=spec.batch_size)
        if spec.index_per_file:
            owners = await asyncio.to_thread(_file_indexes, source)
            indexes = tuple(dict.fromkeys(index for _, index in owners))
            more["file_indexes"] = owners
        requests: collections.Counter[str] = collections.Counter()
        shapes = await index_shapes(settings, spec.bucket, indexes, requests)
        job = put_job(spec, source, (spec.bucket, indexes), settings, shapes, plan, **more)
        job.preflight_requests = dict(requests)
        job.preflight_notes = [note] if note else []
        if not spec.dry_run:
            await asyncio.to_thread(remember, spec.reading(), settings, spec.bucket, indexes, plan.job_id)
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
