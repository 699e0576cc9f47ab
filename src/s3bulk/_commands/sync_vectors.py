"""`vectors sync`: indexes made equal to a Parquet (or .npy, JSON Lines) source: what is new or
changed is put, what is equal left alone (compared by the content hash s3bulk's puts keep), and
with --delete what the source no longer has is deleted, under --max-delete and the empty-source
guard, as `sync` does. The job (`s3bulk._vectors.sync`) is loaded when one runs."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec
from s3bulk._commands.deletes import check_max_delete
from s3bulk._commands.vectorspecs import EmbeddingSource, VectorWrites, segments_field
from s3bulk._commands.vectorwrites import WRITE_ENGINE, put_job, settle_rejects, write_notes
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._flags import MAX_DELETE, option
from s3bulk._report import Report

if TYPE_CHECKING:
    from s3bulk._sources.embeddings import EmbeddingSpec
    from s3bulk._vectors.sync import SyncPlan

ENGINE = WRITE_ENGINE  # a sync sends what a put sends, and its deletes


@dataclass(frozen=True, kw_only=True)
class SyncVectorsSpec(VectorWrites, EmbeddingSource, Spec):
    command: ClassVar[str] = "vectors-sync"
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
    segments: int = segments_field()
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors sync")
        super().__post_init__()
        self.check_writes(self.indexes)
        check_max_delete(self.max_delete)
        if (self.max_delete is not None or self.allow_empty_source) and not self.delete:
            raise UsageError("--max-delete and --allow-empty-source go with --delete")

    def absolute(self) -> SyncVectorsSpec:
        return super().absolute().with_absolute_rejects()


class SyncVectorsCommand(Command):
    name: ClassVar[str] = "vectors-sync"
    spec: ClassVar[type[Spec]] = SyncVectorsSpec

    settle = settle_rejects

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The plan (complete listings, a complete read of the source, as the last put into
        the indexes read it where the user left the columns out), checked against the guards,
        then the job that carries it out. Refused here, nothing is sent."""
        from s3bulk._sources.embeddings import resolve_columns
        from s3bulk._stores.retry import Meter
        from s3bulk._stores.vectors import VectorsClient
        from s3bulk._vectors.columns import recalled, remember
        from s3bulk._vectors.delete import DeleteOptions, DeleteVectorsJob
        from s3bulk._vectors.indexes import index_shapes
        from s3bulk._vectors.sync import SyncVectorsJob, plan_sync

        assert isinstance(spec, SyncVectorsSpec)
        requests: collections.Counter[str] = collections.Counter()
        shapes = await index_shapes(settings, spec.bucket, spec.indexes, requests)
        reading, recalled_note = recalled(spec.reading(), settings, spec.bucket, spec.indexes)
        source, note = await asyncio.to_thread(resolve_columns, spec.embedding_spec(settings, reading))
        if spec.delete:
            await asyncio.to_thread(_same_keys_as_loaded, spec, settings, reading, source)
        client = VectorsClient(settings, max_connections=16, meter=Meter(requests))
        started = time.monotonic()
        try:
            planned = await plan_sync(client, source, spec.bucket, spec.indexes, spec.delete, spec.segments)
        finally:
            await client.close()
        deleting = sum(len(keys) for keys in planned.deletes.values())
        if spec.delete and deleting and not planned.source_rows and not spec.allow_empty_source:
            raise UsageError(
                f"the source holds no vectors, so --delete would empty {spec.bucket}/"
                f"{','.join(spec.indexes)} ({deleting:,} vectors): check the source, or pass "
                "--allow-empty-source"
            )
        put = put_job(spec, source, (spec.bucket, spec.indexes), settings, shapes, plan)
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
        planning = f"planned in {time.monotonic() - started:.2f}s: {_plan_said(planned)}"
        job.preflight_notes = [each for each in (recalled_note, note, planning) if each]
        job.preflight_notes += _hash_notes(planned, spec, put.hashes)
        if not spec.dry_run:
            await asyncio.to_thread(remember, reading, settings, spec.bucket, spec.indexes, plan.job_id)
        return job

    def verb(self, job: Job) -> str:
        return "vectors sync"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """What the sync's puts cost and, before it runs (--dry-run), how long its puts and
        deletes take at the limits, priced as a put prices its own."""
        from s3bulk._vectors.sync import SyncVectorsJob

        assert isinstance(spec, SyncVectorsSpec) and isinstance(job, SyncVectorsJob)
        write_notes(report, job.put, spec)
        if spec.dry_run:
            deletes = sum(len(keys) for keys in job.plan.deletes.values())
            report.notes[-1] += f" ({job.plan.put_rows:,} to put, {deletes:,} to delete)"


def _same_keys_as_loaded(
    spec: SyncVectorsSpec, settings: AwsSettings, reading: dict[str, Any], source: EmbeddingSpec
) -> None:
    """Refuse `sync --delete` whose keys are made otherwise than the put into these indexes made
    them (another --key-column, keys file or template, as resolved: a default that finds the same
    column is the same): none of the index's keys would be the source's, and every vector would
    be deleted. Blocking (may read a footer): run it in a thread."""
    from s3bulk._sources.embeddings import resolve_columns
    from s3bulk._vectors.columns import OPTIONS, loaded_keys

    loaded = loaded_keys(settings, spec.bucket, spec.indexes)
    if loaded is None:
        return
    as_loaded, _ = resolve_columns(spec.embedding_spec(settings, reading | loaded))
    ours, theirs = _keys_made(source), _keys_made(as_loaded)
    if ours != theirs:
        differ = [name for name in ours if ours[name] != theirs[name]]
        said = ", ".join(f"{OPTIONS[name]} {theirs[name] or '(none)'}" for name in differ)
        raise UsageError(
            f"{spec.bucket}/{','.join(spec.indexes)} was loaded with {said}, and sync --delete with "
            f"other keys would delete its vectors: sync with {said}, or put the new keys first"
        )


def _keys_made(source: EmbeddingSpec) -> dict[str, Any]:
    """What makes a row's key: its column (unless a template makes it), keys file, template."""
    column = "" if source.key_template else source.key_column
    return {"key_column": column, "keys_file": source.keys_file, "key_template": source.key_template}


def _plan_said(planned: SyncPlan) -> str:
    """What the plan found, in words: the listing, the source, and why rows are put."""
    changed = planned.put_rows - planned.new
    return (
        f"{planned.stored:,} stored vectors listed, {planned.source_rows:,} source rows read: "
        f"{planned.new:,} new, {changed:,} changed or refused, {planned.unchanged:,} equal"
    )


def _hash_notes(planned: SyncPlan, spec: SyncVectorsSpec, hashes: Any) -> list[str]:
    """Where vectors had no content hash to compare by: what reading them back cost, and what
    would spare it."""
    if not planned.compared_by_reading:
        return []
    spared = (
        "the vectors this sync puts carry it"
        if all(hashes(index) for index in spec.indexes)
        else "a put with --content-hash, or into an index made by s3bulk vectors create-index (it "
        "declares s3bulk_hash non-filterable), would let a sync compare them from the listing alone"
    )
    return [
        f"{planned.compared_by_reading:,} stored vectors had no content hash (s3bulk_hash): compared "
        f"by reading them back ({planned.gets:,} GetVectors); {spared}"
    ]


COMMANDS = (SyncVectorsCommand(),)  # found by the registry (s3bulk._commands)
