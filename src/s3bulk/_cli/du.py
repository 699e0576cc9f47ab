"""`s3bulk du s3://b/prefix/`: objects and bytes under a prefix, from the parallel listing (no
object is read), in total or grouped by storage class or by the first N levels of the key."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import typer

from s3bulk._cli.options import (
    EndpointOption,
    InventoryOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    RequestPayerOption,
    settings_from,
)
from s3bulk._cli.output import guarded
from s3bulk._cli.progress import json_line
from s3bulk._engine.loop import run_loop
from s3bulk._errors import UsageError
from s3bulk._ls import ls_pages
from s3bulk._report import human_bytes
from s3bulk._sources.tables import TableWriter, records_batch
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._text import printable
from s3bulk._urls import parse_s3, relative_key


@guarded
def du_command(
    url: str = typer.Argument(..., help="s3://bucket/ or s3://bucket/prefix/"),
    human: bool = typer.Option(False, "--human", "-H", help="Sizes in KiB, MiB, GiB."),
    group: str | None = typer.Option(None, "--group", help="storage-class: one line per storage class."),
    depth: int = typer.Option(0, "--depth", help="One line per key prefix this many levels below URL."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    output: str | None = typer.Option(
        None, "--output", help="Write the lines as a table: FILE.parquet, .csv or .arrow.", metavar="FILE"
    ),
    concurrency: int = typer.Option(16, "--concurrency", help="List requests in flight."),
    inventory: str | None = InventoryOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
) -> int:
    """Count objects and bytes under a prefix (like du): in total, --group storage-class, or --depth N."""
    if group not in (None, "storage-class"):
        raise UsageError(f"--group {group!r}: only storage-class")
    if depth < 0:
        raise UsageError("--depth must be 0 or more")
    prefix = parse_s3(url).key
    table = None if output is None else TableWriter(output, du_schema(bool(group)))
    settings = settings_from(
        endpoint_url, profile, region, no_verify_ssl, no_sign_request, request_payer=request_payer
    )
    objects: Counter[str] = Counter()
    sizes: Counter[str] = Counter()

    async def count() -> None:
        async for _, page in ls_pages(url, concurrency=concurrency, settings=settings, inventory=inventory):
            for info in page:
                add(info)

    def add(info: ObjectInfo) -> None:
        if group:
            name = info.storage_class or "STANDARD"
        elif depth:
            levels = relative_key(info.key, prefix).split("/")
            name = prefix + "/".join(levels[:depth]) + ("/" if len(levels) > depth else "")
        else:
            name = prefix
        objects[name] += 1
        sizes[name] += info.size

    try:
        run_loop(count())
    except BaseException:
        if table is not None:
            table.close(completed=False)
        raise
    if not objects:
        objects[prefix] = sizes[prefix] = 0
    rows = []
    for name in sorted(objects):
        size = human_bytes(sizes[name]) if human else str(sizes[name])
        where = name if group else f"s3://{parse_s3(url).bucket}/{name}"
        if table is not None:
            rows.append({"group" if group else "url": where, "objects": objects[name], "bytes": sizes[name]})
        elif as_json:
            json_line({"group" if group else "url": where, "objects": objects[name], "bytes": sizes[name]})
        else:
            noun = "object " if objects[name] == 1 else "objects"
            sys.stdout.write(f"{size:>12} {objects[name]:>10} {noun}  {printable(where)}\n")
    if table is not None:
        with table:
            table.write(records_batch(rows, table.schema))
    return 0


def du_schema(grouped: bool) -> Any:
    """du's lines as a table: the prefix's URL (or storage class), its objects and bytes."""
    import pyarrow as pa

    return pa.schema(
        [("group" if grouped else "url", pa.string()), ("objects", pa.int64()), ("bytes", pa.int64())]
    )


COMMANDS = {"du": du_command}  # found by s3bulk._cli: the commands this module adds
