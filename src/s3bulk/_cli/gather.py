"""`s3bulk gather`: a selection out of many HDF5 files on S3 (or local) into .npy, .csv or .parquet."""

from __future__ import annotations

import asyncio
import sys

import typer

from s3bulk._api.gather import gather_to_file_async
from s3bulk._cli.jobrun import QuietOption, StatsOption
from s3bulk._cli.options import (
    ConcurrencyOption,
    EndpointOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    WorkersOption,
    settings_from,
)
from s3bulk._cli.progress import LiveProgress, json_line, print_summary
from s3bulk._config import parse_size


def gather_command(
    sources: list[str] = typer.Argument(
        ..., help="HDF5 files: s3:// URLs, globs like 's3://bucket/wtk/*.h5' (quote them), prefixes/, paths."
    ),
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset, e.g. windspeed_100m."),
    select: str = typer.Option(
        ":", "--select", "-s", help="numpy-style selection per file, e.g. ':,1234' or '0:24,100:200'."
    ),
    output: str = typer.Option(..., "--output", "-o", help="Result file: .npy, .csv or .parquet."),
    combine: str = typer.Option(
        "concat", "--combine", help="concat: join files along --axis; stack: one new first axis per file."
    ),
    axis: int = typer.Option(0, "--axis", help="With concat: the axis of each file's part to join along."),
    scale: bool = typer.Option(False, "--scale", help="Divide by the dataset's scale_factor (WIND Toolkit)."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Keep chunk indexes by URL + ETag."),
    cache_dir: str | None = typer.Option(
        None, "--cache-dir", help="Where indexes are kept (default: ~/.cache/s3bulk/h5index)."
    ),
    engine: str = typer.Option("async", "--engine", help="Engine for the fetch wave (default: async)."),
    workers: int | None = WorkersOption,
    concurrency: int = ConcurrencyOption,
    max_in_flight: str = typer.Option(
        "256MiB", "--max-in-flight", help="Range and decoded chunk bytes held at once, per worker."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON line."),
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
) -> int:
    """Read one selection out of many chunked HDF5 files with concurrent range reads.

    Each file's chunk index is read once (then cached), the chunks the selection needs are
    fetched in one wave, decoded off the GIL, and the parts joined in URL order."""
    settings = settings_from(endpoint_url, profile, region, no_verify_ssl, no_sign_request)
    with LiveProgress(enabled=not (as_json or quiet)) as progress:
        report = asyncio.run(
            gather_to_file_async(
                sources,
                dataset,
                select,
                output,
                combine=combine,
                axis=axis,
                scale=scale,
                cache=cache,
                cache_dir=cache_dir,
                engine=engine,
                workers=workers,
                concurrency=concurrency,
                max_in_flight_bytes=parse_size(max_in_flight, "--max-in-flight"),
                settings=settings,
                on_progress=progress.update,
            )
        )
    if as_json:
        json_line({"summary": report.to_dict()}, sys.stdout)
    else:
        print_summary(report, "gather", stats=stats, quiet=quiet)
    return 0


COMMANDS = {"gather": gather_command}  # found by s3bulk._cli: the commands this module adds
