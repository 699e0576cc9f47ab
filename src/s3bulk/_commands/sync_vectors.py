"""`vectors sync`: indexes made equal to a Parquet (or .npy, JSON Lines) source: what is new or
changed is put, what is equal left alone (compared by the content hash s3bulk's puts keep), and
with --delete what the source no longer has is deleted, under --max-delete and the empty-source
guard, as `sync` does. The job (`s3bulk._vectors.sync`) is loaded when one runs."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from dataclasses import dataclass, replace
from typing import ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, absolute, locations, patterns
from s3bulk._commands.deletes import check_max_delete
from s3bulk._commands.vectorwrites import WRITE_ENGINE, check_format, check_targets, default_rejects_path
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._flags import MAX_DELETE, option
from s3bulk._report import Report
from s3bulk._vectors.limits import REQUESTS_PER_SECOND, VECTORS_PER_SECOND, time_at_limits

ENGINE = WRITE_ENGINE  # a sync sends what a put sends, and its deletes


@dataclass(frozen=True, kw_only=True)
class SyncVectorsSpec(Spec):
    command: ClassVar[str] = "vectors-sync"
    sources: tuple[str, ...]
    bucket: str
    indexes: tuple[str, ...]
    format: str | None = None
    key_column: str | None = None
    vector_column: str | None = None
    metadata_columns: tuple[str, ...] = ()
    delete: bool = dataclasses.field(
        default=False,
        metadata=option("--delete", help="Delete the vectors whose keys the source no longer has."),
    )
    max_delete: int | None = dataclasses.field(default=None, metadata=MAX_DELETE)
    allow_empty_source: bool = dataclasses.field(
        default=False,
        metadata=option(
            "--allow-empty-source",
            help="With --delete, let an empty source empty the index (refused otherwise).",
        ),
    )
    vectors_per_second: float = VECTORS_PER_SECOND
    requests_per_second: float = REQUESTS_PER_SECOND
    rejects: str | None = None
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors sync")
        object.__setattr__(self, "sources", locations(self.sources, "sources"))
        object.__setattr__(self, "indexes", patterns(self.indexes, "index"))
        object.__setattr__(self, "metadata_columns", patterns(self.metadata_columns, "metadata_columns"))
        check_targets(self.indexes, self.vectors_per_second, self.requests_per_second)
        check_format(self.format)
        check_max_delete(self.max_delete)
        if (self.max_delete is not None or self.allow_empty_source) and not self.delete:
            raise UsageError("--max-delete and --allow-empty-source go with --delete")

    def places(self) -> tuple[str, str]:
        return " ".join(self.sources), "/".join((self.bucket, *self.indexes))

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(each for each in self.sources if each.startswith("s3://"))

    def needs_credentials(self) -> bool:
        return True

    def absolute(self) -> SyncVectorsSpec:
        return replace(self, sources=tuple(absolute(each) for each in self.sources))


class SyncVectorsCommand(Command):
    name: ClassVar[str] = "vectors-sync"
    spec: ClassVar[type[Spec]] = SyncVectorsSpec

    def settle(self, spec: Spec, plan: JobPlan) -> Spec:
        assert isinstance(spec, SyncVectorsSpec)
        return spec if spec.rejects else replace(spec, rejects=default_rejects_path(plan.job_id))

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The plan (complete listings, a complete read of the source), checked against the
        guards, then the job that carries it out. Refused here, nothing is sent."""
        from s3bulk._sources.embeddings import EmbeddingSpec, resolve_columns
        from s3bulk._stores.retry import Meter
        from s3bulk._stores.vectors import VectorsClient
        from s3bulk._vectors.delete import DeleteOptions, DeleteVectorsJob
        from s3bulk._vectors.indexes import index_shapes
        from s3bulk._vectors.job import PutOptions, PutVectorsJob
        from s3bulk._vectors.sync import SyncVectorsJob, plan_sync

        assert isinstance(spec, SyncVectorsSpec) and spec.rejects is not None
        requests: collections.Counter[str] = collections.Counter()
        shapes = await index_shapes(settings, spec.bucket, spec.indexes, requests)
        source = EmbeddingSpec(
            spec.sources,
            format=spec.format,
            key_column=spec.key_column or "",
            vector_column=spec.vector_column or "",
            metadata_columns=spec.metadata_columns,
            settings=settings,
        )
        source, note = await asyncio.to_thread(resolve_columns, source)
        client = VectorsClient(settings, max_connections=16, meter=Meter(requests))
        started = time.monotonic()
        try:
            planned = await plan_sync(client, source, spec.bucket, spec.indexes, spec.delete)
        finally:
            await client.close()
        planning = (
            f"planned in {time.monotonic() - started:.2f}s: {planned.stored:,} stored vectors listed, "
            f"{planned.source_rows:,} source rows read"
        )
        deleting = sum(len(keys) for keys in planned.deletes.values())
        if spec.delete and deleting and not planned.source_rows and not spec.allow_empty_source:
            raise UsageError(
                f"the source holds no vectors, so --delete would empty {spec.bucket}/"
                f"{','.join(spec.indexes)} ({deleting:,} vectors): check the source, or pass "
                "--allow-empty-source"
            )
        put = PutVectorsJob(
            source,
            PutOptions(
                bucket=spec.bucket,
                indexes=spec.indexes,
                vectors_per_second=spec.vectors_per_second,
                requests_per_second=spec.requests_per_second,
                rejects_path=spec.rejects,
                concurrency=spec.engine.concurrency,
                dry_run=spec.dry_run,
            ),
            settings,
            shapes,
            workers=plan.workers,
        )
        delete = DeleteVectorsJob(
            DeleteOptions(
                bucket=spec.bucket,
                indexes=spec.indexes,
                keys_from=(),
                vectors_per_second=spec.vectors_per_second,
                requests_per_second=spec.requests_per_second,
                dry_run=spec.dry_run,
                max_delete=spec.max_delete,
                concurrency=spec.engine.concurrency,
            ),
            settings,
            workers=plan.workers,
        )
        job = SyncVectorsJob(put, delete if deleting else None, planned)
        job.preflight_requests = dict(requests)
        job.preflight_notes = [*([note] if note else []), planning]
        if planned.compared_by_reading:
            job.preflight_notes.append(
                f"{planned.compared_by_reading:,} stored vectors had no content hash (loaded by another "
                "tool): compared by reading them back"
            )
        return job

    def verb(self, job: Job) -> str:
        return "vectors sync"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """What the sync would do (--dry-run): its time at the limits."""
        from s3bulk._vectors.sync import SyncVectorsJob

        assert isinstance(spec, SyncVectorsSpec) and isinstance(job, SyncVectorsJob)
        if spec.dry_run:
            deletes = sum(len(keys) for keys in job.plan.deletes.values())
            writes = job.plan.put_rows + deletes
            batches = -(-job.plan.put_rows // 500) + -(-deletes // 500)
            report.notes.append(
                time_at_limits(
                    writes, batches, len(spec.indexes), spec.vectors_per_second, spec.requests_per_second
                )
                + f" ({job.plan.put_rows:,} to put, {deletes:,} to delete)"
            )


COMMANDS = (SyncVectorsCommand(),)  # found by the registry (s3bulk._commands)
