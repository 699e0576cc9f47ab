"""`s3bulk cp SRC DST` and `s3bulk mv SRC DST`: upload, download or server-side copy (mv then
deletes each source whose copy succeeded); a trailing '/' means a prefix."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import typer

from s3bulk._api.copy import copy_async, move_async
from s3bulk._cli.attributes import with_attribute_options
from s3bulk._cli.checks import with_upload_check_options
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
    RecursiveOption,
    RegionOption,
    RequestPayerOption,
    TpsLimitOption,
    VersionIdOption,
    WorkersOption,
    as_prefix,
    parse_optional_size,
    settings_from,
    spec_options,
)
from s3bulk._cli.output import say
from s3bulk._cli.source import SAME_SIDE, SourceSide, with_source_options
from s3bulk._cli.window import with_window_options
from s3bulk._commands.copy import CopySpec, MoveSpec
from s3bulk._config import DEFAULT_CHECKS, NO_KEYS, AwsSettings, CustomerKeys, UploadChecks, parse_size
from s3bulk._engine.strategies import DEFAULT_ENGINE
from s3bulk._errors import UsageError
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes

SourceArgument = typer.Argument(
    None, help="s3://bucket/key, s3://bucket/prefix/, a file or a directory.", show_default=False
)
DestinationArgument = typer.Argument(None, help="s3://bucket/prefix/ or a local path.", show_default=False)


def make_copy_command(command: str) -> Callable[..., int]:
    @spec_options(CopySpec if command == "cp" else MoveSpec)
    @with_upload_check_options
    @with_copy_key_options
    @with_source_options
    @with_attribute_options
    @with_window_options
    def copy_command(
        source: str | None = SourceArgument,
        destination: str | None = DestinationArgument,
        dry_run: bool = DryRunOption,
        # mv deletes, cp does not: its help does not offer the cap (a cp given it is told so)
        max_delete: int | None = MaxDeleteOption
        if command == "mv"
        else typer.Option(None, "--max-delete", hidden=True),
        version_id: str | None = VersionIdOption,
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
        recursive: bool = RecursiveOption,
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
        given = given or {}
        source = as_prefix(source) if recursive else source
        if version_id is not None:  # one version of one object: to a file or to stdout
            settings = settings_from(
                endpoint_url, profile, region, no_verify_ssl, no_sign_request, keys, None, request_payer
            )
            size = given["part_size"]
            return _one_version(command, source or "", destination or "", version_id, size, settings, quiet)
        if "-" in (source, destination) and command == "cp":  # a stream: stdin or stdout
            settings = settings_from(
                endpoint_url,
                profile,
                region,
                no_verify_ssl,
                no_sign_request,
                keys,
                source_side,
                request_payer,
                checks,
            )
            size = given["part_size"]
            return _stream(source or "", destination or "", attributes, size, settings, quiet)
        if max_delete is not None and command == "cp":
            raise UsageError("--max-delete is for mv, sync and rm: cp deletes nothing")
        if given["show_attributes"] and not as_json:
            raise UsageError("--attributes adds to each --json record: add --json (or see s3bulk head)")
        memory = parse_optional_size(max_memory, "--max-memory")
        start = continuation(
            command,
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
                keys,
                source_side,
                request_payer,
                checks,
            )
            assert source is not None and destination is not None

            run = copy_async if command == "cp" else move_async
            extra: dict[str, Any] = {"max_delete": max_delete} if command == "mv" else {}

            def start(on_progress: Any, on_records: Any) -> Any:
                return run(
                    source,
                    destination,
                    dry_run=dry_run,
                    engine=engine or DEFAULT_ENGINE,
                    workers=workers,
                    ray_address=ray_address,
                    journal_url=journal_url,
                    concurrency=concurrency,
                    max_in_flight_bytes=parse_size(max_in_flight, "--max-in-flight"),
                    max_memory=memory,
                    settings=settings,
                    on_progress=on_progress,
                    on_records=on_records,
                    attributes=attributes,
                    min_size=min_size,
                    max_size=max_size,
                    newer_than=newer_than,
                    older_than=older_than,
                    bwlimit=parse_optional_size(bwlimit, "--bwlimit"),
                    tpslimit=tpslimit,
                    **extra,
                    **given,
                )

        return run_job(
            start,
            verb=command,
            as_json=as_json,
            dry_run=dry_run,
            quiet=quiet,
            stats=stats,
            output=plan_output,
        )

    copy_command.__doc__ = (
        "Copy objects between local paths and S3, many in flight across all cores."
        if command == "cp"
        else "Move objects: copy, then delete each source whose copy succeeded."
    )
    return copy_command


def _stream(
    source: str, destination: str, attributes: Attributes, part_size: int, settings: AwsSettings, quiet: bool
) -> int:
    """`cp - s3://b/k` (stdin up, as `pipe`) or `cp s3://b/k -` (down to stdout, as `cat`)."""
    if source == "-" and destination.startswith("s3://"):
        from s3bulk._cli.pipe import upload_stdin

        size = upload_stdin(destination, attributes, part_size, 4, settings)
        if not quiet:
            say(f"upload: - to {destination} ({size:,} bytes)", err=True)
        return 0
    if destination == "-" and source.startswith("s3://"):
        from s3bulk._cli.cat import cat_to_stdout

        return cat_to_stdout(source, part_size, 8, settings)
    raise UsageError("'-' streams one object: cp - s3://bucket/key (stdin) or cp s3://bucket/key - (stdout)")


def _one_version(
    command: str,
    source: str,
    destination: str,
    version_id: str,
    part_size: int,
    settings: AwsSettings,
    quiet: bool,
) -> int:
    """`cp --version-id V s3://b/k PATH` (or `-`): that version, downloaded as `cat` reads it;
    `cp --version-id V s3://b/k s3://b/k`: that version copied by the service, onto its own key
    the current version again (a restore, as aws-cli's CopyObject does)."""
    if command != "cp" or not source.startswith("s3://") or source.endswith("/"):
        raise UsageError(
            "--version-id reads one version of one object: cp --version-id V s3://bucket/key PATH "
            "(or s3://bucket/key, the same key to restore it)"
        )
    if destination.startswith("s3://"):
        from s3bulk._api.objects import copy_version

        target = destination + source.rsplit("/", 1)[1] if destination.endswith("/") else destination
        size = copy_version(source, target, version_id, settings=settings)
        if not quiet:
            verb = "restore" if target == source else "copy"
            say(f"{verb}: {source} ({version_id}) to {target} ({size:,} bytes)")
        return 0
    if "://" in destination:
        raise UsageError(f"--version-id copies to s3:// or to a local path, not to {destination}")
    if destination == "-":
        from s3bulk._cli.cat import cat_to_stdout

        return cat_to_stdout(source, part_size, 8, settings, version_id)
    from s3bulk._api.objects import get_to_file

    target = destination or "."
    if target.endswith("/") or os.path.isdir(target):
        target = os.path.join(target, source.rsplit("/", 1)[1])
    size = get_to_file(source, target, version_id=version_id, settings=settings)
    if not quiet:
        say(f"download: {source} ({version_id}) to {target} ({size:,} bytes)")
    return 0


cp_command = make_copy_command("cp")
mv_command = make_copy_command("mv")


COMMANDS = {"cp": cp_command, "mv": mv_command}  # found by s3bulk._cli: the commands this module adds
