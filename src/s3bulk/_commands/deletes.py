"""Deleting many keys, for `rm`, `sync --delete` and `mv`: DeleteObjects with 1,000 keys a
request and per-key outcomes (the storage seam retries the keys the service refused for a reason
worth retrying: `Storage.delete_many`), under `--max-delete` (`DeleteCap`).

`BatchDeleter` lets many concurrent tasks (mv's copies) each delete one key while the requests
still carry many keys: keys gather for a moment and go out together.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import NamedTuple

from s3bulk._engine.caps import DeleteCap
from s3bulk._engine.job import BatchOutcome, WorkerContext
from s3bulk._errors import ItemError, UsageError
from s3bulk._report import Failure
from s3bulk._stores.storage import MAX_KEYS_PER_DELETE, Storage


def check_max_delete(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise UsageError(f"--max-delete {limit}: give a count of objects, 0 or more")


class BatchDeleter:
    """Each caller awaits the deletion of its own key; keys that arrive within `linger` seconds
    of each other (or 1,000 of them) share one DeleteObjects request."""

    def __init__(self, storage: Storage, bucket: str, linger: float = 0.02) -> None:
        self.storage = storage
        self.bucket = bucket
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
        if len(self._pending) >= MAX_KEYS_PER_DELETE:
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
            failed = await self.storage.delete_many(self.bucket, list(batch))
        except Exception as exc:  # a bug must still fail every waiting caller, not hang them
            failed = dict.fromkeys(batch, f"internal error: {exc!r}")
        for key, future in batch.items():
            if future.done():
                continue
            if key in failed:
                future.set_exception(ItemError(failed[key], retryable=False))
            else:
                future.set_result(None)


class LocalDelete(NamedTuple):
    """An item: a local file sync --delete removes."""

    path: str
    size: int


@dataclass(frozen=True)
class DeleteBatch:
    """An item (and a descriptor): up to 1,000 keys of one bucket, deleted with one request."""

    bucket: str
    keys: tuple[tuple[str, int], ...]  # (key, size)

    def __str__(self) -> str:
        first = self.keys[0][0] if self.keys else ""
        return f"{len(self.keys)} keys from s3://{self.bucket}/{first}"


async def run_delete_batch(
    storage: Storage,
    batch: DeleteBatch,
    dry_run: bool,
    cap: DeleteCap | None = None,
    ctx: WorkerContext | None = None,
) -> BatchOutcome:
    """Delete a batch and say key by key what happened; never raises for a key's failure. Under
    a cap, only the keys it grants are deleted (the rest are neither done nor failed)."""
    if cap is not None:  # a dry run stops where the real one would
        assert ctx is not None
        batch = replace(batch, keys=batch.keys[: cap.take(len(batch.keys), ctx.stop_job)])
    sizes = dict(batch.keys)
    failed = {} if dry_run else await storage.delete_many(batch.bucket, list(sizes))
    url = f"s3://{batch.bucket}/"
    done = [(key, size, url + key) for key, size in batch.keys if key not in failed]
    failures = [
        Failure(url + key, "", reason, item_id=key, size=sizes[key]) for key, reason in failed.items()
    ]
    return BatchOutcome(done, failures)
