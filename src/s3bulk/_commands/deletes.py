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
from s3bulk._errors import ItemError, S3Error, UsageError
from s3bulk._report import Failure
from s3bulk._stores.storage import MAX_KEYS_PER_DELETE, Storage


def check_max_delete(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise UsageError(f"--max-delete {limit}: give a count of objects, 0 or more")


# An ETag no version of any object has: a delete on this condition is refused by a service that
# takes conditions on deletes, and done by one that ignores them (`BatchDeleter._learn`).
NO_VERSION_HAS = "s3bulk-no-version-has-this-etag"
CHANGED_AFTER_COPY = (
    "it changed after it was copied: kept, with what was written meanwhile (the copy holds the "
    "version before; run the mv again to move it)"
)
CHANGED_AFTER_LISTING = (
    "it changed after it was listed: kept, with what was written meanwhile (run again to "
    "delete it if it is still to go)"
)


class BatchDeleter:
    """Each caller awaits the deletion of its own key; keys that arrive within `linger` seconds
    of each other (or 1,000 of them) share one DeleteObjects request.

    mv names the version it copied (its ETag), and a source is deleted only while it is still
    that version: another writer's newer one is kept. S3 takes the condition in DeleteObjects
    (an <ETag> per key) and refuses a key that changed; of the servers tested, versitygw takes
    it in a DeleteObject only (If-Match), MinIO and Garage in neither (docs/compatibility.md).
    Which form a service takes is learnt from the first keys deleted (`_learn`); until then, and
    where it takes none, each key is looked at by a HEAD just before its delete: a write between
    that HEAD and the delete is then lost, the window docs/compatibility.md names."""

    def __init__(
        self, storage: Storage, bucket: str, linger: float = 0.02, changed: str = CHANGED_AFTER_COPY
    ) -> None:
        self.storage = storage
        self.bucket = bucket
        self.linger = linger
        self.changed = changed  # why a key that changed since is kept, as its caller says it
        # key -> (ETag, whether a HEAD looks at it first, its delete)
        self._pending: dict[str, tuple[str, bool, asyncio.Future[bool]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        # whether the service takes a condition on DeleteObjects' keys, and on a DeleteObject
        self.in_batches: bool | None = None
        self.one_by_one: bool | None = None
        self._learning: asyncio.Future[None] | None = None

    async def delete(self, key: str, etag: str = "") -> bool:
        """Returns once `key` is deleted (True), or found gone already (False); raises ItemError
        (not retryable) if it could not be, or, with `etag`, if it no longer has that ETag."""
        if not etag:
            return await self._batched(key, "")
        while self.in_batches is None or (self.in_batches is False and self.one_by_one is None):
            if self._learning is None:
                return await self._learn(key, etag)
            await asyncio.shield(self._learning)
        if self.in_batches:
            return await self._batched(key, etag)
        if self.one_by_one:
            return await self._delete_one(key, etag)
        return await self._batched(key, etag, look=True)

    async def _unchanged(self, key: str, etag: str) -> bool:
        """Whether the key still has `etag` (False: it is gone already), as a HEAD says now;
        ItemError if it has another."""
        try:
            head = await self.storage.head(self.bucket, key)
        except S3Error as error:
            if error.status == 404:
                return False
            raise ItemError(str(error), retryable=False) from None
        if head.get("etag", "").strip('"') != etag.strip('"'):
            raise ItemError(self.changed, retryable=False)
        return True

    async def _learn(self, key: str, etag: str) -> bool:
        """Whether the service takes a condition on a delete, in DeleteObjects first, then in a
        DeleteObject, asked with this key once a HEAD said it is unchanged: its delete on an ETag
        no version has is refused (412) by a service that takes it, and done by one that does
        not, which is then the delete asked for. Returns whether the key was deleted."""
        self._learning = asyncio.get_running_loop().create_future()
        in_batches = self.in_batches is None
        try:
            if not await self._unchanged(key, etag):
                return False
            if in_batches:
                failed = await self.storage.delete_many(self.bucket, [key], {key: NO_VERSION_HAS})
                refused = failed.get(key)
            else:
                refused = await self._refusal(key, NO_VERSION_HAS)
            if refused is not None and _gone(refused):  # deleted meanwhile: the next key asks
                return False
            takes = refused is not None and _not_as_asked(refused)
            if in_batches:
                self.in_batches = takes
            else:
                self.one_by_one = takes
            if refused is None:  # the condition was not looked at: deleted
                return True
            if not takes:  # refused for another reason; the HEAD said it is the version copied
                return await self._batched(key, "")
            return await (self._batched(key, etag) if in_batches else self._delete_one(key, etag))
        finally:
            self._learning.set_result(None)
            self._learning = None

    async def _refusal(self, key: str, etag: str) -> str | None:
        """Why a DeleteObject of the key on the condition `etag` was refused (None: done)."""
        try:
            await self.storage.delete_object(self.bucket, key, etag)
        except S3Error as error:
            return str(error) if error.status != 412 else f"PreconditionFailed: {error}"
        return None

    async def _delete_one(self, key: str, etag: str) -> bool:
        """The key deleted by a DeleteObject of its own, only while it has `etag`."""
        refused = await self._refusal(key, etag)
        if refused is None:
            return True
        if _not_as_asked(refused):
            raise ItemError(self.changed, retryable=False)
        if _gone(refused):
            return False
        raise ItemError(refused, retryable=False)

    async def _batched(self, key: str, etag: str, *, look: bool = False) -> bool:
        """The key deleted in the next DeleteObjects: on the condition `etag`, or with `look`,
        if a HEAD sent just before that request says it still has it (`_send`)."""
        loop = asyncio.get_running_loop()
        held = self._pending.get(key)
        if held is None:
            held = self._pending[key] = (etag, look, loop.create_future())
        if len(self._pending) >= MAX_KEYS_PER_DELETE:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.linger, self._flush)
        return await asyncio.shield(held[2])

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

    async def _send(self, batch: dict[str, tuple[str, bool, asyncio.Future[bool]]]) -> None:
        """One DeleteObjects of the batch. The keys to look at first are HEADed all at once just
        before it (not as each arrived: the window for a write is then one HEAD, not the
        batch's wait); those changed or gone are not sent."""
        try:
            batch = await self._looked_at(batch)
            etags = {key: etag for key, (etag, look, _) in batch.items() if etag and not look}
            failed = await self.storage.delete_many(self.bucket, list(batch), etags)
        except Exception as exc:  # a bug must still fail every waiting caller, not hang them
            failed = dict.fromkeys(batch, f"internal error: {exc!r}")
        for key, (etag, _, future) in batch.items():
            reason = failed.get(key)
            if future.done():
                continue
            if reason is None:
                future.set_result(True)
            elif etag and _not_as_asked(reason):
                future.set_exception(ItemError(self.changed, retryable=False))
            elif etag and _gone(reason):  # a condition on a key that is gone
                future.set_result(False)
            else:
                future.set_exception(ItemError(reason, retryable=False))

    async def _looked_at(
        self, batch: dict[str, tuple[str, bool, asyncio.Future[bool]]]
    ) -> dict[str, tuple[str, bool, asyncio.Future[bool]]]:
        """The batch without the keys a HEAD now finds changed (their callers told why) or gone
        (told so), `HEADS` at once."""
        heads = asyncio.Semaphore(HEADS)

        async def unchanged(key: str, etag: str) -> bool:
            async with heads:
                return await self._unchanged(key, etag)

        looked = [key for key, (_, look, _) in batch.items() if look]
        found = await asyncio.gather(
            *(unchanged(key, batch[key][0]) for key in looked), return_exceptions=True
        )
        for key, still in zip(looked, found, strict=True):
            future = batch[key][2]
            if still is True:
                continue
            del batch[key]
            if isinstance(still, BaseException):
                future.set_exception(still)
            else:
                future.set_result(False)
        return batch


HEADS = 64  # HEADs in flight at once for a batch of keys to look at before their delete


def _not_as_asked(reason: str) -> bool:
    """Whether a conditional delete was refused for its condition (the key has another ETag)."""
    return "PreconditionFailed" in reason or "(412)" in reason


def _gone(reason: str) -> bool:
    """Whether a conditional delete was refused because the key is not there any more."""
    return "NoSuchKey" in reason or "(404)" in reason


async def _deleted_as_listed(deleter: BatchDeleter, keys: list[str], etags: dict[str, str]) -> dict[str, str]:
    """{key: why it was not deleted} of `keys`, each deleted while it has its listed ETag."""
    found = await asyncio.gather(
        *(deleter.delete(key, etags.get(key, "")) for key in keys), return_exceptions=True
    )
    failed = {}
    for key, outcome in zip(keys, found, strict=True):
        if isinstance(outcome, ItemError):
            failed[key] = str(outcome)
        elif isinstance(outcome, BaseException):
            raise outcome
    return failed


class LocalDelete(NamedTuple):
    """An item: a local file sync --delete removes, only while it is the file listed (its size
    and time: `mtime` None when not known)."""

    path: str
    size: int
    mtime: float | None = None


@dataclass(frozen=True)
class DeleteBatch:
    """An item (and a descriptor): up to 1,000 keys of one bucket, deleted with one request."""

    bucket: str
    keys: tuple[tuple[str, int], ...]  # (key, size)
    # (key, ETag) as listed: each such key is deleted only while it is that version (`BatchDeleter`)
    etags: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        first = self.keys[0][0] if self.keys else ""
        return f"{len(self.keys)} keys from s3://{self.bucket}/{first}"


async def run_delete_batch(
    storage: Storage,
    batch: DeleteBatch,
    dry_run: bool,
    cap: DeleteCap | None = None,
    ctx: WorkerContext | None = None,
    deleter: BatchDeleter | None = None,
) -> BatchOutcome:
    """Delete a batch and say key by key what happened; never raises for a key's failure. Under
    a cap, only the keys it grants are deleted (the rest are neither done nor failed). A key
    listed with its ETag is deleted on that condition: where the service takes it in
    DeleteObjects (S3), what another writer wrote there since the listing is kept, and its item
    fails by name; with a `deleter` (sync's), wherever the service takes a condition, else
    after a HEAD just before (`BatchDeleter`), at a request per key more."""
    if cap is not None:  # a dry run stops where the real one would
        assert ctx is not None
        batch = replace(batch, keys=batch.keys[: cap.take(len(batch.keys), ctx.stop_job)])
    sizes = dict(batch.keys)
    if dry_run:
        failed = {}
    elif deleter is not None and batch.etags:
        failed = await _deleted_as_listed(deleter, list(sizes), dict(batch.etags))
    else:
        etags = dict(batch.etags)
        failed = await storage.delete_many(batch.bucket, list(sizes), etags)
        failed = {  # a key gone already, its condition unmet, is as deleted as the rest
            key: CHANGED_AFTER_LISTING if key in etags and _not_as_asked(why) else why
            for key, why in failed.items()
            if not (key in etags and _gone(why))
        }
    url = f"s3://{batch.bucket}/"
    done = [(key, size, url + key) for key, size in batch.keys if key not in failed]
    failures = [
        Failure(url + key, "", reason, item_id=key, size=sizes[key]) for key, reason in failed.items()
    ]
    return BatchOutcome(done, failures)
