"""Options shared by commands, and parsing of human sizes like 8MiB."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

import typer

from s3bulk._config import DEFAULT_CHECKS, NO_KEYS, AwsSettings, CustomerKeys, UploadChecks, parse_size
from s3bulk._errors import UsageError


def parse_optional_size(text: str | None, option: str) -> int | None:
    return None if text is None else parse_size(text, option)


def parse_switch(text: str, option: str) -> bool | None:
    """auto -> None (decide from the situation), on -> True, off -> False."""
    value = text.strip().lower()
    if value in ("auto", "on", "off"):
        return {"auto": None, "on": True, "off": False}[value]
    raise UsageError(f"{option}: expected auto, on or off, not {text!r}")


EndpointOption = typer.Option(None, "--endpoint-url", help="S3 endpoint (default: AWS_ENDPOINT_URL or AWS).")
ProfileOption = typer.Option(None, "--profile", help="AWS profile (default: AWS_PROFILE).")
RegionOption = typer.Option(None, "--region", help="AWS region (default: AWS_REGION or the profile's).")
NoVerifyOption = typer.Option(False, "--no-verify-ssl", help="Do not verify TLS certificates (unsafe).")
NoSignOption = typer.Option(False, "--no-sign-request", help="Anonymous access to public buckets.")
RequestPayerOption = typer.Option(
    None, "--request-payer", help="requester: read a requester-pays bucket (your account pays)."
)


def settings_from(
    endpoint_url: str | None,
    profile: str | None,
    region: str | None,
    no_verify_ssl: bool,
    no_sign_request: bool,
    keys: CustomerKeys = NO_KEYS,
    source_side: Any = None,
    request_payer: str | None = None,
    checks: UploadChecks = DEFAULT_CHECKS,
) -> AwsSettings:
    if no_verify_ssl:
        import sys

        sys.stderr.write("warning: TLS certificate verification is off (--no-verify-ssl)\n")
    settings = AwsSettings.from_env(
        profile=profile,
        region=region,
        endpoint_url=endpoint_url,
        verify_ssl=not no_verify_ssl,
        anonymous=no_sign_request,
        sse_c=keys.key,
        sse_c_source=keys.source,
        source=_source_settings(source_side, not no_verify_ssl, keys, payer(request_payer)),
        request_payer=payer(request_payer),
        checksum_algorithm=checks.algorithm,
        unsigned_payload=checks.unsigned_payload,
    )
    settings.check_profile()
    return settings


BwLimitOption = typer.Option(
    None, "--bwlimit", help="Bytes per second the whole job moves, e.g. 50MiB (all workers together)."
)
TpsLimitOption = typer.Option(None, "--tpslimit", help="Requests per second the whole job sends.")
VersionIdOption = typer.Option(None, "--version-id", help="That version of the object (a versioned bucket).")
FilesFromOption = typer.Option(
    None, "--files-from", help="Only the names in this file (one per line, relative to SRC; - reads stdin)."
)


def manifest_path(value: str | None) -> str | None:
    """--files-from's file; stdin ("-") is first copied beside the journals, so a resume can
    read the same names again."""
    if value != "-":
        return value
    from s3bulk._journal.local import state_dir
    from s3bulk._sources.manifest import spool_stdin

    return spool_stdin(state_dir() / "manifests")


MaxDeleteOption = typer.Option(
    None, "--max-delete", help="Stop the job, exit non-zero, before deleting more than this many objects."
)


def payer(value: str | None) -> bool:
    if value is None:
        return False
    if value.lower() != "requester":
        raise UsageError(f"--request-payer {value!r}: the one value is 'requester'")
    return True


def _source_settings(
    side: Any, verify_ssl: bool, keys: CustomerKeys, request_payer: bool
) -> AwsSettings | None:
    """The source's own settings (`_cli/source.py`), or None when it is where the destination is."""
    if side is None or not side.given:
        return None
    return AwsSettings.from_env(
        profile=side.profile,
        region=side.region,
        endpoint_url=side.endpoint_url,
        verify_ssl=verify_ssl,
        anonymous=side.anonymous,
        sse_c=keys.source,  # a relayed copy reads its source with the copy-source key
        request_payer=request_payer,
    )


IncludeOption = typer.Option([], "--include", help="Only names matching this glob (repeatable).")
ExcludeOption = typer.Option([], "--exclude", help="Leave out names matching this glob (repeatable).")
EngineOption = typer.Option(
    None,
    "--engine",
    help="serial, threads, async, processes, hybrid (the default: a process per core, each one event "
    "loop with many requests in flight), auto "
    "(hybrid with an adaptive in-flight limit) or ray (hybrid workers across a Ray cluster).",
    show_default=False,
)
RayAddressOption = typer.Option(
    None,
    "--ray-address",
    help="--engine ray: the cluster to run on, e.g. ray://head:10001 (default: a local Ray instance).",
)
JournalUrlOption = typer.Option(
    None,
    "--journal-url",
    help="--engine ray: where the job's journal goes in the object store, as s3://bucket/prefix/ "
    "(default: s3://BUCKET/.s3bulk/jobs/ beside the data).",
)
WorkersOption = typer.Option(
    None, "--workers", help="Worker processes, or threads for --engine threads (default: per core)."
)
ConcurrencyOption = typer.Option(
    64, "--concurrency", help="Requests in flight per worker (async, hybrid; auto: a quarter of its ceiling)."
)
MaxInFlightOption = typer.Option(
    "16MiB", "--max-in-flight", help="Object bytes held in memory at once, per worker."
)
NoGuessMimeTypeOption = typer.Option(
    False,
    "--no-guess-mime-type",
    help="Do not set uploads' Content-Type from the file name (default: guessed, like aws s3).",
)
PartSizeOption = typer.Option("8MiB", "--part-size", help="Multipart part size.")
RecursiveOption = typer.Option(
    False, "--recursive", "-r", help="SRC is a prefix or a directory's contents (as if it ended in '/')."
)


def as_prefix(place: str | None) -> str | None:
    """`-r`, typed by habit from `aws s3`: the place as a prefix (a trailing '/' added)."""
    if place is None or place == "-" or place.endswith("/") or "*" in place:
        return place
    return place + "/"


MultipartThresholdOption = typer.Option("64MiB", "--multipart-threshold", help="Use parts above this.")
ListRangesOption = typer.Option(
    "auto",
    "--list-ranges",
    help="List key ranges in parallel: auto (where a StartAfter probe costs less than a page), on, off.",
)


def option_group(
    options: dict[str, tuple[Any, Any]],
    replaces: tuple[str, ...],
    build: Callable[[dict[str, Any]], dict[str, Any]],
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A decorator that adds a group of options ({name: (type, typer.Option)}) to a command's
    signature and calls the command with `build(their values)` in place of its `replaces`
    parameters: an option group is declared once, not on every command that takes it."""

    def decorate(command: Callable[..., int]) -> Callable[..., int]:
        signature = inspect.signature(command)
        kept = [parameter for name, parameter in signature.parameters.items() if name not in replaces]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
            for name, (kind, option) in options.items()
        ]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> int:
            given = {name: kwargs.pop(name) for name in options}
            return command(*args, **build(given), **kwargs)

        hints = {
            name: kind
            for name, kind in inspect.get_annotations(command, eval_str=True).items()
            if name not in replaces
        }
        wrapper.__annotations__ = hints | {name: kind for name, (kind, _) in options.items()}
        wrapper.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
        return wrapper

    return decorate


def spec_switches(spec: type[Any], *names: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A decorator that adds the switches of these boolean spec fields, as the spec declares
    them (`transfer.switch`: flags, help; the field's default), to a command, and calls it with
    their values as `switches` ({field name: value}), to pass on to the API as they are: a
    switch is written once, on its spec field."""
    fields = {field.name: field for field in dataclasses.fields(spec)}
    options: dict[str, tuple[Any, Any]] = {}
    for name in names:
        flags, text = fields[name].metadata["switch"]
        options[name] = (bool, typer.Option(fields[name].default, *flags, help=text))
    in_panel(SELECTION, *(option for _, option in options.values()))
    return option_group(options, ("switches",), lambda given: {"switches": given})


def in_panel(panel: str, *options: Any) -> None:
    """Put options in a panel of their command's help: a person scans panels (what to copy, the
    endpoint, speed and memory, the job), not one list of sixty."""
    for option in options:
        option.rich_help_panel = panel


ACCOUNT, SELECTION, SPEED, JOB, ATTRIBUTES, ENCRYPTION = (
    "Endpoints and accounts",
    "What to copy",
    "Speed and memory",
    "The job",
    "Attributes",
    "Encryption",
)
in_panel(
    ACCOUNT, EndpointOption, ProfileOption, RegionOption, NoVerifyOption, NoSignOption, RequestPayerOption
)
in_panel(
    SELECTION,
    IncludeOption,
    ExcludeOption,
    FilesFromOption,
    RecursiveOption,
)
in_panel(
    SPEED,
    EngineOption,
    RayAddressOption,
    WorkersOption,
    ConcurrencyOption,
    MaxInFlightOption,
    BwLimitOption,
    TpsLimitOption,
    PartSizeOption,
    MultipartThresholdOption,
    ListRangesOption,
)
in_panel(JOB, JournalUrlOption, MaxDeleteOption)
