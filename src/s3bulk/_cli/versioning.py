"""`s3bulk versioning enable|suspend|status s3://bucket`: whether a bucket keeps the old versions
of its objects. `s3bulk ls --all-versions` lists them, `s3bulk cp --version-id V s3://b/k s3://b/k`
makes one the current version again, `s3bulk rm --all-versions` deletes them."""

from __future__ import annotations

from collections.abc import Callable

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

app = typer.Typer(help="A bucket's versioning: turn it on, suspend it, or ask.", no_args_is_help=True)

BucketArgument = typer.Argument(..., help="s3://bucket")


def _subcommand(change: str | None) -> Callable[..., int]:
    """`s3bulk versioning CHANGE s3://bucket` (status: `change` None): says the status after."""

    def versioning(
        url: str = BucketArgument,
        endpoint_url: str | None = EndpointOption,
        profile: str | None = ProfileOption,
        region: str | None = RegionOption,
        no_verify_ssl: bool = NoVerifyOption,
    ) -> int:
        from s3bulk._api.objects import versioning_async
        from s3bulk._objects import bucket_name

        settings = settings_from(endpoint_url, profile, region, no_verify_ssl, False)
        status = run_loop(versioning_async(url, change, settings=settings))
        say(f"s3://{bucket_name(url)}: versioning {status or 'never enabled'}")
        return 0

    return versioning


for name, change, doc in (
    ("enable", "enable", "Keep every version of every object written or deleted from now on."),
    (
        "suspend",
        "suspend",
        "Keep no new versions (the versions kept so far stay: rm --all-versions deletes them).",
    ),
    ("status", None, "Say whether the bucket keeps versions: Enabled, Suspended, or never enabled."),
):
    command = _subcommand(change)
    command.__doc__ = doc
    app.command(name)(guarded(command))


GROUPS = {"versioning": app}  # found by s3bulk._cli: the command group this module adds
