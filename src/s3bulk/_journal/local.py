"""The job journal: one SQLite file (WAL) per job, so a job killed at any point can resume.

It holds the job's spec (what the user asked for, enough to run it again), one row per item that
finished (done or failed, with the reason) and the descriptors whose listing failed as a whole.
Only the driver writes, in batches (a transaction every fraction of a second), so the hot path
never waits on a disk sync; workers open it read-only to skip items an earlier run finished.

Guarantees after `kill -9`: every item recorded done *was* done (rows are written only after the
store confirmed the item), so a resumed job never loses one. Items that finished in the last
fraction of a second before the kill were not recorded yet and run once more on resume; every
operation s3bulk journals is idempotent (PUT, COPY and DELETE of the same content), so this costs a
request, never correctness. `times_done` counts completions per item so this is visible.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from s3bulk._errors import UsageError
from s3bulk._report import Report, WorkerStats

SCHEMA = """
CREATE TABLE IF NOT EXISTS job (
    id TEXT PRIMARY KEY, command TEXT NOT NULL, spec TEXT NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run INTEGER PRIMARY KEY, mode TEXT NOT NULL, pid INTEGER NOT NULL, started REAL NOT NULL,
    ended REAL, status TEXT NOT NULL, summary TEXT
);
CREATE TABLE IF NOT EXISTS items (
    id TEXT PRIMARY KEY, state TEXT NOT NULL, size INTEGER NOT NULL, reason TEXT NOT NULL,
    run INTEGER NOT NULL, times_done INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS uploads (
    upload_id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL, run INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS failed_descriptors (
    seq INTEGER PRIMARY KEY, run INTEGER NOT NULL, descriptor BLOB NOT NULL, reason TEXT NOT NULL,
    retried INTEGER NOT NULL DEFAULT 0
);
"""

FLUSH_ROWS = 5000


def state_dir() -> Path:
    """Where journals live: $S3BULK_STATE_DIR, else $XDG_STATE_HOME/s3bulk, else ~/.local/state."""
    explicit = os.environ.get("S3BULK_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "s3bulk" / "jobs"


def private_directory(directory: Path) -> None:
    """Create `directory` readable by its owner only: journals name buckets, keys and paths. One
    that exists must be this user's and writable by nobody else: a journal another user could
    write says what a resume skips, and what it deletes."""
    if not directory.is_dir():
        directory.mkdir(parents=True, mode=0o700)
        directory.chmod(0o700)  # mkdir's mode is filtered by the umask
        return
    found = directory.stat()
    if found.st_uid != os.geteuid() or found.st_mode & 0o022:
        owner = (
            "another user's"
            if found.st_uid != os.geteuid()
            else f"writable by others (mode {found.st_mode & 0o777:o})"
        )
        raise UsageError(
            f"the state directory {directory} is {owner}: anyone could change the journals in it; "
            "chmod 700 it, or set S3BULK_STATE_DIR to a directory of your own"
        )


def new_job_id() -> str:
    """Sortable by start time, unique without coordination: 20261122-153012-3fa9c1."""
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def _connect(path: Path, readonly: bool = False, wal: bool = True) -> sqlite3.Connection:
    if readonly:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
    else:
        connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        if wal:
            connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")  # a killed process loses nothing committed
    return connection


def _unwritable(directory: Path, exc: BaseException) -> UsageError:
    """A state directory where no journal can be written, in one line."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return UsageError(
        f"cannot write the job's journal in {directory}: {reason}; free space or fix its "
        "permissions, or set S3BULK_STATE_DIR to a directory you can write"
    )


class JournalLocked(UsageError):
    """Another process is running this job."""


class NoSuchJob(UsageError):
    """No journal of that id here."""


def _lock(path: Path, job_id: str) -> int:
    """A descriptor of the journal holding an exclusive lock on it for as long as this process
    runs the job: two runs of one job at once (two `--resume JOB`) both ran, each reporting the
    other's items as failures. The lock goes with the process, however it ends."""
    descriptor = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        holder = _holder(path)
        raise JournalLocked(
            f"job {job_id} is running in another process{holder}: let it end, or stop it, then resume it"
        ) from None
    return descriptor


def _holder(path: Path) -> str:
    """' (pid N)' of the run in progress, when the journal says."""
    with contextlib.suppress(sqlite3.Error, TypeError):
        db = _connect(path, readonly=True)
        try:
            row = db.execute(
                "SELECT pid FROM runs WHERE status = 'running' ORDER BY run DESC LIMIT 1"
            ).fetchone()
        finally:
            db.close()
        if row is not None:
            return f" (pid {row[0]})"
    return ""


class Journal:
    """The driver's handle: create or open a job, record what workers report, close the run.
    Writing it can fail (a full disk, a directory made read-only): what could not be written is
    dropped (a resume redoes those items) and `broken` says why, once; the driver then stops
    the job, with that one line."""

    def __init__(self, path: Path, job_id: str) -> None:
        self.path = path
        self.job_id = job_id
        self._lock = _lock(path, job_id)
        try:
            self._db = _connect(path)
            self._db.executescript(SCHEMA)
        except BaseException:
            os.close(self._lock)
            raise
        self.broken = ""  # why the journal cannot be written ("": it can)
        self.run = 0
        self._done: list[tuple[str, int, int]] = []
        self._failed: list[tuple[str, int, str, int]] = []
        self._descriptors: list[tuple[int, bytes, str]] = []
        self._uploads: list[tuple[str, str, str, int]] = []
        self._uploads_ended: list[tuple[str]] = []
        self._retrying: list[int] = []

    # ---- opening -----------------------------------------------------------------------------
    @classmethod
    def create(
        cls, command: str, spec: dict[str, Any], directory: Path | None = None, job_id: str | None = None
    ) -> Journal:
        """A new journal, made whole beside its place and then renamed into it: a process killed
        as it starts leaves a journal with its job, or none (one without its job row could not
        be resumed, nor shown by `s3bulk jobs`)."""
        directory = directory or state_dir()
        job_id = job_id or new_job_id()
        path = directory / f"{job_id}.db"
        making = directory / f".{job_id}.db.making"
        try:
            private_directory(directory)
            os.close(os.open(making, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))  # -wal/-shm copy its mode
            db = _connect(making, wal=False)
            try:
                db.executescript(SCHEMA)
                db.execute(
                    "INSERT INTO job VALUES (?, ?, ?, ?)",
                    (job_id, command, orjson.dumps(spec).decode(), time.time()),
                )
            finally:
                db.close()
            os.replace(making, path)
        except (OSError, sqlite3.Error) as exc:
            with contextlib.suppress(OSError):
                os.unlink(making)
            raise _unwritable(directory, exc) from None
        return cls(path, job_id)

    @classmethod
    def open(cls, job_id: str, directory: Path | None = None) -> Journal:
        directory = directory or state_dir()
        path = directory / f"{job_id}.db"
        if not job_id or "/" in job_id or not path.is_file():
            raise NoSuchJob(f"no job {job_id!r} in {directory}: run 's3bulk jobs' to see the job ids")
        journal = cls(path, job_id)
        try:
            if journal._db.execute("SELECT count(*) FROM job").fetchone()[0] != 1:
                raise UsageError(
                    f"job {job_id}'s journal holds no job (its first run was stopped as it began, "
                    "before anything was done): start the job again"
                )
        except BaseException:
            journal.close()
            raise
        return journal

    @property
    def command(self) -> str:
        return str(self._db.execute("SELECT command FROM job").fetchone()[0])

    @property
    def spec(self) -> dict[str, Any]:
        return dict(orjson.loads(self._db.execute("SELECT spec FROM job").fetchone()[0]))

    # ---- one run of the job ------------------------------------------------------------------
    def begin_run(self, mode: str) -> int:
        try:
            cursor = self._db.execute(
                "INSERT INTO runs (mode, pid, started, status) VALUES (?, ?, ?, 'running')",
                (mode, os.getpid(), time.time()),
            )
        except sqlite3.Error as exc:  # nothing ran yet: one line, and the job is as it was
            raise _unwritable(self.path.parent, exc) from None
        self.run = int(cursor.lastrowid or 0)
        return self.run

    def record(self, delta: WorkerStats) -> None:
        """Buffer what a worker reported; written by `flush` (called a few times a second)."""
        run = self.run
        self._done.extend((item_id, size, run) for item_id, size in delta.done_ids)
        for failure in delta.failures:
            if failure.item_id and not failure.skipped:
                self._failed.append((failure.item_id, failure.size, failure.reason, run))
        for descriptor, reason in delta.failed_descriptors:
            self._descriptors.append((run, pickle.dumps(descriptor), reason))
        self._uploads.extend(
            (upload_id, bucket, key, run) for bucket, key, upload_id in delta.uploads_started
        )
        self._uploads_ended.extend((upload_id,) for upload_id in delta.uploads_ended)
        if (
            delta.uploads_started or len(self._done) + len(self._failed) >= FLUSH_ROWS
        ):  # an id lost to a kill -9 would leave its upload for good
            self.flush()

    def flush(self) -> None:
        if not (self._done or self._failed or self._descriptors or self._uploads or self._uploads_ended):
            return
        db = self._db
        try:
            db.execute("BEGIN")
            try:
                self._write(db)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # a full disk has rolled it back already
                    db.execute("ROLLBACK")  # else every later flush finds this transaction still open
                raise
        except sqlite3.Error as exc:
            self._broke(exc)
        finally:  # rows that cannot be written are dropped: a resume redoes their items
            for rows in (self._done, self._failed, self._descriptors, self._uploads, self._uploads_ended):
                rows.clear()

    def _broke(self, exc: sqlite3.Error) -> None:
        if self.broken:
            return
        command = "<command>"
        with contextlib.suppress(sqlite3.Error):
            command = self.command.replace("-", " ")
        self.broken = (
            f"the journal cannot be written ({exc}): {self.path}; free space (or make its "
            f"directory writable), then: s3bulk {command} --resume {self.job_id}"
        )

    def _write(self, db: sqlite3.Connection) -> None:
        db.executemany(
            "INSERT INTO items (id, state, size, reason, run, times_done) VALUES (?, 'done', ?, '', ?, 1) "
            "ON CONFLICT (id) DO UPDATE SET state = 'done', size = excluded.size, reason = '', "
            "run = excluded.run, times_done = times_done + 1",
            self._done,
        )
        db.executemany(
            "INSERT INTO items (id, state, size, reason, run) VALUES (?, 'failed', ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET state = 'failed', reason = excluded.reason, run = excluded.run",
            self._failed,
        )
        db.executemany(
            "INSERT INTO failed_descriptors (run, descriptor, reason) VALUES (?, ?, ?)", self._descriptors
        )
        db.executemany("INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?)", self._uploads)
        db.executemany("DELETE FROM uploads WHERE upload_id = ?", self._uploads_ended)

    def end_run(self, report: Report, interrupted: bool = False) -> None:
        self.flush()
        status = "interrupted" if interrupted else "ok" if report.ok else "failed"
        summary = {
            key: value
            for key, value in report.to_dict().items()
            if key not in ("failures", "stage_seconds", "requests")
        }
        try:
            if not interrupted:
                self._db.executemany(
                    "UPDATE failed_descriptors SET retried = 1 WHERE seq = ?",
                    [(seq,) for seq in self._retrying],
                )
            self._db.execute(
                "UPDATE runs SET ended = ?, status = ?, summary = ? WHERE run = ?",
                (time.time(), status, orjson.dumps(summary).decode(), self.run),
            )
        except sqlite3.Error as exc:  # the run stays "running" in it: `jobs` tells by its pid
            self._broke(exc)

    def checkpoint(self) -> None:
        """Everything in the main database file, so that the file alone is the journal."""
        self.flush()
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Write everything into the database file itself and leave WAL mode, so no -wal/-shm
        files stay beside it (and readers such as `s3bulk jobs` create none); then let the job
        be run by another process."""
        self.flush()
        with contextlib.suppress(sqlite3.Error):  # another process still reads it: it stays WAL
            self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.close()
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1

    # ---- multipart uploads a stopped run left ------------------------------------------------
    def leftover_uploads(self) -> list[tuple[str, str, str]]:
        """(bucket, key, upload id) of the multipart uploads earlier runs started and never
        completed or aborted (the run was killed outright): the server still bills their parts."""
        rows = self._db.execute(
            "SELECT bucket, key, upload_id FROM uploads WHERE run < ?", (self.run,)
        ).fetchall()
        return [(str(bucket), str(key), str(upload_id)) for bucket, key, upload_id in rows]

    def forget_uploads(self, upload_ids: Iterable[str]) -> None:
        self._db.executemany("DELETE FROM uploads WHERE upload_id = ?", [(each,) for each in upload_ids])

    # ---- what retry-failed reruns ------------------------------------------------------------
    def failed_items(self, batch: int = 1000) -> Iterator[list[tuple[str, int]]]:
        """Failed items in id order, in batches, without holding them all in memory."""
        after = ""
        while True:
            rows = self._db.execute(
                "SELECT id, size FROM items WHERE state = 'failed' AND id > ? ORDER BY id LIMIT ?",
                (after, batch),
            ).fetchall()
            if not rows:
                return
            yield [(str(item_id), int(size)) for item_id, size in rows]
            after = rows[-1][0]

    def take_failed_descriptors(self) -> list[Any]:
        """Descriptors whose listing failed, to run again. They count as retried only once this
        run ends (a run killed first offers them again; a new failure records them anew)."""
        rows = self._db.execute("SELECT seq, descriptor FROM failed_descriptors WHERE retried = 0").fetchall()
        self._retrying = [seq for seq, _ in rows]
        return [pickle.loads(blob) for _, blob in rows]


class JournalReader:
    """A worker's read-only view: which of these items did an earlier run finish?"""

    def __init__(self, path: str) -> None:
        self._db = _connect(Path(path), readonly=True)

    def done(self, ids: Iterable[str]) -> set[str]:
        wanted = list(ids)
        found: set[str] = set()
        for start in range(0, len(wanted), 900):  # SQLite's bound-parameter limit
            chunk = wanted[start : start + 900]
            marks = ",".join("?" * len(chunk))
            found.update(
                row[0]
                for row in self._db.execute(
                    f"SELECT id FROM items WHERE state = 'done' AND id IN ({marks})", chunk
                )
            )
        return found

    def close(self) -> None:
        self._db.close()


@dataclass
class JobSummary:
    job_id: str
    command: str
    spec: dict[str, Any]
    created: float
    status: str  # ok, failed, running, interrupted
    runs: int
    done: int
    failed: int


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_jobs(directory: Path | None = None) -> list[JobSummary]:
    """Every journal in the state directory, newest first."""
    directory = directory or state_dir()
    jobs = []
    for path in sorted(directory.glob("*.db"), reverse=True):
        try:
            db = _connect(path, readonly=True)
            job_id, command, spec, created = db.execute(
                "SELECT id, command, spec, created FROM job"
            ).fetchone()
            last = db.execute("SELECT status, pid FROM runs ORDER BY run DESC LIMIT 1").fetchone()
            runs = db.execute("SELECT count(*) FROM runs").fetchone()[0]
            counts = dict(db.execute("SELECT state, count(*) FROM items GROUP BY state").fetchall())
            db.close()
        except (sqlite3.Error, TypeError):
            continue  # not a journal, or one still being created
        status = "new"
        if last is not None:
            status = last[0]
            if status == "running" and not _pid_alive(int(last[1])):
                status = "interrupted"
        jobs.append(
            JobSummary(
                job_id,
                command,
                orjson.loads(spec),
                created,
                status,
                runs,
                counts.get("done", 0),
                counts.get("failed", 0),
            )
        )
    return jobs
