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
import errno
import functools
import os
import tempfile
from datetime import datetime
from typing import TYPE_CHECKING, Any

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, S3Error, UsageError, changed_meanwhile, require_extra

try:
    from fsspec.asyn import AsyncFileSystem, _run_coros_in_chunks, sync
    from fsspec.callbacks import DEFAULT_CALLBACK
except ImportError:  # the extra is not installed: one line saying which to install
    require_extra("fsspec", "s3bulk.fsspec")
    raise

from s3bulk._report import Report
from s3bulk._stores.attributes import NO_ATTRIBUTES
from s3bulk._stores.retry import Retrier, RetryPolicy
from s3bulk._stores.routes import Parts
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._stores.storage import Storage

if TYPE_CHECKING:
    from s3bulk._commands.deletes import BatchDeleter

PROTOCOLS = ("s3bulk", "s3", "s3a")
DELETE_BATCH = 1000
JOB_FROM = 16  # pairs: fewer are moved one by one, side by side, without a job's fixed cost
LISTINGS_CACHE = ("use_listings_cache", "listings_expiry_time", "max_paths")  # fsspec's DirCache

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


def settings_from(storage_options: dict[str, Any]) -> AwsSettings:
    """fsspec's storage options (as s3fs names them) as s3bulk's settings."""
    options = dict(storage_options)
    client = options.pop("client_kwargs", None) or {}
    for secret in ("key", "secret", "token"):
        if options.get(secret) is not None:
            raise UsageError(
                f"storage option {secret!r}: s3bulk takes credentials as the AWS SDKs do "
                "(a profile=, AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
            )
    unknown = set(options) - {"profile", "region", "endpoint_url", "anon", "verify", "requester_pays"}
    if unknown:
        raise UsageError(
            f"storage options {sorted(unknown)}: s3bulk takes profile, region, endpoint_url, anon, "
            "verify, requester_pays and client_kwargs (endpoint_url, region_name)"
        )
    settings = AwsSettings.from_env(
        profile=options.get("profile"),
        region=options.get("region") or client.get("region_name"),
        endpoint_url=options.get("endpoint_url") or client.get("endpoint_url"),
        verify_ssl=options.get("verify", client.get("verify", True)) is not False,
        anonymous=bool(options.get("anon", False)),
        request_payer=bool(options.get("requester_pays", False)),
    )
    settings.check_profile()
    return settings


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
    return _file_entry(f"{bucket}/{info.key}", info.size, info.etag, info.last_modified, info.storage_class)


def _directory(name: str) -> dict[str, Any]:
    return {"name": name, "size": 0, "type": "directory", "StorageClass": "DIRECTORY"}


class S3BulkFileSystem(AsyncFileSystem):
    """S3 (and what speaks its API) for fsspec, on s3bulk's engine. Paths are `bucket/key`, with or
    without `s3bulk://` (or `s3://` once `register(as_s3=True)`); directories are prefixes, so an
    empty one does not exist."""

    protocol = PROTOCOLS
    root_marker = ""
    async_impl = True
    mirror_sync_methods = True

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
        self.settings = settings or settings_from(storage_options)
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
        return path.rstrip("/")

    def unstrip_protocol(self, name: str) -> str:
        return f"s3bulk://{name}"

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        return {}

    def _url(self, path: str) -> str:
        return f"s3://{self._strip_protocol(path)}"

    # ---- looking --------------------------------------------------------------------------------
    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        seen = _SEEN.get()
        if seen is not None and path in seen:
            return seen[path]
        bucket, key = _split(path)
        if not bucket:
            return _directory("")
        known = self._known(path)
        if known is not None:
            return known
        storage = self._storage()
        if not key:
            try:
                if await storage.bucket_exists(bucket):
                    return _directory(bucket)
            except Exception as exc:
                raise _os_error(exc, path) from None
            raise FileNotFoundError(2, "no such bucket", path)
        try:
            head = await storage.head(bucket, key)
        except S3Error as exc:
            if exc.status != 404 and exc.code not in ("NoSuchKey", "NotFound"):
                raise _os_error(exc, path) from None
        else:
            return _file_entry(
                path,
                int(head.get("content-length", 0)),
                head.get("etag", ""),
                _http_date(head.get("last-modified")),
                head.get("x-amz-storage-class", ""),
            )
        try:
            page = await storage.list_objects_v2(bucket, key + "/", max_keys=1, delimiter="/")
        except Exception as exc:
            raise _os_error(exc, path) from None
        if page.objects or page.common_prefixes:
            return _directory(path)
        raise FileNotFoundError(2, "no such object or prefix", path)

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        storage = self._storage()
        if not bucket:
            buckets = [_directory(each.name) for each in await storage.list_buckets()]
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
            entries = [info] if info["type"] == "file" else []
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
        path = self._strip_protocol(path)
        bucket, key = _split(path)
        storage = self._storage()
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

    async def _pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        if mode == "create" and await self._exists(path):
            raise FileExistsError(17, "the object exists (mode='create')", path)
        bucket, key = _split(path)
        try:
            await self._storage().put_bytes(bucket, key, bytes(value))
        except Exception as exc:
            raise _os_error(exc, path) from None
        finally:
            self._forget([path])

    async def _put_file(self, lpath: str, rpath: str, mode: str = "overwrite", **kwargs: Any) -> None:
        if os.path.isdir(lpath):
            return  # a prefix needs no object
        pending = _PENDING.get()
        if pending is not None:
            pending.append((lpath, self._url(rpath)))
            return
        rpath = self._strip_protocol(rpath)
        if mode == "create" and await self._exists(rpath):
            raise FileExistsError(17, "the object exists (mode='create')", rpath)
        bucket, key = _split(rpath)
        try:
            await self._storage().upload(lpath, bucket, key, NO_ATTRIBUTES, Parts())
        except Exception as exc:
            raise _os_error(exc, rpath) from None
        finally:
            self._forget([rpath])

    async def _get_file(self, rpath: str, lpath: str, **kwargs: Any) -> None:
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
                source_bucket, source_key, bucket, key, size=info["size"], etag=info["ETag"], parts=Parts()
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
    ) -> None:
        """Delete the objects `path` names (and everything under it, `recursive`), 1,000 per
        DeleteObjects request, the requests side by side."""
        names = await self._expand_path(path, recursive=recursive, maxdepth=maxdepth)
        by_bucket: dict[str, list[str]] = {}
        for name in names:
            bucket, key = _split(self._strip_protocol(name))
            if key:
                by_bucket.setdefault(bucket, []).append(key)
        storage = self._storage()
        batches = [
            (bucket, keys[start : start + DELETE_BATCH])
            for bucket, keys in by_bucket.items()
            for start in range(0, len(keys), DELETE_BATCH)
        ]
        try:
            results = await asyncio.gather(*(storage.delete_many(bucket, keys) for bucket, keys in batches))
        finally:
            self._forget(names)
        for (bucket, _), failed in zip(batches, results, strict=True):
            for key, why in failed.items():
                raise OSError(5, f"not deleted: {why}", f"{bucket}/{key}")

    async def _makedirs(self, path: str, exist_ok: bool = False) -> None:
        bucket, key = _split(self._strip_protocol(path))
        if bucket and not key and not await self._exists(bucket):
            await self._mkdir(bucket)

    async def _mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        bucket, key = _split(self._strip_protocol(path))
        if bucket and not key:
            storage = self._storage()
            try:
                await storage.make_bucket(bucket, kwargs.get("region") or self.settings.region or "")
            except Exception as exc:
                raise _os_error(exc, path) from None

    async def _rmdir(self, path: str) -> None:
        bucket, key = _split(self._strip_protocol(path))
        if bucket and not key:
            await self._storage().remove_bucket(bucket)
            self.invalidate_cache(bucket)

    async def _touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        if truncate or not await self._exists(path):
            await self._pipe_file(path, b"")

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, **kwargs: Any) -> Any:
        """s3bulk's reader (a read somewhere new fetches `block_size` bytes, 8 MiB by default)
        or writer (parts of `block_size` bytes as they fill), on one store per filesystem: a
        dataset of 200 files opens 200 readers, not 200 connection pools."""
        path = self._strip_protocol(path)
        if "x" in mode:
            if self.exists(path):
                raise FileExistsError(17, "the object exists (mode='x')", path)
            mode = mode.replace("x", "w")
        if mode not in ("rb", "wb"):
            raise ValueError(f"mode {mode!r}: s3bulk opens objects 'rb', 'wb' or 'xb'")
        bucket, key = _split(path)
        size = block_size or 8 * 1024 * 1024
        if mode == "wb":
            self.invalidate_cache(path)
            return self._files.open_writer(
                bucket, key, NO_ATTRIBUTES, buffer_size=size, on_close=lambda: self.invalidate_cache(path)
            )
        known = self._known(path)
        if known is not None and known["type"] == "directory":
            raise IsADirectoryError(21, "a prefix, not an object", path)
        try:
            if known is not None:  # listed already: no HEAD for its size and ETag
                return self._files.open_reader(
                    bucket, key, buffer_size=size, size=known["size"], etag=known.get("ETag", "")
                )
            return self._files.open_reader(bucket, key, buffer_size=size)
        except FileNotFoundError:
            raise FileNotFoundError(2, "no such object", path) from None

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
        pairs, tree = await self._collect(
            super()._get, rpath, lpath, recursive=recursive, maxdepth=maxdepth, **kwargs
        )
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
        if len(pairs) < JOB_FROM:
            await self._each(pairs, callback, delete_sources)
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

        done = await asyncio.gather(*(one(*pair) for pair in pairs), return_exceptions=True)
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
