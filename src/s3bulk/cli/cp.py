"""`s3bulk cp SRC DST`: upload, download or server-side copy; a trailing '/' means a prefix."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import typer

from s3bulk.api import copy_async
from s3bulk.cli.options import (
    EndpointOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    parse_size,
    parse_switch,
    settings_from,
)
from s3bulk.progress import LiveProgress, json_line, print_summary


def cp_command(
    source: str = typer.Argument(..., help="s3://bucket/key, s3://bucket/prefix/, a file or a directory."),
    destination: str = typer.Argument(..., help="s3://bucket/prefix/ or a local path."),
    include: list[str] = typer.Option([], "--include", help="Only keys matching this glob (repeatable)."),
    exclude: list[str] = typer.Option(
        [], "--exclude", help="Leave out keys matching this glob (repeatable)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be copied; copy nothing."),
    as_json: bool = typer.Option(False, "--json", help="One JSON line per object and a summary line."),
    workers: int | None = typer.Option(None, "--workers", help="Worker processes (default: one per core)."),
    concurrency: int = typer.Option(64, "--concurrency", help="Requests in flight per worker."),
    max_in_flight: str = typer.Option(
        "16MiB", "--max-in-flight", help="Object bytes held in memory at once, per worker."
    ),
    part_size: str = typer.Option("8MiB", "--part-size", help="Multipart part size."),
    multipart_threshold: str = typer.Option("64MiB", "--multipart-threshold", help="Use parts above this."),
    copy_multipart_threshold: str = typer.Option(
        "5GiB", "--copy-multipart-threshold", help="Server-side copies above this use UploadPartCopy."
    ),
    list_ranges: str = typer.Option(
        "auto", "--list-ranges", help="List key ranges in parallel: auto (not on loopback), on, off."
    ),
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
) -> int:
    """Copy objects between local paths and S3, many in flight across all cores."""
    settings = settings_from(endpoint_url, profile, region, no_verify_ssl, no_sign_request)
    out = sys.stdout

    def print_records(records: list[dict[str, Any]]) -> None:
        for record in records:
            if as_json:
                json_line({"status": "ok", "dry_run": dry_run, **record}, out)
            else:
                out.write(f"(dryrun) cp {record['source']} {record['destination']}\n")

    with LiveProgress(enabled=not as_json) as progress:
        report = asyncio.run(
            copy_async(
                source,
                destination,
                include=include,
                exclude=exclude,
                dry_run=dry_run,
                workers=workers,
                concurrency=concurrency,
                max_in_flight_bytes=parse_size(max_in_flight, "--max-in-flight"),
                part_size=parse_size(part_size, "--part-size"),
                multipart_threshold=parse_size(multipart_threshold, "--multipart-threshold"),
                copy_multipart_threshold=parse_size(copy_multipart_threshold, "--copy-multipart-threshold"),
                partitioned_listing=parse_switch(list_ranges, "--list-ranges"),
                settings=settings,
                on_progress=progress.update,
                on_records=print_records if (as_json or dry_run) else None,
            )
        )
    if as_json:
        for failure in report.failures:
            status = "skipped" if failure.skipped else "failed"
            json_line({"status": status, **failure.__dict__}, out)
        json_line({"summary": report.to_dict() | {"failures": len(report.failures)}}, out)
    else:
        print_summary(report)
    return 0 if report.ok else 1
