"""Single objects and buckets (`s3bulk._objects`): get, head, put, open, presign, buckets."""

from __future__ import annotations

import asyncio
import builtins
import itertools
import os
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any

from s3bulk._api.base import sync_twin, with_builtin_errors
from s3bulk._config import AwsSettings
from s3bulk._errors import S3BulkError, UsageError
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.s3xml import BucketInfo, VersionInfo

_TEMPORARIES = itertools.count(1)  # this process's temporary files (`get_to_file_async`)


@with_builtin_errors
async def get_async(
    url: str,
    *,
    range: tuple[int, int] | None = None,
    version_id: str | None = None,
    settings: AwsSettings | None = None,
) -> bytes:
    """One object's bytes, fetched as concurrent ranges (for objects that fit in memory; `cat`
    and `get_to_file` stream), or only bytes [start, end) with `range=(start, end)`."""
    from s3bulk._objects import get_bytes, get_range

    settings = settings or AwsSettings.from_env()
    if range is not None:
        if version_id:
            raise UsageError("get(range=..., version_id=...): a version is read whole (or use open)")
        return await get_range(settings, url, *range)
    return await get_bytes(settings, url, version_id or "")


@with_builtin_errors
async def head_async(
    url: str, *, version_id: str | None = None, settings: AwsSettings | None = None
) -> dict[str, Any]:
    """Every attribute of one object (size, etag, content_type, metadata, storage_class, ...), as
    `s3bulk head --json` prints them."""
    from s3bulk._objects import head
    from s3bulk._stores.attributes import described

    return described(await head(settings or AwsSettings.from_env(), url, version_id or ""))


@with_builtin_errors
async def get_to_file_async(
    url: str,
    path: str | os.PathLike[str],
    *,
    version_id: str | None = None,
    settings: AwsSettings | None = None,
) -> int:
    """One object into a local file, as concurrent ranges written in order; returns its size.
    `path` may start with ~, name a directory (one that exists, or ending in /: the object keeps
    its name there), and have parents still to make. The file appears whole or not at all
    (written beside it, then renamed): named as every download's temporary file is
    (`.NAME.PID-N.s3bulk-part`), so that one a killed process left is swept by the next
    download into its directory, and no walk takes it for a file of the tree."""
    from s3bulk._objects import cat, object_location
    from s3bulk._stores.landing import sweep_stale_parts, temporary_name

    target = _file_for(os.path.expanduser(os.fspath(path)), object_location(url).key)
    directory = os.path.dirname(target)
    try:
        os.makedirs(directory, exist_ok=True)
        sweep_stale_parts(directory)  # left by an earlier download killed outright
        temporary = os.path.join(directory, temporary_name(target, next(_TEMPORARIES)))
        handle = builtins.open(temporary, "xb")  # noqa: SIM115 -- closed below
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, target) from None
    try:
        with handle:

            async def write(data: memoryview) -> None:
                await asyncio.to_thread(handle.write, data)

            size = await cat(
                settings or AwsSettings.from_env(), url, write, version_id=version_id or "", verb="get"
            )
        os.replace(handle.name, target)
    except OSError as exc:
        os.unlink(handle.name)
        if isinstance(exc, S3BulkError):  # bytes that are not the object's: said as they are
            raise
        raise OSError(exc.errno, exc.strerror, target) from None
    except BaseException:
        os.unlink(handle.name)
        raise
    return size


def _file_for(path: str, key: str) -> str:
    """The file a download to `path` lands in: in a directory, under the object's own name."""
    if path.endswith(os.sep) or os.path.isdir(path):
        return os.path.abspath(os.path.join(path, key.rsplit("/", 1)[-1]))
    return os.path.abspath(path)


@with_builtin_errors
async def put_async(
    url: str,
    data: bytes | str | os.PathLike[str] | Iterable[bytes],
    *,
    attributes: Attributes = NO_ATTRIBUTES,
    settings: AwsSettings | None = None,
    if_match: str | None = None,
    if_none_match: str | None = None,
) -> int:
    """Store one object from bytes, a local file's path, or an iterable of byte chunks (sent in
    parts as they come, memory bounded); returns the bytes sent. `if_none_match="*"`: only where
    no object is; `if_match=ETAG`: only over that version (else `WrittenMeanwhile`, nothing
    stored), as conditional writes (If-None-Match, If-Match) do."""
    from s3bulk._objects import put_stream
    from s3bulk._stores.conditional import asked_replaces

    replaces = asked_replaces(if_match, if_none_match)

    if isinstance(data, (str, os.PathLike)):
        if not os.path.isfile(data):
            raise UsageError(
                f"no such file {os.fspath(data)!r}: a str is a local path; to store text, pass bytes"
            )
        with builtins.open(data, "rb") as handle:
            return await put_stream(
                settings or AwsSettings.from_env(),
                url,
                _reader(handle.read),
                attributes=attributes,
                replaces=replaces,
            )
    chunks: Iterator[bytes]
    if isinstance(data, bytes | bytearray | memoryview):
        chunks = iter([bytes(data)])
    elif isinstance(data, Iterable) and not isinstance(data, str):
        chunks = iter(data)
    else:
        kind = type(data).__name__
        raise TypeError(
            f"put(url, data): data is bytes, a local file's path or an iterable of bytes, not {kind}"
        )
    return await put_stream(
        settings or AwsSettings.from_env(),
        url,
        _chunk_reader(chunks),
        attributes=attributes,
        replaces=replaces,
    )


def _reader(read: Callable[[int], bytes]) -> Callable[[int], Coroutine[Any, Any, bytes]]:
    async def read_async(size: int) -> bytes:
        return await asyncio.to_thread(read, size)

    return read_async


def _chunk_reader(chunks: Iterator[bytes]) -> Callable[[int], Coroutine[Any, Any, bytes]]:
    """read(n) over an iterator of chunks of any size."""
    pending = bytearray()

    async def read(size: int) -> bytes:
        while len(pending) < size:
            chunk = next(chunks, None)
            if chunk is None:
                break
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise TypeError(f"put(url, chunks): each chunk is bytes, not {type(chunk).__name__}")
            pending.extend(chunk)
        taken = bytes(pending[:size])
        del pending[:size]
        return taken

    return read


def open(
    url: str,
    mode: str = "rb",
    *,
    attributes: Attributes = NO_ATTRIBUTES,
    buffer_size: int = 8 * 1024 * 1024,
    settings: AwsSettings | None = None,
) -> Any:
    """A file-like object on one object: "rb" reads (read, readinto, readline, seek, tell): a
    read somewhere new fetches `buffer_size` bytes, reading on streams the rest in one GET (an
    object replaced while it is read fails the read); "wb" uploads `buffer_size` parts as they
    fill and completes on close (leaving its `with` block by an exception aborts the upload).
    Writers set every one of `attributes` (Content-* headers, Expires, metadata, tags, storage
    class, encryption, ACL) as `put` does, and send the settings' checksum for the service to
    check what it stores by: CRC64NVME (the default, full-object) or SHA256 (per part); with
    another algorithm chosen, none."""
    from s3bulk._objects import open_object

    return open_object(settings or AwsSettings.from_env(), url, mode, attributes, buffer_size)


def presign(
    url: str, *, expires_in: int = 3600, method: str = "GET", settings: AwsSettings | None = None
) -> str:
    """A URL anyone can GET (or PUT, with method="PUT") the object with for `expires_in` seconds."""
    from s3bulk._objects import presign as sign

    return sign(settings or AwsSettings.from_env(), url, expires_in=expires_in, method=method)


@with_builtin_errors
async def list_buckets_async(*, settings: AwsSettings | None = None) -> list[BucketInfo]:
    """The account's buckets, (name, created) each."""
    from s3bulk._objects import list_buckets

    return await list_buckets(settings or AwsSettings.from_env())


@with_builtin_errors
async def make_bucket_async(
    url: str, *, region: str | None = None, versioning: bool = False, settings: AwsSettings | None = None
) -> str:
    """Create a bucket (in `region`, default the settings' region), keeping every version of
    its objects with `versioning=True`; returns its name."""
    from s3bulk._objects import make_bucket

    return await make_bucket(settings or AwsSettings.from_env(), url, region, versioning=versioning)


@with_builtin_errors
async def versioning_async(
    url: str, change: str | None = None, *, settings: AwsSettings | None = None
) -> str:
    """A bucket's versioning after `change`, if given: "enable" keeps every version of what is
    written or deleted from now on, "suspend" keeps no new ones (those kept stay). Returns
    "Enabled", "Suspended", or "" for a bucket whose versioning was never turned on."""
    from s3bulk._objects import bucket_versioning

    return await bucket_versioning(settings or AwsSettings.from_env(), url, change)


@with_builtin_errors
async def copy_version_async(
    source: str, destination: str, version_id: str, *, settings: AwsSettings | None = None
) -> int:
    """Copy one version of an object (`s3bulk ls --all-versions` names them) to `destination`,
    server-side, with the attributes it had; onto its own key, it becomes the current version
    again. Returns its size."""
    from s3bulk._objects import copy_version

    return await copy_version(settings or AwsSettings.from_env(), source, destination, version_id)


@with_builtin_errors
async def remove_bucket_async(url: str, *, force: bool = False, settings: AwsSettings | None = None) -> str:
    """Remove a bucket; with `force`, delete every object in it first (the batched deleter),
    then, if it is still not empty (a versioned bucket), every old version and delete marker it
    keeps: a bucket that never kept versions, or a server without ListObjectVersions, costs no
    listing more."""
    from s3bulk._api.remove import remove_async
    from s3bulk._objects import BucketNotEmpty, bucket_name, remove_bucket, remove_versions

    settings = settings or AwsSettings.from_env()
    bucket = bucket_name(url)
    if force:
        report = await remove_async(f"s3://{bucket}/", settings=settings, journal=False)
        if not report.ok:
            raise UsageError(
                f"s3://{bucket} still holds {report.objects_failed} objects that could not be deleted"
            )
    try:
        return await remove_bucket(settings, bucket)
    except BucketNotEmpty:
        if not force:
            raise
    kept = [version async for version, why in remove_versions(settings, f"s3://{bucket}/") if why]
    if kept:
        raise UsageError(f"s3://{bucket} still holds {len(kept)} versions that could not be deleted")
    return await remove_bucket(settings, bucket)


@with_builtin_errors
async def remove_versions_async(
    url: str, *, dry_run: bool = False, settings: AwsSettings | None = None
) -> list[tuple[VersionInfo, str]]:
    """Delete every version and delete marker under s3://bucket/prefix/, or of s3://bucket/key
    alone (`s3bulk rm --all-versions`): what a versioned bucket keeps of objects deleted or
    written over. Returns each (version, "" or why it was not deleted)."""
    from s3bulk._objects import remove_versions

    settings = settings or AwsSettings.from_env()
    return [pair async for pair in remove_versions(settings, url, dry_run)]


get = sync_twin(get_async)


head = sync_twin(head_async)


get_to_file = sync_twin(get_to_file_async)


put = sync_twin(put_async)


list_buckets = sync_twin(list_buckets_async)


make_bucket = sync_twin(make_bucket_async)


versioning = sync_twin(versioning_async)


copy_version = sync_twin(copy_version_async)


remove_bucket = sync_twin(remove_bucket_async)


remove_versions = sync_twin(remove_versions_async)
