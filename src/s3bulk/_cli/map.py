"""`s3bulk map package.module:function s3://bucket/prefix/ [--to s3://…/] [--output x.jsonl]`:
the user's function over every object; without --to or --output its results are printed as JSON
lines ({"key", "result"}) as they come."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from s3bulk._cli.jobrun import (
    JsonOption,
    MaxMemoryOption,
    QuietOption,
    ResumeOption,
    RetryFailedOption,
    StatsOption,
    continuation,
    run_job,
)
from s3bulk._cli.options import (
    ConcurrencyOption,
    EndpointOption,
    EngineOption,
    ExcludeOption,
    IncludeOption,
    InventoryOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RayAddressOption,
    RegionOption,
    RequestPayerOption,
    WorkersOption,
    parse_optional_size,
    settings_from,
)
from s3bulk._cli.progress import json_line
from s3bulk._engine.spec import EngineSpec
from s3bulk._engine.strategies import DEFAULT_ENGINE


def map_command(
    function: str | None = typer.Argument(
        None,
        help="package.module:function, called as function(obj, body) (the current directory is importable).",
        show_default=False,
    ),
    source: str | None = typer.Argument(None, help="s3://bucket/prefix/", show_default=False),
    to: str | None = typer.Option(
        None, "--to", help="Upload what the function returns (bytes; None skips) here."
    ),
    output: str | None = typer.Option(
        None,
        "--output",
        help="Write the results as rows: x.jsonl (JSON lines) or x.parquet (a dict's fields as columns).",
    ),
    on_error: str = typer.Option(
        "collect", "--on-error", help="collect: an exception fails its object; abort: the job."
    ),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
    inventory: str | None = InventoryOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    engine: str | None = EngineOption,
    ray_address: str | None = RayAddressOption,
    workers: int | None = WorkersOption,
    concurrency: int = ConcurrencyOption,
    max_memory: str | None = MaxMemoryOption,
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
) -> int:
    """Run your own Python function over every object under a prefix, one process per core."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `mymodule:fn` from where the user stands, as python -m does
    memory = parse_optional_size(max_memory, "--max-memory")
    start = continuation(
        "map",
        resume,
        retry_failed,
        [function, source],
        {"engine": engine, "workers": workers, "max_memory": memory, "ray_address": ray_address},
    )
    if start is None:
        from s3bulk._api.base import run_async
        from s3bulk._commands.map import MapSpec, imported

        assert function is not None and source is not None
        imported(function)  # a name that cannot be imported is one line now
        settings = settings_from(
            endpoint_url, profile, region, no_verify_ssl, no_sign_request, request_payer=request_payer
        )
        chosen = EngineSpec(
            engine=engine or DEFAULT_ENGINE,
            workers=workers,
            concurrency=concurrency,
            max_memory=memory,
            ray_address=ray_address,
        )
        spec = MapSpec(
            source=source,
            function=function,
            to=to,
            output=output,
            include=tuple(include),
            exclude=tuple(exclude),
            inventory=inventory,
            on_error=on_error,
            engine=chosen,
        )

        def start(on_progress: Any, on_records: Any) -> Any:
            return run_async(
                spec, settings=settings, on_progress=on_progress, on_records=_printed(to, on_records)
            )

    return run_job(
        start,
        verb="map",
        as_json=as_json,
        dry_run=False,
        # a plain map's output is its results; a resumed job's (whatever it was) says what it did
        quiet=quiet if to or output or resume or retry_failed else True,
        stats=stats,
    )


def _printed(to: str | None, shown: Any) -> Any:
    """Without --to or --output, the results themselves are the output: JSON lines on stdout
    (with --output the command writes them; with --to the usual lines say what was uploaded)."""
    if to:
        return shown

    def write(records: list[dict[str, Any]]) -> None:
        for record in records:
            json_line({"key": record["key"], "result": record["result"]}, sys.stdout)

    return write


COMMANDS = {"map": map_command}  # found by s3bulk._cli: the commands this module adds
