"""One conditional write over all its attempts: a retry that finds the write's own object.

A write under a condition (If-None-Match: *, If-Match: ETAG) whose answer is lost on the way (the
connection reset after the service stored the object) is sent again, and the service refuses the
retry for its condition (412): the object there is not what the write may replace, because it
is the write itself. Taken as another writer's, a flaky network would fail ~1% of a sync's
writes with "changed since it was listed" (make reliability's resets did). So a refusal that
follows an earlier attempt asks what is there: an object whose ETag is what the bytes sent make
(their MD5; the MD5 of the parts' MD5s for a multipart upload) is the write done. Anything else
is another writer's, and the refusal stands; so does one the first attempt got.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

from s3bulk._errors import WrittenMeanwhile
from s3bulk._stores.etags import completed_etag
from s3bulk._stores.s3 import S3Client


class OneWrite:
    """The attempts of one PutObject or CompleteMultipartUpload of `key` (made once, outside
    the retry, and called in each attempt)."""

    def __init__(self, client: S3Client, bucket: str, key: str) -> None:
        self.client, self.bucket, self.key = client, bucket, key
        self._attempts = 0

    async def put(self, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        """PutObject of `body`; the answer's headers (or, after a lost answer, the HEAD's)."""
        return await self._attempt(
            lambda: self.client.put_object(self.bucket, self.key, body, headers),
            lambda: hashlib.md5(body, usedforsecurity=False).hexdigest(),
        )

    async def complete(
        self,
        upload_id: str,
        etags: list[str],
        checksum: str | None,
        parts: list[tuple[str, int]] | None,
        condition: dict[str, str] | None,
    ) -> dict[str, str]:
        """CompleteMultipartUpload of the parts `etags` (as `S3Client.complete_multipart_upload`)."""
        return await self._attempt(
            lambda: self.client.complete_multipart_upload(
                self.bucket, self.key, upload_id, etags, checksum, parts, condition
            ),
            lambda: completed_etag(etags),
        )

    async def _attempt(
        self, write: Callable[[], Awaitable[dict[str, str]]], etag: Callable[[], str | None]
    ) -> dict[str, str]:
        self._attempts += 1
        try:
            return await write()
        except WrittenMeanwhile:
            landed = await self._own_object(etag()) if self._attempts > 1 else None
            if landed is None:
                raise
            return landed

    async def _own_object(self, etag: str | None) -> dict[str, str] | None:
        """The object's headers when its ETag is `etag` (None: another's, or an ETag that
        cannot be foretold, as under SSE-KMS)."""
        if etag is None:
            return None
        head = await self.client.head_object(self.bucket, self.key)
        return head if head.get("etag", "").strip('"').lower() == etag.lower() else None
