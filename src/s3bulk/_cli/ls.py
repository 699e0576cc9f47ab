"""`s3bulk ls`: print like `aws s3 ls`, or JSON lines, with an optional summary."""

from __future__ import annotations

import functools
import sys
from collections.abc import Coroutine
from datetime import datetime
from typing import Any

import typer

from s3bulk._cli.keys import with_key_options
from s3bulk._cli.options import (
    EndpointOption,
    InventoryOption,
    ListRangesOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    RequestPayerOption,
    settings_from,
)
from s3bulk._cli.output import stdout_gone
from s3bulk._cli.progress import json_line
from s3bulk._cli.window import with_window_options
from s3bulk._config import NO_KEYS, AwsSettings, CustomerKeys, parse_switch
from s3bulk._engine.loop import run_loop
from s3bulk._errors import UsageError
from s3bulk._ls import ls_pages
from s3bulk._plan.filters import Filters, check_window
from s3bulk._report import Report, human_bytes
from s3bulk._sources.tables import TableWriter, listing_batch, listing_schema, versions_batch
from s3bulk._stores.s3xml import ObjectInfo, VersionInfo, epoch_seconds, split_iso
from s3bulk._text import printable, printable_all
from s3bulk._urls import relative_key


def _local_time(iso: str) -> str:
    """The listing's time in the local zone, to the second, as `aws s3 ls` prints it."""
    second, _fraction, zone = split_iso(iso)
    return _local_second(second + zone)


@functools.lru_cache(maxsize=4096)  # objects written together share their second
def _local_second(iso: str) -> str:
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return iso
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _text_lines(prefixes: list[str], objects: list[ObjectInfo], below: str, human: bool = False) -> str:
    """A page as `aws s3 ls` prints it: names relative to `below` ("" with -r: whole keys),
    sizes in bytes or, `human`, as 1.5 MiB."""
    names = printable_all([relative_key(key, below) for key in prefixes])
    lines = [f"{'PRE':>30} {name}" for name in names]
    keys = (
        [info.key for info in objects] if not below else [relative_key(info.key, below) for info in objects]
    )
    lines += [
        f"{_local_time(info.modified)} {human_bytes(info.size) if human else info.size:>10} {name}"
        for info, name in zip(objects, printable_all(keys), strict=True)
    ]
    return "\n".join(lines) + "\n"


@with_window_options
@with_key_options
def ls_command(
    url: str | None = typer.Argument(None, help="s3://bucket/prefix/ to list (none: your buckets)."),
    recursive: bool = typer.Option(
        False,
        "--recursive",
        "-r",
        help="List every key under the prefix (without: one level, as aws s3 ls; the API lists all).",
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    summarize: bool = typer.Option(False, "--summarize", help="Print total objects and size."),
    human: bool = typer.Option(False, "--human-readable", "-H", help="Sizes as 1.5 MiB (as aws s3 ls)."),
    with_attributes: bool = typer.Option(
        False,
        "--attributes",
        help="Every attribute of each object (a HEAD each, in parallel, printed as they answer; implies -r).",
    ),
    all_versions: bool = typer.Option(
        False, "--all-versions", help="Every version and delete marker (a versioned bucket; implies -r)."
    ),
    concurrency: int = typer.Option(16, "--concurrency", help="List requests in flight."),
    output: str | None = typer.Option(
        None,
        "--output",
        help="Write the listing as a table to FILE.parquet, .csv or .arrow (with -r or --all-versions), "
        "a row group at a time as pages arrive.",
        metavar="FILE",
    ),
    list_ranges: str = ListRangesOption,
    inventory: str | None = InventoryOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
    keys: CustomerKeys = NO_KEYS,
    min_size: int | None = None,
    max_size: int | None = None,
    newer_than: float | None = None,
    older_than: float | None = None,
) -> int:
    """List objects; with -r, many key ranges are listed in parallel and printed in key order."""
    check_window(min_size, max_size, newer_than, older_than)
    selected = Filters(min_size=min_size, max_size=max_size, newer_than=newer_than, older_than=older_than)
    shown = [0, 0]  # objects and bytes printed (the summary counts what the window let through)
    settings = settings_from(
        endpoint_url, profile, region, no_verify_ssl, no_sign_request, keys=keys, request_payer=request_payer
    )
    if url is None:
        return _list_buckets(settings, as_json)
    if inventory is not None and (all_versions or with_attributes):
        raise UsageError("--inventory lists the latest versions it holds: no --all-versions or --attributes")
    recursive = recursive or inventory is not None  # an inventory lists every key under the prefix
    table = _table(output, recursive or all_versions, as_json or with_attributes, all_versions)
    if all_versions:
        return _list_versions(url, as_json, settings, table)
    if with_attributes:  # what `head` shows, for every object under the prefix
        from s3bulk._cli.head import show_attributes

        return show_attributes(url if url.endswith("/") else url + "/", as_json, 32, False, settings)
    report = Report("ls", source=url)
    out = sys.stdout
    prefix = url.split("://", 1)[-1].partition("/")[2]

    async def run() -> None:
        async for prefixes, objects in ls_pages(
            url,
            recursive=recursive,
            concurrency=concurrency,
            partitioned=parse_switch(list_ranges, "--list-ranges"),
            settings=settings,
            report=report,
            inventory=inventory,
            restore_states=as_json and table is None,
        ):
            if stdout_gone():  # `s3bulk ls ... | head`: the rest of the listing has no reader
                return
            if selected:
                objects = [o for o in objects if selected.in_window(o.size, epoch_seconds(o.modified))]
            shown[0] += len(objects)
            shown[1] += sum(info.size for info in objects)
            if table is not None:
                table.write(listing_batch(objects))
            elif as_json:
                for entry in prefixes:
                    json_line({"prefix": entry}, out)
                for info in objects:
                    json_line(info.to_json(), out)
            elif prefixes or objects:
                out.write(_text_lines(prefixes, objects, "" if recursive else prefix, human))

    _written(table, run())
    if summarize:
        if as_json:
            json_line({"summary": {"objects": shown[0], "bytes": shown[1]}}, out)
        else:
            size = human_bytes(shown[1]) if human else shown[1]
            out.write(f"\nTotal Objects: {shown[0]}\n   Total Size: {size}\n")
    return 0


def _table(output: str | None, recursive: bool, other: bool, versions: bool) -> TableWriter | None:
    """The table `--output` names, opened (as FILE.partial until the listing is whole)."""
    if output is None:
        return None
    if not recursive:
        raise UsageError(f"--output {output}: a table holds every object under the prefix: add -r")
    if other:
        raise UsageError("--output writes the table, --json and --attributes print lines: pick one")
    return TableWriter(output, listing_schema(versions=versions))


def _written(table: TableWriter | None, listing: Coroutine[Any, Any, None]) -> None:
    """Run the listing; the table is put in its place only if it ran to its end."""
    try:
        run_loop(listing)
    except BaseException:
        if table is not None:
            table.close(completed=False)
        raise
    if table is not None:
        table.close()


def _list_versions(url: str, as_json: bool, settings: AwsSettings, table: TableWriter | None = None) -> int:
    """ListObjectVersions: each version (its id, and which is the latest) and delete marker."""
    from s3bulk._objects import list_versions

    out = sys.stdout
    waiting: list[VersionInfo] = []

    async def run() -> None:
        async for version in list_versions(settings, url):
            if table is not None:
                waiting.append(version)
                if len(waiting) >= 1000:
                    table.write(versions_batch(waiting))
                    waiting.clear()
                continue
            if stdout_gone():
                return
            if as_json:
                json_line(version.to_json(), out)
                continue
            size = "DELETED" if version.delete_marker else f"{version.size:>10}"
            latest = "  (latest)" if version.is_latest else ""
            when = _local_time(version.modified)
            out.write(f"{when} {size:>10} {printable(version.key)}  {version.version_id}{latest}\n")
        if table is not None and waiting:
            table.write(versions_batch(waiting))

    _written(table, run())
    return 0


def _list_buckets(settings: AwsSettings, as_json: bool) -> int:
    """`s3bulk ls` alone: the buckets, as `aws s3 ls` prints them."""
    from s3bulk._objects import list_buckets

    for bucket in run_loop(list_buckets(settings)):
        if as_json:
            json_line(bucket._asdict())
        else:
            sys.stdout.write(f"{_local_time(bucket.created)} {printable(bucket.name)}\n")
    return 0


COMMANDS = {"ls": ls_command}  # found by s3bulk._cli: the commands this module adds
