"""Uploads and copies: a local file, a stream or bytes to an object, and an object to another,
server-side or relayed through here from a place no server-side copy reaches. A large one goes
in parts (`multipart.py`), each retried alone, its upload id told to `hooks` so that nothing is
ever left behind; a small one in one request of the signed client, which reads the answer (a
200 OK can carry an <Error>).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import NamedTuple, TypeVar

from s3bulk._errors import ItemError, S3Error, WrittenMeanwhile, changed_meanwhile
from s3bulk._stores.attributes import NO_ATTRIBUTES, Attributes
from s3bulk._stores.conditional import Version, WriteConditions, of_one_version, version_of
from s3bulk._stores.localfiles import read_unchanged
from s3bulk._stores.multipart import (
    UploadHooks,
    copy_attributes,
    copy_in_parts,
    etag_parts,
    relay_in_parts,
    source_part_size,
    upload_file,
    upload_stream,
)
from s3bulk._stores.onewrite import OneWrite
from s3bulk._stores.retry import Retrier
from s3bulk._stores.routes import MiB, Parts
from s3bulk._stores.s3 import S3Client

T = TypeVar("T")
Head = Callable[..., Awaitable[dict[str, str]]]


class Source(NamedTuple):
    """Where a relayed copy reads: another endpoint's or account's client, retries and HEAD."""

    client: S3Client
    retry: Retrier
    head: Head


class Writes:
    """One worker's uploads and copies, sent through `client`, retried by `retry`, every
    multipart upload id told to `hooks`; `head` is the seam's (retried)."""

    def __init__(self, client: S3Client, retry: Retrier, hooks: UploadHooks, head: Head) -> None:
        self.client = client
        self.retry = retry
        self.hooks = hooks
        self.head = head

    async def _retrying(self, action: Callable[[], Awaitable[T]], what: str) -> T:
        return await self.retry(action, what)

    async def upload(
        self,
        path: str,
        bucket: str,
        key: str,
        attributes: Attributes,
        parts: Parts,
        condition: dict[str, str] | None = None,
    ) -> int:
        """A local file to an object; a large one in parts (each retried alone), its upload id
        told to `hooks` so that nothing is ever left behind; `condition` (If-None-Match, If-Match:
        `conditional.write_condition`) says what it may replace. Returns the bytes sent."""
        size = os.stat(path).st_size  # the file may have changed since it was listed
        if not os.access(path, os.R_OK):
            raise ItemError(f"cannot read local file: permission denied: {path}", retryable=False)
        if size <= parts.threshold:  # parts wait for their own bytes (multipart.upload_file)
            await self.retry.pace_bytes(size)
        if size > parts.threshold:
            await upload_file(
                self.client,
                bucket,
                key,
                path,
                size,
                part_size=parts.size,
                concurrency=parts.in_flight,
                headers=attributes.headers(),
                hooks=self.hooks,
                retry=self.retry,
                pace_bytes=self.retry.pace_bytes,
                condition=condition,
            )
        else:
            write = OneWrite(self.client, bucket, key)  # a retry refused (412) for its own object
            return await self._retrying(
                lambda: self._put_file(write, path, size, attributes, condition), f"put s3://{bucket}/{key}"
            )
        return size

    async def _put_file(
        self, write: OneWrite, path: str, size: int, attributes: Attributes, condition: dict[str, str] | None
    ) -> int:
        """The file read whole, as one version of itself (`read_unchanged`), then sent by the
        signed client (its SHA-256 signed: the service refuses a body changed on the way)."""
        body = read_unchanged(path) if size <= 2 * MiB else await asyncio.to_thread(read_unchanged, path)
        await write.put(body, attributes.headers() | (condition or {}))
        return len(body)

    async def write_conditions(self, bucket: str, prefix: str) -> WriteConditions:
        """Which conditions on a write the destination honours, found by a probe key beside
        what is written (`prefix`'s folder; removed after): written, then written again under
        If-None-Match: * and under If-Match of an ETag no object has, and copied onto itself
        under If-None-Match: *, which a server that honours them refuses (412) and one that
        ignores them does. A probe that cannot be written (no permission) finds none honoured:
        -n then asks first (a HEAD), as a server that ignores them is asked."""
        key = f"{prefix[: prefix.rfind('/') + 1]}.s3bulk-probe-{uuid.uuid4().hex}"
        what = f"probe s3://{bucket}/{key}"
        try:
            await self._retrying(lambda: self.client.put_object(bucket, key, b""), what)
        except ItemError as error:
            if error.job_wide:
                raise
            return WriteConditions()
        try:
            none_match = await self._refused(
                lambda: self.client.put_object(bucket, key, b"", {"If-None-Match": "*"})
            )
            match = await self._refused(
                lambda: self.client.put_object(bucket, key, b"", {"If-Match": f'"{"0" * 32}"'})
            )
            copy = await self._refused(
                lambda: self.client.copy_object(
                    bucket, key, bucket, key, {"x-amz-metadata-directive": "REPLACE", "If-None-Match": "*"}
                )
            )
        finally:
            left = await self._removed(bucket, key, what)
        return WriteConditions(none_match, match, copy, left)

    async def _removed(self, bucket: str, key: str, what: str) -> str:
        """The probe key deleted; "" once it is, else its URL (credentials that may write but
        not delete: the report names it, for the user to remove)."""
        try:
            await self._retrying(lambda: self.client.delete_object(bucket, key), what)
        except ItemError as error:
            if error.job_wide:
                raise
            return f"s3://{bucket}/{key}"
        return ""

    async def _refused(self, write: Callable[[], Awaitable[object]]) -> bool:
        """Whether the service refused a conditional write for its condition (412); a write it
        did, or refused for anything else (400, 501: it takes no such header), says no."""
        try:
            await self._retrying(write, "probe")
        except ItemError as error:
            if error.job_wide:
                raise
            return isinstance(error, WrittenMeanwhile) or changed_meanwhile(error)
        return False

    async def put_bytes(
        self, bucket: str, key: str, body: bytes, attributes: Attributes | None = None
    ) -> None:
        """A small object from memory (probes, journal parts, map's results), retried."""
        headers = (attributes or NO_ATTRIBUTES).headers()
        await self._retrying(
            lambda: self.client.put_object(bucket, key, body, headers), f"put s3://{bucket}/{key}"
        )

    async def copy(
        self,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        *,
        size: int,
        etag: str,
        parts: Parts,
        keep_layout: bool = False,
        attributes: Attributes = NO_ATTRIBUTES,
        condition: dict[str, str] | None = None,
    ) -> Version:
        """A server-side copy (no bytes pass here), keeping the source's attributes but those
        `attributes` sets. Above the threshold, or for a multipart source when `keep_layout`, it
        copies in parts, in the source's own part layout where it can be found, so both objects
        have the same ETag. Every request copies the source's version `etag` only (the listing's;
        for a copy in parts, the HEAD's): one that changed meanwhile is copied again whole, as it
        is now (`conditional.of_one_version`). Returns the version copied."""
        what = f"copy s3://{source_bucket}/{source_key}"

        async def copy(version: Version) -> Version:
            if version.size > parts.threshold or (keep_layout and etag_parts(version.etag) > 0):
                return await self._copy_in_parts(
                    source_bucket, source_key, bucket, key, version, parts, attributes, condition
                )
            headers = attributes.copy_headers() | (
                condition or {}
            )  # the signed client's, which reads the answer
            try:
                await self._retrying(
                    lambda: self.client.copy_object(
                        source_bucket, source_key, bucket, key, headers, if_match=version.etag
                    ),
                    what,
                )
            except S3Error as exc:
                if (
                    condition
                    and changed_meanwhile(exc)
                    and (await now()).etag.strip('"') == version.etag.strip('"')
                ):
                    raise WrittenMeanwhile(str(exc)) from None  # the source is as it was: the destination's
                if not (
                    version.size == 0 and key.endswith("/") and exc.code == "DirectoryObjectContainsData"
                ):
                    raise
                await self._put_marker(source_bucket, source_key, bucket, key, attributes)
            return version

        async def now() -> Version:
            return version_of(await self.head(source_bucket, source_key, of_source=True))

        return await of_one_version(copy, Version(etag, size), now, what)

    async def _put_marker(
        self, source_bucket: str, source_key: str, bucket: str, key: str, attributes: Attributes
    ) -> None:
        """An empty 'dir/' marker written anew with its source's attributes: a server that keeps
        such keys as directories (Versity's gateway) refuses to CopyObject one, as if a copy
        could carry data into a directory, but takes a PUT of nothing."""
        head = await self.head(source_bucket, source_key)
        kept = await self.retry(lambda: copy_attributes(self.client, source_bucket, source_key, head))
        headers = attributes.over_source(kept)
        what = f"put s3://{bucket}/{key}"
        await self._retrying(lambda: self.client.put_object(bucket, key, b"", headers), what)

    async def relay(
        self,
        source: Source,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        *,
        size: int,
        parts: Parts,
        attributes: Attributes = NO_ATTRIBUTES,
        condition: dict[str, str] | None = None,
    ) -> Version:
        """A copy from a place no server-side copy reaches (another endpoint or account, read
        with `source`'s settings): the bytes pass through here, a whole small object or a part
        at a time (memory: parts in flight x part size), and the new object keeps the source's
        attributes (Content-*, metadata, tags) but those `attributes` sets, as a copy does. Every
        GET asks for the version a HEAD found (If-Match); one that changed meanwhile is copied
        again whole, as it is now. Returns the version copied."""
        what = f"copy s3://{source_bucket}/{source_key}"

        async def relay(_: Version) -> Version:  # each time of the version its own HEAD finds
            head = await source.head(source_bucket, source_key)
            await self._relay_version(
                source, source_bucket, source_key, bucket, key, head, parts, attributes, condition
            )
            return version_of(head)

        async def asked_by_relay() -> Version:
            return Version("", size)

        return await of_one_version(relay, Version("", size), asked_by_relay, what)

    async def _relay_version(
        self,
        source: Source,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        head: dict[str, str],
        parts: Parts,
        attributes: Attributes,
        condition: dict[str, str] | None = None,
    ) -> None:
        """`relay` of the version `head` describes."""
        size, etag = int(head.get("content-length") or 0), head.get("etag", "")
        kept = await source.retry(lambda: copy_attributes(source.client, source_bucket, source_key, head))
        headers = attributes.over_source(kept)
        condition = condition or {}
        what = f"copy s3://{source_bucket}/{source_key}"

        async def fetch(start: int, end: int) -> bytes:
            await self.retry.pace_bytes(end - start)
            return await source.retry(
                lambda: source.client.get_range(source_bucket, source_key, start, end, if_match=etag), what
            )

        if size > parts.threshold:
            await relay_in_parts(
                self.client,
                fetch,
                bucket,
                key,
                size,
                part_size=parts.size,
                concurrency=parts.in_flight,
                headers=headers,
                hooks=self.hooks,
                retry=self.retry,
                condition=condition,
            )
        else:
            body = await fetch(0, size) if size else b""
            write = OneWrite(self.client, bucket, key)
            await self._retrying(lambda: write.put(body, headers | condition), what)

    async def _copy_in_parts(
        self,
        source_bucket: str,
        source_key: str,
        bucket: str,
        key: str,
        listed: Version,
        parts: Parts,
        attributes: Attributes,
        condition: dict[str, str] | None = None,
    ) -> Version:
        """`copy` in parts, of the version a HEAD finds (the listed one, unless it changed since)."""
        client, retry = self.client, self.retry
        head = await self.head(source_bucket, source_key, of_source=True)
        version = version_of(head)._replace(etag=head.get("etag") or listed.etag)
        size, etag = version.size or listed.size, version.etag.strip('"')
        layout = await retry(lambda: source_part_size(client, source_bucket, source_key, size, etag))
        await copy_in_parts(
            client,
            source_bucket,
            source_key,
            bucket,
            key,
            size,
            part_size=layout or parts.size,
            concurrency=parts.in_flight,
            headers=attributes.over_source(
                await retry(lambda: copy_attributes(client, source_bucket, source_key, head))
            ),
            hooks=self.hooks,
            retry=retry,
            etag=etag,
            condition=condition,
        )
        return version._replace(size=size)

    async def upload_stream(
        self,
        read: Callable[[int], Awaitable[bytes]],
        bucket: str,
        key: str,
        attributes: Attributes,
        parts: Parts,
        condition: dict[str, str] | None = None,
    ) -> int:
        """What `read(n)` gives until it gives b"" (stdin), in parts as it comes; returns bytes."""
        return await upload_stream(
            self.client,
            bucket,
            key,
            read,
            part_size=parts.size,
            concurrency=parts.in_flight,
            headers=attributes.headers(),
            hooks=self.hooks,
            retry=self.retry,
            condition=condition,
        )
