"""`s3bulk doctor s3://bucket/prefix/`: probe a location, say what limits it, recommend flags."""

from __future__ import annotations

import typer

from s3bulk._cli.options import (
    EndpointOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    settings_from,
)
from s3bulk._cli.progress import json_line


def doctor_command(
    url: str = typer.Argument(..., help="s3://bucket/prefix/ to probe (an empty one gets probe objects)."),
    max_concurrency: int = typer.Option(256, "--max-concurrency", help="Highest in-flight level to try."),
    as_json: bool = typer.Option(False, "--json", help="The measurements as one JSON line."),
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
) -> int:
    """Measure round trip, CPU per request and the concurrency where throughput stops growing;
    recommend --engine and --concurrency for bulk jobs on this location."""
    from s3bulk._doctor import doctor, render

    settings = settings_from(endpoint_url, profile, region, no_verify_ssl, no_sign_request)
    result = doctor(url, settings, max_concurrency)
    if as_json:
        json_line(result.to_dict())
    else:
        print(render(result))
    return 0


COMMANDS = {"doctor": doctor_command}  # found by s3bulk._cli: the commands this module adds
