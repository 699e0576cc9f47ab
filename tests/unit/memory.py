"""An in-memory stand-in for the storage seam (`_stores/storage.Storage`), for testing job logic
without a server: the verbs cp, mv, sync, check and rm call (list, head, copy, download, upload,
delete, a file against its object), on buckets held in a dict, each object with its
LastModified, with a failure a test can ask for per key, and a hook run before every request
(`MemoryS3.before`: where a test puts another writer's change between two requests). Not a
model of S3's corners: those are the real servers' tests."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import formatdate
from functools import partial
from typing import Any

from s3bulk._errors import ItemError, S3Error, WrittenMeanwhile
from s3bulk._stores.conditional import Version, WriteConditions
from s3bulk._stores.downloads import Downloaded
from s3bulk._stores.s3 import quoted
from s3bulk._stores.s3xml import ListPage, ObjectInfo

WHEN = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


def _hashed_place(seed: int, key: str) -> str:
    """Where `key` comes in a listing in no order: a hash of it and the seed."""
    return hashlib.blake2b(f"{seed}/{key}".encode(), digest_size=8).hexdigest()


class MemoryS3:
    """Buckets of objects (key -> bytes) and their times, and the keys whose next write or delete
    fails. An object a job writes is modified "now" (`time.time()`), as a server's would be."""

    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, bytes]] = {}
        self.modified: dict[tuple[str, str], float] = {}  # (bucket, key) -> LastModified, when not WHEN
        self.refuse: dict[tuple[str, str], str] = {}  # (bucket, key) -> why a write or delete of it fails
        self.requests: list[tuple[str, str, str]] = []  # (verb, bucket, key), in order
        # called with (verb, bucket, key) before each request is answered
        self.before: Callable[[str, str, str], None] | None = None
        self.page_size = 1000  # a listing's page holds at most this many keys (S3 may give fewer than asked)
        # whether a delete's condition (its ETag) is looked at, in DeleteObjects and in a
        # DeleteObject: S3 does; MinIO and Garage do in neither (they delete), versitygw in the second
        self.conditional_deletes = (True, True)
        # whether writes take If-None-Match and If-Match (PUT, CopyObject): off, as a server that
        # ignores them (`Storage.write_conditions` finds none), unless a test turns them on
        self.conditional_writes = WriteConditions()
        # listings in no key order, as S3 Express directory buckets give them (each listing its own
        # order, drawn from this seed, pages following one another by offset)
        self.unordered: int | None = None

    def put(self, bucket: str, key: str, body: bytes, modified: float | None = None) -> None:
        self.buckets.setdefault(bucket, {})[key] = body
        self.modified[bucket, key] = WHEN.timestamp() if modified is None else modified

    def written(self, bucket: str, key: str, body: bytes) -> None:
        """An object a request wrote: modified now."""
        self.put(bucket, key, body, time.time())

    def request(self, verb: str, bucket: str, key: str) -> None:
        self.requests.append((verb, bucket, key))
        if self.before is not None:
            self.before(verb, bucket, key)

    def time_of(self, bucket: str, key: str) -> float:
        return self.modified.get((bucket, key), WHEN.timestamp())

    def storage(self) -> Callable[..., MemoryStorage]:
        """What `Stores.make` takes: a storage on these buckets, whatever the settings say."""
        return Maker(self)


_LIVE: dict[int, MemoryS3] = {}


class Maker:
    """Makes storages on one `MemoryS3`. The engine pickles a job even for the worker in its
    own loop (each keeps its own clients): this pickles as the store's number, so the worker's
    copy reaches the same buckets the test looks at."""

    def __init__(self, s3: MemoryS3) -> None:
        self.number = id(s3)
        _LIVE[self.number] = s3

    def __call__(self, *_: Any, **__: Any) -> MemoryStorage:
        return MemoryStorage(_LIVE[self.number])


class Meter:
    """What `Storage.meter` counts: requests by kind (the in-memory store's are in `requests`)."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}


class MemoryStorage:
    def __init__(self, s3: MemoryS3) -> None:
        self.s3 = s3
        self.meter = Meter()

    def _bucket(self, bucket: str) -> dict[str, bytes]:
        return self.s3.buckets.setdefault(bucket, {})

    def _refused(self, bucket: str, key: str) -> None:
        why = self.s3.refuse.get((bucket, key))
        if why:
            raise ItemError(why, retryable=False)

    async def list_objects_v2(
        self,
        bucket: str,
        prefix: str = "",
        *,
        start_after: str | None = None,
        continuation_token: str | None = None,
        delimiter: str | None = None,
        max_keys: int = 1000,
    ) -> ListPage:
        self.s3.request("LIST", bucket, prefix)
        max_keys = min(max_keys, self.s3.page_size)
        if self.s3.unordered is not None:  # as S3 Express: no StartAfter, which needs key order
            if start_after:
                raise S3Error(400, "InvalidArgument", "StartAfter is not supported", f"list s3://{bucket}")
            return self._unordered(bucket, prefix, "", continuation_token, max_keys)
        after = continuation_token or start_after or ""
        keys = sorted(key for key in self._bucket(bucket) if key.startswith(prefix) and key > after)
        page, more = keys[:max_keys], len(keys) > max_keys
        objects = [_info(key, self._bucket(bucket)[key], self.s3.time_of(bucket, key)) for key in page]
        return ListPage(objects, [], more, page[-1] if more else None)

    def _unordered(self, bucket: str, prefix: str, after: str, token: str | None, max_keys: int) -> ListPage:
        """A page of a listing in no key order: the keys in the order of a hash of the seed and
        each key, as a store that keeps them hashed lists them, `token` where the last page ended
        in that order. Keys deleted or written meanwhile move no other key: a listing that goes on
        while its keys are deleted (rm) sees each remaining one once (an offset into the keys as
        they are now, reshuffled by what was left, skipped keys rm had not reached)."""
        place = partial(_hashed_place, self.s3.unordered)
        keys = sorted(
            (place(key), key) for key in self._bucket(bucket) if key.startswith(prefix) and key > after
        )
        if token:
            ended = tuple(json.loads(token))
            keys = [entry for entry in keys if entry > ended]
        page, more = keys[:max_keys], len(keys) > max_keys
        objects = [_info(key, self._bucket(bucket)[key], self.s3.time_of(bucket, key)) for _, key in page]
        return ListPage(objects, [], more, json.dumps(page[-1]) if more else None)

    async def head(self, bucket: str, key: str, *_: Any, **__: Any) -> dict[str, str]:
        self.s3.request("HEAD", bucket, key)
        body = self._bucket(bucket).get(key)
        if body is None:  # as the signed client reads a HEAD's 404
            raise S3Error(404, "NotFound", "", f"head s3://{bucket}/{key}")
        return {
            "content-length": str(len(body)),
            "etag": _etag(body),
            "last-modified": formatdate(int(self.s3.time_of(bucket, key)), usegmt=True),
        }

    async def write_conditions(self, bucket: str, prefix: str) -> WriteConditions:
        return self.s3.conditional_writes

    def _condition_holds(self, bucket: str, key: str, condition: dict[str, str] | None) -> None:
        """A conditional write refused as the signed client refuses it (412: `WrittenMeanwhile`)."""
        body = self._bucket(bucket).get(key)
        if condition and "If-None-Match" in condition and body is not None:
            raise WrittenMeanwhile(f"put s3://{bucket}/{key}: PreconditionFailed (412)")
        if condition and "If-Match" in condition and (body is None or _etag(body) != condition["If-Match"]):
            raise WrittenMeanwhile(f"put s3://{bucket}/{key}: PreconditionFailed (412)")

    async def copy(
        self,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        condition: dict[str, str] | None = None,
        **_: Any,
    ) -> Version:
        self.s3.request("COPY", bucket, key)
        self._refused(bucket, key)
        self._condition_holds(bucket, key, condition)
        body = self._bucket(source_bucket).get(source_key)
        if body is None:
            raise S3Error(404, "NoSuchKey", "", f"copy s3://{source_bucket}/{source_key}")
        self.s3.written(bucket, key, body)
        return Version(_etag(body), len(body))

    async def download(
        self, bucket: str, key: str, target: str, size: int, mtime: float, *_: Any, **__: Any
    ) -> Downloaded:
        self.s3.request("GET", bucket, key)
        body = self._bucket(bucket).get(key)
        if body is None:
            raise S3Error(404, "NoSuchKey", "", f"get s3://{bucket}/{key}")
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "wb") as file:
            file.write(body)
        if mtime:  # a download gives its file the object's time, as the storage seam does
            os.utime(target, (mtime, mtime))
        return Downloaded(len(body), True, _etag(body))

    async def upload(
        self,
        path: str,
        bucket: str,
        key: str,
        attributes: Any = None,
        parts: Any = None,
        condition: Any = None,
    ) -> int:
        self.s3.request("PUT", bucket, key)
        self._refused(bucket, key)
        self._condition_holds(bucket, key, condition)
        with open(path, "rb") as file:
            body = file.read()
        self.s3.written(bucket, key, body)
        return len(body)

    async def file_matches(
        self, path: str, etag: str, size: int, part_size: int, *, bucket: str = "", key: str = ""
    ) -> bool | None:
        """Whether the file holds the object's bytes: its MD5 against the (single-part) ETag."""
        with open(path, "rb") as file:
            return _etag(file.read()) == etag

    async def delete_many(
        self, bucket: str, keys: list[str], etags: dict[str, str] | None = None
    ) -> dict[str, str]:
        """A key in `etags` only while it has that ETag, where the condition is looked at."""
        failed = {}
        for key in keys:
            self.s3.request("DELETE", bucket, key)
            why = self._delete(bucket, key, (etags or {}).get(key, ""), self.s3.conditional_deletes[0])
            if why:
                failed[key] = why
        return failed

    async def delete_object(self, bucket: str, key: str, etag: str = "") -> None:
        self.s3.request("DELETE", bucket, key)
        why = self._delete(bucket, key, etag, self.s3.conditional_deletes[1])
        if why:
            raise S3Error(412 if why.startswith("Precondition") else 403, why.split()[0], "", f"delete {key}")

    def _delete(self, bucket: str, key: str, etag: str, conditional: bool) -> str:
        """Why the key was not deleted ("" when it was)."""
        why = self.s3.refuse.get((bucket, key))
        body = self._bucket(bucket).get(key)
        if why:
            return why
        if conditional and etag and (body is None or _etag(body) != quoted(etag)):
            return "PreconditionFailed (412)" if body is not None else "NoSuchKey (404)"
        self._bucket(bucket).pop(key, None)
        self.s3.modified.pop((bucket, key), None)
        return ""

    async def close(self) -> None:
        pass


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


def _info(key: str, body: bytes, modified: float) -> ObjectInfo:
    listed = datetime.fromtimestamp(int(modified), UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")  # to the second
    return ObjectInfo(key, len(body), listed, _etag(body))
