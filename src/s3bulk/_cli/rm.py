"""`s3bulk rm TARGET`: delete an object, a prefix (ending in '/') or the keys a glob matches."""

from __future__ import annotations

import sys
from typing import Any

import typer

from s3bulk._api.remove import remove_async
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
    BwLimitOption,
    EndpointOption,
    EngineOption,
    ExcludeOption,
    FilesFromOption,
    IncludeOption,
    InventoryOption,
    JournalUrlOption,
    ListRangesOption,
    MaxDeleteOption,
    NoSignOption,
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
    parse_optional_size,
    settings_from,
)
from s3bulk._cli.window import with_window_options
from s3bulk._config import parse_switch
from s3bulk._engine.strategies import DEFAULT_ENGINE
from s3bulk._errors import S3BulkError, UsageError
from s3bulk._urls import parse_s3


@with_window_options
def rm_command(
    target: str | None = typer.Argument(
        None, help="s3://bucket/key, s3://bucket/prefix/ or s3://bucket/logs/*.gz", show_default=False
    ),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
    dry_run: bool = DryRunOption,
    max_delete: int | None = MaxDeleteOption,
    files_from: str | None = FilesFromOption,
    inventory: str | None = InventoryOption,
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
    concurrency: int = typer.Option(16, "--concurrency", help="DeleteObjects requests in flight per worker."),
    list_ranges: str = ListRangesOption,
    recursive: bool = RecursiveOption,
    all_versions: bool = typer.Option(
        False, "--all-versions", help="Every version and delete marker under the prefix (a versioned bucket)."
    ),
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: float | None = None,
    older_than: float | None = None,
) -> int:
    """Delete objects, 1,000 keys per request, several requests in flight."""
    target = as_prefix(target) if recursive else target
    if all_versions:
        assert target is not None
        given = {
            "--include": include,
            "--exclude": exclude,
            "--files-from": files_from,
            "--inventory": inventory,
            "--max-delete": max_delete,
            "--resume": resume,
            "--retry-failed": retry_failed,
            "--min-size/--max-size": min_size is not None or max_size is not None,
            "--newer-than/--older-than": newer_than is not None or older_than is not None,
        }
        if any(given.values()):
            names = ", ".join(name for name, value in given.items() if value)
            raise UsageError(
                f"--all-versions takes no {names}: it deletes every version under a prefix/ or of one key"
            )
        settings = settings_from(endpoint_url, profile, region, no_verify_ssl, no_sign_request)
        return _remove_versions(target, dry_run, quiet, settings)
    start = continuation(
        "rm",
        resume,
        retry_failed,
        [target],
        {"engine": engine, "workers": workers, "ray_address": ray_address, "max_delete": max_delete},
    )
    if start is None:
        settings = settings_from(
            endpoint_url, profile, region, no_verify_ssl, no_sign_request, request_payer=request_payer
        )
        assert target is not None

        def start(on_progress: Any, on_records: Any) -> Any:
            return remove_async(
                target,
                include=include,
                exclude=exclude,
                dry_run=dry_run,
                engine=engine or DEFAULT_ENGINE,
                workers=workers,
                ray_address=ray_address,
                journal_url=journal_url,
                concurrency=concurrency,
                partitioned_listing=parse_switch(list_ranges, "--list-ranges"),
                min_size=min_size,
                max_size=max_size,
                newer_than=newer_than,
                older_than=older_than,
                files_from=manifest_path(files_from),
                inventory=inventory,
                bwlimit=parse_optional_size(bwlimit, "--bwlimit"),
                tpslimit=tpslimit,
                max_delete=max_delete,
                settings=settings,
                on_progress=on_progress,
                on_records=on_records,
            )

    return run_job(
        start, verb="rm", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats, output=plan_output
    )


def _remove_versions(target: str, dry_run: bool, quiet: bool, settings: Any) -> int:
    """rm --all-versions: each version and delete marker listed under the prefix, deleted page by
    page (not journaled: a second run finds what is left)."""
    from s3bulk._api.objects import remove_versions
    from s3bulk._text import printable

    deleted = failed = 0
    for version, why in remove_versions(target, dry_run=dry_run, settings=settings):
        url = printable(f"s3://{parse_s3(target).bucket}/{version.key}")
        what = "delete marker" if version.delete_marker else "version"
        if why:
            failed += 1
            sys.stderr.write(f"failed: {url} ({what} {version.version_id}): {printable(why)}\n")
            continue
        deleted += 1
        if not quiet:
            sys.stdout.write(f"{'(dryrun) ' if dry_run else ''}delete: {url} ({what} {version.version_id})\n")
    if not deleted and not failed:
        raise S3BulkError(f"no version or delete marker of {printable(target)} (a prefix ends with '/')")
    verb = "would delete" if dry_run else "deleted"
    sys.stdout.write(
        f"rm --all-versions: {deleted:,} {verb}" + (f", {failed:,} failed\n" if failed else "\n")
    )
    return 1 if failed else 0


COMMANDS = {"rm": rm_command}  # found by s3bulk._cli: the commands this module adds
