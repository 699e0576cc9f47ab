"""`s3bulk cat s3://b/k`: one object to stdout, fetched as concurrent ranges and written in
order, so memory is part size x parts in flight whatever the object's size."""

from __future__ import annotations

import asyncio
import sys

import typer

from s3bulk._cli.keys import with_key_options
from s3bulk._cli.options import (
    EndpointOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    RequestPayerOption,
    VersionIdOption,
    settings_from,
)
from s3bulk._cli.output import guarded, refused, stdout_gone
from s3bulk._config import NO_KEYS, AwsSettings, CustomerKeys, parse_size
from s3bulk._engine.loop import run_loop


@guarded
@with_key_options
def cat_command(
    url: str = typer.Argument(..., help="s3://bucket/key"),
    part_size: str = typer.Option("8MiB", "--part-size", help="Bytes per ranged GET."),
    in_flight: int = typer.Option(
        8, "--concurrency", help="Ranged GETs in flight (memory: this x --part-size)."
    ),
    version_id: str | None = VersionIdOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
    keys: CustomerKeys = NO_KEYS,
) -> int:
    """Write an object to stdout (pipe it: s3bulk cat s3://b/k | sha256sum)."""
    settings = settings_from(
        endpoint_url, profile, region, no_verify_ssl, no_sign_request, keys=keys, request_payer=request_payer
    )
    return cat_to_stdout(url, parse_size(part_size, "--part-size"), max(1, in_flight), settings, version_id)


def cat_to_stdout(
    url: str, part_size: int, in_flight: int, settings: AwsSettings, version_id: str | None = None
) -> int:
    from s3bulk._objects import cat

    out = sys.stdout.buffer

    def put(data: memoryview | None) -> None:
        """`data` written (None: flushed)."""
        try:
            if data is None:
                out.flush()
            else:
                out.write(data)
        except OSError as exc:  # its reader gone (`| head -c 100`: it has what it wanted), a full disk
            refused(exc)  # ... as for every command (`_cli.output.written`)
            raise

    async def write(data: memoryview) -> None:
        await asyncio.to_thread(put, data)

    try:
        run_loop(
            cat(settings, url, write, part_size=part_size, in_flight=in_flight, version_id=version_id or "")
        )
        put(None)
    except OSError:
        if not stdout_gone():
            raise
    return 0


COMMANDS = {"cat": cat_command}  # found by s3bulk._cli: the commands this module adds
