"""Multipart uploads and copies whose upload ids s3bulk knows.

An upload that is started and never completed or aborted stays on the server, invisible in
listings, and is billed until a lifecycle rule removes it. obstore's multipart upload keeps its
id to itself, so a job stopped mid-way (Ctrl-C, SIGTERM, kill -9) could neither abort it nor say
it exists. Here every upload id is reported the moment it exists (`UploadHooks.started`, which the
journal records) and again when it is completed or aborted (`ended`). A job stopped by Ctrl-C or
SIGTERM keeps the uploads of files its journal holds (`UploadHooks.kept`: a resume goes on with
them, sending only the parts not yet stored, as after a kill -9) and aborts the rest; whatever
a resume does not go on with, it aborts once it has finished.

Copies of multipart objects keep the source's part layout when it can be found (a HEAD of part 1),
so the copy's ETag equals the source's and `sync --checksum` sees them as equal; and they carry
the source's attributes (Content-Type, metadata, Cache-Control, tags, ...), which a multipart
copy otherwise drops, because CreateMultipartUpload starts with none.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from s3bulk._errors import ItemError, S3Error
from s3bulk._stores import checksums
from s3bulk._stores.etags import completed_etag
from s3bulk._stores.native_http import FileRange
from s3bulk._stores.onewrite import OneWrite
from s3bulk._stores.s3 import S3Client, quote_key
from s3bulk._stores.underway import count_moved

T = TypeVar("T")


def file_version(path: str) -> tuple[int, ...]:
    """What tells one version of a file from another (`version_of` its stat)."""
    return version_of(os.stat(path))


def version_of(found: os.stat_result) -> tuple[int, ...]:
    """A file's size, inode, modification and change times: ctime changes on every write, and
    nobody can set it back."""
    return (found.st_size, found.st_ino, found.st_mtime_ns, found.st_ctime_ns)


MAX_PARTS = 10_000
MIN_PART = 5 * 1024**2
ABORT_SECONDS = 10.0
# Retry one request (a part) with the job's policy: the store does not choose its own.
Retry = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]

# What a copy keeps of its source: what CopyObject itself copies (metadata directive COPY).
COPIED_HEADERS = (
    "content-type",
    "content-encoding",
    "content-disposition",
    "content-language",
    "cache-control",
    "expires",
    "x-amz-website-redirect-location",
)


def _nobody(*_: str) -> None:
    """Hooks nobody listens to (a module function, so jobs holding it still pickle)."""


@dataclass(frozen=True)
class UploadHooks:
    """Told of every upload id as it starts (bucket, key, id) and once it is finished with."""

    started: Callable[[str, str, str], None] = _nobody
    ended: Callable[[str], None] = _nobody
    # an upload of (bucket, key) an earlier run of the job left unfinished, to go on with
    resumable: Callable[[str, str], str | None] = lambda bucket, key: None
    # told of an upload of a file left for the resume when the job is stopped (the bytes its
    # stored parts hold); None: no journal keeps the id for a resume, so a stop aborts it
    kept: Callable[[int], None] | None = None


def fit_part_size(size: int, part_size: int) -> int:
    """`part_size`, raised if needed so that `size` takes at most 10,000 parts (S3's limit)."""
    return max(part_size, MIN_PART, math.ceil(size / MAX_PARTS))


def etag_parts(etag: str) -> int:
    """N for a multipart ETag (`md5-N`), 0 for a plain MD5 or anything else."""
    _, _, parts = etag.strip('"').partition("-")
    return int(parts) if parts.isdigit() else 0


@contextlib.asynccontextmanager
async def _upload(
    client: S3Client,
    bucket: str,
    key: str,
    headers: dict[str, str],
    hooks: UploadHooks,
    retry: Retry,
    resumed: str = "",
    checksum: str | None = None,
    stored: Callable[[], int] | None = None,
) -> AsyncIterator[str]:
    """An upload id for the block (`resumed`: an earlier run's, gone on with; `checksum`: the
    algorithm its parts carry); aborted if the block fails, and reported as ended only once it
    is completed or surely aborted (else the journal keeps it for later). Cancelled (the job is
    stopped), an upload that a resume can go on with (`stored`: the bytes its stored parts hold)
    is kept for it where the journal keeps its id (`hooks.kept`): aborting it would have the
    resume send every part again, which a kill -9 would not."""
    upload_id: str = resumed or await retry(
        lambda: client.create_multipart_upload(bucket, key, headers, checksum)
    )
    hooks.started(bucket, key, upload_id)  # a resumed one is this run's now
    try:
        yield upload_id
    except (asyncio.CancelledError, KeyboardInterrupt):
        if stored is None or hooks.kept is None:
            await _abort(client, bucket, key, upload_id, hooks)
        else:
            hooks.kept(stored())
        raise
    except BaseException:
        await _abort(client, bucket, key, upload_id, hooks)
        raise
    hooks.ended(upload_id)


async def _abort(client: S3Client, bucket: str, key: str, upload_id: str, hooks: UploadHooks) -> None:
    """Abort an upload that failed or was stopped, bounded: a job being stopped must not hang on
    a service that does not answer. One that cannot be aborted stays journaled, and the resume
    aborts it; the original failure is the one to report."""
    try:
        await asyncio.wait_for(client.abort_multipart_upload(bucket, key, upload_id), ABORT_SECONDS)
    except Exception:
        return
    hooks.ended(upload_id)


@contextlib.asynccontextmanager
async def parts_group() -> AsyncIterator[asyncio.TaskGroup]:
    """A TaskGroup for the parts of one object (an upload's, a download's ranges) whose first
    failure cancels the others and is raised as itself: it is what the user reads ("BadDigest:
    ..."), not "unhandled errors in a TaskGroup"."""
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None


# Sends part `number` (bytes first..last, inclusive) of the upload `upload_id`; returns its ETag
# and its checksum ("" for none).
SendPart = Callable[[str, int, int, int], Awaitable[tuple[str, str]]]


async def _in_parts(
    client: S3Client,
    bucket: str,
    key: str,
    size: int,
    *,
    part_size: int,
    concurrency: int,
    headers: dict[str, str],
    hooks: UploadHooks,
    retry: Retry,
    send: SendPart,
    resumed: str = "",
    kept: dict[int, tuple[str, str]] | None = None,
    still_whole: Callable[[], None] = lambda: None,
    checksum: str | None = None,
    condition: dict[str, str] | None = None,
    resumable: bool = False,
) -> None:
    """One multipart upload of `size` bytes: every part sent by `send` (each retried alone, at
    most `concurrency` at once, the first failure cancelling the rest), then completed, unless
    `still_whole` raises (the parts are not one version of the source: the upload is aborted).
    Going on with the upload `resumed`, the parts in `kept` (number: ETag, checksum) are not
    sent again. With `checksum`, the parts carry that algorithm's values (`S3Client.checksum`);
    `condition` goes with the completion (If-None-Match, If-Match: `conditional.write_condition`).
    `resumable`: a resume could go on with this upload, so a stopped job keeps it (`_upload`)."""
    part_size = fit_part_size(size, part_size)
    semaphore = asyncio.Semaphore(max(1, concurrency))
    kept = kept or {}
    stored = [0]  # the bytes of the parts the service holds
    holding = (lambda: stored[0]) if resumable else None
    async with _upload(client, bucket, key, headers, hooks, retry, resumed, checksum, holding) as upload_id:

        async def part(number: int, first: int) -> tuple[str, str]:
            last = min(first + part_size, size) - 1
            if number in kept:
                stored[0] += last - first + 1
                count_moved(last - first + 1)
                return kept[number]
            async with semaphore:
                sent: tuple[str, str] = await retry(lambda: send(upload_id, number, first, last))
            stored[0] += last - first + 1
            count_moved(last - first + 1)
            return sent

        starts = range(0, size, part_size) if size else range(1)
        async with parts_group() as group:
            tasks = [group.create_task(part(number, first)) for number, first in enumerate(starts, 1)]
        sent = [task.result() for task in tasks]
        still_whole()
        lengths = [min(part_size, size - first) for first in starts]
        await _complete(client, bucket, key, upload_id, sent, lengths, retry, checksum, condition)


async def _complete(
    client: S3Client,
    bucket: str,
    key: str,
    upload_id: str,
    sent: list[tuple[str, str]],
    lengths: list[int],
    retry: Retry,
    checksum: str | None,
    condition: dict[str, str] | None = None,
) -> None:
    """Complete the upload of the parts `sent` (ETag, checksum) of `lengths`. A completion
    whose answer was lost (the connection reset after the service had completed it) is sent
    again and answered NoSuchUpload, although the upload is now the object: a HEAD tells so by
    its ETag, the MD5 of the parts' MD5s with their count."""
    etags = [etag for etag, _ in sent]
    parts = [(value, length) for (_, value), length in zip(sent, lengths, strict=True)]
    write = OneWrite(client, bucket, key)  # a retry refused (412) for the write's own object
    try:
        await retry(lambda: write.complete(upload_id, etags, checksum, parts, condition))
    except S3Error as error:
        expected = completed_etag(etags)
        if error.code != "NoSuchUpload" or expected is None:
            raise
        head = await retry(lambda: client.head_object(bucket, key))
        if head.get("etag", "").strip('"').lower() != expected:
            raise


async def upload_file(
    client: S3Client,
    bucket: str,
    key: str,
    path: str,
    size: int,
    *,
    part_size: int,
    concurrency: int,
    headers: dict[str, str],
    hooks: UploadHooks,
    retry: Retry,
    pace_bytes: Callable[[int], Awaitable[None]] | None = None,
    condition: dict[str, str] | None = None,
) -> None:
    """Upload a local file in parts, `concurrency` at once, each read from the file as it is
    sent (`FileRange`: a chunk or two of each in memory, not the part); each part first waits
    for its bytes under a --bwlimit (`pace_bytes`). An upload of this key that an earlier run
    left (`hooks.resumable`) is gone on with: its parts that hold this file's bytes stay.
    Read by path as it is sent, a file written to meanwhile (or replaced) would be stored torn:
    its size, inode and times are the same when the last part is sent as when the first was, or
    the upload is aborted and the item fails, by name."""
    version = file_version(path)
    descriptor = os.open(path, os.O_RDONLY)
    resumed, kept = await _resumable(client, bucket, key, hooks, descriptor, size, part_size, retry)

    async def send(upload_id: str, number: int, first: int, last: int) -> tuple[str, str]:
        if pace_bytes is not None:
            await pace_bytes(last - first + 1)
        if os.fstat(descriptor).st_size <= last:  # else retried, and failing the same way
            raise ItemError(f"{path} shrank while it was being uploaded", retryable=False)
        part = FileRange(path, first, last - first + 1)
        return await client.upload_part(bucket, key, upload_id, number, part)

    def still_whole() -> None:
        if version[0] != size or file_version(path) != version:
            raise ItemError(
                f"{path} changed while it was being uploaded: nothing was stored (upload it again)",
                retryable=False,
            )

    try:
        await _in_parts(
            client,
            bucket,
            key,
            size,
            part_size=part_size,
            concurrency=concurrency,
            headers=headers,
            hooks=hooks,
            retry=retry,
            send=send,
            resumed=resumed,
            kept=kept,
            still_whole=still_whole,
            checksum=client.checksum,
            condition=condition,
            resumable=True,
        )
    finally:
        os.close(descriptor)


async def _resumable(
    client: S3Client,
    bucket: str,
    key: str,
    hooks: UploadHooks,
    descriptor: int,
    size: int,
    part_size: int,
    retry: Retry,
) -> tuple[str, dict[int, tuple[str, str]]]:
    """(upload id, kept parts) of an upload of this key an earlier run left, to be gone on with;
    ("", {}) when there is none, or none of its parts holds this file's bytes."""
    earlier = hooks.resumable(bucket, key)
    if not earlier:
        return "", {}
    found = await _parts_holding(
        client, bucket, key, earlier, descriptor, size, fit_part_size(size, part_size), retry
    )
    return ("", {}) if found is None else (earlier, found)


async def _parts_holding(
    client: S3Client,
    bucket: str,
    key: str,
    upload_id: str,
    descriptor: int,
    size: int,
    part_size: int,
    retry: Retry,
) -> dict[int, tuple[str, str]] | None:
    """The parts of an earlier run's upload that hold the file's bytes where this run would put
    them: the right size, and an ETag that is the MD5 of those bytes (the file may have changed;
    an encrypted part's ETag is no MD5, so it is sent again), with the checksum the part was
    sent with (a CRC's found again here; a SHA's part is sent again). None: the upload is gone."""
    try:
        parts = await retry(lambda: client.list_parts(bucket, key, upload_id))
    except S3Error as error:
        if error.status == 404:
            return None
        raise

    algorithm = client.checksum
    if algorithm is not None and checksums.multipart_type(algorithm) != "FULL_OBJECT":
        return {}

    def holding(number: int, etag: str, length: int) -> str | None:
        """The part's checksum ("" for none) if it holds the file's bytes, else None."""
        first = (number - 1) * part_size
        if first >= size or length != min(part_size, size - first):
            return None
        digest, chunks = hashlib.md5(usedforsecurity=False), []
        for offset in range(first, first + length, 8 * 1024 * 1024):
            chunk = os.pread(descriptor, min(8 * 1024 * 1024, first + length - offset), offset)
            digest.update(chunk)
            if algorithm is not None:
                chunks.append((checksums.of_bytes(algorithm, chunk), len(chunk)))
        if digest.hexdigest() != etag.strip('"').lower():
            return None
        return (checksums.whole_object(algorithm, chunks) or "") if algorithm is not None else ""

    kept = {}
    for number, etag, length in parts:
        value = await asyncio.to_thread(holding, number, etag, length)
        if value is not None:
            kept[number] = (etag, value)
    return kept


async def copy_attributes(client: S3Client, bucket: str, key: str, head: dict[str, str]) -> dict[str, str]:
    """The headers that give a new upload the attributes of the object `head` describes."""
    headers = {name: head[name] for name in COPIED_HEADERS if head.get(name)}
    headers.update({name: value for name, value in head.items() if name.startswith("x-amz-meta-")})
    if int(head.get("x-amz-tagging-count") or 0):
        tags = await client.get_tagging(bucket, key)
        if tags:
            headers["x-amz-tagging"] = urlencode(tags, quote_via=quote)
    return headers


async def source_part_size(client: S3Client, bucket: str, key: str, size: int, etag: str) -> int | None:
    """The part size a multipart object was uploaded with, when every part but the last has it
    (what every common tool does), found from part 1's size; None if the layout is otherwise."""
    parts = etag_parts(etag)
    if parts < 1:
        return None
    if parts == 1:
        return max(size, 1)
    head = await client.head_object(bucket, key, part_number=1, of_source=True)
    first = int(head.get("content-length") or 0)
    if first and first * (parts - 1) < size <= first * parts:
        return first
    return None


async def copy_in_parts(
    client: S3Client,
    source_bucket: str,
    source_key: str,
    bucket: str,
    key: str,
    size: int,
    *,
    part_size: int,
    concurrency: int,
    headers: dict[str, str],
    hooks: UploadHooks,
    retry: Retry,
    etag: str = "",
    condition: dict[str, str] | None = None,
) -> None:
    """Server-side copy with UploadPartCopy, `concurrency` parts in flight (no bytes pass here),
    each of the source's version `etag` only: a part of the next version is refused (412), the
    upload aborted, never completed torn."""
    source = f"/{source_bucket}/{quote_key(source_key)}"

    async def send(upload_id: str, number: int, first: int, last: int) -> tuple[str, str]:
        copied = await client.upload_part_copy(bucket, key, upload_id, number, source, first, last, etag)
        return copied, ""

    await _in_parts(
        client,
        bucket,
        key,
        size,
        part_size=part_size,
        concurrency=concurrency,
        headers=headers,
        hooks=hooks,
        retry=retry,
        send=send,
        condition=condition,
    )


async def relay_in_parts(
    client: S3Client,
    fetch: Callable[[int, int], Awaitable[bytes]],
    bucket: str,
    key: str,
    size: int,
    *,
    part_size: int,
    concurrency: int,
    headers: dict[str, str],
    hooks: UploadHooks,
    retry: Retry,
    condition: dict[str, str] | None = None,
) -> None:
    """A multipart upload whose parts are fetched from elsewhere (`fetch(first, end)`: another
    endpoint or account), `concurrency` parts in memory at once."""

    async def send(upload_id: str, number: int, first: int, last: int) -> tuple[str, str]:
        body = await fetch(first, last + 1)
        if len(body) != last - first + 1:
            raise ItemError(
                f"the source changed while it was copied (part {number} is short)", retryable=False
            )
        return await client.upload_part(bucket, key, upload_id, number, body)

    await _in_parts(
        client,
        bucket,
        key,
        size,
        part_size=part_size,
        concurrency=concurrency,
        headers=headers,
        hooks=hooks,
        retry=retry,
        send=send,
        checksum=client.checksum,
        condition=condition,
    )


async def upload_stream(
    client: S3Client,
    bucket: str,
    key: str,
    read: Callable[[int], Awaitable[bytes]],
    *,
    part_size: int,
    concurrency: int,
    headers: dict[str, str],
    hooks: UploadHooks,
    retry: Retry,
    condition: dict[str, str] | None = None,
) -> int:
    """Upload what `read(n)` gives until it gives b"" (stdin, a generator), its size unknown in
    advance: one PutObject when it fits in one part, else a multipart upload holding at most
    `concurrency` parts in flight plus the one being read. Returns the bytes sent."""
    body = await _read_full(read, part_size)
    if len(body) < part_size:
        write = OneWrite(client, bucket, key)
        await retry(lambda: write.put(body, headers | (condition or {})))
        return len(body)
    slots = asyncio.Semaphore(max(1, concurrency))
    sent: dict[int, tuple[str, str]] = {}
    lengths: dict[int, int] = {}
    size = 0
    checksum = client.checksum
    async with _upload(client, bucket, key, headers, hooks, retry, checksum=checksum) as upload_id:

        async def send(number: int, part: bytes) -> None:
            try:
                sent[number] = await retry(lambda: client.upload_part(bucket, key, upload_id, number, part))
                lengths[number] = len(part)
            finally:
                slots.release()

        async with parts_group() as group:
            number = 0
            while body:
                number += 1
                if number > MAX_PARTS:
                    raise ItemError(
                        f"the stream is longer than {MAX_PARTS:,} parts of {part_size:,} bytes: "
                        "raise --part-size",
                        retryable=False,
                    )
                await slots.acquire()
                size += len(body)
                group.create_task(send(number, body))
                body = await _read_full(read, part_size)
        numbers = sorted(sent)
        await _complete(
            client,
            bucket,
            key,
            upload_id,
            [sent[number] for number in numbers],
            [lengths[number] for number in numbers],
            retry,
            checksum,
            condition,
        )
    return size


async def _read_full(read: Callable[[int], Awaitable[bytes]], size: int) -> bytes:
    """`size` bytes, fewer only at the end (a pipe answers in pieces)."""
    chunks: list[bytes] = []
    wanted = size
    while wanted > 0:
        chunk = await read(wanted)
        if not chunk:
            break
        chunks.append(chunk)
        wanted -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
