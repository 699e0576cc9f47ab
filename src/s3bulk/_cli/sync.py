"""`s3bulk sync SRC DST`: copy only what differs; `--delete` also removes what SRC lacks."""

from __future__ import annotations

from typing import Any

import typer

from s3bulk._api.sync import sync_async
from s3bulk._cli.attributes import with_attribute_options
from s3bulk._cli.checks import with_upload_check_options
from s3bulk._cli.cp import DestinationArgument
from s3bulk._cli.jobrun import (
    DryRunOption,
    JsonOption,
    MaxMemoryOption,
    PlanOption,
    QuietOption,
    ResumeOption,
    RetryFailedOption,
    StatsOption,
    continuation,
    run_job,
)
from s3bulk._cli.keys import with_copy_key_options
from s3bulk._cli.options import (
    BwLimitOption,
    ConcurrencyOption,
    EndpointOption,
    EngineOption,
    JournalUrlOption,
    MaxDeleteOption,
    MaxInFlightOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RayAddressOption,
    RegionOption,
    RequestPayerOption,
    TpsLimitOption,
    WorkersOption,
    parse_optional_size,
    settings_from,
    spec_options,
)
from s3bulk._cli.source import SAME_SIDE, SourceSide, with_source_options
from s3bulk._cli.window import with_window_options
from s3bulk._commands.sync import NOT_FOR_SYNC, SyncSpec
from s3bulk._config import DEFAULT_CHECKS, NO_KEYS, CustomerKeys, UploadChecks, parse_size
from s3bulk._engine.strategies import DEFAULT_ENGINE
from s3bulk._errors import UsageError
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes


@spec_options(SyncSpec, leaving_out=NOT_FOR_SYNC)
@with_upload_check_options
@with_copy_key_options
@with_source_options
@with_attribute_options
@with_window_options
def sync_command(
    source: str | None = typer.Argument(
        None,
        help="s3://bucket/prefix/ or a directory: what the destination is made to match.",
        show_default=False,
    ),
    destination: str | None = DestinationArgument,
    size_only: bool = typer.Option(False, "--size-only", help="Compare sizes only."),
    checksum: bool = typer.Option(
        False, "--checksum", help="Compare contents (checksums, ETags) when sizes match, not times."
    ),
    dry_run: bool = DryRunOption,
    max_delete: int | None = MaxDeleteOption,
    bwlimit: str | None = BwLimitOption,
    tpslimit: float | None = TpsLimitOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    plan_output: str | None = PlanOption,
    stats: bool = StatsOption,
    engine: str | None = EngineOption,
    ray_address: str | None = RayAddressOption,
    journal_url: str | None = JournalUrlOption,
    workers: int | None = WorkersOption,
    concurrency: int = ConcurrencyOption,
    max_in_flight: str = MaxInFlightOption,
    max_memory: str | None = MaxMemoryOption,
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
    keys: CustomerKeys = NO_KEYS,
    checks: UploadChecks = DEFAULT_CHECKS,
    source_side: SourceSide = SAME_SIDE,
    attributes: Attributes = NO_ATTRIBUTES,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: float | None = None,
    older_than: float | None = None,
    given: dict[str, Any] | None = None,
) -> int:
    """Make DST hold what SRC holds, transferring only what differs (both are prefixes/directories)."""
    if size_only and checksum:
        raise UsageError("--size-only and --checksum exclude each other: pick one")
    given = given or {}
    if given["show_attributes"] and not as_json:
        raise UsageError("--attributes adds to each --json record: add --json (or see s3bulk head)")
    memory = parse_optional_size(max_memory, "--max-memory")
    start = continuation(
        "sync",
        resume,
        retry_failed,
        [source, destination],
        {
            "engine": engine,
            "workers": workers,
            "ray_address": ray_address,
            "max_memory": memory,
            "max_delete": max_delete,
        },
        keys,
    )
    if start is None:
        settings = settings_from(
            endpoint_url,
            profile,
            region,
            no_verify_ssl,
            no_sign_request,
            keys=keys,
            source_side=source_side,
            request_payer=request_payer,
            checks=checks,
        )
        assert source is not None and destination is not None

        def start(on_progress: Any, on_records: Any) -> Any:
            return sync_async(
                source,
                destination,
                mode="size" if size_only else "checksum" if checksum else "mtime",
                dry_run=dry_run,
                engine=engine or DEFAULT_ENGINE,
                workers=workers,
                ray_address=ray_address,
                journal_url=journal_url,
                concurrency=concurrency,
                max_in_flight_bytes=parse_size(max_in_flight, "--max-in-flight"),
                max_memory=memory,
                attributes=attributes,
                min_size=min_size,
                max_size=max_size,
                newer_than=newer_than,
                older_than=older_than,
                bwlimit=parse_optional_size(bwlimit, "--bwlimit"),
                tpslimit=tpslimit,
                max_delete=max_delete,
                settings=settings,
                on_progress=on_progress,
                on_records=on_records,
                **given,
            )

    return run_job(
        start,
        verb="cp",
        command="sync",
        as_json=as_json,
        dry_run=dry_run,
        quiet=quiet,
        stats=stats,
        output=plan_output,
    )


COMMANDS = {"sync": sync_command}  # found by s3bulk._cli: the commands this module adds
