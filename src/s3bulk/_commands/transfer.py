"""What `cp`, `mv`, `sync` and `check` share, so that none of them imports another: the fields
of their specs (`TransferSpec`), the options a job runs with (`TransferOptions`, made from a
spec by `transfer_options`), and the checks of the two places made before any request. The item
a transfer moves, and where it lands, is `_plan/keys.py`'s; the worker side that moves it is
`mover.Mover`; what sync and check share besides, the two listings side by side, is `sides`.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self

from s3bulk._commands.base import JobPlan, Spec, absolute, as_epoch, location, manifest, patterns
from s3bulk._config import AwsSettings
from s3bulk._engine.job import BatchOutcome, WorkerContext
from s3bulk._errors import S3Error, UsageError
from s3bulk._flags import EXCLUDE, FILES_FROM, INCLUDE, LIST_RANGES, PART_SIZE, option, sized
from s3bulk._plan.filters import Filters, check_window
from s3bulk._sources.manifest import check_manifest
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.retry import RetryPolicy
from s3bulk._stores.routes import STREAMED_HELD, Parts
from s3bulk._stores.storage import Storage
from s3bulk._urls import LocalLocation, Location, S3Location, basename, parse_location

MiB = 1024**2
GiB = 1024**3
MIN_PART = 5 * MiB  # S3's smallest part (but the last)

Direction = Literal["upload", "download", "copy"]


@dataclass(frozen=True, kw_only=True)
class TransferSpec(Spec):
    """The options cp, mv, sync and check take alike; each command's spec adds its own. A field
    with an `option` is an option of each command whose spec has it (`_cli/options.spec_options`)."""

    source: str
    destination: str
    include: tuple[str, ...] = field(default=(), metadata=INCLUDE)
    exclude: tuple[str, ...] = field(default=(), metadata=EXCLUDE)
    part_size: int = field(default=Parts.size, metadata=PART_SIZE)
    multipart_threshold: int = field(  # uploads and ranged downloads above this go in parts
        default=Parts.threshold, metadata=sized("--multipart-threshold", help="Use parts above this.")
    )
    copy_multipart_threshold: int = field(
        default=5 * GiB,
        metadata=sized(
            "--copy-multipart-threshold", help="Server-side copies above this use UploadPartCopy."
        ),
    )
    partitioned_listing: bool | None = field(default=None, metadata=LIST_RANGES)  # None: decide
    follow_symlinks: bool = field(
        default=False,
        metadata=option(
            "--follow-symlinks", help="Upload what symbolic links point to (default: skip links)."
        ),
    )
    guess_mime_type: bool = field(
        default=True,
        metadata=option(
            "--no-guess-mime-type",
            help="Do not set uploads' Content-Type from the file name (default: guessed, like aws s3).",
            opposite=True,
        ),
    )
    attributes: Attributes = NO_ATTRIBUTES  # what uploads and copies set on their objects
    show_attributes: bool = field(  # downloads: each record carries the object's attributes (a HEAD)
        default=False,
        metadata=option(
            "--attributes",
            help="Downloads: each --json record has the object's attributes (a HEAD each).",
            panel="job",
        ),
    )
    files_from: str | None = field(default=None, metadata=FILES_FROM)  # names, relative to the source
    verify: bool = field(
        default=True,
        metadata=option(
            "--ignore-checksum", help="Do not check downloads against their ETag (MD5).", opposite=True
        ),
    )
    allow_control_chars: bool = field(
        default=False,
        metadata=option(
            "--allow-control-chars",
            help="Downloads: write keys that hold ESC or another control character under those names "
            "(refused by default: such a name rewrites the terminal that lists it).",
        ),
    )
    no_clobber: bool = field(
        default=False,
        metadata=option("--no-clobber", "-n", help="Leave what is already at the destination as it is."),
    )
    if_size_differ: bool = field(
        default=False,
        metadata=option(
            "--if-size-differ", "-s", help="Write over an existing destination only if its size differs."
        ),
    )
    if_newer: bool = field(
        default=False,
        metadata=option(
            "--if-newer", "-u", help="Write over an existing destination only if the source is newer."
        ),
    )
    restored_only: bool = field(
        default=False,
        metadata=option(
            "--restored-only",
            help="Objects in Glacier or Deep Archive: copy those restored (s3bulk restore), count the "
            "rest as skipped (default: each is a failure naming s3bulk restore).",
        ),
    )
    min_size: int | None = None  # the size and time window (bytes; seconds since the epoch)
    max_size: int | None = None
    newer_than: float | None = None
    older_than: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", location(self.source, "source"))
        object.__setattr__(self, "destination", location(self.destination, "destination"))
        object.__setattr__(self, "include", patterns(self.include, "include"))
        object.__setattr__(self, "exclude", patterns(self.exclude, "exclude"))
        parse_location(self.source), parse_location(self.destination)  # malformed: one line now
        object.__setattr__(self, "newer_than", as_epoch(self.newer_than))
        object.__setattr__(self, "older_than", as_epoch(self.older_than))
        check_window(self.min_size, self.max_size, self.newer_than, self.older_than)
        if self.files_from is not None:
            object.__setattr__(self, "files_from", check_manifest(manifest(self.files_from, "--files-from")))
            if not self.source.endswith("/"):
                object.__setattr__(self, "source", self.source + "/")  # names are relative to it
        if self.show_attributes and not (self.source.startswith("s3://") and "://" not in self.destination):
            raise UsageError(
                "--attributes is for downloads: for other objects, use s3bulk head or ls --attributes"
            )
        if self.part_size < MIN_PART:
            raise UsageError("--part-size must be at least 5 MiB (the S3 minimum part size)")
        for name in ("multipart_threshold", "copy_multipart_threshold"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name.replace('_', '-')} cannot be negative")

    def places(self) -> tuple[str, str]:
        return self.source, self.destination

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {"attributes": self.attributes.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return super().from_json(data | {"attributes": Attributes.from_json(data.get("attributes"))})

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(each for each in (self.destination, self.source) if each.startswith("s3://"))

    def absolute(self) -> Self:
        return replace(self, source=absolute(self.source), destination=absolute(self.destination))

    def part_size_for_memory(self) -> int:
        return self.part_size

    def leaving_out(self, pattern: str) -> Self:
        return replace(self, exclude=(*self.exclude, pattern))


@dataclass(frozen=True)
class TransferOptions:
    """What a transfer job runs with: the user's spec, read as it is (`options.spec.no_clobber`),
    and what the runner's plan and the command add to it. A new option of cp, mv or sync is a
    field of the spec, not one here too."""

    spec: TransferSpec
    filters: Filters = field(default_factory=Filters)  # the spec's include/exclude and window, compiled
    concurrency: int = 64  # requests in flight per worker (the spec's engine's)
    part_concurrency: int = 8  # parts of one object in flight (fitted to the byte budget)
    # ranges of one download in flight: each streams into the file, holding a chunk or two
    # (`routes.STREAMED_HELD`), not its part, so the budget allows more than parts of an upload
    ranges_in_flight: int = 8
    delete_source: bool = False  # mv: delete each source once its copy succeeded
    max_delete: int | None = None  # mv, sync --delete: deletes this run may make (DeleteCap)
    keep_part_layout: bool = False  # sync --checksum: multipart copies keep their parts (same ETag)
    replaces: str | None = None  # cp --if-match / --if-none-match: what its one write may replace
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # the driver's own requests (sync's listings)


def transfer_options(
    spec: TransferSpec,
    settings: AwsSettings,
    plan: JobPlan,
    *,
    delete_source: bool = False,
    max_delete: int | None = None,
    keep_part_layout: bool = False,
    replaces: str | None = None,
) -> TransferOptions:
    """The job's options: the user's spec, and what the runner's plan adds (the byte budget sets
    how many parts of one large object are in flight); what only one command sets, it says."""
    return TransferOptions(
        spec=spec,
        filters=Filters(
            spec.include, spec.exclude, spec.min_size, spec.max_size, spec.newer_than, spec.older_than
        ),
        concurrency=spec.engine.concurrency,
        part_concurrency=parts_in_flight(plan.max_in_flight_bytes, spec.part_size),
        ranges_in_flight=parts_in_flight(plan.max_in_flight_bytes, STREAMED_HELD),
        delete_source=delete_source,
        max_delete=max_delete,
        keep_part_layout=keep_part_layout,
        replaces=replaces,
        retry=RetryPolicy(max_attempts=spec.engine.attempts(settings)),
    )


def parts_in_flight(budget: int, part_size: int, most: int = 8) -> int:
    """Parts of one large object in flight at once, so that they fit the byte budget."""
    return max(1, min(most, budget // max(1, part_size)))


_MIME_TYPES = mimetypes.MimeTypes()  # Python's own table only: the same answer on every machine
for _suffix in (".js", ".mjs"):  # RFC 9239, as Python 3.12 has it; 3.11 says application/javascript
    _MIME_TYPES.add_type("text/javascript", _suffix)


def content_type(path: str) -> str | None:
    """The Content-Type `aws s3 cp` would give a file of this name (None: the service's default)."""
    return _MIME_TYPES.guess_type(path, strict=False)[0]


async def check_bucket(client: Storage, bucket: str, prefix: str) -> None:
    """Raise the service's answer if listing `bucket` shows it cannot be used at all (no such
    bucket, bad credentials). AccessDenied is not such an answer: write-only credentials may not
    list, and the writes themselves will tell."""
    try:
        await client.list_objects_v2(bucket, prefix, max_keys=1)
    except S3Error as error:
        if error.job_wide:
            raise


async def written_bucket_usable(
    settings: AwsSettings, destination: Location, dry_run: bool
) -> dict[str, int]:
    """Before the job starts (and before its journal exists): one listing request on the
    bucket written to, so bad credentials or a missing bucket stop the job with one line
    instead of failing every item. Returns the requests it made."""
    if dry_run or not isinstance(destination, S3Location):
        return {}
    storage = Storage(settings, connections=2)
    try:
        await check_bucket(storage, destination.bucket, destination.key)
    finally:
        await storage.close()
    return dict(storage.meter.requests)


def direction_of(source: Location, destination: Location) -> Direction:
    if isinstance(source, LocalLocation) and isinstance(destination, S3Location):
        return "upload"
    if isinstance(source, S3Location) and isinstance(destination, LocalLocation):
        return "download"
    if isinstance(source, S3Location) and isinstance(destination, S3Location):
        return "copy"
    raise UsageError("both locations are local: s3bulk copies to, from or within S3 (use cp/rsync)")


def check_source(source: Location) -> None:
    """A local source that is not there, or a file named as a directory: one line, no request."""
    if isinstance(source, LocalLocation):
        path = source.path
        if not path.exists():
            raise UsageError(f"local source {str(path)!r} does not exist")
        if source.trailing_slash and not path.is_dir():
            raise UsageError(f"local source {str(path)!r} is not a directory (drop the trailing '/')")


def check_places(source: Location, destination: Location, many: bool) -> None:
    """Refuse, before any request, what every item would fail at: a copy onto itself, into its
    own source (the copies would be listed and copied again), many objects into a file."""
    if isinstance(source, S3Location) and isinstance(destination, S3Location):
        if source.bucket != destination.bucket:
            return
        if not many:
            if source.key == destination.key or (
                destination.is_prefix and destination.key + basename(source.key) == source.key
            ):
                raise UsageError(
                    f"source and destination are the same object ({source}): nothing to copy "
                    "(to make an old version current again: cp --version-id V SRC SRC)"
                )
            return
        target = destination.key if destination.is_prefix else destination.key + "/"
        if target == source.key:
            raise UsageError(
                f"source and destination are the same ({source}): nothing would be copied; "
                "to change attributes, copy to another prefix"
            )
        if target.startswith(source.key):
            raise UsageError(
                f"destination s3://{destination.bucket}/{target} is inside the source {source}: "
                "the copies would be listed and copied again; pick a prefix outside it"
            )
    elif isinstance(destination, LocalLocation) and many:
        path = destination.path
        if path.exists() and not path.is_dir():
            raise UsageError(
                f"destination {str(path)!r} is a file, and many objects need a directory: "
                "give a directory (it is created if missing)"
            )


def unchanged(ctx: WorkerContext, size: int) -> BatchOutcome:
    """An item found the same at its destination after all (a guard, a checksum): it leaves the
    totals it was listed in and counts as unchanged, not as done."""
    stats = ctx.stats
    stats.objects_unchanged += 1
    stats.objects_listed -= 1
    stats.bytes_listed -= size
    return BatchOutcome([], [])
