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
    ExcludeOption,
    FilesFromOption,
    IncludeOption,
    JournalUrlOption,
    ListRangesOption,
    MaxDeleteOption,
    MaxInFlightOption,
    MultipartThresholdOption,
    NoGuessMimeTypeOption,
    NoSignOption,
    NoVerifyOption,
    PartSizeOption,
    ProfileOption,
    RayAddressOption,
    RegionOption,
    RequestPayerOption,
    TpsLimitOption,
    WorkersOption,
    manifest_path,
    parse_optional_size,
    parse_switch,
    settings_from,
    spec_switches,
)
from s3bulk._cli.source import SAME_SIDE, SourceSide, with_source_options
from s3bulk._cli.window import with_window_options
from s3bulk._commands.transfer import TransferSpec
from s3bulk._config import DEFAULT_CHECKS, NO_KEYS, CustomerKeys, UploadChecks, parse_size
from s3bulk._engine.strategies import DEFAULT_ENGINE
from s3bulk._errors import UsageError
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes


@spec_switches(TransferSpec, "follow_symlinks", "allow_control_chars")
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
    delete: bool = typer.Option(False, "--delete", help="Delete destination objects missing at the source."),
    allow_empty_source: bool = typer.Option(
        False, "--allow-empty-source", help="With --delete, accept an empty or missing source (empties DST)."
    ),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
    dry_run: bool = DryRunOption,
    max_delete: int | None = MaxDeleteOption,
    files_from: str | None = FilesFromOption,
    ignore_checksum: bool = typer.Option(
        False, "--ignore-checksum", help="Do not check downloads against their ETag (MD5)."
    ),
    bwlimit: str | None = BwLimitOption,
    tpslimit: float | None = TpsLimitOption,
    as_json: bool = JsonOption,
    show_attributes: bool = typer.Option(
        False, "--attributes", help="Downloads: each --json record has the object's attributes (a HEAD each)."
    ),
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    engine: str | None = EngineOption,
    ray_address: str | None = RayAddressOption,
    journal_url: str | None = JournalUrlOption,
    workers: int | None = WorkersOption,
    concurrency: int = ConcurrencyOption,
    max_in_flight: str = MaxInFlightOption,
    max_memory: str | None = MaxMemoryOption,
    part_size: str = PartSizeOption,
    multipart_threshold: str = MultipartThresholdOption,
    list_ranges: str = ListRangesOption,
    no_guess_mime_type: bool = NoGuessMimeTypeOption,
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
    switches: dict[str, bool] | None = None,
) -> int:
    """Make DST hold what SRC holds, transferring only what differs (both are prefixes/directories)."""
    if size_only and checksum:
        raise UsageError("--size-only and --checksum exclude each other: pick one")
    if show_attributes and not as_json:
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
                delete=delete,
                allow_empty_source=allow_empty_source,
                include=include,
                exclude=exclude,
                dry_run=dry_run,
                engine=engine or DEFAULT_ENGINE,
                workers=workers,
                ray_address=ray_address,
                journal_url=journal_url,
                concurrency=concurrency,
                max_in_flight_bytes=parse_size(max_in_flight, "--max-in-flight"),
                max_memory=memory,
                part_size=parse_size(part_size, "--part-size"),
                multipart_threshold=parse_size(multipart_threshold, "--multipart-threshold"),
                partitioned_listing=parse_switch(list_ranges, "--list-ranges"),
                guess_mime_type=not no_guess_mime_type,
                attributes=attributes,
                show_attributes=show_attributes,
                min_size=min_size,
                max_size=max_size,
                newer_than=newer_than,
                older_than=older_than,
                files_from=manifest_path(files_from),
                verify=not ignore_checksum,
                bwlimit=parse_optional_size(bwlimit, "--bwlimit"),
                tpslimit=tpslimit,
                max_delete=max_delete,
                settings=settings,
                on_progress=on_progress,
                on_records=on_records,
                **(switches or {}),
            )

    return run_job(
        start, verb="cp", command="sync", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats
    )


COMMANDS = {"sync": sync_command}  # found by s3bulk._cli: the commands this module adds
