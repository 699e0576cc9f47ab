"""`s3bulk presign s3://b/k`: a URL anyone can GET (or, with --put, PUT) the object with, for
--expires-in seconds; signed here with your credentials, nothing sent."""

from __future__ import annotations

import sys

import typer

from s3bulk._cli.options import EndpointOption, ProfileOption, RegionOption, settings_from


def presign_command(
    url: str = typer.Argument(..., help="s3://bucket/key"),
    expires_in: int = typer.Option(3600, "--expires-in", help="Seconds the URL works (at most 7 days)."),
    put: bool = typer.Option(False, "--put", help="A URL to upload with (HTTP PUT), not to download."),
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
) -> int:
    """Print a presigned URL for one object."""
    from s3bulk._objects import presign

    settings = settings_from(endpoint_url, profile, region, False, False)
    sys.stdout.write(presign(settings, url, expires_in=expires_in, method="PUT" if put else "GET") + "\n")
    return 0


COMMANDS = {"presign": presign_command}  # found by s3bulk._cli: the commands this module adds
