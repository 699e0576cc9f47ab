"""`s3bulk head URL` (also `stat`): every attribute of one object, or of each object under a
prefix, as a block of `name  value` lines or, with --json, one JSON object per object."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import typer

from s3bulk._cli.jobrun import StatsOption
from s3bulk._cli.keys import with_key_options
from s3bulk._cli.options import (
    EndpointOption,
    InventoryOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    RequestPayerOption,
    VersionIdOption,
    settings_from,
)
from s3bulk._cli.progress import json_line, print_summary
from s3bulk._config import NO_KEYS, AwsSettings, CustomerKeys
from s3bulk._report import RecordSink
from s3bulk._text import printable
from s3bulk._urls import parse_s3


@with_key_options
def head_command(
    url: str = typer.Argument(..., help="s3://bucket/key, or s3://bucket/prefix/ for every object below it."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per object."),
    concurrency: int = typer.Option(32, "--concurrency", help="HEAD requests in flight."),
    inventory: str | None = InventoryOption,
    version_id: str | None = VersionIdOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
    keys: CustomerKeys = NO_KEYS,
) -> int:
    """Show every attribute of an object (size, ETag, Content-Type, metadata, storage class,
    encryption, checksums), or of each object under a prefix."""
    settings = settings_from(
        endpoint_url, profile, region, no_verify_ssl, no_sign_request, keys=keys, request_payer=request_payer
    )
    if version_id:
        return _show_version(url, version_id, as_json, settings)
    return show_attributes(url, as_json, concurrency, stats, settings, inventory)


def _show_version(url: str, version_id: str, as_json: bool, settings: AwsSettings) -> int:
    """One version of one object: its attributes, as for the object."""
    from s3bulk._objects import head
    from s3bulk._stores.attributes import described

    found = described(asyncio.run(head(settings, url, version_id)))
    if as_json:
        json_line({"key": parse_s3(url).key, "url": url, "version_id": version_id, **found})
    else:
        sys.stdout.write(_block(f"{url} ({version_id})", found))
    return 0


def show_attributes(
    url: str,
    as_json: bool,
    concurrency: int,
    stats: bool,
    settings: AwsSettings,
    inventory: str | None = None,
) -> int:
    """HEAD the object, or every object under the prefix (in parallel; those `inventory` lists,
    with no listing), and print what it says."""
    from s3bulk._api.base import run_async
    from s3bulk._commands.head import ENGINE, HeadSpec
    from s3bulk._engine.spec import EngineSpec

    engine = EngineSpec(engine=ENGINE.engine, concurrency=concurrency)
    spec = HeadSpec(target=url, inventory=inventory, engine=engine)

    def show(records: list[dict[str, Any]]) -> None:
        for record in records:
            if as_json:
                json_line(
                    {"key": parse_s3(record["source"]).key, "url": record["source"], **record["attributes"]}
                )
            else:
                sys.stdout.write(_block(record["source"], record["attributes"]))

    report = asyncio.run(run_async(spec, settings=settings, on_records=RecordSink(show)))
    print_summary(report, "head", stats=stats, quiet=not stats)
    return 0 if report.ok else 1


def _block(url: str, found: dict[str, Any]) -> str:
    lines = [printable(url)]
    for name, value in found.items():
        if isinstance(value, dict):
            value = ", ".join(f"{key}={each}" for key, each in value.items())
        elif name == "size":
            value = f"{value:,}"
        lines.append(f"  {name.replace('_', '-'):<26}{printable(str(value))}")
    return "\n".join(lines) + "\n"


COMMANDS = {"head": head_command, "stat": head_command}  # found by s3bulk._cli
