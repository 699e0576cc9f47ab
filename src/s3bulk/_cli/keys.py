"""The SSE-C options, written once: `--sse-c-key` (with aws-cli's `--sse-c AES256`, which it
implies) on every command that reads or writes object bytes, and `--sse-c-copy-source-key` on
those that copy. A command gets one `keys: CustomerKeys` in their place."""

from __future__ import annotations

from typing import Any

import typer

from s3bulk._cli.options import ENCRYPTION, in_panel, option_group
from s3bulk._config import CustomerKeys
from s3bulk._errors import UsageError

_KEY = typer.Option(
    None,
    "--sse-c-key",
    help="SSE-C: write and read objects with this key (32 characters, fileb://FILE or base64:KEY).",
)
_ALGORITHM = typer.Option(
    None, "--sse-c", help="SSE-C algorithm: AES256, the only one (implied by --sse-c-key)."
)
_SOURCE_KEY = typer.Option(
    None, "--sse-c-copy-source-key", help="SSE-C: a server-side copy's source objects use this key."
)
_ALGORITHM.hidden = True  # aws-cli's spelling, taken and implied: one option to read, --sse-c-key
in_panel(ENCRYPTION, _KEY, _SOURCE_KEY)


def _keys(
    sse_c: str | None, sse_c_key: str | None, sse_c_copy_source_key: str | None = None
) -> dict[str, Any]:
    if sse_c is not None and sse_c != "AES256":
        raise UsageError(f"--sse-c {sse_c!r}: SSE-C has one algorithm, AES256")
    if sse_c and not sse_c_key:
        raise UsageError("--sse-c needs its key: add --sse-c-key (32 characters, fileb://FILE or base64:KEY)")
    return {"keys": CustomerKeys.parse(sse_c_key, sse_c_copy_source_key)}


# a command that reads or writes object bytes, called with `keys`
with_key_options = option_group(
    {"sse_c": (str | None, _ALGORITHM), "sse_c_key": (str | None, _KEY)},
    ("keys",),
    lambda given: _keys(**given),
)
# ... and that copies between objects, whose source may have a key of its own
with_copy_key_options = option_group(
    {
        "sse_c": (str | None, _ALGORITHM),
        "sse_c_key": (str | None, _KEY),
        "sse_c_copy_source_key": (str | None, _SOURCE_KEY),
    },
    ("keys",),
    lambda given: _keys(**given),
)
