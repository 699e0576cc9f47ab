"""`s3bulk vectors put|sync|export|copy|delete|query|verify|count|create-bucket|create-index`:
embeddings into S3 Vectors, kept equal to their source, out again, into another index, away,
and asked.

Each command's options are its spec's fields (`_commands/*_vectors.py`, `vectorspecs.py`: each
declared once, with its flags, help and reader; `spec_options` makes them), and a job command
adds the options every job takes (`job_command`): adding an option to a vectors command is one
field on its spec."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
from collections.abc import Callable
from typing import Any

import typer

from s3bulk._cli.jobrun import (
    DryRunOption,
    JsonOption,
    QuietOption,
    ResumeOption,
    RetryFailedOption,
    StatsOption,
    continuation,
    run_job,
)
from s3bulk._cli.options import (
    ACCOUNT,
    SPEED,
    EngineOption,
    JournalUrlOption,
    ProfileOption,
    RayAddressOption,
    RegionOption,
    WorkersOption,
    in_panel,
    spec_options,
)
from s3bulk._cli.output import guarded
from s3bulk._cli.progress import json_line
from s3bulk._commands.base import Spec
from s3bulk._commands.copy_vectors import ENGINE as COPY
from s3bulk._commands.copy_vectors import CopyVectorsSpec
from s3bulk._commands.delete_vectors import ENGINE as DELETE
from s3bulk._commands.delete_vectors import DeleteVectorsSpec
from s3bulk._commands.export_vectors import ENGINE as EXPORT
from s3bulk._commands.export_vectors import ExportVectorsSpec
from s3bulk._commands.put_vectors import ENGINE as PUT
from s3bulk._commands.put_vectors import PutVectorsSpec
from s3bulk._commands.query_vectors import ENGINE as QUERY
from s3bulk._commands.query_vectors import QueryVectorsSpec
from s3bulk._commands.sync_vectors import ENGINE as SYNC
from s3bulk._commands.sync_vectors import SyncVectorsSpec
from s3bulk._commands.vectorspecs import CountVectorsSpec, CreateIndexSpec, VerifyVectorsSpec
from s3bulk._config import AwsSettings
from s3bulk._engine.spec import EngineSpec
from s3bulk._engine.strategies import DEFAULT_ENGINE
from s3bulk._errors import UsageError

app = typer.Typer(
    help="S3 Vectors in bulk at the per-index limits: load, sync, export, copy, delete, query, verify, "
    "count.",
    no_args_is_help=True,
)

VectorsEndpointOption = typer.Option(
    None, "--endpoint-url", help="S3 Vectors endpoint (default: AWS_ENDPOINT_URL_S3VECTORS or AWS)."
)
S3EndpointOption = typer.Option(
    None, "--s3-endpoint-url", help="S3 endpoint for s3:// sources (default: AWS_ENDPOINT_URL_S3 or AWS)."
)
in_panel(ACCOUNT, VectorsEndpointOption, S3EndpointOption)

# the options of the account every vectors command talks to: (type, option) by parameter name
ACCOUNT_OPTIONS: dict[str, tuple[Any, Any]] = {
    "endpoint_url": (str | None, VectorsEndpointOption),
    "profile": (str | None, ProfileOption),
    "region": (str | None, RegionOption),
}
# what every vectors job takes besides its spec's options
JOB_OPTIONS: dict[str, tuple[Any, Any]] = {
    "engine": (str | None, EngineOption),
    "resume": (str | None, ResumeOption),
    "retry_failed": (str | None, RetryFailedOption),
    "as_json": (bool, JsonOption),
    "quiet": (bool, QuietOption),
    "stats": (bool, StatsOption),
} | ACCOUNT_OPTIONS
# what some take: `job_command(..., takes=...)` names them
MORE_OPTIONS: dict[str, tuple[Any, Any]] = {
    "dry_run": (bool, DryRunOption),
    "s3_endpoint_url": (str | None, S3EndpointOption),  # s3:// sources
    "workers": (int | None, WorkersOption),
    "ray_address": (str | None, RayAddressOption),
    "journal_url": (str | None, JournalUrlOption),
}


def _settings(options: dict[str, Any]) -> AwsSettings:
    settings = AwsSettings.from_env(
        profile=options["profile"],
        region=options["region"],
        endpoint_url=options.get("s3_endpoint_url"),
        vectors_endpoint_url=options["endpoint_url"],
    )
    settings.check_profile()
    return settings


def _required(spec: type[Any]) -> list[str]:
    """The fields a command cannot run without (no default): its sources, bucket, indexes."""
    return [
        field.name
        for field in dataclasses.fields(spec)
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    ]


def _command(
    name: str, spec: type[Any], options: dict[str, tuple[Any, Any]], body: Callable[..., int], doc: str
) -> None:
    """Add `s3bulk vectors NAME`: `spec`'s options and `options`, calling `body(given,
    **options)` with the spec's fields as given (None: left out). A command that is no job
    (verify, count, create-index) is handed its spec, made, or told in one line what is missing."""

    def command(**values: Any) -> int:
        given = {field: value for field, value in values.pop("given").items() if value is not None}
        if not issubclass(spec, Spec):
            if any(not given.get(field) for field in _required(spec)):
                raise UsageError(f"missing arguments: see s3bulk vectors {name} --help")
            given = spec(**given)
        return body(given, **values)

    command.__doc__ = doc
    command.__annotations__ = {name: kind for name, (kind, _) in options.items()} | {
        "given": dict[str, Any] | None,
        "return": int,
    }
    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=made, annotation=kind)
        for name, (kind, made) in options.items()
    ]
    given = inspect.Parameter("given", inspect.Parameter.KEYWORD_ONLY, default=None)
    command.__signature__ = inspect.Signature([*parameters, given])  # type: ignore[attr-defined]
    app.command(name)(guarded(spec_options(spec)(command)))


def job_command(spec: type[Spec], engine: EngineSpec, doc: str, *, takes: tuple[str, ...] = ()) -> None:
    """Add `spec`'s command (`s3bulk vectors put` for vectors-put): its spec's options, the
    options every job takes and `takes` of MORE_OPTIONS, run as one job (resumable)."""
    concurrency = typer.Option(engine.concurrency, "--concurrency", help=spec.concurrency_help)
    in_panel(SPEED, concurrency)
    options = JOB_OPTIONS | {name: MORE_OPTIONS[name] for name in takes} | {"concurrency": (int, concurrency)}
    verb = spec.command.replace("-", " ")

    def run(given: dict[str, Any], **options: Any) -> int:
        from s3bulk._api.base import run_spec

        places = [given.get(name) or None for name in _required(spec)]
        overrides = {name: options.get(name) for name in ("engine", "workers", "ray_address")}
        start = continuation(spec.command, options["resume"], options["retry_failed"], places, overrides)
        if start is None:
            knobs = {
                name: options[name]
                for name in ("dry_run", "workers", "ray_address", "journal_url")
                if name in options
            }
            arguments = (
                given
                | knobs
                | {
                    "engine": options["engine"] or DEFAULT_ENGINE,
                    "concurrency": options["concurrency"],
                    "settings": _settings(options),
                }
            )

            def start(on_progress: Any, on_records: Any) -> Any:
                return run_spec(spec, engine, arguments | {"on_progress": on_progress})

        dry_run = bool(options.get("dry_run"))
        return run_job(
            start,
            verb=verb,
            as_json=options["as_json"],
            dry_run=dry_run,
            quiet=options["quiet"],
            stats=options["stats"],
        )

    _command(verb.split()[1], spec, options, run, doc)


job_command(
    PutVectorsSpec,
    PUT,
    """Load embeddings at the per-index write limit (one process, or one per core when the limits
    together ask for more than one process builds).""",
    takes=("dry_run", "s3_endpoint_url", "workers", "ray_address", "journal_url"),
)
job_command(
    SyncVectorsSpec,
    SYNC,
    "Make indexes equal to a source: put what is new or changed, --delete what it lacks.",
    takes=("dry_run", "s3_endpoint_url"),
)
job_command(
    ExportVectorsSpec,
    EXPORT,
    "Export keys, data and metadata to Parquet; --resume goes on from each segment's last file.",
)
job_command(
    CopyVectorsSpec,
    COPY,
    "Copy indexes into others (--create: with another metric), at the destination's limits.",
    takes=("dry_run",),
)
job_command(
    DeleteVectorsSpec,
    DELETE,
    "Delete vectors by key or by a metadata filter, 500 per request, at the per-index write limit.",
    takes=("dry_run", "s3_endpoint_url"),
)
job_command(
    QueryVectorsSpec,
    QUERY,
    "Run a file of query vectors against an index; results as Parquet rows.",
    takes=("s3_endpoint_url",),
)


def _verify(spec: VerifyVectorsSpec, **options: Any) -> int:
    from s3bulk._api.vectors import verify_spec

    report = asyncio.run(verify_spec(spec, _settings(options)))
    if options["as_json"]:
        json_line(report.to_dict())
        return 0 if report.ok else 1
    sys.stdout.write(
        f"vectors verify: {report.matched:,} of {report.sampled:,} rows match, "
        f"{len(report.missing):,} missing, "
        f"{len(report.differ):,} differ, {report.invalid:,} invalid in the source (never loaded) "
        f"in {report.wall_seconds:.2f}s ({report.requests.get('GetVectors', 0):,} GetVectors)\n"
    )
    for note in report.notes:
        sys.stdout.write(f"{note}\n")
    for key in report.missing[:20]:
        sys.stderr.write(f"missing: {key}\n")
    for key, what in report.differ[:20]:
        sys.stderr.write(f"differs: {key}: {what}\n")
    return 0 if report.ok else 1


def _count(spec: CountVectorsSpec, **options: Any) -> int:
    from s3bulk._api.vectors import count_spec

    counts = asyncio.run(count_spec(spec, _settings(options)))
    for name, number in counts.items():
        sys.stdout.write(f"{spec.bucket}/{name}\t{number}\n")
    if len(counts) > 1:
        sys.stdout.write(f"total\t{sum(counts.values())}\n")
    return 0


def _create_index(spec: CreateIndexSpec, **options: Any) -> int:
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.digest import HASH_KEY

    async def create() -> None:
        client = VectorsClient(_settings(options))
        try:
            # the content hash a put keeps where it costs nothing (sync compares by it): not
            # filterable, so it takes nothing from the 2 KB of filterable metadata
            keys = tuple(dict.fromkeys([*spec.non_filterable, HASH_KEY]))
            await client.create_index(spec.bucket, spec.index, spec.dimension, spec.metric, keys)
        finally:
            await client.close()

    asyncio.run(create())
    sys.stdout.write(
        f"created index {spec.bucket}/{spec.index} ({spec.dimension} dimensions, {spec.metric})\n"
    )
    return 0


VerifyJsonOption = typer.Option(False, "--json", help="Print the result as JSON.")
_command(
    "verify",
    VerifyVectorsSpec,
    {
        "as_json": (bool, VerifyJsonOption),
        **ACCOUNT_OPTIONS,
        "s3_endpoint_url": MORE_OPTIONS["s3_endpoint_url"],
    },
    _verify,
    "Fetch a sample of rows back (GetVectors) and compare data and metadata with the source.",
)
_command(
    "count",
    CountVectorsSpec,
    ACCOUNT_OPTIONS,
    _count,
    "Count the vectors in each index (ListVectors, in parallel segments).",
)
_command(
    "create-index",
    CreateIndexSpec,
    ACCOUNT_OPTIONS,
    _create_index,
    "Create an index (float32) in a vector bucket.",
)


@app.command("create-bucket")
@guarded
def create_bucket_command(
    bucket: str = typer.Argument(..., help="Name of the new vector bucket."),
    endpoint_url: str | None = VectorsEndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
) -> int:
    """Create a vector bucket."""
    from s3bulk._stores.vectors import VectorsClient

    async def create() -> None:
        client = VectorsClient(
            _settings({"endpoint_url": endpoint_url, "profile": profile, "region": region})
        )
        try:
            await client.create_vector_bucket(bucket)
        finally:
            await client.close()

    asyncio.run(create())
    sys.stdout.write(f"created vector bucket {bucket}\n")
    return 0


GROUPS = {"vectors": app}  # found by s3bulk._cli: the commands this module adds
