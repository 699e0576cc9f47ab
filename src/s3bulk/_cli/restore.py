"""`s3bulk restore URL --days N [--tier Bulk|Standard|Expedited]`: ask for a restored copy of
every archived object (Glacier Flexible Retrieval, Deep Archive) under a prefix."""

from __future__ import annotations

from typing import Any

import typer

from s3bulk._api.restore import restore_async
from s3bulk._cli.jobrun import (
    DryRunOption,
    JsonOption,
    PlanOption,
    QuietOption,
    ResumeOption,
    RetryFailedOption,
    StatsOption,
    continuation,
    run_job,
)
from s3bulk._cli.options import (
    EndpointOption,
    EngineOption,
    ExcludeOption,
    FilesFromOption,
    IncludeOption,
    InventoryOption,
    JournalUrlOption,
    ListRangesOption,
    NoVerifyOption,
    ProfileOption,
    RayAddressOption,
    RecursiveOption,
    RegionOption,
    RequestPayerOption,
    TpsLimitOption,
    WorkersOption,
    as_prefix,
    manifest_path,
    settings_from,
)
from s3bulk._commands.restore import ENGINE
from s3bulk._config import parse_switch
from s3bulk._errors import UsageError


def restore_command(
    target: str | None = typer.Argument(
        None, help="s3://bucket/key or s3://bucket/prefix/", show_default=False
    ),
    days: int | None = typer.Option(
        None,
        "--days",
        help="Days the restored copy stays (then it expires; the archived object stays).",
        show_default=False,
    ),
    tier: str = typer.Option(
        "Standard",
        "--tier",
        help="Bulk (cheapest, 5-12 h; Deep Archive 48 h), Standard (3-5 h; 12 h) or "
        "Expedited (1-5 min; not for Deep Archive).",
    ),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
    dry_run: bool = DryRunOption,
    files_from: str | None = FilesFromOption,
    inventory: str | None = InventoryOption,
    tpslimit: float | None = TpsLimitOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    plan_output: str | None = PlanOption,
    stats: bool = StatsOption,
    engine: str | None = EngineOption,
    ray_address: str | None = RayAddressOption,
    journal_url: str | None = JournalUrlOption,
    workers: int | None = WorkersOption,
    concurrency: int = typer.Option(
        ENGINE.concurrency, "--concurrency", help="Objects looked at (a HEAD, then a RestoreObject) at once."
    ),
    list_ranges: str = ListRangesOption,
    recursive: bool = RecursiveOption,
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    request_payer: str | None = RequestPayerOption,
) -> int:
    """Restore archived objects (Glacier Flexible Retrieval, Deep Archive) for --days, at --tier:
    one RestoreObject each, none for an object being restored or restored already."""
    target = as_prefix(target) if recursive else target
    start = continuation(
        "restore",
        resume,
        retry_failed,
        [target],
        {"engine": engine, "workers": workers, "ray_address": ray_address},
    )
    if start is None:
        if target is None:
            raise UsageError("restore what? give s3://bucket/key or s3://bucket/prefix/ (or --resume JOB)")
        if days is None:
            raise UsageError("give --days N: how many days the restored copy stays")
        settings = settings_from(
            endpoint_url, profile, region, no_verify_ssl, False, request_payer=request_payer
        )
        given_days: int = days
        given_target: str = target

        def start(on_progress: Any, on_records: Any) -> Any:
            return restore_async(
                given_target,
                days=given_days,
                tier=tier,
                include=include,
                exclude=exclude,
                dry_run=dry_run,
                engine=engine or ENGINE.engine,
                workers=workers,
                ray_address=ray_address,
                journal_url=journal_url,
                concurrency=concurrency,
                partitioned_listing=parse_switch(list_ranges, "--list-ranges"),
                files_from=manifest_path(files_from),
                inventory=inventory,
                tpslimit=tpslimit,
                settings=settings,
                on_progress=on_progress,
                on_records=on_records,
            )

    return run_job(
        start, verb="restore", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats, output=plan_output
    )


COMMANDS = {"restore": restore_command}  # found by s3bulk._cli: the commands this module adds
