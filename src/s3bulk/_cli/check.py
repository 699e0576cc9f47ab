"""`s3bulk check SRC DST`: what differs between two trees, copying nothing; exit 1 if anything."""

from __future__ import annotations

import sys
from typing import Any

import typer

from s3bulk._cli.jobrun import JsonOption
from s3bulk._cli.keys import with_key_options
from s3bulk._cli.options import (
    DestinationInventoryOption,
    EndpointOption,
    ExcludeOption,
    FilesFromOption,
    IncludeOption,
    InventoryOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    RequestPayerOption,
    manifest_path,
    settings_from,
)
from s3bulk._cli.output import guarded, say
from s3bulk._cli.progress import json_line
from s3bulk._cli.source import SAME_SIDE, SourceSide, with_source_options
from s3bulk._cli.window import with_window_options
from s3bulk._config import NO_KEYS, CustomerKeys
from s3bulk._engine.loop import run_loop
from s3bulk._sources.tables import ROW_GROUP, TableWriter, records_batch
from s3bulk._text import printable


@guarded
@with_key_options
@with_source_options
@with_window_options
def check_command(
    source: str = typer.Argument(..., help="s3://bucket/prefix/ or a directory."),
    destination: str = typer.Argument(..., help="s3://bucket/prefix/ or a directory."),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
    files_from: str | None = FilesFromOption,
    inventory: str | None = InventoryOption,
    destination_inventory: str | None = DestinationInventoryOption,
    as_json: bool = JsonOption,
    output: str | None = typer.Option(
        None,
        "--output",
        help="Write what differs (status, name, source, destination, why) to FILE.parquet, .csv or .arrow.",
        metavar="FILE",
    ),
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
    source_side: SourceSide = SAME_SIDE,
    keys: CustomerKeys = NO_KEYS,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: float | None = None,
    older_than: float | None = None,
) -> int:
    """Compare two trees (sizes, then ETags or the files' MD5, or the checksums the service
    keeps) and list what differs, is missing at DST or is extra there; copies nothing; exit 1
    if anything differs."""
    from s3bulk._api.check import check_async

    table = None if output is None else TableWriter(output, check_schema())
    settings = settings_from(
        endpoint_url,
        profile,
        region,
        no_verify_ssl,
        no_sign_request,
        keys=keys,
        source_side=source_side,
        request_payer=request_payer,
    )
    report = run_loop(
        check_async(
            source,
            destination,
            include=include,
            exclude=exclude,
            files_from=manifest_path(files_from),
            inventory=inventory,
            destination_inventory=destination_inventory,
            min_size=min_size,
            max_size=max_size,
            newer_than=newer_than,
            older_than=older_than,
            settings=settings,
        )
    )
    out = sys.stdout
    counts: dict[str, int] = {}
    rows: list[dict[str, str]] = []
    for failure in report.failures:
        kind, _, why = failure.reason.partition(": ")
        kind = kind if kind in ("missing", "extra", "differs", "cannot tell") else "failed"
        counts[kind] = counts.get(kind, 0) + 1
        if as_json or table is not None:
            name = _relative(failure.source, source, destination)
            places = {"source": _under(source, name), "destination": _under(destination, name)}
            row = {"status": kind, "name": name, **places, "why": why or failure.reason}
            if table is None:
                json_line(row, out)
                continue
            rows.append(row)
            if len(rows) >= ROW_GROUP:
                table.write(records_batch(rows, table.schema))
                rows = []
        else:
            out.write(f"{kind}: {printable(failure.source)}" + (f" ({printable(why)})" if why else "") + "\n")
    if table is not None:
        with table:
            table.write(records_batch(rows, table.schema))
    same = report.objects_unchanged
    summary = ", ".join(f"{count:,} {kind}" for kind, count in counts.items())
    if as_json:
        json_line({"summary": {"same": same, **counts}}, out)
    else:
        say(f"check: {same:,} the same" + (f", {summary}" if summary else ""), err=True)
    return 1 if counts or report.aborted else 0


def check_schema() -> Any:
    """check's findings as a table: one row per name that is not the same on both sides."""
    import pyarrow as pa

    return pa.schema([(name, pa.string()) for name in ("status", "name", "source", "destination", "why")])


def _under(root: str, name: str) -> str:
    return root.rstrip("/") + "/" + name


def _relative(place: str, *roots: str) -> str:
    """A name as both sides share it (`sub/a.txt`), from the URL or path of one side."""
    for root in roots:
        if place.startswith(stem := root.rstrip("/") + "/"):
            return place[len(stem) :]
    return place


COMMANDS = {"check": check_command}  # found by s3bulk._cli: the commands this module adds
