"""An in-memory stand-in for the storage seam (`_stores/storage.Storage`), for testing job logic
without a server: the verbs cp, mv and sync call (list, head, copy, download, upload, delete), on
buckets held in a dict, with a failure a test can ask for per key. Not a model of S3's corners:
those are the real servers' tests."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from s3bulk._errors import ItemError, S3Error
from s3bulk._stores.conditional import Version
from s3bulk._stores.downloads import Downloaded
from s3bulk._stores.s3 import quoted
from s3bulk._stores.s3xml import ListPage, ObjectInfo

WHEN = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


class MemoryS3:
    """Buckets of objects (key -> bytes), and the keys whose next write or delete fails."""

    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, bytes]] = {}
        self.refuse: dict[tuple[str, str], str] = {}  # (bucket, key) -> why a write or delete of it fails
        self.requests: list[tuple[str, str, str]] = []  # (verb, bucket, key), in order
        # whether a delete's condition (its ETag) is looked at, in DeleteObjects and in a
        # DeleteObject: S3 does; MinIO and Garage do in neither (they delete), versitygw in the second
        self.conditional_deletes = (True, True)

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.buckets.setdefault(bucket, {})[key] = body

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


class MemoryStorage:
    def __init__(self, s3: MemoryS3) -> None:
        self.s3 = s3

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
        self.s3.requests.append(("LIST", bucket, prefix))
        after = continuation_token or start_after or ""
        keys = sorted(key for key in self._bucket(bucket) if key.startswith(prefix) and key > after)
        page, more = keys[:max_keys], len(keys) > max_keys
        objects = [_info(key, self._bucket(bucket)[key]) for key in page]
        return ListPage(objects, [], more, page[-1] if more else None)

    async def head(self, bucket: str, key: str, *_: Any, **__: Any) -> dict[str, str]:
        self.s3.requests.append(("HEAD", bucket, key))
        body = self._bucket(bucket).get(key)
        if body is None:  # as the signed client reads a HEAD's 404
            raise S3Error(404, "NotFound", "", f"head s3://{bucket}/{key}")
        return {
            "content-length": str(len(body)),
            "etag": _etag(body),
            "last-modified": "Fri, 27 Nov 2026 10:00:00 GMT",
        }

    async def copy(self, source_bucket: str, source_key: str, bucket: str, key: str, **_: Any) -> Version:
        self.s3.requests.append(("COPY", bucket, key))
        self._refused(bucket, key)
        body = self._bucket(bucket)[key] = self._bucket(source_bucket)[source_key]
        return Version(_etag(body), len(body))

    async def download(
        self, bucket: str, key: str, target: str, size: int, mtime: float, *_: Any, **__: Any
    ) -> Downloaded:
        self.s3.requests.append(("GET", bucket, key))
        body = self._bucket(bucket)[key]
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "wb") as file:
            file.write(body)
        return Downloaded(len(body), True, _etag(body))

    async def upload(self, path: str, bucket: str, key: str, *_: Any, **__: Any) -> int:
        self.s3.requests.append(("PUT", bucket, key))
        self._refused(bucket, key)
        with open(path, "rb") as file:
            self._bucket(bucket)[key] = file.read()
        return len(self._bucket(bucket)[key])

    async def delete_many(
        self, bucket: str, keys: list[str], etags: dict[str, str] | None = None
    ) -> dict[str, str]:
        """A key in `etags` only while it has that ETag, where the condition is looked at."""
        failed = {}
        for key in keys:
            self.s3.requests.append(("DELETE", bucket, key))
            why = self._delete(bucket, key, (etags or {}).get(key, ""), self.s3.conditional_deletes[0])
            if why:
                failed[key] = why
        return failed

    async def delete_object(self, bucket: str, key: str, etag: str = "") -> None:
        self.s3.requests.append(("DELETE", bucket, key))
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
        return ""

    async def close(self) -> None:
        pass


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


def _info(key: str, body: bytes) -> ObjectInfo:
    return ObjectInfo(key, len(body), WHEN.strftime("%Y-%m-%dT%H:%M:%S.000Z"), _etag(body))
