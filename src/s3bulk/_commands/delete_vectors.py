"""`vectors delete`: keys out of one or more indexes (named in files, on stdin, or found by a
metadata filter), 500 per DeleteVectors, at the index's write limits, journaled, with --dry-run
(what it would delete, and how long that takes at the limits) and --max-delete. The job
(`s3bulk._vectors.delete`) is loaded when one runs."""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from typing import ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, absolute, locations, manifest, patterns
from s3bulk._commands.deletes import check_max_delete
from s3bulk._commands.vectorspecs import (
    KEY_COLUMN,
    bucket_field,
    check_targets,
    requests_per_second_field,
    vectors_per_second_field,
)
from s3bulk._commands.vectorwrites import dry_run_note
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._flags import MAX_DELETE, argument, option, verbatim
from s3bulk._journal.local import private_directory, state_dir
from s3bulk._report import Report
from s3bulk._stores.retry import Meter
from s3bulk._vectors.filters import parse_filter

ENGINE = EngineSpec(concurrency=16, max_attempts=8)


@dataclass(frozen=True, kw_only=True)
class DeleteVectorsSpec(Spec):
    command: ClassVar[str] = "vectors-delete"
    concurrency_help: ClassVar[str] = "DeleteVectors requests in flight per worker."
    keys_from: tuple[str, ...] = dataclasses.field(  # text files of keys, or Parquet files' key column
        default=(), metadata=argument("Files of keys (one per line) or Parquet files (their key column).")
    )
    bucket: str = bucket_field()
    indexes: tuple[str, ...] = dataclasses.field(
        metadata=option("--index", help="The index; several: each key from the index vectors put sent it to.")
    )
    files_from: str | None = dataclasses.field(
        default=None,
        metadata=option("--files-from", help="Keys to delete, one per line (- reads stdin).", read=verbatim),
    )
    filter: str | None = dataclasses.field(
        default=None,
        metadata=option(
            "--filter",
            help='Delete the vectors whose metadata matches, as JSON: \'{"source": "old-crawl"}\' '
            "(each index listed whole).",
            read=verbatim,
        ),
    )
    key_column: str | None = dataclasses.field(default=None, metadata=KEY_COLUMN)  # Parquet sources
    max_delete: int | None = dataclasses.field(default=None, metadata=MAX_DELETE)
    vectors_per_second: float = vectors_per_second_field()
    requests_per_second: float = requests_per_second_field()
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors delete")
        object.__setattr__(self, "indexes", patterns(self.indexes, "index"))
        object.__setattr__(self, "keys_from", locations(self.keys_from, "keys_from"))
        if self.files_from is not None:
            object.__setattr__(self, "files_from", manifest(self.files_from, "--files-from"))
        check_targets(self.indexes, self.vectors_per_second, self.requests_per_second)
        if [bool(self.keys_from), self.files_from is not None, self.filter is not None].count(True) != 1:
            raise UsageError(
                "vectors delete: name the keys once: files of keys or Parquet files as arguments, "
                "--files-from FILE (- for stdin), or --filter JSON"
            )
        if self.filter is not None:
            parse_filter(self.filter)
        check_max_delete(self.max_delete)

    @property
    def sources(self) -> tuple[str, ...]:
        return self.keys_from or ((self.files_from,) if self.files_from else ())

    def places(self) -> tuple[str, str]:
        named = " ".join(self.sources) or f"--filter {self.filter}"
        return named, "/".join((self.bucket, *self.indexes))

    def needs_credentials(self) -> bool:
        return True

    def absolute(self) -> DeleteVectorsSpec:
        return replace(
            self,
            keys_from=tuple(absolute(each) for each in self.keys_from),
            files_from=absolute(self.files_from) if self.files_from else None,
        )


class DeleteVectorsCommand(Command):
    name: ClassVar[str] = "vectors-delete"
    spec: ClassVar[type[Spec]] = DeleteVectorsSpec

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The job, after reading each index (a wrong name stops here, before any delete) and,
        for a filter, listing what matches it."""
        from s3bulk._vectors.delete import DeleteOptions, DeleteVectorsJob
        from s3bulk._vectors.indexes import index_shapes

        assert isinstance(spec, DeleteVectorsSpec)
        requests: collections.Counter[str] = collections.Counter()
        await index_shapes(settings, spec.bucket, spec.indexes, requests)
        notes: list[str] = []
        keys_from = spec.sources
        keys_index: tuple[str, ...] = ()  # each keys file's own index: a filter's listings
        if spec.filter is not None:
            keys_from = await _matches(spec, settings, plan.job_id, requests, notes)
            keys_index = spec.indexes
        options = DeleteOptions(
            bucket=spec.bucket,
            indexes=spec.indexes,
            keys_from=keys_from,
            keys_index=keys_index,
            key_column=spec.key_column or "",
            vectors_per_second=spec.vectors_per_second,
            requests_per_second=spec.requests_per_second,
            dry_run=spec.dry_run,
            max_delete=spec.max_delete,
            concurrency=spec.engine.concurrency,
        )
        job = DeleteVectorsJob(options, settings, workers=plan.workers)
        job.preflight_requests = dict(requests)
        job.preflight_notes = notes
        return job

    def verb(self, job: Job) -> str:
        return "vectors delete"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """A dry run says how long the deletes take at the limits the indexes allow. A job
        without a journal keeps no filter matches: nothing would resume from them."""
        from s3bulk._vectors.delete import DeleteVectorsJob

        assert isinstance(spec, DeleteVectorsSpec) and isinstance(job, DeleteVectorsJob)
        if spec.filter is not None and not report.job_id:
            shutil.rmtree(os.path.dirname(job.options.keys_from[0]), ignore_errors=True)
        if spec.dry_run:
            report.notes.append(
                dry_run_note(report, len(spec.indexes), spec.vectors_per_second, spec.requests_per_second)
            )


async def _matches(
    spec: DeleteVectorsSpec,
    settings: AwsSettings,
    job_id: str,
    requests: collections.Counter[str],
    notes: list[str],
) -> tuple[str, ...]:
    """Per index, a Parquet file of the keys the filter matches, listed once: beside the job's
    journal, where a resume finds it and deletes what the first listing found (a listing that
    broke left no file, and lists again)."""
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.delete import list_matches

    assert spec.filter is not None
    condition = parse_filter(spec.filter)
    if job_id:
        directory = state_dir()
        private_directory(directory)
        folder = str(directory)
    else:
        folder = tempfile.mkdtemp(prefix="s3bulk-filter-")
    paths = tuple(f"{folder}/{job_id or 'job'}.{index}.matches.parquet" for index in spec.indexes)
    client = VectorsClient(settings, max_connections=16, meter=Meter(requests))
    try:
        for index, path in zip(spec.indexes, paths, strict=True):
            if os.path.exists(path):
                notes.append(f"{index}: the keys the filter matched when the job began")
                continue
            started = time.monotonic()
            listed, matched = await list_matches(client, spec.bucket, index, condition, path)
            notes.append(
                f"{index}: {listed:,} vectors listed in {time.monotonic() - started:.2f}s, "
                f"{matched:,} match the filter"
            )
    finally:
        await client.close()
    return paths


COMMANDS = (DeleteVectorsCommand(),)  # found by the registry (s3bulk._commands)
