"""s3bulk as an fsspec filesystem: `fsspec.filesystem("s3bulk")` and `"s3bulk://bucket/key"` URLs
work with nothing imported (an entry point registers the protocol), so pandas, pyarrow, xarray,
dask and zarr reach s3bulk; `register(as_s3=True)` serves `s3://` and `s3a://` URLs with it too.

    fs = fsspec.filesystem("s3bulk", profile="prod")
    fs.get("bucket/prefix/", "out/", recursive=True)   # one s3bulk job, many objects in flight

A call that names many objects (get, put, copy, mv of a prefix or of lists) runs as one s3bulk
job on the engine, without a journal (fsspec callers expect a call, not a job): fsspec's own
rules say which object goes where, and what they collect is moved together, not one object at a
time. `rm` deletes 1,000 keys per request. `find`, `glob`, `du` and `walk` list key ranges in
parallel. One object's calls (info, cat, pipe, open) are single requests on s3bulk's storage seam.
Settings are s3bulk's (profiles, endpoints, the environment): storage options map onto them.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import dataclasses
import errno
import functools
import glob
import io
import mimetypes
import os
import tempfile
from datetime import datetime
from typing import TYPE_CHECKING, Any

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, S3Error, UsageError, WrittenMeanwhile, changed_meanwhile, require_extra

try:
    from fsspec.asyn import (
        AbstractAsyncStreamedFile,
        AsyncFileSystem,
        _run_coros_in_chunks,
        sync,
        sync_wrapper,
    )
    from fsspec.caching import BaseCache, register_cache
    from fsspec.callbacks import DEFAULT_CALLBACK
    from fsspec.spec import AbstractBufferedFile
except ImportError:  # the extra is not installed: one line saying which to install
    require_extra("fsspec", "s3bulk.fsspec")
    raise

from s3bulk._report import Report
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.onewrite import OneWrite
from s3bulk._stores.retry import Retrier, RetryPolicy
from s3bulk._stores.routes import Parts
from s3bulk._stores.s3 import quote_key
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._stores.storage import Storage

if TYPE_CHECKING:
    from s3bulk._commands.deletes import BatchDeleter

PROTOCOLS = ("s3bulk", "s3", "s3a")
DELETE_BATCH = 1000
JOB_FROM = 16  # pairs: fewer are moved one by one, side by side, without a job's fixed cost
LISTINGS_CACHE = ("use_listings_cache", "listings_expiry_time", "max_paths")  # fsspec's DirCache
READ_BLOCK = 8 * 1024 * 1024  # what a read somewhere new fetches, unless a block size is given
PART_MIN = 5 * 1024 * 1024  # S3's smallest part (but the last)
PUT_MAX = 5 * 1024**3  # S3's largest single PUT
READER_CACHE = "s3bulk"  # fsspec's name for the cache that is s3bulk's prefetching reader
READER_BLOCK_MIN = 1024 * 1024  # smaller blocks are read with fsspec's readahead cache

# During a bulk call: the (source, destination) pairs fsspec's own rules hand to the one-object
# methods, collected to run as one job instead of one request each.
_PENDING: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "s3bulk_fsspec_pending", default=None
)
# During a bulk call: what listings found (name -> entry), so fsspec's checks of each name
# (is it a directory?) cost no request.
_SEEN: contextvars.ContextVar[dict[str, dict[str, Any]] | None] = contextvars.ContextVar(
    "s3bulk_fsspec_seen", default=None
)
# During a bulk call: the paths whose every object a listing found (`_find`'s roots).
_LISTED: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
    "s3bulk_fsspec_listed", default=None
)


def register(as_s3: bool = False) -> None:
    """Serve `s3bulk://` URLs (the entry point does this already), and with `as_s3` also
    `s3://` and `s3a://`: pandas, pyarrow and xarray then use s3bulk where they used s3fs."""
    import fsspec

    names = PROTOCOLS if as_s3 else PROTOCOLS[:1]
    for name in names:
        fsspec.register_implementation(name, S3BulkFileSystem, clobber=True)


# s3fs's storage options that tune its own client (aiobotocore): taken, so that code written for
# s3fs runs, with no effect here (s3bulk's connections, retries and timeouts are its own).
S3FS_CLIENT_TUNING = (
    "session",
    "cache_regions",
    "max_concurrency",
    "local_expiry_check",  # reads here always ask for the version they started on (If-Match)
    "asynchronous_client",
    "use_expiry_check",
)
# s3fs's `s3_additional_kwargs` (and `open()` keywords) that set what a write stores, as
# s3bulk's Attributes name them
WRITE_ATTRIBUTES = {
    "ContentType": "content_type",
    "ContentEncoding": "content_encoding",
    "ContentDisposition": "content_disposition",
    "ContentLanguage": "content_language",
    "CacheControl": "cache_control",
    "Expires": "expires",
    "Metadata": "metadata",
    "StorageClass": "storage_class",
    "ServerSideEncryption": "sse",
    "SSEKMSKeyId": "sse_kms_key_id",
    "ACL": "acl",
    "acl": "acl",
}


@dataclasses.dataclass(frozen=True)
class S3fsOptions:
    """What s3fs's storage options say beyond s3bulk's settings: what writes store, block sizes,
    read caching and versions."""

    attributes: dict[str, Any]  # WRITE_ATTRIBUTES' names -> values (s3_additional_kwargs)
    default_block_size: int | None
    default_cache_type: str | None
    default_fill_cache: bool
    version_aware: bool
    fixed_upload_size: bool


def settings_from(storage_options: dict[str, Any]) -> AwsSettings:
    """fsspec's storage options (as s3fs names them) as s3bulk's settings."""
    return _options(storage_options)[0]


def _options(storage_options: dict[str, Any]) -> tuple[AwsSettings, S3fsOptions]:
    """s3fs's storage options as s3bulk's settings and the filesystem's own (`S3fsOptions`):
    credentials (key, secret, token; or client_kwargs' aws_* names), endpoint, region, TLS,
    s3_additional_kwargs, block sizes, versions. An option neither knows is one line naming it."""
    options = dict(storage_options)
    client = dict(options.pop("client_kwargs", None) or {})
    config = dict(options.pop("config_kwargs", None) or {})
    extra = dict(options.pop("s3_additional_kwargs", None) or {})
    for name in S3FS_CLIENT_TUNING:
        options.pop(name, None)
    keys = _given_keys(options, client)
    known = {
        "profile", "region", "endpoint_url", "anon", "verify", "requester_pays", "use_ssl",
        "default_block_size", "default_cache_type", "default_fill_cache", "version_aware",
        "fixed_upload_size",
    }  # fmt: skip
    unknown = set(options) - known
    if unknown:
        raise UsageError(
            f"storage options {sorted(unknown)}: s3bulk takes s3fs's profile, key, secret, token, "
            "region, endpoint_url, anon, verify, use_ssl, requester_pays, client_kwargs, config_kwargs, "
            "s3_additional_kwargs, default_block_size, default_cache_type, default_fill_cache, "
            "version_aware and fixed_upload_size"
        )
    request_payer = (
        bool(options.get("requester_pays", False)) or extra.pop("RequestPayer", None) == "requester"
    )
    checksum = extra.pop("ChecksumAlgorithm", None)
    attributes = _attributes_of(extra, "s3_additional_kwargs")
    endpoint = options.get("endpoint_url") or client.get("endpoint_url")
    if options.get("use_ssl") is False and endpoint and endpoint.startswith("https://"):
        endpoint = "http://" + endpoint[len("https://") :]
    settings = AwsSettings.from_env(
        profile=options.get("profile"),
        region=options.get("region") or client.get("region_name") or config.get("region_name"),
        endpoint_url=endpoint,
        verify_ssl=options.get("verify", client.get("verify", True)) is not False,
        anonymous=bool(options.get("anon", False)),
        request_payer=request_payer,
        checksum_algorithm=checksum,
    )
    if keys is not None:
        settings = dataclasses.replace(settings, given_keys=keys)
    settings.check_profile()
    block = options.get("default_block_size")
    return settings, S3fsOptions(
        attributes=attributes,
        default_block_size=int(block) if block else None,
        default_cache_type=options.get("default_cache_type"),
        default_fill_cache=bool(options.get("default_fill_cache", True)),
        version_aware=bool(options.get("version_aware", False)),
        fixed_upload_size=bool(options.get("fixed_upload_size", False)),
    )


def _given_keys(options: dict[str, Any], client: dict[str, Any]) -> tuple[str, str, str | None] | None:
    """Credentials given as s3fs takes them (key/secret/token, their username/password
    aliases, or client_kwargs' aws_access_key_id...): both or neither of key and secret."""
    pairs = (
        ("key", "username", "aws_access_key_id"),
        ("secret", "password", "aws_secret_access_key"),
        ("token", "", "aws_session_token"),
    )
    given: list[str | None] = []
    for name, alias, boto in pairs:
        value = options.pop(name, None) or (options.pop(alias, None) if alias else None)
        from_client = client.pop(boto, None)
        if value is not None and from_client is not None and value != from_client:
            raise UsageError(f"storage options {name}= and client_kwargs {boto}= differ: give one")
        given.append(value if value is not None else from_client)
    key, secret, token = given
    if key is None and secret is None:
        return None
    if not key or not secret:
        raise UsageError("storage options key= and secret= go together: give both, or neither")
    return key, secret, token


def _attributes_of(given: dict[str, Any], where: str) -> dict[str, Any]:
    """s3fs's write keywords (ContentType=, ServerSideEncryption=, ACL=, Metadata=...) by
    s3bulk's Attributes names; one it does not know is one line naming it."""
    unknown = sorted(set(given) - set(WRITE_ATTRIBUTES))
    if unknown:
        raise UsageError(
            f"{where} {unknown}: s3bulk sets {', '.join(sorted(WRITE_ATTRIBUTES))} on what it writes"
        )
    found: dict[str, Any] = {}
    for name, value in given.items():
        if value is None or value is False:
            continue
        if isinstance(value, datetime):
            value = value.isoformat()
        found[WRITE_ATTRIBUTES[name]] = value
    return found


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.partition("/")
    return bucket, key


def _os_error(exc: Exception, path: str) -> Exception:
    """An s3bulk error as fsspec's callers catch them: FileNotFoundError, PermissionError, or an
    OSError naming the S3 code."""
    if changed_meanwhile(exc):
        return OSError(
            errno.ESTALE, "changed since it was listed: invalidate_cache(), then read it again", path
        )
    if isinstance(exc, S3Error):
        if exc.status == 404 or exc.code in ("NoSuchKey", "NoSuchBucket", "NotFound"):
            return FileNotFoundError(2, f"no such object or bucket ({exc.code or exc.status})", path)
        if exc.status == 403 or exc.denied:
            return PermissionError(13, str(exc), path)
        return OSError(5, str(exc), path)
    if isinstance(exc, ItemError):
        return OSError(5, str(exc), path)
    return exc


class _StandIn:
    """An empty directory standing in for a get's local destination `lpath`, as fsspec reads it
    (a directory when it is one or ends in '/', else the name of what is made), and the way back
    from a path under it to the same path under `lpath`."""

    def __init__(self, lpath: str, empty: str) -> None:
        given = os.path.abspath(os.path.expanduser(lpath))
        if lpath.endswith(("/", os.sep)) or os.path.isdir(lpath):
            self.path, self._under, self.root = empty + "/", empty, given
        else:  # fsspec makes it: a file, or the directory of a tree
            self.path = self._under = os.path.join(empty, "made")
            self.root = given
        self._empty = empty

    def back(self, path: str) -> str:
        relative = os.path.relpath(path, self._under)
        return self.root if relative == os.curdir else os.path.join(self.root, relative)

    def made(self) -> list[str]:
        """The directories fsspec made under it (a prefix with no object below it gets one)."""
        return [
            os.path.join(directory, name)
            for directory, names, _ in os.walk(self._empty)
            for name in names
            if os.path.join(directory, name).startswith(self._under)
        ]


class _Inside:
    """The rule `s3bulk cp` keeps for a destination directory (`_stores/folders.py`): a link
    inside it that the user made is followed only to a directory inside it."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._real = os.path.realpath(root)
        self._checked: set[str] = set()

    def check(self, directory: str) -> None:
        """Each existing component of `directory` below the root that is a link, resolved, must
        be inside the root. PermissionError (one line, as cp's): one leads outside."""
        relative = os.path.relpath(directory, self.root)
        if relative == os.curdir or relative.startswith(os.pardir):
            return
        path = self.root
        for name in relative.split(os.sep):
            path = os.path.join(path, name)
            if path in self._checked:
                continue
            if not os.path.lexists(path):
                return  # nothing below it exists: it is made, inside
            if os.path.islink(path):
                inside = os.path.relpath(os.path.realpath(path), self._real)
                if inside == os.pardir or inside.startswith(os.pardir + os.sep):
                    raise PermissionError(
                        errno.EPERM, f"{path} resolves outside the destination directory", path
                    )
            self._checked.add(path)


def _file_entry(
    name: str, size: int, etag: str, modified: datetime | None, storage_class: str
) -> dict[str, Any]:
    return {
        "name": name,
        "size": size,
        "type": "file",
        "ETag": etag,
        "LastModified": modified,
        "StorageClass": storage_class or "STANDARD",
    }


def _listed(bucket: str, info: ObjectInfo) -> dict[str, Any]:
    """A listed object's entry: fsspec's fields, and s3fs's (`Key`, `Size`) beside them."""
    name = f"{bucket}/{info.key}"
    entry = _file_entry(name, info.size, info.etag, info.last_modified, info.storage_class)
    return {"Key": name, "Size": info.size} | entry


def _directory(name: str) -> dict[str, Any]:
    return {"Key": name, "Size": 0, "name": name, "size": 0, "type": "directory", "StorageClass": "DIRECTORY"}


def _bucket(name: str) -> dict[str, Any]:
    return _directory(name) | {"StorageClass": "BUCKET", "VersionId": None}


def _as_listed(entry: dict[str, Any]) -> dict[str, Any]:
    """An object's entry from its HEAD as a listing gives it (s3fs's fields of each)."""
    listed = {name: value for name, value in entry.items() if name not in ("ContentType", "VersionId")}
    return {"Key": entry["name"], "Size": entry["size"]} | listed


def _headed(name: str, head: dict[str, str]) -> dict[str, Any]:
    """An object's entry from its HEAD: fsspec's fields and s3fs's (ContentType, VersionId)."""
    entry = _file_entry(
        name,
        int(head.get("content-length", 0)),
        head.get("etag", ""),
        _http_date(head.get("last-modified")),
        head.get("x-amz-storage-class", ""),
    )
    return entry | {"ContentType": head.get("content-type"), "VersionId": head.get("x-amz-version-id")}


class S3BulkFileSystem(AsyncFileSystem):
    """S3 (and what speaks its API) for fsspec, on s3bulk's engine. Paths are `bucket/key`, with or
    without `s3bulk://` (or `s3://` once `register(as_s3=True)`); directories are prefixes, so an
    empty one does not exist."""

    protocol = PROTOCOLS
    root_marker = ""
    async_impl = True
    mirror_sync_methods = True
    # s3fs's defaults, which code written for it reads and sets (on the class, for what follows)
    default_block_size = 50 * 1024 * 1024  # a write's part size (and a read's, when given)
    default_cache_type = READER_CACHE  # s3bulk's prefetching reader (s3fs: "readahead")

    def __init__(
        self,
        *,
        settings: AwsSettings | None = None,
        asynchronous: bool = False,
        loop: Any = None,
        batch_size: int | None = None,
        **storage_options: Any,
    ) -> None:
        cache = {name: storage_options.pop(name) for name in LISTINGS_CACHE if name in storage_options}
        super().__init__(asynchronous=asynchronous, loop=loop, batch_size=batch_size, **cache)
        found, options = _options(storage_options)
        self.settings = settings or found
        self.s3_additional_kwargs = options.attributes
        self.read_block_size = options.default_block_size  # None: READ_BLOCK
        # each filesystem keeps the default it was made with (a later change to the class's
        # default is for the filesystems made after it, as s3fs has it)
        self.default_block_size = options.default_block_size or type(self).default_block_size
        if options.default_cache_type:
            self.default_cache_type = options.default_cache_type
        self.default_fill_cache = options.default_fill_cache
        self.version_aware = options.version_aware
        self.fixed_upload_size = options.fixed_upload_size
        self._storages: dict[int, Storage] = {}
        self._deleters: dict[tuple[int, str], BatchDeleter] = {}  # mv's, per event loop and bucket
        self.last_report: Report | None = None  # the last bulk call's job: counts, requests, failures

    # ---- the seam -------------------------------------------------------------------------------
    def _storage(self) -> Storage:
        """This event loop's storage (a connection pool belongs to the loop that made it)."""
        loop = id(asyncio.get_running_loop())
        storage = self._storages.get(loop)
        if storage is None:
            retry = Retrier(RetryPolicy(max_attempts=self.settings.max_attempts))  # AWS_MAX_ATTEMPTS
            storage = self._storages[loop] = Storage(self.settings, connections=64, retry=retry)
        return storage

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(each) for each in path]
        path = os.fspath(path) if not isinstance(path, str) else path
        for name in PROTOCOLS:
            if path.startswith(f"{name}://"):
                path = path[len(name) + 3 :]
                break
        return path.strip("/") if path.startswith("/") else path.rstrip("/")

    def unstrip_protocol(self, name: str) -> str:
        return f"s3bulk://{name}"

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        """A URL naming a version (`?versionId=`) makes a version-aware filesystem, as s3fs."""
        return {"version_aware": True} if "?versionId=" in path else {}

    def _url(self, path: str) -> str:
        return f"s3://{self._strip_protocol(path)}"

    # ---- looking --------------------------------------------------------------------------------
    async def _info(self, path: str, version_id: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """An object's entry (s3fs's fields: ETag, LastModified, ContentType, VersionId), a
        prefix's or a bucket's; of that version, with `version_id` (or `?versionId=` in the
        path, as s3fs writes it)."""
        path, in_path = _version_of(self._strip_protocol(path))
        version_id = version_id or in_path
        if version_id:
            return await self._version_info(path, version_id)
        if kwargs.get("refresh"):
            self.invalidate_cache(path)
        seen = _SEEN.get()
        if seen is not None and path in seen:
            return seen[path]
        bucket, key = _split(path)
        if not bucket:
            return _bucket("")
        known = self._known(path)
        if known is not None:
            return known
        storage = self._storage()
        if not key:
            try:
                if await storage.bucket_exists(bucket):
                    return _bucket(bucket)
            except Exception as exc:
                raise _os_error(exc, path) from None
            raise FileNotFoundError(2, "no such bucket", path)
        try:
            head = await storage.head(bucket, key)
        except S3Error as exc:
            if exc.status != 404 and exc.code not in ("NoSuchKey", "NotFound"):
                raise _os_error(exc, path) from None
        else:
            return _headed(path, head)
        try:
            page = await storage.list_objects_v2(bucket, key + "/", max_keys=1, delimiter="/")
        except Exception as exc:
            raise _os_error(exc, path) from None
        if page.objects or page.common_prefixes:
            return _directory(path)
        raise FileNotFoundError(2, "no such object or prefix", path)

    async def _version_info(self, path: str, version_id: str) -> dict[str, Any]:
        if not self.version_aware:
            raise ValueError(f"version_id {version_id!r}: give version_aware=True to the filesystem")
        bucket, key = _split(path)
        try:
            head = await self._storage().retry(
                lambda: self._storage().client.head_object(bucket, key, version_id=version_id),
                f"head s3://{path}",
            )
        except Exception as exc:
            raise _os_error(exc, path) from None
        return _headed(path, head)

    async def _ls(self, path: str, detail: bool = False, versions: bool = False, **kwargs: Any) -> list[Any]:
        """What is directly under `path`: names, or entries with `detail` (names by default, as
        s3fs lists); every version of each object with `versions` (`key?versionId=V`)."""
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        storage = self._storage()
        if versions:
            return await self._ls_versions(path, detail)
        if not bucket:
            buckets = [_bucket(each.name) for each in await storage.list_buckets()]
            return buckets if detail else [each["name"] for each in buckets]
        from s3bulk._sources.listing import list_sequential

        entries: list[dict[str, Any]] | None = None if kwargs.get("refresh") else self.dircache.get(path)
        if entries is None:
            entries = []
            prefix = key + "/" if key else ""
            try:  # the project's paginator: a token that repeats, or a page that fails, raises
                async for page in list_sequential(storage, bucket, prefix, delimiter="/"):
                    entries += [_directory(f"{bucket}/{each.rstrip('/')}") for each in page.common_prefixes]
                    entries += [_listed(bucket, each) for each in page.objects if each.key != prefix]
            except Exception as exc:
                raise _os_error(exc, path) from None
            entries.sort(key=lambda entry: entry["name"])
            if entries:
                self.dircache[path] = entries
        if not entries:
            info = await self._info(path)  # a file lists as itself; nothing there raises
            entries = [_as_listed(info)] if info["type"] == "file" else []
        return entries if detail else [entry["name"] for entry in entries]

    async def _ls_versions(self, path: str, detail: bool) -> list[Any]:
        if not self.version_aware:
            raise ValueError("ls(versions=True) needs version_aware=True on the filesystem")
        bucket, key = _split(path)
        entries = []
        try:
            async for page in self._storage().list_versions(bucket, key + "/" if key else ""):
                for each in page:
                    rest = each.key[len(key) + 1 :] if key else each.key
                    if each.delete_marker or "/" in rest:
                        continue
                    name = f"{bucket}/{each.key}?versionId={each.version_id}"
                    entries.append(
                        {"name": name, "size": each.size, "type": "file", "ETag": each.etag}
                        | {"VersionId": each.version_id, "Key": f"{bucket}/{each.key}", "Size": each.size}
                    )
        except Exception as exc:
            raise _os_error(exc, path) from None
        return entries if detail else [entry["name"] for entry in entries]

    async def _find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Every object under `path`, its key ranges listed in parallel (s3bulk's listing), in
        key order. Names only, unless the caller or a bulk call wants each entry: a list of
        100,000 names is a fraction of 100,000 entries' memory."""
        prefix = kwargs.pop("prefix", None) or ""
        if prefix:
            return await self._find_prefixed(path, prefix, maxdepth, withdirs, detail)
        if maxdepth is not None:
            return await super()._find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        if not bucket:
            raise ValueError("find needs a bucket: find('bucket/prefix')")
        seen, listed = _SEEN.get(), _LISTED.get()
        entries = detail or withdirs or seen is not None
        found: dict[str, dict[str, Any]] = {}
        names: list[str] = []
        try:
            async for objects in self._listing(bucket, key + "/" if key else ""):
                for info in objects:
                    if info.key.endswith("/"):
                        continue  # a directory marker: prefixes are the directories here
                    if entries:
                        found[f"{bucket}/{info.key}"] = _listed(bucket, info)
                    else:
                        names.append(f"{bucket}/{info.key}")
        except Exception as exc:
            raise _os_error(exc, path) from None
        if withdirs:
            self._add_directories(found, path, key)
        if entries and found:
            self._keep_listings(found, path)
        if not found and not names and key:  # the path may name one object
            try:
                itself = await self._info(path)
            except FileNotFoundError:
                itself = {"type": "absent"}
            if itself["type"] == "file":
                found[path], names = itself, [path]
        if not entries:
            return names
        if seen is not None and listed is not None:
            seen.update(found)
            listed.add(path)
        ordered = sorted(found)
        return {name: found[name] for name in ordered} if detail else ordered

    async def _find_prefixed(
        self, path: str, prefix: str, maxdepth: int | None, withdirs: bool, detail: bool
    ) -> Any:
        """`find(path, prefix=P)`, as s3fs: the objects under `path` whose name there starts
        with P (one listing of `path/P`), `maxdepth` levels deep at most. Not kept as listings:
        they are part of a directory, not all of it."""
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        if not bucket:
            raise ValueError("find needs a bucket: find('bucket/prefix')")
        found: dict[str, dict[str, Any]] = {}
        try:
            async for objects in self._listing(bucket, (key + "/" if key else "") + prefix):
                found |= {
                    f"{bucket}/{info.key}": _listed(bucket, info)
                    for info in objects
                    if not info.key.endswith("/")
                }
        except Exception as exc:
            raise _os_error(exc, path) from None
        if withdirs:
            self._add_directories(found, path, "")
            found.pop(path, None)

        def depth(name: str) -> int:
            return name[len(path) + 1 :].count("/") + 1 if path else name.count("/") + 1

        kept = {name: entry for name, entry in found.items() if maxdepth is None or depth(name) <= maxdepth}
        ordered = sorted(kept)
        return {name: kept[name] for name in ordered} if detail else ordered

    def _listing(self, bucket: str, prefix: str) -> Any:
        """The pages of objects under a prefix, key ranges in parallel, on this loop's storage."""
        from s3bulk._sources.listing import list_prefix

        return list_prefix(self._storage(), bucket, prefix, concurrency=16, auto=True)

    def _keep_listings(self, found: dict[str, dict[str, Any]], path: str) -> None:
        """What a whole listing under `path` found, kept as fsspec's listings of each directory
        in it (its files and subdirectories), as s3fs keeps them: the `info`, `isfile` and `open`
        of each file that follow (a pyarrow dataset's, say) then cost no request."""
        levels: dict[str, dict[str, dict[str, Any]]] = {}
        for name, entry in found.items():
            child, parent = name, name.rpartition("/")[0]
            while len(parent) >= len(path) and child != path:
                kept = levels.setdefault(parent, {})
                if child in kept:
                    break
                kept[child] = entry if child == name else _directory(child)
                child, parent = parent, parent.rpartition("/")[0]
        for parent, children in levels.items():
            self.dircache[parent] = sorted(children.values(), key=lambda entry: entry["name"])

    def _known(self, path: str) -> dict[str, Any] | None:
        """`path`'s entry in a kept listing: None when no kept listing says; FileNotFoundError
        when its directory's says it is not there."""
        if path in self.dircache:
            return _directory(path)
        found = self._ls_from_cache(path)
        return found[0] if found else None

    def invalidate_cache(self, path: str | None = None) -> None:
        """Forget kept listings: all of them, or those at, above and under `path` (every write
        and delete through this filesystem calls it for what it changed)."""
        if path is None:
            self.dircache.clear()
        else:
            path = self._strip_protocol(path)
            for name in [each for each in self.dircache if each.startswith(path + "/")]:
                self.dircache.pop(name, None)
            above = path
            while above:
                self.dircache.pop(above, None)
                above = self._parent(above)
        super().invalidate_cache(path)

    @staticmethod
    def _add_directories(found: dict[str, dict[str, Any]], path: str, key: str) -> None:
        """The prefixes between `path` and each object, as fsspec's directories."""
        for name in list(found):
            parent = name.rpartition("/")[0]
            while len(parent) > len(path) and parent not in found:
                found[parent] = _directory(parent)
                parent = parent.rpartition("/")[0]
        if found and key:
            found[path] = _directory(path)

    # ---- one object -----------------------------------------------------------------------------
    async def _cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        """The object's bytes (checked as `cp` checks a download: `Storage.get_object`), or bytes
        [start, end) of it, of the version a listing or an `info` of it saw when there was one
        (If-Match): the ranges of one file that `cat_ranges` reads are then of one version."""
        path, in_path = _version_of(self._strip_protocol(path))
        version = kwargs.get("version_id") or in_path
        bucket, key = _split(path)
        storage = self._storage()
        if version:
            return await self._cat_version(path, version, start, end)
        try:
            if start is None and end is None:
                return await storage.get_object(bucket, key)
            etag = str(kwargs.get("if_match") or self._known_etag(path))
            if (start is not None and start < 0) or (end is not None and end < 0) or end is None:
                info = await self._info(path)
                size, etag = info["size"], str(info.get("ETag", ""))
                start = 0 if start is None else (start if start >= 0 else max(0, size + start))
                end = size if end is None else (end if end >= 0 else max(0, size + end))
            start = start or 0
            if end <= start:
                return b""
            return await storage.get_range(bucket, key, start, end, if_match=etag)
        except Exception as exc:
            raise _os_error(exc, path) from None

    async def _cat_version(self, path: str, version: str, start: int | None, end: int | None) -> bytes:
        info = await self._info(path, version_id=version)
        size = info["size"]
        start = 0 if start is None else (start if start >= 0 else max(0, size + start))
        end = size if end is None else (end if end >= 0 else max(0, size + end))
        if end <= start:
            return b""
        bucket, key = _split(path)
        client = self._storage().client
        try:
            return await self._storage().retry(
                lambda: client.get_range(bucket, key, start, end, version_id=version), f"get s3://{path}"
            )
        except Exception as exc:
            raise _os_error(exc, path) from None

    def _known_etag(self, path: str) -> str:
        """The ETag a kept listing says `path` has ("" when none says)."""
        try:
            return str((self._known(path) or {}).get("ETag", ""))
        except FileNotFoundError:
            return ""

    async def _cat_ranges(
        self,
        paths: list[str],
        starts: Any,
        ends: Any,
        max_gap: int | None = None,
        batch_size: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[Any]:
        """Byte ranges of many objects, `batch_size` in flight at once; ranges of one object that
        lie within `max_gap` bytes of each other (64 KiB by default) are fetched as one GET of at
        most 8 MiB and cut apart here. An object read in several GETs has each ask for one
        version (If-Match: the ETag a kept listing or an `info` gives), so that an object
        replaced meanwhile fails its ranges rather than mixing two versions."""
        count = len(paths)
        starts = list(starts) if isinstance(starts, list | tuple) else [starts] * count
        ends = list(ends) if isinstance(ends, list | tuple) else [ends] * count
        if len(starts) != count or len(ends) != count:
            raise ValueError("cat_ranges: paths, starts and ends differ in length")
        plain = [
            each
            for each in range(count)
            if isinstance(starts[each], int) and isinstance(ends[each], int) and starts[each] >= 0
        ]
        blocks = _merged([self._strip_protocol(paths[each]) for each in plain], plain, starts, ends, max_gap)
        batch = batch_size or self.batch_size  # in flight at once: memory bounded by it, not the count
        versions = await self._versions([path for path, _, _, _ in blocks], batch)
        fetched = await _run_coros_in_chunks(
            [
                self._cat_file(path, start=start, end=end, if_match=versions.get(path, ""))
                for path, start, end, _ in blocks
            ],
            batch_size=batch,
            nofiles=True,
            return_exceptions=True,
        )
        out: list[Any] = [None] * count
        for (_, start, _, members), data in zip(blocks, fetched, strict=True):
            for each in members:
                out[each] = (
                    data
                    if isinstance(data, BaseException)
                    else data[starts[each] - start : ends[each] - start]
                )
        merged = set(plain)
        rest = [each for each in range(count) if each not in merged]
        single = await _run_coros_in_chunks(
            [self._cat_file(paths[each], start=starts[each], end=ends[each]) for each in rest],
            batch_size=batch,
            nofiles=True,
            return_exceptions=True,
        )
        for each, data in zip(rest, single, strict=True):
            out[each] = data
        if on_error != "return":
            failed = next((each for each in out if isinstance(each, BaseException)), None)
            if failed is not None:
                raise failed
        return out

    async def _versions(self, paths: list[str], batch: int | None) -> dict[str, str]:
        """The ETag of each path read in more than one GET, as a kept listing says or a HEAD
        (`info`) finds ("" when it cannot be found: its GETs go without a condition)."""
        several = sorted(path for path, count in collections.Counter(paths).items() if count > 1)
        unknown = [path for path in several if not self._known_etag(path)]
        found = await _run_coros_in_chunks(
            [self._info(path) for path in unknown], batch_size=batch, nofiles=True, return_exceptions=True
        )
        etags = {path: self._known_etag(path) for path in several}
        for path, info in zip(unknown, found, strict=True):
            etags[path] = "" if isinstance(info, BaseException) else str(info.get("ETag", ""))
        return etags

    def _attributes(self, kwargs: dict[str, Any], path: str = "") -> Attributes:
        """What a write stores besides its bytes: the filesystem's s3_additional_kwargs, then
        the call's own (ContentType=...), then a Content-Type guessed from `path`'s name, as
        s3fs guesses it for `put`."""
        given = {name: kwargs.pop(name) for name in list(kwargs) if name in WRITE_ATTRIBUTES}
        try:
            attributes = Attributes(**(self.s3_additional_kwargs | _attributes_of(given, "write")))
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        return attributes.with_content_type(mimetypes.guess_type(path)[0] if path else None)

    async def _pipe_file(
        self, path: str, value: bytes, mode: str = "overwrite", chunksize: int | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """`value` as the object (in parts of `chunksize` above it); with mode="create" only
        where no object is (If-None-Match). Returns its ETag and VersionId, as s3fs does."""
        path = self._strip_protocol(path)
        whole = bytes(value)
        data = memoryview(whole)
        attributes = self._attributes(kwargs)
        try:
            return await self._write_object(
                path,
                len(data),
                lambda start, length: whole if length == len(whole) else bytes(data[start : start + length]),
                chunksize or PUT_MAX,  # in memory already: one PUT, unless parts are asked for
                create=mode == "create",
                attributes=attributes,
            )
        finally:
            self._forget([path])

    async def _write_object(
        self,
        path: str,
        size: int,
        read: Any,
        part: int,
        *,
        create: bool,
        attributes: Attributes,
        callback: Any = DEFAULT_CALLBACK,
    ) -> dict[str, Any]:
        """An object of `size` bytes, `read(start, length)` a part at a time: one PUT up to
        `part`, else a multipart upload (aborted if anything fails); with `create`, only where
        no object is (If-None-Match: *, on the PUT or the completion): FileExistsError else."""
        bucket, key = _split(path)
        storage = self._storage()
        client, what = storage.client, f"put s3://{path}"
        condition = {"If-None-Match": "*"} if create else {}
        headers = attributes.headers()
        part = max(part, PART_MIN)
        try:
            if size <= part:
                data, write = read(0, size), OneWrite(client, bucket, key)
                answer = await storage.retry(lambda: write.put(data, headers | condition), what)
                callback.relative_update(size)
            else:
                answer = await self._write_parts(bucket, key, size, read, part, headers, condition, callback)
        except WrittenMeanwhile:  # If-None-Match refused (412), as the client names it
            raise FileExistsError(17, "the object exists (mode='create')", path) from None
        except S3Error as exc:
            if create and exc.status in (409, 412):
                raise FileExistsError(17, "the object exists (mode='create')", path) from None
            raise _os_error(exc, path) from None
        except ItemError as exc:
            raise _os_error(exc, path) from None
        return {"ETag": answer.get("etag"), "VersionId": answer.get("x-amz-version-id")}

    async def _write_parts(
        self,
        bucket: str,
        key: str,
        size: int,
        read: Any,
        part: int,
        headers: dict[str, str],
        condition: dict[str, str],
        callback: Any,
    ) -> dict[str, str]:
        storage = self._storage()
        client, what = storage.client, f"upload s3://{bucket}/{key}"
        checksum = client.checksum
        upload = await storage.retry(
            lambda: client.create_multipart_upload(bucket, key, headers, checksum), what
        )
        try:
            sent: list[tuple[str, str, int]] = []
            for number, start in enumerate(range(0, size, part), 1):
                data = await asyncio.to_thread(read, start, min(part, size - start))

                async def send(number: int = number, data: bytes = data) -> tuple[str, str]:
                    return await client.upload_part(bucket, key, upload, number, data)

                etag, value = await storage.retry(send, what)
                sent.append((etag, value, len(data)))
                callback.relative_update(len(data))
            etags, sums = [etag for etag, _, _ in sent], [(value, length) for _, value, length in sent]
            write = OneWrite(client, bucket, key)
            return await storage.retry(lambda: write.complete(upload, etags, checksum, sums, condition), what)
        except BaseException:
            await client.abort_multipart_upload(bucket, key, upload)
            raise

    async def _put_file(
        self,
        lpath: str,
        rpath: str,
        mode: str = "overwrite",
        callback: Any = DEFAULT_CALLBACK,
        chunksize: int | None = None,
        **kwargs: Any,
    ) -> None:
        if os.path.isdir(lpath):
            return  # a prefix needs no object
        pending = _PENDING.get()
        if pending is not None:
            pending.append((lpath, self._url(rpath)))
            return
        rpath = self._strip_protocol(rpath)
        bucket, key = _split(rpath)
        attributes = self._attributes(kwargs, lpath)
        size = os.path.getsize(lpath)
        callback.set_size(size)
        try:
            if mode == "create":

                def read(start: int, length: int) -> bytes:
                    with open(lpath, "rb") as handle:
                        handle.seek(start)
                        return handle.read(length)

                part = chunksize or self.default_block_size
                await self._write_object(
                    rpath, size, read, part, create=True, attributes=attributes, callback=callback
                )
                return
            try:
                await self._storage().upload(lpath, bucket, key, attributes, Parts())
            except Exception as exc:
                raise _os_error(exc, rpath) from None
            callback.relative_update(size)
        finally:
            self._forget([rpath])

    async def _get_file(
        self, rpath: str, lpath: str, callback: Any = DEFAULT_CALLBACK, **kwargs: Any
    ) -> None:
        rpath = self._strip_protocol(rpath)
        if await self._isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        pending = _PENDING.get()
        if pending is not None:
            pending.append((self._url(rpath), lpath))
            return
        from s3bulk._api.objects import get_to_file_async

        try:
            await get_to_file_async(self._url(rpath), lpath, settings=self.settings)
        except Exception as exc:
            raise _os_error(exc, rpath) from None
        size = os.path.getsize(lpath)
        callback.set_size(size)
        callback.relative_update(size)

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        await self._copied(path1, path2)

    async def _copied(self, path1: str, path2: str) -> str:
        """`_cp_file`: the ETag of the version it copied ("" when it copied nothing: a prefix, or
        a pair collected for a bulk call)."""
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        info = await self._info(path1)
        if info["type"] == "directory":
            return ""  # a prefix needs no object
        pending = _PENDING.get()
        if pending is not None:
            pending.append((self._url(path1), self._url(path2)))
            return ""
        (source_bucket, source_key), (bucket, key) = _split(path1), _split(path2)
        try:
            copied = await self._storage().copy(
                source_bucket,
                source_key,
                bucket,
                key,
                size=info["size"],
                etag=info.get("ETag", ""),
                parts=Parts(),
            )
        except Exception as exc:
            raise _os_error(exc, path1) from None
        finally:
            self._forget([path2])
        return copied.etag

    async def _delete_moved(self, path: str, etag: str) -> None:
        """mv's delete of a source it copied: only while it is the version copied (`etag`), as
        `s3bulk mv` deletes (`BatchDeleter`); a newer one another writer put there is kept, and
        the call fails naming it."""
        from s3bulk._commands.deletes import BatchDeleter

        path = self._strip_protocol(path)
        bucket, key = _split(path)
        loop = id(asyncio.get_running_loop())
        deleter = self._deleters.get((loop, bucket))
        if deleter is None:
            deleter = self._deleters[loop, bucket] = BatchDeleter(self._storage(), bucket)
        try:
            await deleter.delete(key, etag)
        except Exception as exc:
            raise _os_error(exc, path) from None
        finally:
            self._forget([path])

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        await self._rm([path])

    async def _rm(
        self, path: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> list[str]:
        """Delete the objects `path` names (and everything under it, `recursive`: folder
        markers too, and a bucket named alone, as s3fs does), 1,000 keys per DeleteObjects
        request, the requests side by side. Returns the names deleted; a path that names
        nothing raises FileNotFoundError."""
        paths = [self._strip_protocol(each) for each in (path if isinstance(path, list) else [path])]
        names: set[str] = set()
        buckets: list[str] = []
        for each in paths:
            bucket, key = _split(each)
            if not bucket:
                raise ValueError("rm needs a bucket: rm('bucket/key')")
            if glob.has_magic(each) or (recursive and maxdepth is not None):
                names |= set(await self._expand_path(each, recursive=recursive, maxdepth=maxdepth))
            elif not key:
                buckets.append(bucket)
                if recursive:
                    names |= set(await self._every_key(bucket, ""))
            elif recursive:
                under = await self._every_key(bucket, key + "/")
                if not under and not await self._exists(each):
                    raise FileNotFoundError(2, "no such object or prefix", each)
                names |= {*under, each}
            else:
                names.add(each)
        try:
            await self._delete(sorted(names))
            for bucket in buckets:
                await self._remove_bucket(bucket)
        finally:
            self._forget(sorted(names))
            for each in paths:
                self.invalidate_cache(each)
        return sorted(names)

    async def _every_key(self, bucket: str, prefix: str) -> list[str]:
        """Every key under `prefix`, folder markers too (what a recursive rm deletes)."""
        try:
            return [
                f"{bucket}/{info.key}" async for objects in self._listing(bucket, prefix) for info in objects
            ]
        except Exception as exc:
            raise _os_error(exc, f"{bucket}/{prefix}") from None

    async def _delete(self, names: list[str]) -> None:
        by_bucket: dict[str, list[str]] = {}
        for name in names:
            bucket, key = _split(name)
            if key:
                by_bucket.setdefault(bucket, []).append(key)
        storage = self._storage()
        batches = [
            (bucket, keys[start : start + DELETE_BATCH])
            for bucket, keys in by_bucket.items()
            for start in range(0, len(keys), DELETE_BATCH)
        ]
        results = await asyncio.gather(
            *(storage.delete_many(bucket, keys) for bucket, keys in batches), return_exceptions=True
        )
        for (bucket, _), failed in zip(batches, results, strict=True):
            if isinstance(failed, BaseException):
                raise _os_error(failed, bucket) if isinstance(failed, Exception) else failed
            for key, why in failed.items():
                if "NoSuchBucket" in str(why):
                    raise FileNotFoundError(2, "no such bucket", bucket)
                raise OSError(5, f"not deleted: {why}", f"{bucket}/{key}")

    async def _remove_bucket(self, bucket: str) -> None:
        try:
            await self._storage().remove_bucket(bucket)
        except S3Error as exc:
            if exc.code == "BucketNotEmpty" or exc.status == 409:
                raise OSError(
                    errno.ENOTEMPTY, "the bucket holds objects: rm(bucket, recursive=True)", bucket
                ) from None
            raise _os_error(exc, bucket) from None
        self.invalidate_cache(bucket)
        self.invalidate_cache("")

    async def _makedirs(self, path: str, exist_ok: bool = False) -> None:
        """A prefix needs no object: only a missing bucket is made (FileExistsError for a
        bucket that is there, unless `exist_ok`)."""
        bucket, key = _split(self._strip_protocol(path))
        if not bucket:
            raise ValueError("makedirs needs a bucket: makedirs('bucket/prefix')")
        if await self._exists(bucket):
            if not key and not exist_ok:
                raise FileExistsError(17, "the bucket exists", bucket)
            return
        await self._make_bucket(bucket, "")

    async def _mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """A bucket (FileExistsError if it is there), or a prefix, which needs no object: its
        bucket is made when missing with `create_parents`, else FileNotFoundError."""
        bucket, key = _split(self._strip_protocol(path))
        if not bucket:
            raise ValueError("mkdir needs a bucket: mkdir('bucket') or mkdir('bucket/prefix')")
        region = kwargs.get("region_name") or kwargs.get("region") or ""
        if not key:
            if await self._exists(bucket):  # S3 in us-east-1 answers 200 to making it again
                raise FileExistsError(17, "the bucket exists", bucket)
            await self._make_bucket(bucket, region)
        elif not await self._exists(bucket):
            if not create_parents:
                raise FileNotFoundError(2, "no such bucket (create_parents=True makes it)", bucket)
            await self._make_bucket(bucket, region)

    async def _make_bucket(self, bucket: str, region: str) -> None:
        try:
            await self._storage().make_bucket(bucket, region or self.settings.region or "")
        except S3Error as exc:
            if exc.code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise FileExistsError(17, "the bucket exists", bucket) from None
            raise _os_error(exc, bucket) from None
        self.invalidate_cache("")

    async def _rmdir(self, path: str) -> None:
        """Remove an empty bucket. A prefix is no directory to remove (FileExistsError while
        something is under it: rm(path, recursive=True); FileNotFoundError when nothing is)."""
        bucket, key = _split(self._strip_protocol(path))
        if key:
            if await self._exists(path):
                raise FileExistsError(17, "objects are under it: rm(path, recursive=True)", path)
            raise FileNotFoundError(2, "no such prefix", path)
        await self._remove_bucket(bucket)

    rmdir = sync_wrapper(_rmdir)

    async def _touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        """An empty object; with truncate=False, one that exists is refused (S3 cannot
        change an object's time without writing it: ValueError, as s3fs)."""
        if not truncate and await self._exists(path):
            raise ValueError(
                f"{path}: touch(truncate=False) of an object that exists: S3 cannot update its time"
            )
        await self._pipe_file(path, b"", **kwargs)

    touch = sync_wrapper(_touch)

    async def _glob(self, path: str, maxdepth: int | None = None, **kwargs: Any) -> Any:
        if self._strip_protocol(path).startswith("*"):
            raise ValueError("glob of every bucket: start the pattern with a bucket name")
        return await super()._glob(path, maxdepth=maxdepth, **kwargs)

    async def _list_multipart_uploads(self, bucket: str) -> list[dict[str, Any]]:
        """The multipart uploads under way in `bucket` (Key, UploadId), as s3fs lists them."""
        found = []
        async for page in self._storage().list_uploads(self._strip_protocol(bucket)):
            found += [{"Key": each.key, "UploadId": each.upload_id} for each in page]
        return found

    list_multipart_uploads = sync_wrapper(_list_multipart_uploads)

    async def _clear_multipart_uploads(self, bucket: str) -> None:
        """Abort every multipart upload under way in `bucket`."""
        bucket = self._strip_protocol(bucket)
        for each in await self._list_multipart_uploads(bucket):
            await self._storage().abort_upload(bucket, each["Key"], each["UploadId"])

    clear_multipart_uploads = sync_wrapper(_clear_multipart_uploads)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_type: str | None = None,
        cache_options: dict[str, Any] | None = None,
        size: int | None = None,
        version_id: str | None = None,
        fill_cache: bool | None = None,
        **kwargs: Any,
    ) -> S3BulkFile:
        """fsspec's buffered file (`S3BulkFile`): read through s3bulk's prefetching reader (a
        read somewhere new fetches `block_size` bytes, 8 MiB unless given; reading on streams
        the blocks after it), or any fsspec cache asked for; written in parts of `block_size`
        (50 MiB, as s3fs; 5 MiB at least), "xb" only where nothing is (If-None-Match), "ab" onto
        what is there (a server-side copy of it as the first part, as s3fs does it). Keywords
        as s3fs takes them (ACL=, ContentType=, Metadata=, ServerSideEncryption=...) set what a
        write stores, over the filesystem's s3_additional_kwargs."""
        path = self._strip_protocol(path)
        block_size = block_size or kwargs.pop("blocksize", None)
        kwargs.pop("requester_pays", None)  # a filesystem's setting here
        path, in_path = _version_of(path)
        version_id = version_id or in_path
        if version_id and not self.version_aware:
            raise ValueError(
                f"version_id {version_id!r}: give version_aware=True to the filesystem to read versions"
            )
        if "r" in mode and "b" not in mode:
            mode = mode + "b"
        if mode not in ("rb", "wb", "xb", "ab"):
            raise ValueError(f"mode {mode!r}: s3bulk opens objects 'rb', 'wb', 'xb' or 'ab'")
        if not path:
            raise ValueError("open needs a path: bucket/key")
        try:
            attributes = Attributes(**(self.s3_additional_kwargs | _attributes_of(kwargs, "open")))
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        if mode != "rb":
            self.invalidate_cache(path)
            if mode == "xb" and self.exists(path):  # said now; If-None-Match says it again on close
                raise FileExistsError(17, "the object exists (mode 'xb')", path)
            return S3BulkFile(self, path, mode, block_size, autocommit=autocommit, attributes=attributes)
        known = None if version_id else self._known(path)
        if known is not None and known["type"] == "directory":
            raise IsADirectoryError(21, "a prefix, not an object", path)
        details = known if known is not None and size is None else None
        return S3BulkFile(
            self,
            path,
            mode,
            block_size,
            autocommit=autocommit,
            cache_type=cache_type,
            cache_options=cache_options,
            size=size,
            version_id=version_id,
            fill_cache=fill_cache,
            details=details,
        )

    async def open_async(self, path: str, mode: str = "rb", **kwargs: Any) -> S3BulkStreamedFile:
        """A file read with `await f.read(n)` on this filesystem's loop (fsspec's streamed
        file), as s3fs's `open_async`: reading only."""
        if "b" not in mode or "r" not in mode:
            raise ValueError(f"open_async: mode {mode!r}: only 'rb' is streamed")
        path = self._strip_protocol(path)
        info = await self._info(path)
        if info["type"] != "file":
            raise IsADirectoryError(21, "a prefix, not an object", path)
        return S3BulkStreamedFile(self, path, mode, size=info["size"], etag=str(info.get("ETag", "")))

    @functools.cached_property
    def _files(self) -> Storage:
        """The storage files are opened on (their readers and writers are obstore's, which run
        on its own threads, whatever the calling thread)."""
        return Storage(self.settings)

    def ukey(self, path: str) -> str:
        return str(self.info(path).get("ETag", ""))

    def checksum(self, path: str) -> int:
        return int(self.ukey(path).strip('"').split("-")[0][:16] or "0", 16)

    def modified(self, path: str) -> datetime:
        value = self.info(path).get("LastModified")
        if not isinstance(value, datetime):
            raise IsADirectoryError(21, "a prefix has no modification time", path)
        return value

    # ---- many objects: one job ------------------------------------------------------------------
    async def _get(
        self,
        rpath: Any,
        lpath: Any,
        recursive: bool = False,
        callback: Any = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Objects to files as one s3bulk job. A link inside a destination directory that leads
        outside it is refused, as `s3bulk cp` refuses it, in one line and before anything is
        written (s3fs follows it: docs/fsspec.md): fsspec's rules make the pairs against an empty
        stand-in of the destination (they make the files' directories as they go), each pair's
        directories are checked, and only then made and written."""
        if not isinstance(lpath, str):  # the caller named every file itself
            pairs, tree = await self._collect(
                super()._get, rpath, lpath, recursive=recursive, maxdepth=maxdepth, **kwargs
            )
            await self._move(pairs, tree, callback)
            return
        with tempfile.TemporaryDirectory(prefix=".s3bulk-get-") as empty:
            stand_in = _StandIn(lpath, empty)
            pairs, tree = await self._collect(
                super()._get, rpath, stand_in.path, recursive=recursive, maxdepth=maxdepth, **kwargs
            )
            pairs = [(source, stand_in.back(local)) for source, local in pairs]
            tree = (tree[0], stand_in.back(tree[1]).rstrip("/") + "/") if tree is not None else None
            directories = [stand_in.back(each) for each in stand_in.made()]
        inside = _Inside(stand_in.root)
        for directory in [*directories, *(os.path.dirname(local) for _, local in pairs)]:
            inside.check(directory)
        for directory in {*directories, *(os.path.dirname(local) for _, local in pairs)}:
            os.makedirs(directory, exist_ok=True)
        await self._move(pairs, tree, callback)

    async def _put(
        self,
        lpath: Any,
        rpath: Any,
        recursive: bool = False,
        callback: Any = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Files to objects as one s3bulk job; with mode="create" (only where no object is) or
        what to store besides the bytes (ContentType=...), each file by `put_file`, which
        takes them (a job would not)."""
        if kwargs.get("mode", "overwrite") != "overwrite" or set(kwargs) & set(WRITE_ATTRIBUTES):
            await super()._put(
                lpath, rpath, recursive=recursive, callback=callback, maxdepth=maxdepth, **kwargs
            )
            return
        pairs, tree = await self._collect(
            super()._put, lpath, rpath, recursive=recursive, maxdepth=maxdepth, **kwargs
        )
        await self._move(pairs, tree, callback)

    async def _copy(
        self,
        path1: Any,
        path2: Any,
        recursive: bool = False,
        on_error: str | None = None,
        maxdepth: int | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        pairs, tree = await self._collect(
            super()._copy,
            path1,
            path2,
            recursive=recursive,
            on_error=on_error,
            maxdepth=maxdepth,
            batch_size=batch_size,
            **kwargs,
        )
        await self._move(pairs, tree)

    async def _mv(
        self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> None:
        """fsspec's `mv` is a copy, then an `rm` of the source path, which would also delete what
        was written there meanwhile; here each source is deleted only once its own copy
        succeeded (`s3bulk mv`), and nothing else."""
        if path1 == path2:
            return
        pairs, tree = await self._collect(super()._copy, path1, path2, recursive=recursive, maxdepth=maxdepth)
        await self._move(pairs, tree, delete_sources=True)

    def mv(
        self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> None:
        sync(self.loop, self._mv, path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    async def _collect(
        self, call: Any, *args: Any, **kwargs: Any
    ) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
        """The pairs fsspec's rules make of a bulk call's arguments, moved by nobody yet."""
        pending: list[tuple[str, str]] = []
        tokens = _PENDING.set(pending), _SEEN.set({}), _LISTED.set(set())
        try:
            await call(*args, **kwargs)
            return pending, self._whole_tree(pending)
        finally:
            _PENDING.reset(tokens[0])
            _SEEN.reset(tokens[1])
            _LISTED.reset(tokens[2])

    def _whole_tree(self, pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
        """(source, destination) roots when the pairs are every object or file under one root,
        each landing under the other root by the same relative name: the shape of
        `get(prefix, dir, recursive=True)`, which `s3bulk cp` then moves as a tree (listed in
        parallel, no request per object to learn its size). None for any other shape."""
        if len(pairs) < 2:
            return None
        sources = sorted(source for source, _ in pairs)
        # URLs, not paths: the common characters, then back to the last '/'
        root = os.path.commonprefix([sources[0], sources[-1]]).rpartition("/")[0] + "/"  # noqa: RUF071
        first_source, first_destination = pairs[0]
        relative = first_source[len(root) :]
        if not first_destination.endswith("/" + relative):
            return None
        target = first_destination[: len(first_destination) - len(relative)]
        if any(destination != target + source[len(root) :] for source, destination in pairs):
            return None
        return (root, target) if self._all_under(root, len(pairs)) else None

    def _all_under(self, root: str, count: int) -> bool:
        """Whether `count` is every object (or file) under `root`, as a listing or walk just found."""
        if not root.startswith("s3://"):
            files = sum(len(names) for _, _, names in os.walk(root))
            return files == count
        path = root[len("s3://") :]
        listed, seen = _LISTED.get() or set(), _SEEN.get() or {}
        if not any(path == each + "/" or path.startswith(each + "/") for each in listed):
            return False
        under = sum(1 for name, entry in seen.items() if entry["type"] == "file" and name.startswith(path))
        return under == count

    async def _move(
        self,
        pairs: list[tuple[str, str]],
        tree: tuple[str, str] | None,
        callback: Any = DEFAULT_CALLBACK,
        delete_sources: bool = False,
    ) -> None:
        """Move (source, destination) pairs as one s3bulk job: a whole tree as `s3bulk cp` (or
        `mv`) moves it, any other set as `s3bulk run`'s items (one per pair: keys are data, never
        command text, `_commands/run.py`). `callback` hears of objects as the job finishes them,
        not as fsspec hands them over. What it changed, even in part, is listed afresh next time."""
        if not pairs:
            return
        try:
            await self._run(pairs, tree, callback, delete_sources)
        finally:
            changed = [destination for _, destination in pairs]
            changed += [source for source, _ in pairs] if delete_sources else []
            changed += [tree[1], *([tree[0]] if delete_sources else [])] if tree else []
            self._forget([each for each in changed if each.startswith("s3://")])

    def _forget(self, paths: list[str]) -> None:
        """Drop the kept listings of the directories that hold `paths`, and of those under a path
        that ends in '/' (a tree's root), at a lookup per directory, not a scan per object."""
        for root in paths:
            if root.endswith("/"):
                self.invalidate_cache(root)
        above = {self._parent(self._strip_protocol(path)) for path in paths}
        while above:
            for path in above:
                self.dircache.pop(path, None)
            above = {self._parent(path) for path in above if path} - {""}

    async def _run(
        self, pairs: list[tuple[str, str]], tree: tuple[str, str] | None, callback: Any, delete_sources: bool
    ) -> None:
        """`_move`'s work: a few pairs one by one, a tree as cp/mv, other sets as run's items."""
        from s3bulk._api.base import run_async

        callback.set_size(len(pairs))
        if len(pairs) < JOB_FROM or self.settings.given_keys is not None:
            await self._each(pairs, callback, delete_sources)  # keys given in code stay here
            return

        def progress(report: Report) -> None:
            callback.absolute_update(report.objects_done + report.objects_unchanged)

        if tree is not None:
            from s3bulk._api.copy import copy_async, move_async

            run = move_async if delete_sources else copy_async
            report = await run(
                *tree, follow_symlinks=True, journal=False, settings=self.settings, on_progress=progress
            )
        else:
            from s3bulk._commands.run import RunSpec, item

            verb = "mv" if delete_sources else "cp"
            with tempfile.NamedTemporaryFile("w", suffix=".s3bulk-items", delete=False) as handle:
                handle.writelines(item(verb, source, destination) for source, destination in pairs)
            try:
                spec = RunSpec(commands_file=handle.name, items=True)
                report = await run_async(spec, settings=self.settings, journal=False, on_progress=progress)
            finally:
                os.unlink(handle.name)
        self.last_report = report
        if report.failures:
            first = report.failures[0]
            missing = "NoSuchKey" in first.reason or "no such" in first.reason.lower()
            kind = FileNotFoundError if missing else OSError
            raise kind(
                2 if missing else 5, f"{len(report.failures)} failed; first: {first.reason}", first.source
            )

    async def _each(self, pairs: list[tuple[str, str]], callback: Any, delete_sources: bool) -> None:
        """A few pairs side by side, each on its own (for them a job's fixed cost, its plan and
        checks, is more than it saves); a source is deleted only once its own copy succeeded."""

        async def one(source: str, destination: str) -> None:
            copied = await self._one(source, destination)
            if delete_sources and copied:  # a prefix copied nothing, and has nothing to delete
                await self._delete_moved(source, copied)
            callback.relative_update(1)

        done = await _run_coros_in_chunks(
            [one(*pair) for pair in pairs], batch_size=self.batch_size, nofiles=True, return_exceptions=True
        )
        failed = next((each for each in done if isinstance(each, BaseException)), None)
        if failed is not None:
            raise failed

    async def _one(self, source: str, destination: str) -> str:
        """One pair moved on its own; the ETag of the version copied (mv's: S3 to S3)."""
        token = _PENDING.set(None)
        try:
            if source.startswith("s3://") and destination.startswith("s3://"):
                return await self._copied(source, destination)
            if source.startswith("s3://"):
                await self._get_file(source, destination)
            else:
                await self._put_file(source, destination)
            return ""
        finally:
            _PENDING.reset(token)


def _merged(
    paths: list[str], members: list[int], starts: list[int], ends: list[int], max_gap: int | None
) -> list[tuple[str, int, int, list[int]]]:
    """(path, start, end, the ranges it holds) blocks covering every range given, ranges of one
    object within `max_gap` bytes of each other merged, no block over 8 MiB."""
    gap = 64 * 1024 if max_gap is None else max_gap
    order = sorted(range(len(members)), key=lambda at: (paths[at], starts[members[at]]))
    blocks: list[tuple[str, int, int, list[int]]] = []
    for at in order:
        each = members[at]
        start, end = starts[each], max(ends[each], starts[each])
        if blocks:
            path, first, last, held = blocks[-1]
            if path == paths[at] and start <= last + gap and max(last, end) - first <= 8 * 1024 * 1024:
                blocks[-1] = (path, first, max(last, end), [*held, each])
                continue
        blocks.append((paths[at], start, end, [each]))
    return blocks


def _http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    from email.utils import parsedate_to_datetime

    return parsedate_to_datetime(value)


def _version_of(path: str) -> tuple[str, str | None]:
    """`bucket/key?versionId=V` as (bucket/key, V), as s3fs writes a version in a path."""
    if "?versionId=" in path:
        path, _, version = path.partition("?versionId=")
        return path, version
    return path, None


class _ReaderCache(BaseCache):
    """fsspec's cache interface over s3bulk's prefetching reader (`Storage.open_reader`): a
    read somewhere new fetches one block, reading on streams the blocks after it, and an object
    no bigger than a block is fetched whole; every GET asks for the version first seen."""

    name = READER_CACHE

    def __init__(self, blocksize: int, fetcher: Any, size: int, open_reader: Any = None) -> None:
        super().__init__(blocksize, fetcher, size)
        self._open_reader = open_reader
        self._reader: Any = None

    def _fetch(self, start: int | None, stop: int | None) -> bytes:
        start = 0 if start is None else start
        stop = self.size if stop is None else min(stop, self.size)
        if start >= stop:
            return b""
        if self._open_reader is None:
            return bytes(self.fetcher(start, stop))
        if self._reader is None:
            self._reader = self._open_reader()
        self._reader.seek(start)
        chunks, wanted = [], stop - start
        while wanted > 0:
            chunk = self._reader.read(wanted)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
        self.total_requested_bytes += stop - start
        return b"".join(chunks)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


register_cache(_ReaderCache, clobber=True)


class S3BulkFile(AbstractBufferedFile):
    """An object as fsspec's buffered file, as s3fs's S3File behaves: `size`, `loc`, `details`,
    `seek`, `cache`, `read_block`; written in parts of `blocksize` as they fill (`mpu`, the
    upload's id, and `parts` as s3fs names them), in one PUT when it closes smaller than a part;
    `autocommit=False` holds the upload open until `commit()` (or `discard()`)."""

    part_max = 5 * 1024**3

    def __init__(
        self,
        fs: S3BulkFileSystem,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_type: str | None = None,
        cache_options: dict[str, Any] | None = None,
        size: int | None = None,
        version_id: str | None = None,
        fill_cache: bool | None = None,
        details: dict[str, Any] | None = None,
        attributes: Attributes = NO_ATTRIBUTES,
    ) -> None:
        self.bucket, self.key = _split(path)
        if not self.bucket or not self.key:
            raise ValueError(f"open: {path!r} names no object (bucket/key)")
        self.version_id = version_id
        self.mpu: str | None = None  # the multipart upload's id, once there is one
        self.parts: list[tuple[str, str, int]] | None = None  # (ETag, checksum, length) sent
        self.fill_cache = fs.default_fill_cache if fill_cache is None else fill_cache
        self.attributes = attributes
        self.append_block = False  # "ab" onto an object of a part or more: copied as part 1
        self.buffer: Any = None  # fsspec's: what is written and not sent yet
        self.etag = ""
        self._appended = 0  # the bytes of the object appended onto, when copied as part 1
        self._checksum: str | None = None
        cache_type = cache_type or fs.default_cache_type
        if "r" in mode:
            block = block_size or fs.read_block_size or READ_BLOCK
            if details is not None:
                self.details = details
            elif size is None or version_id:
                self.details = fs.info(path, version_id=version_id) if version_id else fs.info(path)
            if self._details is not None:
                self.etag = str(self._details.get("ETag", ""))
                if fs.version_aware and not version_id:
                    self.version_id = self._details.get("VersionId")
            if cache_type == READER_CACHE:
                if version_id or block < READER_BLOCK_MIN:
                    # the reader reads the current version only, and a block that small would
                    # be a request per block: fsspec's readahead reads what is asked at once
                    cache_type = "readahead"
                else:
                    cache_options = {"open_reader": self._open_reader}
        else:
            block = block_size or fs.default_block_size
            if block < PART_MIN:
                raise ValueError(f"block_size {block}: S3's parts are 5 MiB or more (block_size=5 * 2**20)")
        super().__init__(
            fs,
            path,
            mode,
            block,
            autocommit=autocommit,
            cache_type=cache_type,
            cache_options=cache_options,
            size=size if size is not None or "r" not in mode else self.size,
        )
        self.s3 = fs  # as s3fs's files name their filesystem
        if "a" in mode:
            self._append_onto_existing()

    # ---- reading --------------------------------------------------------------------------------
    def _open_reader(self) -> Any:
        return self.fs._files.open_reader(
            self.bucket, self.key, buffer_size=self.blocksize, size=self.size, etag=self.etag
        )

    def _fetch_range(self, start: int, end: int) -> bytes:
        return bytes(
            sync(
                self.fs.loop,
                self.fs._cat_file,
                self.path,
                start=start,
                end=end,
                if_match=self.etag,
                version_id=self.version_id,
            )
        )

    def close(self) -> None:
        cache = getattr(self, "cache", None)
        if isinstance(cache, _ReaderCache):
            cache.close()
        super().close()

    def url(self, **kwargs: Any) -> str:
        return str(self.fs.url(self.path, **kwargs))

    # ---- writing --------------------------------------------------------------------------------
    def _append_onto_existing(self) -> None:
        """ "ab": what is there starts the new object: bytes of an object smaller than a part
        are written first; a bigger one is copied as the first part (UploadPartCopy)."""
        try:
            info = self.fs.info(self.path, refresh=True)
        except FileNotFoundError:
            return
        self.loc = int(info["size"])
        if self.loc < PART_MIN:
            self.buffer.write(self.fs.cat_file(self.path))
            self.loc = self.buffer.tell()
        else:
            self.append_block = True
            self.etag = str(info.get("ETag", ""))
            self._appended = self.loc

    def _wait(self, coroutine: Any) -> Any:
        return sync(self.fs.loop, lambda: coroutine)

    def _initiate_upload(self) -> None:
        if self.autocommit and not self.append_block and self.tell() < self.blocksize:
            return  # closing a small file: one PUT
        self._wait(self._start_upload())

    async def _start_upload(self) -> None:
        storage = self.fs._storage()
        client, what = storage.client, f"start an upload of s3://{self.bucket}/{self.key}"
        self._checksum = None if self.append_block else client.checksum
        headers = self.attributes.headers()
        self.mpu = await storage.retry(
            lambda: client.create_multipart_upload(self.bucket, self.key, headers, self._checksum), what
        )
        self.parts = []
        if self.append_block:
            source = f"/{self.bucket}/{quote_key(self.key)}"
            etag = await storage.retry(
                lambda: client.upload_part_copy(
                    self.bucket, self.key, str(self.mpu), 1, source, 0, self._appended - 1, if_match=self.etag
                ),
                f"copy s3://{self.bucket}/{self.key} as the first part",
            )
            self.parts.append((etag, "", self._appended))

    async def _send_part(self, data: bytes) -> None:
        storage, number = self.fs._storage(), len(self.parts or []) + 1
        etag, checksum = await storage.retry(
            lambda: storage.client.upload_part(self.bucket, self.key, str(self.mpu), number, data),
            f"upload part {number} of s3://{self.bucket}/{self.key}",
        )
        assert self.parts is not None
        self.parts.append((etag, checksum, len(data)))

    def _upload_chunk(self, final: bool = False) -> bool:
        if not (self.autocommit and not self.append_block and final and self.tell() < self.blocksize):
            if self.mpu is None:
                self._wait(self._start_upload())
            self.buffer.seek(0)
            smallest = 1 if final else self.blocksize
            largest = self.blocksize if self.fs.fixed_upload_size else self.part_max
            while len(self.buffer.getbuffer()) - self.buffer.tell() >= smallest:
                self._wait(self._send_part(self.buffer.read(largest)))
        if self.autocommit and final:
            self.commit()
        else:
            self.offset += self.buffer.tell()
            self.buffer = io.BytesIO(self.buffer.read())
            self.buffer.seek(0, 2)
        return False  # the buffer is kept as set here, not emptied by fsspec

    def commit(self) -> None:
        """Store what was written: one PUT when no part went, else complete the upload; "xb"
        only where no object is (If-None-Match: FileExistsError otherwise)."""
        if self.buffer is None:
            raise ValueError(f"{self.path}: discarded, nothing to commit")
        self.buffer.seek(0)
        answer = self._wait(self._commit(self.buffer.read()))
        if self.fs.version_aware:
            self.version_id = answer.get("x-amz-version-id")
        self.buffer = None
        self.fs.invalidate_cache(self.path)

    async def _commit(self, data: bytes) -> dict[str, str]:
        storage, create = self.fs._storage(), "x" in self.mode
        condition = {"If-None-Match": "*"} if create else {}
        write = OneWrite(storage.client, self.bucket, self.key)
        try:
            if not self.parts:
                if self.mpu is not None:
                    await self._abort()
                headers = self.attributes.headers() | condition
                return dict(
                    await storage.retry(
                        lambda: write.put(data, headers), f"put s3://{self.bucket}/{self.key}"
                    )
                )
            etags = [etag for etag, _, _ in self.parts]
            sums = [(checksum, length) for _, checksum, length in self.parts]
            return dict(
                await storage.retry(
                    lambda: write.complete(str(self.mpu), etags, self._checksum, sums, condition),
                    f"complete the upload of s3://{self.bucket}/{self.key}",
                )
            )
        except Exception as exc:
            if self.parts:
                await self._abort()
            if create and (
                isinstance(exc, WrittenMeanwhile) or (isinstance(exc, S3Error) and exc.status in (409, 412))
            ):
                raise FileExistsError(17, "the object exists (mode 'create' / 'xb')", self.path) from None
            raise _os_error(exc, self.path) from None

    async def _abort(self) -> None:
        if self.mpu is not None:
            await self.fs._storage().client.abort_multipart_upload(self.bucket, self.key, self.mpu)
            self.mpu = None

    def discard(self) -> None:
        self._wait(self._abort())
        self.buffer = None


class S3BulkStreamedFile(AbstractAsyncStreamedFile):
    """`await fs.open_async(path)`: `await f.read(n)` reads the next n bytes (of the version
    first seen) on the filesystem's loop."""

    def __init__(self, fs: S3BulkFileSystem, path: str, mode: str, size: int, etag: str) -> None:
        super().__init__(fs, path, mode, size=size)
        self.etag = etag

    async def _fetch_range(self, start: int, end: int) -> bytes:
        end = min(end, self.size)
        if start >= end:
            return b""  # at the end: S3 answers a range past it with 416
        return bytes(await self.fs._cat_file(self.path, start=start, end=end, if_match=self.etag))
