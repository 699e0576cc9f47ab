"""The object-attribute options every writing command takes (cp, mv, sync), written once:
`with_attribute_options` adds them to a command's signature and hands the command one checked
`Attributes` value instead of thirteen loose options."""

from __future__ import annotations

from typing import Any

import typer

from s3bulk._cli.options import ATTRIBUTES, ENCRYPTION, in_panel, option_group
from s3bulk._stores.attributes import CANNED_ACLS, ENCRYPTIONS, STORAGE_CLASSES, Attributes

_OPTIONS: dict[str, tuple[Any, Any]] = {
    "content_type": (
        str | None,
        typer.Option(None, "--content-type", help="Content-Type of every upload (default: from its name)."),
    ),
    "content_encoding": (str | None, typer.Option(None, "--content-encoding", help="e.g. gzip.")),
    "content_disposition": (
        str | None,
        typer.Option(None, "--content-disposition", help="e.g. 'attachment; filename=x.csv'."),
    ),
    "content_language": (str | None, typer.Option(None, "--content-language", help="e.g. en-US.")),
    "cache_control": (str | None, typer.Option(None, "--cache-control", help="e.g. 'max-age=3600'.")),
    "expires": (
        str | None,
        typer.Option(None, "--expires", help="When caches drop it (ISO 8601 or HTTP date)."),
    ),
    "metadata": (
        list[str],
        typer.Option([], "--metadata", help="User metadata KEY=VALUE; repeat it for more."),
    ),
    "metadata_directive": (
        str | None,
        typer.Option(
            None,
            "--metadata-directive",
            help="Copies: COPY keeps the source's Content-* and metadata, REPLACE sets the given ones "
            "(default: REPLACE when any is given, else COPY).",
        ),
    ),
    "storage_class": (
        str | None,
        typer.Option(None, "--storage-class", help=f"One of {', '.join(STORAGE_CLASSES[:6])}, ..."),
    ),
    "sse": (
        str | None,
        typer.Option(None, "--sse", help=f"Server-side encryption: {' or '.join(ENCRYPTIONS[:2])}."),
    ),
    "sse_kms_key_id": (str | None, typer.Option(None, "--sse-kms-key-id", help="--sse aws:kms: the key.")),
    "acl": (str | None, typer.Option(None, "--acl", help=f"A canned ACL: {', '.join(CANNED_ACLS[:3])}, ...")),
    "tags": (list[str], typer.Option([], "--tags", help="Object tags KEY=VALUE; repeat it for more.")),
}


in_panel(
    ATTRIBUTES, *(option for name, (_, option) in _OPTIONS.items() if name not in ("sse", "sse_kms_key_id"))
)
in_panel(ENCRYPTION, _OPTIONS["sse"][1], _OPTIONS["sse_kms_key_id"][1])


def _attributes(given: dict[str, Any]) -> dict[str, Any]:
    given["metadata"], given["tags"] = tuple(given["metadata"]), tuple(given["tags"])
    return {"attributes": Attributes(**given)}


# `command` with the attribute options added; it is called with `attributes=Attributes(...)`
# (checked first: a bad value is one line and exit 2, before anything starts)
with_attribute_options = option_group(_OPTIONS, ("attributes",), _attributes)
# an upload's (pipe): a metadata directive only means something to a copy
with_upload_attribute_options = option_group(
    {name: option for name, option in _OPTIONS.items() if name != "metadata_directive"},
    ("attributes",),
    _attributes,
)
