"""`rm`, and deleting many keys for `sync --delete` and `mv`: DeleteObjects (1,000 keys a
request, several requests in flight) with per-key outcomes and retries.

A DeleteObjects answer can be "200 OK" and still list keys that were not deleted (AccessDenied,
SlowDown, InternalError); those are reported one by one, and the retryable ones are sent again.
`BatchDeleter` lets many concurrent tasks (mv's copies) each delete one key while the requests
still carry many keys: keys gather for a moment and go out together.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from s3bulk.config import AwsSettings
from s3bulk.engine.job import BatchOutcome, WorkerContext
from s3bulk.engine.retry import RetryPolicy, with_retries
from s3bulk.errors import ItemError, S3Error, UsageError
from s3bulk.plan.filters import Filters
from s3bulk.report import Failure, WorkerStats
from s3bulk.sources.listing import KeyRange, SingleObject, find_object, iter_range
from s3bulk.stores.s3xml import ObjectInfo, xml_safe
from s3bulk.stores.signed import SignedClient
from s3bulk.urls import S3Location, relative_key

MAX_KEYS_PER_REQUEST = 1000


async def delete_keys(
    client: SignedClient,
    bucket: str,
    keys: list[str],
    policy: RetryPolicy,
    on_retry: Callable[[ItemError], None] | None = None,
) -> dict[str, str]:
    """Delete `keys` (any number); returns {key: reason} for the keys that could not be deleted."""
    failed: dict[str, str] = {}
    single = [key for key in keys if not xml_safe(key)]
    batched = [key for key in keys if xml_safe(key)]
    for key in single:
        try:
            await with_retries(lambda key=key: client.delete_object(bucket, key), policy, on_retry=on_retry)
        except ItemError as exc:
            failed[key] = str(exc)
    for start in range(0, len(batched), MAX_KEYS_PER_REQUEST):
        failed.update(
            await _delete_batch(
                client, bucket, batched[start : start + MAX_KEYS_PER_REQUEST], policy, on_retry
            )
        )
    return failed


async def _delete_batch(
    client: SignedClient,
    bucket: str,
    keys: list[str],
    policy: RetryPolicy,
    on_retry: Callable[[ItemError], None] | None,
) -> dict[str, str]:
    failed: dict[str, str] = {}
    attempt = 0
    while keys:
        try:
            errors = await with_retries(
                lambda keys=keys: client.delete_objects(bucket, keys), policy, on_retry=on_retry
            )
        except ItemError as exc:  # the request as a whole failed, after its own retries
            return failed | dict.fromkeys(keys, str(exc))
        attempt += 1
        again = []
        for key, code, message in errors:
            error = S3Error(
                500 if code in S3Error.RETRYABLE_CODES else 400, code, message, f"delete s3://{bucket}/{key}"
            )
            if error.retryable and attempt < policy.max_attempts:
                again.append(key)
                if on_retry is not None:
                    on_retry(error)
            else:
                failed[key] = str(error)
        keys = again
        if keys:
            await asyncio.sleep(policy.delay(attempt))
    return failed


class BatchDeleter:
    """Each caller awaits the deletion of its own key; keys that arrive within `linger` seconds
    of each other (or 1,000 of them) share one DeleteObjects request."""

    def __init__(
        self,
        client: SignedClient,
        bucket: str,
        policy: RetryPolicy,
        on_retry: Callable[[ItemError], None] | None = None,
        linger: float = 0.02,
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.policy = policy
        self.on_retry = on_retry
        self.linger = linger
        self._pending: dict[str, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def delete(self, key: str) -> None:
        """Returns once `key` is deleted; raises ItemError (not retryable) if it could not be."""
        loop = asyncio.get_running_loop()
        future = self._pending.get(key)
        if future is None:
            future = self._pending[key] = loop.create_future()
        if len(self._pending) >= MAX_KEYS_PER_REQUEST:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.linger, self._flush)
        await asyncio.shield(future)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        batch, self._pending = self._pending, {}
        task = asyncio.create_task(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: dict[str, asyncio.Future[None]]) -> None:
        try:
            failed = await delete_keys(self.client, self.bucket, list(batch), self.policy, self.on_retry)
        except Exception as exc:  # a bug must still fail every waiting caller, not hang them
            failed = dict.fromkeys(batch, f"internal error: {exc!r}")
        for key, future in batch.items():
            if future.done():
                continue
            if key in failed:
                future.set_exception(ItemError(failed[key], retryable=False))
            else:
                future.set_result(None)


@dataclass(frozen=True)
class DeleteBatch:
    """An item (and a descriptor): up to 1,000 keys of one bucket, deleted with one request."""

    bucket: str
    keys: tuple[tuple[str, int], ...]  # (key, size)

    def __str__(self) -> str:
        first = self.keys[0][0] if self.keys else ""
        return f"{len(self.keys)} keys from s3://{self.bucket}/{first}"


async def run_delete_batch(
    client: SignedClient, batch: DeleteBatch, ctx: WorkerContext, dry_run: bool
) -> BatchOutcome:
    """Delete a batch and say key by key what happened; never raises for a key's failure."""

    sizes = dict(batch.keys)
    failed: dict[str, str] = {}
    if not dry_run:
        failed = await delete_keys(client, batch.bucket, list(sizes), ctx.retry, ctx.count_retry)
    url = f"s3://{batch.bucket}/"
    done = [(key, size, url + key) for key, size in batch.keys if key not in failed]
    failures = [
        Failure(url + key, "", reason, item_id=key, size=sizes[key]) for key, reason in failed.items()
    ]
    return BatchOutcome(done, failures)


_WILDCARDS = "*?["


def split_wildcard(key: str) -> tuple[str, str]:
    """('logs/2024-', 'logs/2024-*.gz') for 'logs/2024-*.gz': list the literal part, match the
    pattern against whole keys. No wildcard: the pattern is empty."""
    positions = [key.index(char) for char in _WILDCARDS if char in key]
    if not positions:
        return key, ""
    return key[: min(positions)], key


@dataclass(frozen=True)
class RemoveOptions:
    filters: Filters = field(default_factory=Filters)
    dry_run: bool = False
    concurrency: int = 16
    partitioned_listing: bool = True


@dataclass
class RemoveJob:
    """Delete one object, everything under a prefix, or the keys matching a glob."""

    target: S3Location
    settings: AwsSettings
    options: RemoveOptions = field(default_factory=RemoveOptions)
    prefix: str = field(init=False)
    pattern: str = field(init=False)

    def __post_init__(self) -> None:
        self.prefix, self.pattern = split_wildcard(self.target.key)
        self._client: SignedClient | None = None
        self._key_filter = Filters(include=(self.pattern,)) if self.pattern else Filters()

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"_client": None}

    @property
    def single(self) -> bool:
        return not self.pattern and not self.target.is_prefix

    async def partitions(self, stats: WorkerStats) -> AsyncIterator[Any]:
        yield SingleObject(self.target.key) if self.single else KeyRange()

    def retry_partitions(self, rows: Iterator[list[tuple[str, int]]]) -> Iterator[Any]:
        for batch in rows:
            yield DeleteBatch(self.target.bucket, tuple(batch))

    async def open(self, ctx: WorkerContext) -> None:
        self._client = SignedClient(self.settings, max_connections=self.options.concurrency * 2)
        self._client.count_into(ctx.stats)

    async def close(self, ctx: WorkerContext) -> None:
        if self._client is not None:
            await self._client.close()

    async def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[DeleteBatch]]:
        assert self._client is not None
        if isinstance(descriptor, DeleteBatch):
            yield [descriptor]
            return
        bucket = self.target.bucket
        if isinstance(descriptor, SingleObject):
            found = await find_object(self._client, bucket, descriptor.key)
            yield self._batch([found], ctx)
            return
        async for objects in iter_range(
            self._client,
            bucket,
            self.prefix,
            descriptor,
            on_split=ctx.split if self.options.partitioned_listing else None,
            want_split=ctx.want_split,
        ):
            batch = self._batch([info for info in objects if self._wanted(info.key)], ctx)
            if batch:
                yield batch

    def _batch(self, objects: list[ObjectInfo], ctx: WorkerContext) -> list[DeleteBatch]:
        """One DeleteBatch of the keys an earlier run did not delete yet (empty: none left)."""
        keys = ctx.drop_done([(info.key, info.size) for info in objects], lambda entry: entry[0])
        ctx.stats.objects_listed += len(keys)
        ctx.stats.bytes_listed += sum(size for _, size in keys)
        return [DeleteBatch(self.target.bucket, tuple(keys))] if keys else []

    def _wanted(self, key: str) -> bool:
        if not self._key_filter.accepts(key):
            return False
        filters = self.options.filters
        return not filters or filters.accepts(relative_key(key, self.prefix))

    async def run(self, item: DeleteBatch, ctx: WorkerContext) -> BatchOutcome:
        assert self._client is not None
        return await run_delete_batch(self._client, item, ctx, self.options.dry_run)

    def cost(self, item: DeleteBatch) -> int:
        return 0

    def describe(self, item: DeleteBatch) -> tuple[str, str, int]:
        return f"s3://{item.bucket}/{item.keys[0][0] if item.keys else ''}", "", sum(s for _, s in item.keys)

    def item_id(self, item: DeleteBatch) -> str:
        return item.keys[0][0] if item.keys else ""


def check_remove_target(text: str, location: S3Location) -> None:
    """`rm s3://bucket` (no '/') is refused: emptying a bucket must be spelled out."""
    if not location.key and not text.rstrip().endswith("/"):
        raise UsageError(
            f"refusing to delete every object in s3://{location.bucket} from {text!r}: "
            f"say s3://{location.bucket}/ (or s3://{location.bucket}/*) if that is what you want"
        )
