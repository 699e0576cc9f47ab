"""The journal in the object store (ray engine): a job a whole cluster runs can be resumed from
any machine, after its driver or any of its workers died.

Under the job's prefix (default `s3://BUCKET/.s3bulk/jobs/ID/`, BUCKET the destination's, else the
source's):

    job.json                       the spec: command, arguments, settings (never credentials)
    parts/RUN-WORKER-SEQ.jsonl     items finished, one JSON line each, written by the worker that
                                   finished them whenever one of its partitions finishes (and
                                   every 5,000 items within a long one)
    resume/RUN-TOKEN.db            the journal a resuming driver rebuilt: its workers read it to
                                   leave out what is done, wherever they run

S3 has no append, so every part is a new object, complete or absent. A worker killed before its
part is written loses only that part's record: a resume does those items again, and every
operation s3bulk journals is idempotent (PUT, COPY, DELETE of the same content; vectors overwrite
by key). The driver's local SQLite journal is kept as for any engine; this is its copy that
outlives the machine.

Its requests go through s3bulk's signed client (obstore's HTTP client, used before, followed a
307 to another host and sent the session token there: issue 62), on the file-like readers' event
loop (`reader.BACKGROUND`): the driver's calls block (they run in a thread), a worker's parts are
awaited from its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import orjson

from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error, UsageError, classify
from s3bulk._journal.local import Journal, JournalReader, NoSuchJob, state_dir
from s3bulk._report import Failure, WorkerStats
from s3bulk._stores.reader import BACKGROUND
from s3bulk._stores.retry import Retrier
from s3bulk._stores.s3xml import Repeats, repeated
from s3bulk._stores.storage import Storage
from s3bulk._urls import parse_s3

T = TypeVar("T")

JOBS_PREFIX = ".s3bulk/jobs/"
PART_ROWS = 5000


def default_url(locations: tuple[str, ...], job_id: str) -> str | None:
    """Where a job's object-store journal goes unless --journal-url says: beside its data, in the
    bucket of the first of the job's s3:// `locations` (the one written to comes first)."""
    for value in locations:
        if value.startswith("s3://"):
            return f"s3://{parse_s3(value).bucket}/{JOBS_PREFIX}{job_id}/"
    return None


class StoreJournal:
    """A job's prefix in the object store, for the driver (spec, import) and workers (parts)."""

    def __init__(self, url: str, settings: AwsSettings) -> None:
        self.location = parse_s3(url if url.endswith("/") else url + "/")
        self.url = f"s3://{self.location.bucket}/{self.location.key}"
        self.bucket = self.location.bucket
        self.storage = Storage(settings, connections=4)  # used on BACKGROUND's loop only

    def _key(self, name: str) -> str:
        return self.location.key + name

    @staticmethod
    def _wait(coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine run on the journal's loop, for a caller that blocks."""
        return BACKGROUND.run(coroutine)

    def _get(self, key: str) -> bytes:
        return self._wait(self.storage.get_object(self.bucket, key))

    def _put(self, key: str, body: bytes) -> None:
        self._wait(self.storage.put_bytes(self.bucket, key, body))

    async def put_once(self, key: str, body: bytes) -> None:
        """One PUT of a part, unretried (its writer retries it), from any event loop."""
        client = self.storage.client
        await asyncio.wrap_future(BACKGROUND.start(client.put_object(self.bucket, key, body)))

    async def _part_keys(self) -> list[str]:
        """The parts' keys, in key order (so in run order), every page of the listing."""
        keys: list[str] = []
        token: str | None = None
        tokens = Repeats()
        while True:
            page = await self.storage.list_objects_v2(
                self.bucket, self._key("parts/"), continuation_token=token
            )
            keys.extend(entry.key for entry in page.objects)
            if not page.is_truncated:
                return keys
            token = page.next_token
            if tokens.seen(token):
                raise repeated(f"list {self.url}parts/")

    # ---- driver ------------------------------------------------------------------------------
    def write_spec(self, job_id: str, command: str, spec: dict[str, Any]) -> None:
        body = orjson.dumps({"id": job_id, "command": command, "spec": spec})
        try:
            self._put(self._key("job.json"), body)
        except Exception as exc:
            raise UsageError(
                f"cannot write the job's journal to {self.url}: {classify(exc)} "
                "(choose a writable place with --journal-url s3://bucket/prefix/)"
            ) from None

    def import_into(self, directory: Path | None = None) -> str:
        """Create or bring up to date the local journal of this job from the parts, and return
        the job's id: what `--resume s3://...` runs from, on any machine."""
        try:
            head = orjson.loads(self._get(self._key("job.json")))
        except S3Error as error:
            if error.status == 404 and error.code != "NoSuchBucket":
                raise UsageError(f"no s3bulk job at {self.url} (no job.json there): check the URL") from None
            raise UsageError(f"cannot read the job's journal at {self.url}: {error}") from None
        except Exception as exc:
            raise UsageError(f"cannot read the job's journal at {self.url}: {classify(exc)}") from None
        directory = directory or state_dir()
        local: JournalReader | None = None  # this machine's journal of the job, if it has one
        try:
            journal = Journal.open(head["id"], directory)
            local = JournalReader(str(journal.path))
        except NoSuchJob:
            journal = Journal.create(head["command"], head["spec"], directory, job_id=head["id"])
        for key in self._wait(self._part_keys()):  # in key order, so in run order: a later run's word wins
            rows = _rows(self._get(key))
            if local is not None:  # what it has as done stays done, and counted once
                known = local.done([item_id for item_id, _ in rows.done_ids])
                known |= local.done([failure.item_id for failure in rows.failures])
                rows.done_ids = [row for row in rows.done_ids if row[0] not in known]
                rows.failures = [row for row in rows.failures if row.item_id not in known]
            journal.record(rows)
            journal.flush()  # part by part: a row must not overtake an earlier part's
        if local is not None:
            local.close()
        journal.close()
        return str(head["id"])

    def publish_for_workers(self, path: Path, run: int) -> str:
        """Upload a local journal (checkpointed: the file alone is all of it) for workers on
        other machines; returns its key."""
        key = self._key(f"resume/{run:03d}-{secrets.token_hex(4)}.db")
        self._put(key, path.read_bytes())
        return key

    # ---- worker ------------------------------------------------------------------------------
    def fetch(self, key: str) -> str:
        """A local copy of a published journal (a temporary file), for a worker's JournalReader."""
        data = self._get(key)
        with tempfile.NamedTemporaryFile(prefix="s3bulk-journal-", suffix=".db", delete=False) as handle:
            handle.write(data)
        return handle.name


def _rows(part: bytes) -> WorkerStats:
    """One part's rows, in the shape the local journal records."""
    rows = WorkerStats()
    for line in part.splitlines():
        row = orjson.loads(line)
        if row["state"] == "done":
            rows.done_ids.append((row["id"], row["size"]))
        else:
            rows.failures.append(Failure("", "", row["reason"], item_id=row["id"], size=row["size"]))
    return rows


class PartWriter:
    """A worker's side: collects the items it finished and writes them as parts."""

    def __init__(self, journal: StoreJournal, run: int, worker_id: int, retry: Retrier) -> None:
        self.journal = journal
        self.retry = retry  # the worker's: a part's retries count with its items'
        self.prefix = f"parts/{run:03d}-{worker_id:04d}-{secrets.token_hex(3)}-"
        self.rows: list[bytes] = []
        self.seq = 0
        self.pending: set[asyncio.Task[None]] = set()

    def add(self, delta: WorkerStats) -> None:
        self.rows.extend(orjson.dumps({"id": i, "state": "done", "size": s}) for i, s in delta.done_ids)
        self.rows.extend(
            orjson.dumps({"id": f.item_id, "state": "failed", "size": f.size, "reason": f.reason})
            for f in delta.failures
            if f.item_id and not f.skipped
        )
        if len(self.rows) >= PART_ROWS:
            self.write()

    def write(self) -> None:
        """Start writing what was collected as one part (in the background)."""
        if not self.rows:
            return
        body, self.rows = b"\n".join(self.rows) + b"\n", []
        self.seq += 1
        key = self.journal._key(f"{self.prefix}{self.seq:06d}.jsonl")
        task = asyncio.create_task(self._put(key, body))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _put(self, key: str, body: bytes) -> None:
        """Retried like items (and counted with them). A part that cannot be written costs only a
        repeat of its items, should the job be resumed from the object store. Like the local
        journal's writes, parts are not among the job's requests, so every engine reports the
        same requests for the same work (one PUT per part: about 1 per 5,000 items)."""
        with contextlib.suppress(Exception):
            await self.retry(lambda: self.journal.put_once(key, body), "journal part")

    async def close(self) -> None:
        self.write()
        if self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)
