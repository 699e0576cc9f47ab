"""Options shared by commands, and parsing of human sizes like 8MiB."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

import typer

from s3bulk._config import (
    DEFAULT_CHECKS,
    NO_KEYS,
    AwsSettings,
    CustomerKeys,
    UploadChecks,
    parse_size,
)
from s3bulk._errors import UsageError
from s3bulk._flags import (
    DESTINATION_INVENTORY,
    EXCLUDE,
    FILES_FROM,
    INCLUDE,
    INVENTORY,
    LIST_RANGES,
    PART_SIZE,
    Flag,
)
from s3bulk._stores.routes import Parts


def parse_optional_size(text: str | None, option: str) -> int | None:
    return None if text is None else parse_size(text, option)


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


def manifest_path(value: str | None) -> str | None:
    """--files-from's file (`manifest`: stdin is kept beside the journals)."""
    from s3bulk._commands.base import manifest

    return None if value is None else manifest(value, "--files-from")


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
RecursiveOption = typer.Option(
    False, "--recursive", "-r", help="SRC is a prefix or a directory's contents (as if it ended in '/')."
)


def as_prefix(place: str | None) -> str | None:
    """`-r`, typed by habit from `aws s3`: the place as a prefix (a trailing '/' added)."""
    if place is None or place == "-" or place.endswith("/") or "*" in place:
        return place
    return place + "/"


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


def spec_options(
    spec: type[Any], *, leaving_out: tuple[str, ...] = ()
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A decorator that adds an option for each field of `spec` that names one (`Flag`, in the
    field's metadata: flags, help, how its text reads), and calls the command with their values,
    read, as `given` ({field name: value}), to pass on to the API as they are: an option of cp,
    mv or sync is declared once, on its spec's field."""
    flagged = [
        field
        for field in dataclasses.fields(spec)
        if "option" in field.metadata and field.name not in leaving_out
    ]
    options = {field.name: _typer_option(field) for field in flagged}
    readers = {field.name: field.metadata["option"] for field in flagged}

    def build(given: dict[str, Any]) -> dict[str, Any]:
        return {"given": {name: _value(readers[name], given[name]) for name in given}}

    return option_group(options, ("given",), build)


def _typer_option(field: dataclasses.Field[Any]) -> tuple[Any, Any]:
    """The (type, typer.Option or typer.Argument) of a spec field's option. A field without a
    default (a bucket, the sources) is None when not given: the command says what is missing."""
    flag: Flag = field.metadata["option"]
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        default = () if str(field.type).startswith("tuple") else None
    if flag.positional:
        made = typer.Argument(None, help=flag.help, show_default=False)
        return (list[str] | None) if str(field.type).startswith("tuple") else (str | None), made
    return flag_option(flag, default)


def flag_option(flag: Flag, default: Any) -> tuple[Any, Any]:
    """The (type, typer.Option) of a `Flag` whose field's default is `default`: a switch, a
    repeatable glob, or text that its `read` turns into the field's value."""
    if flag.read is not None:
        shown = default if flag.shown is None else flag.shown(default)
        made = typer.Option(shown, *flag.flags, help=flag.help)
        kind: Any = str | None
    elif isinstance(default, tuple):
        made, kind = typer.Option([], *flag.flags, help=flag.help), list[str]
    else:
        made, kind = typer.Option(flag.opposite != default, *flag.flags, help=flag.help), bool
    in_panel(PANELS[flag.panel], made)
    return kind, made


def _value(flag: Flag, given: Any) -> Any:
    """What the command line gave, as the field's value (None: not given, where it may not be)."""
    if given is None:
        return None
    if flag.read is not None:
        return flag.read(given, flag.flags[0])
    if isinstance(given, list):
        return tuple(given)
    if flag.positional:
        return given
    return given != flag.opposite


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
)
in_panel(JOB, JournalUrlOption, MaxDeleteOption)
PANELS = {"selection": SELECTION, "speed": SPEED, "job": JOB, "account": ACCOUNT}


# options that commands without a transfer spec read themselves (rm, ls, map, check, run):
# the declarations TransferSpec's fields carry
IncludeOption = flag_option(INCLUDE["option"], ())[1]
ExcludeOption = flag_option(EXCLUDE["option"], ())[1]
FilesFromOption = flag_option(FILES_FROM["option"], None)[1]
InventoryOption = flag_option(INVENTORY["option"], None)[1]
DestinationInventoryOption = flag_option(DESTINATION_INVENTORY["option"], None)[1]
ListRangesOption = flag_option(LIST_RANGES["option"], None)[1]
PartSizeOption = flag_option(PART_SIZE["option"], Parts.size)[1]
