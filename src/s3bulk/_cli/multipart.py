"""`s3bulk multipart ls|abort s3://bucket/[prefix]`: multipart uploads that were started and never
completed or aborted. Their parts are stored, and billed, until one of those happens; a lifecycle
rule (AbortIncompleteMultipartUpload) is the lasting fix, these commands the one-off one."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import Any

import typer

from s3bulk._cli.jobrun import JsonOption
from s3bulk._cli.options import (
    EndpointOption,
    NoVerifyOption,
    ProfileOption,
    RegionOption,
    settings_from,
)
from s3bulk._cli.output import guarded, say
from s3bulk._cli.progress import json_line
from s3bulk._cli.window import duration
from s3bulk._config import AwsSettings
from s3bulk._engine.loop import run_loop
from s3bulk._errors import UsageError
from s3bulk._text import printable

app = typer.Typer(help="Multipart uploads left unfinished: list them, abort them.", no_args_is_help=True)

UrlArgument = typer.Argument(..., help="s3://bucket or s3://bucket/prefix")
OlderThanOption = typer.Option(
    None,
    "--older-than",
    help="Only uploads started at least this long ago (7d, 12h) or before a time (ISO 8601).",
)


def cut_off(text: str | None, now: float | None = None) -> float | None:
    """Seconds since the epoch from an age ('7d': that long before now) or a time."""
    if text is None:
        return None
    try:
        return (time.time() if now is None else now) - duration(text, "--older-than")
    except UsageError:
        pass
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(
            f"--older-than {text!r}: give an age (7d, 12h, 30m) or a time (2026-01-31)"
        ) from None


def _settings(
    endpoint_url: str | None, profile: str | None, region: str | None, no_verify_ssl: bool
) -> AwsSettings:
    return settings_from(endpoint_url, profile, region, no_verify_ssl, False)


@app.command("ls")
@guarded
def ls_uploads(
    url: str = UrlArgument,
    older_than: str | None = OlderThanOption,
    as_json: bool = JsonOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
) -> int:
    """List unfinished multipart uploads: when each started, its key and upload id."""
    from s3bulk._objects import list_uploads, uploads_location

    before = cut_off(older_than)
    settings = _settings(endpoint_url, profile, region, no_verify_ssl)
    bucket = uploads_location(url).bucket
    out = sys.stdout

    async def show() -> int:
        found = 0
        async for upload in list_uploads(settings, url, older_than=before):
            found += 1
            if as_json:
                json_line({"url": f"s3://{bucket}/{upload.key}", **upload.to_json()}, out)
            else:
                out.write(f"{upload.initiated}  s3://{bucket}/{printable(upload.key)}  {upload.upload_id}\n")
        return found

    found = run_loop(show())
    if not as_json:
        say(f"{found:,} unfinished upload{'' if found == 1 else 's'}", err=True)
    return 0


@app.command("abort")
@guarded
def abort_uploads_command(
    url: str = UrlArgument,
    older_than: str | None = OlderThanOption,
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be aborted; abort nothing."),
    as_json: bool = JsonOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
) -> int:
    """Abort unfinished multipart uploads (their parts are deleted); exit 1 if any could not be."""
    from s3bulk._objects import abort_uploads, uploads_location

    before = cut_off(older_than)
    settings = _settings(endpoint_url, profile, region, no_verify_ssl)
    bucket = uploads_location(url).bucket
    out = sys.stdout
    verb = "(dryrun) abort" if dry_run else "abort"

    def told(upload: Any, error: str) -> None:
        where = f"s3://{bucket}/{upload.key}"
        if as_json:
            json_line(
                {
                    "status": "failed" if error else "ok",
                    "dry_run": dry_run,
                    "url": where,
                    "upload_id": upload.upload_id,
                    **({"error": error} if error else {}),
                },
                out,
            )
        elif error:
            say(f"failed: {printable(where)} {upload.upload_id}: {printable(error)}", err=True)
        else:
            out.write(f"{verb}: {printable(where)} {upload.upload_id}\n")

    aborted, failed = run_loop(
        abort_uploads(settings, url, older_than=before, dry_run=dry_run, on_abort=told)
    )
    if not as_json:
        what = "would abort" if dry_run else "aborted"
        say(
            f"{what} {aborted:,} upload{'' if aborted == 1 else 's'}"
            + (f", {failed:,} failed" if failed else ""),
            err=True,
        )
    return 1 if failed else 0


GROUPS = {"multipart": app}  # found by s3bulk._cli: the command groups this module adds
