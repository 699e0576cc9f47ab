"""Where a copy's source is, when it is not where its destination is: `--source-profile`,
`--source-endpoint-url`, `--source-region`, `--source-no-sign-request` on cp, mv and sync, written
once. A command gets one `source_side` in their place, which `settings_from` reads."""

from __future__ import annotations

from dataclasses import dataclass

import typer

from s3bulk._cli.options import ACCOUNT, in_panel, option_group


@dataclass(frozen=True)
class SourceSide:
    profile: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    anonymous: bool = False

    @property
    def given(self) -> bool:
        return bool(self.profile or self.endpoint_url or self.region or self.anonymous)


SAME_SIDE = SourceSide()

_OPTIONS = {
    "source_profile": (
        str | None,
        typer.Option(None, "--source-profile", help="The source's AWS profile (another account)."),
    ),
    "source_endpoint_url": (
        str | None,
        typer.Option(None, "--source-endpoint-url", help="The source's S3 endpoint (another server)."),
    ),
    "source_region": (str | None, typer.Option(None, "--source-region", help="The source's region.")),
    "source_no_sign_request": (
        bool,
        typer.Option(False, "--source-no-sign-request", help="Read the source anonymously (public data)."),
    ),
}

in_panel(ACCOUNT, *(option for _, option in _OPTIONS.values()))

# cp, mv and sync with these options; called with `source_side`
with_source_options = option_group(
    _OPTIONS,
    ("source_side",),
    lambda given: {
        "source_side": SourceSide(
            given["source_profile"],
            given["source_endpoint_url"],
            given["source_region"],
            given["source_no_sign_request"],
        )
    },
)
