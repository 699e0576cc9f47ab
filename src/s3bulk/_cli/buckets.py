"""`s3bulk mb [--versioning] s3://b` and `s3bulk rb s3://b [--force]`: make and remove buckets
(`s3bulk ls` with no URL lists them; `s3bulk versioning` turns versioning on and off)."""

from __future__ import annotations

import typer

from s3bulk._cli.options import (
    EndpointOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    settings_from,
)
from s3bulk._cli.output import guarded, say
from s3bulk._engine.loop import run_loop


@guarded
def mb_command(
    url: str = typer.Argument(..., help="s3://bucket"),
    versioning: bool = typer.Option(
        False, "--versioning", help="Keep every version of every object written or deleted in it."
    ),
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
) -> int:
    """Make a bucket (in --region, default your profile's); --versioning keeps old versions."""
    from s3bulk._api.objects import make_bucket_async

    settings = settings_from(endpoint_url, profile, region, no_verify_ssl, False)
    bucket = run_loop(make_bucket_async(url, region=region, versioning=versioning, settings=settings))
    say(f"make_bucket: {bucket}" + (" (versioning Enabled)" if versioning else ""))
    return 0


@guarded
def rb_command(
    url: str = typer.Argument(..., help="s3://bucket"),
    force: bool = typer.Option(False, "--force", help="Delete every object in it first."),
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
) -> int:
    """Remove a bucket; --force empties it first (1,000 keys per request, many in flight)."""
    from s3bulk._api.objects import remove_bucket_async

    settings = settings_from(endpoint_url, profile, region, no_verify_ssl, False)
    bucket = run_loop(remove_bucket_async(url, force=force, settings=settings))
    say(f"remove_bucket: {bucket}")
    return 0


COMMANDS = {"mb": mb_command, "rb": rb_command}  # found by s3bulk._cli: the commands this module adds
