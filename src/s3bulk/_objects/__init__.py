"""Single objects and buckets, the everyday verbs that are not bulk jobs: stream one object out
(`cat`) or in (`pipe`, `cp -`), presign a URL, list, make and remove buckets.

Each opens one `Storage` (the same seam, retry policy and request counting as the jobs), does its
work and closes it. Streams move in parts with a fixed number in flight, so memory is bounded by
part size x parts in flight whatever the object's size.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error, UsageError, WrittenMeanwhile
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.conditional import NOTHING, write_condition
from s3bulk._stores.routes import Parts
from s3bulk._stores.s3 import S3Client
from s3bulk._stores.s3xml import BucketInfo, UploadInfo, VersionInfo, epoch_seconds
from s3bulk._stores.storage import Storage
from s3bulk._urls import S3Location, parse_s3

MiB = 1024 * 1024
STREAM_PART = 8 * MiB
STREAM_IN_FLIGHT = 8
MAX_PRESIGN_SECONDS = 7 * 24 * 3600  # SigV4's limit


@asynccontextmanager
async def _storage(settings: AwsSettings) -> AsyncIterator[Storage]:
    storage = Storage(settings, connections=STREAM_IN_FLIGHT * 2)
    try:
        yield storage
    finally:
        await storage.close()


def object_location(url: str) -> S3Location:
    """s3://bucket/key, refusing a prefix: these verbs take one object."""
    location = parse_s3(url)
    if not location.key or location.key.endswith("/"):
        raise UsageError(f"{url}: name one object, s3://bucket/key (not a bucket or a prefix/)")
    return location


T = TypeVar("T")


async def _one_object(storage: Storage, verb: str, url: str, read: Awaitable[T]) -> T:
    """A read of one object whose 404 says what the user named and what is missing: a HEAD's
    404 has no body, so "no such key" could be a bucket that does not exist."""
    try:
        return await read
    except S3Error as error:
        if error.status != 404:
            raise
        bucket = parse_s3(url).bucket
        if not await storage.bucket_exists(bucket):
            raise S3Error(404, "NoSuchBucket", f"there is no bucket {bucket}", f"{verb} {url}") from None
        raise S3Error(404, "NoSuchKey", "no object has that key", f"{verb} {url}") from None


async def cat(
    settings: AwsSettings,
    url: str,
    write: Callable[[memoryview], Awaitable[None]],
    *,
    part_size: int = STREAM_PART,
    in_flight: int = STREAM_IN_FLIGHT,
    version_id: str = "",
    verb: str = "cat",
) -> int:
    """The object's bytes (that version's) handed to `write` in order, fetched as concurrent ranges."""
    location = object_location(url)
    async with _storage(settings) as storage:
        parts = Parts(size=part_size, in_flight=in_flight)
        streamed = storage.stream_object(location.bucket, location.key, write, parts, version_id)
        return await _one_object(storage, verb, url, streamed)


async def get_bytes(settings: AwsSettings, url: str, version_id: str = "") -> bytes:
    """The whole object in memory (for small objects; `cat` streams large ones)."""
    pieces: collections.deque[bytes] = collections.deque()

    async def keep(data: memoryview) -> None:
        pieces.append(bytes(data))

    await cat(settings, url, keep, version_id=version_id, verb="get")
    return b"".join(pieces)


async def get_range(settings: AwsSettings, url: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of the object (fewer if it ends sooner)."""
    if not 0 <= start <= end:
        raise UsageError(f"range ({start}, {end}): give 0 <= start <= end")
    location = object_location(url)
    if start == end:
        return b""
    async with _storage(settings) as storage:
        return await _one_object(
            storage, "get", url, storage.get_range(location.bucket, location.key, start, end)
        )


async def head(settings: AwsSettings, url: str, version_id: str = "") -> dict[str, str]:
    """The object's headers (names in lower case), of that version with `version_id`."""
    location = object_location(url)
    async with _storage(settings) as storage:
        return await _one_object(
            storage,
            "head",
            url,
            storage.head(location.bucket, location.key, version_id=version_id, checksums=True),
        )


async def list_versions(settings: AwsSettings, url: str) -> AsyncIterator[VersionInfo]:
    """Every version and delete marker under s3://bucket/prefix, in key order, newest first."""
    location = uploads_location(url)
    async with _storage(settings) as storage:
        async for page in storage.list_versions(location.bucket, location.key):
            for version in page:
                yield version


async def put_stream(
    settings: AwsSettings,
    url: str,
    read: Callable[[int], Awaitable[bytes]],
    *,
    attributes: Attributes = NO_ATTRIBUTES,
    part_size: int = STREAM_PART,
    in_flight: int = STREAM_IN_FLIGHT,
    replaces: str | None = None,
) -> int:
    """Upload what `read(n)` gives until b"", in parts as it comes; returns the bytes sent.
    `replaces` (conditional writes): "" (`conditional.NOTHING`), only where no object is; an
    ETag, only over that version; refused otherwise (`WrittenMeanwhile`), nothing stored. Sent
    as If-None-Match / If-Match where the service honours them (a probe finds it), else the
    object is asked for first (a HEAD)."""
    location = object_location(url)
    bucket, key = location.bucket, location.key
    async with _storage(settings) as storage:
        condition = await _write_condition(storage, bucket, key, replaces)
        return await storage.upload_stream(
            read, bucket, key, attributes, Parts(size=part_size, in_flight=in_flight), condition
        )


async def _write_condition(storage: Storage, bucket: str, key: str, replaces: str | None) -> dict[str, str]:
    """The header that makes one write replace only what `replaces` says; where the service
    ignores it, what is there is checked now instead (a write in between is not caught)."""
    if replaces is None:
        return {}
    condition = write_condition(replaces, await storage.write_conditions(bucket, key))
    if condition:
        return condition
    try:
        etag = (await storage.head(bucket, key)).get("etag", "")
    except S3Error as error:
        if error.status != 404:
            raise
        etag = None
    holds = (
        etag is None if replaces == NOTHING else etag is not None and etag.strip('"') == replaces.strip('"')
    )
    if not holds:
        raise WrittenMeanwhile(
            f"put s3://{bucket}/{key}: PreconditionFailed: "
            + ("an object is there" if replaces == NOTHING else f"the object there is not {replaces}")
        )
    return {}


def open_object(settings: AwsSettings, url: str, mode: str, attributes: Attributes, buffer_size: int) -> Any:
    """A file-like reader ("rb") or writer ("wb") on one object."""
    location = object_location(url)
    if mode not in ("rb", "wb"):
        raise UsageError(f"open mode {mode!r}: use 'rb' or 'wb' (objects are read or written whole)")
    storage = Storage(settings)
    if mode == "rb":
        return storage.open_reader(location.bucket, location.key, buffer_size=buffer_size)
    return storage.open_writer(location.bucket, location.key, attributes, buffer_size=buffer_size)


def presign(settings: AwsSettings, url: str, *, expires_in: int = 3600, method: str = "GET") -> str:
    """A URL that lets anyone holding it GET (or PUT) the object for `expires_in` seconds,
    signed locally with the caller's credentials (SigV4 query signing, botocore's)."""
    location = object_location(url)
    if not 1 <= expires_in <= MAX_PRESIGN_SECONDS:
        raise UsageError(
            f"--expires-in {expires_in}: SigV4 allows 1 to {MAX_PRESIGN_SECONDS} seconds (7 days)"
        )
    if method not in ("GET", "PUT"):
        raise UsageError(f"presign {method!r}: GET or PUT")
    credentials = settings.credentials()
    if credentials is None:
        raise UsageError("presign needs credentials to sign with (not --no-sign-request)")
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method=method, url=S3Client(settings).url(location.bucket, location.key))
    S3SigV4QueryAuth(credentials, "s3", settings.resolved_region, expires=expires_in).add_auth(request)
    return str(request.url)


async def list_buckets(settings: AwsSettings) -> list[BucketInfo]:
    async with _storage(settings) as storage:
        return await storage.list_buckets()


def bucket_name(url: str) -> str:
    """The bucket of s3://bucket (or s3://bucket/), refusing a key."""
    location = parse_s3(url if "://" in url else f"s3://{url}")
    if location.key:
        raise UsageError(f"{url}: name a bucket, s3://bucket (without a key)")
    return location.bucket


async def make_bucket(
    settings: AwsSettings, url: str, region: str | None = None, *, versioning: bool = False
) -> str:
    """Make a bucket, and with `versioning` turn it on: a bucket made whose versioning the
    service then refuses is said to exist."""
    bucket = bucket_name(url)
    async with _storage(settings) as storage:
        await storage.make_bucket(bucket, region or settings.resolved_region)
        if versioning:
            try:
                await storage.set_versioning(bucket, "Enabled")
            except S3Error as error:
                raise S3Error(
                    error.status, error.code, f"s3://{bucket} was made without it", "enable versioning"
                ) from None
    return bucket


VERSIONING = {"enable": "Enabled", "suspend": "Suspended"}


async def bucket_versioning(settings: AwsSettings, url: str, change: str | None = None) -> str:
    """The bucket's versioning ("Enabled", "Suspended", or "" if it was never turned on), after
    `change` ("enable" keeps every version of every object written or deleted from now on;
    "suspend" stops keeping new ones and keeps those it has) when given."""
    if change is not None and change not in VERSIONING:
        raise UsageError(f"versioning {change!r}: use enable or suspend (or nothing, to ask)")
    bucket = bucket_name(url)
    async with _storage(settings) as storage:
        if change is not None:
            await storage.set_versioning(bucket, VERSIONING[change])
        return await storage.versioning(bucket)


MAX_COPY = 5 * 1024**3  # CopyObject's limit


async def copy_version(settings: AwsSettings, source_url: str, destination_url: str, version_id: str) -> int:
    """That version of an object copied by the service to `destination_url`, its attributes as
    they were; onto its own key, it becomes the current version again (the restore aws-cli does
    with CopyObject). Returns its size."""
    source, destination = object_location(source_url), object_location(destination_url)
    async with _storage(settings) as storage:
        found = storage.head(source.bucket, source.key, version_id=version_id)
        head = await _one_object(storage, "copy", source_url, found)
        size = int(head.get("content-length") or 0)
        if size > MAX_COPY:
            raise UsageError(
                f"{source_url} ({version_id}) is over 5 GiB, which one CopyObject cannot copy: "
                "download it (cp --version-id V s3://bucket/key PATH) and upload it again"
            )
        await storage.copy_version(source.bucket, source.key, version_id, destination.bucket, destination.key)
    return size


async def remove_versions(
    settings: AwsSettings, url: str, dry_run: bool = False
) -> AsyncIterator[tuple[VersionInfo, str]]:
    """Delete every version and delete marker under s3://bucket/prefix/, or of s3://bucket/key
    (that key alone, not every key it begins: a versioned bucket keeps each object's old bytes
    after the object is deleted): (version, "" or why it was not deleted), 1,000 per
    DeleteObjects, a page of the listing at a time: each page checked (`_marker_pages`) before
    its versions are deleted, so a listing that breaks stops there, having touched nothing it
    did not list."""
    location = uploads_location(url)
    key = location.key if location.key and not location.key.endswith("/") else None
    async with _storage(settings) as storage:
        async for listed in storage.list_versions(location.bucket, location.key):
            page = [version for version in listed if key is None or version.key == key]
            entries = [(version.key, version.version_id) for version in page]
            if not entries:
                continue
            failed = {} if dry_run else await storage.delete_versions(location.bucket, entries)
            for version in page:
                yield version, failed.get((version.key, version.version_id), "")


class BucketNotEmpty(UsageError):
    """A bucket that still holds objects, or (versioned) their old versions and delete markers."""


async def remove_bucket(settings: AwsSettings, url: str) -> str:
    """Remove an empty bucket (`rb --force` empties it first with the batched deleter)."""
    bucket = bucket_name(url)
    async with _storage(settings) as storage:
        try:
            await storage.remove_bucket(bucket)
        except S3Error as error:
            if error.code != "BucketNotEmpty":
                raise
            raise BucketNotEmpty(
                f"s3://{bucket} is not empty: rb --force deletes its objects (and their old versions) first"
            ) from None
    return bucket


# ---- multipart uploads left behind -------------------------------------------------------------
ABORTS_IN_FLIGHT = 16


def uploads_location(url: str) -> S3Location:
    """s3://bucket, s3://bucket/prefix: the uploads of every key starting with the prefix."""
    return parse_s3(url if "://" in url else f"s3://{url}")


async def list_uploads(
    settings: AwsSettings, url: str, *, older_than: float | None = None
) -> AsyncIterator[UploadInfo]:
    """The multipart uploads in progress under s3://bucket/prefix (started before `older_than`,
    seconds since the epoch, when given), in key order."""
    location = uploads_location(url)
    async with _storage(settings) as storage:
        async for page in storage.list_uploads(location.bucket, location.key):
            for upload in page:
                if older_than is None or epoch_seconds(upload.initiated) < older_than:
                    yield upload


async def abort_uploads(
    settings: AwsSettings,
    url: str,
    *,
    older_than: float | None = None,
    dry_run: bool = False,
    on_abort: Callable[[UploadInfo, str], None] = lambda upload, error: None,
) -> tuple[int, int]:
    """Abort the uploads `list_uploads` finds, several at once; `on_abort(upload, error)` hears of
    each ("" when it went). Returns (aborted, failed)."""
    location = uploads_location(url)
    counts = [0, 0]
    gate = asyncio.Semaphore(ABORTS_IN_FLIGHT)
    async with _storage(settings) as storage:

        async def abort(upload: UploadInfo) -> None:
            try:
                if not dry_run:
                    await storage.abort_upload(location.bucket, upload.key, upload.upload_id)
            except S3Error as error:
                counts[1] += 1
                on_abort(upload, str(error))
            else:
                counts[0] += 1
                on_abort(upload, "")
            finally:
                gate.release()

        tasks = set()
        async for page in storage.list_uploads(location.bucket, location.key):
            for upload in page:
                if older_than is not None and epoch_seconds(upload.initiated) >= older_than:
                    continue
                await gate.acquire()
                task = asyncio.create_task(abort(upload))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    return counts[0], counts[1]
