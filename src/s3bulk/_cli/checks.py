"""What uploads send for the service to check their bytes by, written once: `--checksum-algorithm`
(aws-cli's name) and `--unsigned-payload` on every command that uploads (cp, mv, sync, pipe). A
command gets one `checks: UploadChecks` in their place, which `settings_from` puts in its
settings."""

from __future__ import annotations

import typer

from s3bulk._cli.options import ATTRIBUTES, in_panel, option_group
from s3bulk._config import UploadChecks, parse_checksum_algorithm

_ALGORITHM = typer.Option(
    None,
    "--checksum-algorithm",
    help="The checksum uploads send, which the service checks and keeps: CRC64NVME (default), "
    "CRC32C, CRC32, SHA256, SHA1, MD5 (Content-MD5 alone) or none.",
)
_UNSIGNED = typer.Option(
    None,
    "--unsigned-payload/--signed-payload",
    help="Upload bodies unsigned, checked by their checksum alone, or with their SHA-256 signed too "
    "(default: unsigned over HTTPS, signed over HTTP).",
    show_default=False,
)
in_panel(ATTRIBUTES, _ALGORITHM, _UNSIGNED)

# a command that uploads, called with `checks`
with_upload_check_options = option_group(
    {"checksum_algorithm": (str | None, _ALGORITHM), "unsigned_payload": (bool | None, _UNSIGNED)},
    ("checks",),
    lambda given: {
        "checks": UploadChecks(
            parse_checksum_algorithm(given["checksum_algorithm"]), given["unsigned_payload"]
        )
    },
)
