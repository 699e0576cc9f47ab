"""`s3bulk pipe s3://b/k` (and `s3bulk cp - s3://b/k`): stdin to one object, in parts as it
arrives, no size needed in advance; memory is part size x parts in flight."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import typer

from s3bulk._cli.attributes import with_upload_attribute_options
from s3bulk._cli.checks import with_upload_check_options
from s3bulk._cli.keys import with_key_options
from s3bulk._cli.options import (
    EndpointOption,
    NoSignOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    settings_from,
)
from s3bulk._cli.output import guarded, say
from s3bulk._config import DEFAULT_CHECKS, NO_KEYS, CustomerKeys, UploadChecks, parse_size
from s3bulk._engine.loop import run_loop
from s3bulk._errors import UsageError, WrittenMeanwhile
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.conditional import NOTHING, asked_replaces


def upload_stdin(
    url: str,
    attributes: Attributes,
    part_size: int,
    in_flight: int,
    settings: Any,
    replaces: str | None = None,
) -> int:
    """Send stdin to `url` (over what `replaces` says, `put_stream`); a multipart upload that
    fails or is interrupted is aborted."""
    from s3bulk._objects import put_stream

    source = sys.stdin.buffer

    async def read(size: int) -> bytes:
        return await asyncio.to_thread(source.read, size)

    return run_loop(
        put_stream(
            settings,
            url,
            read,
            attributes=attributes,
            part_size=part_size,
            in_flight=in_flight,
            replaces=replaces,
        )
    )


@guarded
@with_upload_check_options
@with_upload_attribute_options
@with_key_options
def pipe_command(
    url: str = typer.Argument(..., help="s3://bucket/key"),
    part_size: str = typer.Option("8MiB", "--part-size", help="Multipart part size."),
    in_flight: int = typer.Option(4, "--concurrency", help="Parts in flight (memory: this x --part-size)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print errors only."),
    no_clobber: bool = typer.Option(
        False, "--no-clobber", "-n", help="Leave an existing object as it is (If-None-Match: *)."
    ),
    if_match: str | None = typer.Option(None, "--if-match", help="Write only over the object of this ETag."),
    if_none_match: str | None = typer.Option(
        None, "--if-none-match", help="'*': write only where no object is (else fail)."
    ),
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    keys: CustomerKeys = NO_KEYS,
    checks: UploadChecks = DEFAULT_CHECKS,
    attributes: Attributes = NO_ATTRIBUTES,
) -> int:
    """Upload stdin to an object (tar c dir | s3bulk pipe s3://b/dir.tar)."""
    settings = settings_from(
        endpoint_url, profile, region, no_verify_ssl, no_sign_request, keys, checks=checks
    )
    replaces = asked_replaces(if_match, if_none_match)
    if no_clobber and replaces is not None:
        raise UsageError("-n and --if-match / --if-none-match: give one of them")
    try:
        size = upload_stdin(
            url,
            attributes,
            parse_size(part_size, "--part-size"),
            max(1, in_flight),
            settings,
            NOTHING if no_clobber else replaces,
        )
    except WrittenMeanwhile:
        if not no_clobber:
            raise
        if not quiet:
            say(f"unchanged: {url} exists (-n)", err=True)
        return 0
    if not quiet:
        say(f"upload: - to {url} ({size:,} bytes)", err=True)
    return 0


COMMANDS = {"pipe": pipe_command}  # found by s3bulk._cli: the commands this module adds
