"""Another writer changes the source while cp, mv or sync runs (issue 62): an overwrite or a delete
injected before any request of the job, on the in-memory store, thousands of times (hypothesis;
S3BULK_WRITER_EXAMPLES cases, 50 by default, 2,000 in `make reliability`). Whatever happens:

- no torn object or file: each destination is exactly one version its source held;
- no lost latest version: each key's latest version (the writer's last write, or the first one
  if it wrote none) is at the source or the destination when the job ends, unless the writer
  deleted it, and
- no delete of what the source holds: a destination the source still holds is never deleted;
- no delete of what the destination's listing did not see: sync --delete deletes an extra
  object only while it is the version listed, another writer's later one is kept (S3 to S3,
  where a writer on the destination is drawn too).

The store (`RacingS3`) answers conditions as S3 does: a request naming a version by its ETag
that the object no longer has is refused (412). A copy or download of an object of 40 bytes or
more takes several requests (a HEAD, its parts, the completion), as a large one does, so a write
can land between its parts. Deletes take their condition as the server modelled does: S3 (in
DeleteObjects and DeleteObject), versitygw (in DeleteObject only), MinIO and Garage (in neither:
mv looks with a HEAD just before; a write between that HEAD and the delete is the window
docs/compatibility.md names, and the only way a latest version may be lost there).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory import _LIVE, Maker, MemoryS3, MemoryStorage, _etag
from test_commands_transfers import PLAN, run

from s3bulk._commands.copy import CopyJob, CopySpec
from s3bulk._commands.deletes import NO_VERSION_HAS
from s3bulk._commands.sync import SyncJob, SyncSpec
from s3bulk._commands.transfer import transfer_options
from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error
from s3bulk._stores.conditional import Version, of_one_version
from s3bulk._stores.downloads import Downloaded
from s3bulk._stores.s3 import quoted
from s3bulk._urls import parse_location

EXAMPLES = int(os.environ.get("S3BULK_WRITER_EXAMPLES", "50"))
MiB = 1024**2
IN_PARTS = 40  # bytes: an object this large moves in PARTS requests, as a large one does
PARTS = 3
SERVERS = {"S3": (True, True), "versitygw": (False, True), "MinIO, Garage": (False, False)}
SHAPES = ["cp s3->s3", "mv s3->s3", "cp s3->local", "mv s3->local", "sync s3->s3", "sync s3->local"]


@dataclass(frozen=True)
class Write:
    """What the other writer does just before request `before` of the job: writes a new
    version of source key `key` (a new key when it names none yet), or deletes it; with
    `destination`, of the destination's object at that name (sync's)."""

    before: int
    key: str
    delete: bool
    destination: bool = False


class Counted(list[tuple[str, str, str]]):
    """The store's requests: each one, before it is done, runs the writes injected before it."""

    def __init__(self, s3: RacingS3) -> None:
        super().__init__()
        self.s3 = s3

    def append(self, request: tuple[str, str, str]) -> None:
        self.s3.meanwhile(len(self))
        super().append(request)


class RacingS3(MemoryS3):
    """`MemoryS3` with another writer, the conditions S3 answers, and the record the invariants
    are checked against: every version each key ever had, the writer's last act on each key,
    and the deletes that fell in mv's window (`seen`: what the last HEAD of a key saw)."""

    def __init__(self, takes: tuple[bool, bool], writes: list[Write]) -> None:
        super().__init__()
        self.requests = Counted(self)
        self.conditional_deletes = takes
        self.writes = writes
        self.versions: dict[str, list[bytes]] = defaultdict(list)  # source key -> every version
        self.last_act: dict[str, str] = {}  # source key -> "wrote" / "deleted" (by the writer)
        self.ever_deleted: set[str] = set()  # source keys the writer deleted at some point
        self.seen: dict[tuple[str, str], bytes | None] = {}
        self.in_window: set[str] = set()  # source keys whose delete came after a write after its HEAD
        self.refused = 0  # requests answered 412: a transfer begun again, or a source kept
        # the destination's writer (sync --delete's race): what it wrote, what the job's listing
        # of the destination saw, and the destination keys deleted though not as listed
        self.written_at_destination: dict[str, list[bytes]] = defaultdict(list)
        self.deleted_at_destination: set[str] = set()  # by the writer
        self.listed: dict[str, bytes] = {}
        self.not_as_listed: set[str] = set()
        self.destination_window: set[str] = set()  # as in_window: after a HEAD, unconditional

    def version(self, key: str, size: int | None = None) -> bytes:
        """A new version of s3://src/key (`size` bytes, else some): unique, moved in parts when
        large enough."""
        number = len(self.versions[key])
        stamp = f"{key}|{number}|".encode()
        size = size if size is not None else len(stamp) * (1 + number % 6)
        body = (stamp * (1 + size // len(stamp)))[: max(size, len(stamp))]
        self.versions[key].append(body)
        return body

    def meanwhile(self, request: int) -> None:
        for write in self.writes:
            if write.before == request and write.destination:
                key = "q/" + write.key[len("p/") :]
                if write.delete:
                    self.buckets["dst"].pop(key, None)
                    self.deleted_at_destination.add(key)
                else:
                    body = f"{key}|theirs|{len(self.written_at_destination[key])}".encode()
                    self.written_at_destination[key].append(body)
                    self.buckets["dst"][key] = body
            elif write.before == request:
                if write.delete:
                    self.buckets["src"].pop(write.key, None)
                    self.ever_deleted.add(write.key)
                else:
                    self.buckets["src"][write.key] = self.version(write.key)
                self.last_act[write.key] = "deleted" if write.delete else "wrote"

    def storage(self) -> Callable[..., MemoryStorage]:
        return RacingMaker(self)


class RacingMaker(Maker):
    def __call__(self, *_: Any, **__: Any) -> MemoryStorage:
        return RacingStorage(_LIVE[self.number])


class RacingStorage(MemoryStorage):
    s3: RacingS3

    def _now(self, bucket: str, key: str, verb: str, etag: str) -> bytes:
        """The object as one request of `verb` finds it: 412 when it no longer has `etag`."""
        self.s3.requests.append((verb, bucket, key))
        body = self._bucket(bucket).get(key)
        if body is None:
            raise S3Error(404, "NoSuchKey", "", f"{verb} s3://{bucket}/{key}")
        if etag and _etag(body) != quoted(etag):
            self.s3.refused += 1
            raise S3Error(412, "PreconditionFailed", "", f"{verb} s3://{bucket}/{key}")
        return body

    async def head(self, bucket: str, key: str, *args: Any, **kwargs: Any) -> dict[str, str]:
        head = await super().head(bucket, key, *args, **kwargs)
        self.s3.seen[bucket, key] = self._bucket(bucket).get(key)
        return head

    async def list_objects_v2(self, bucket: str, prefix: str = "", **kwargs: Any) -> Any:
        page = await super().list_objects_v2(bucket, prefix, **kwargs)
        if bucket == "dst":
            for info in page.objects:
                self.s3.listed[info.key] = self._bucket(bucket)[info.key]
        return page

    async def _read(self, bucket: str, key: str, version: Version, verb: str) -> bytes:
        """The version's bytes as a transfer reads them: in one request, or in parts (a HEAD
        first), each request naming the version (its ETag)."""
        if version.size < IN_PARTS:
            return self._now(bucket, key, verb, version.etag)
        self._now(bucket, key, "HEAD", version.etag)
        step = -(-version.size // PARTS)
        pieces = [
            self._now(bucket, key, verb, version.etag)[start : start + step]
            for start in range(0, version.size, step)
        ]
        return b"".join(pieces)

    async def _of_one_version(
        self, bucket: str, key: str, size: int, etag: str, verb: str
    ) -> tuple[bytes, Version]:
        async def read(version: Version) -> tuple[bytes, Version]:
            return await self._read(bucket, key, version, verb), version

        async def now() -> Version:
            head = await self.head(bucket, key)
            return Version(head["etag"], int(head["content-length"]))

        return await of_one_version(read, Version(etag, size), now, f"{verb} s3://{bucket}/{key}")

    async def copy(  # type: ignore[override]
        self, source_bucket: str, source_key: str, bucket: str, key: str, *, size: int, etag: str, **_: Any
    ) -> Version:
        body, version = await self._of_one_version(source_bucket, source_key, size, etag, "COPY")
        self.s3.requests.append(("COMPLETE", bucket, key))
        self._refused(bucket, key)
        self._bucket(bucket)[key] = body
        return version

    async def download(  # type: ignore[override]
        self, bucket: str, key: str, target: str, size: int, mtime: float, parts: Any, etag: str = ""
    ) -> Downloaded:
        body, version = await self._of_one_version(bucket, key, size, etag, "GET")
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        Path(target).write_bytes(body)
        return Downloaded(len(body), True, version.etag)

    def _delete(self, bucket: str, key: str, etag: str, conditional: bool) -> str:
        before = self._bucket(bucket).get(key)
        why = super()._delete(bucket, key, etag, conditional)
        if why.startswith("PreconditionFailed") and etag != NO_VERSION_HAS:
            self.s3.refused += 1
        unconditional = not (etag and conditional)
        looked = (bucket, key) in self.s3.seen
        if not why and unconditional and looked and before not in (None, self.s3.seen[bucket, key]):
            # changed between the HEAD and the delete
            (self.s3.in_window if bucket == "src" else self.s3.destination_window).add(key)
        if not why and bucket == "dst" and before is not None and before != self.s3.listed.get(key):
            self.s3.not_as_listed.add(key)
        return why


@dataclass(frozen=True)
class Case:
    shape: str
    server: str
    keys: dict[str, int]  # source key -> size of its first version
    at_destination: frozenset[str]  # keys the destination holds before (sync's), as they were
    writes: tuple[Write, ...]
    extra: frozenset[str] = frozenset()  # names only the destination holds (sync --delete's)

    def __str__(self) -> str:
        return f"{self.shape} on {self.server}: {len(self.keys)} keys, writes {list(self.writes)}"


@st.composite
def cases(draw: st.DrawFn) -> Case:
    names = draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True))
    keys = {f"p/{name}": draw(st.integers(1, 80)) for name in names}
    shape = draw(st.sampled_from(SHAPES))
    sync = shape.startswith("sync")
    at_destination = frozenset(draw(st.sets(st.sampled_from(sorted(keys)))) if sync else ())
    extra = frozenset(draw(st.sets(st.sampled_from(("p/x", "p/y", "p/z")))) if sync else ())
    touched = [*keys, "p/new"]
    # sync's destination (S3) has a writer too: over the names both sides hold, and the extra ones
    at_destination_too = sync and not shape.endswith("local")
    writes = draw(
        st.lists(
            st.builds(
                Write,
                st.integers(0, 30),
                st.sampled_from([*touched, *sorted(extra)]),
                st.booleans(),
                st.booleans() if at_destination_too else st.just(False),
            ).filter(lambda write: write.destination or write.key in touched),
            min_size=1,
            max_size=3,
        )
    )
    server = draw(st.sampled_from(list(SERVERS)))
    return Case(shape, server, keys, at_destination, tuple(writes), extra)


def job_for(case: Case, destination: str) -> Any:
    verb = case.shape.split()[0]
    source = "s3://src/p/"
    if verb == "sync":
        spec = SyncSpec(
            source=source, destination=destination, partitioned_listing=False, mode="size", delete=True
        )
        options = transfer_options(spec, AwsSettings(), PLAN, max_delete=spec.max_delete)
        places = parse_location(spec.source), parse_location(spec.destination)
        return SyncJob(*places, AwsSettings(), options, mode="size", delete=True)
    spec = CopySpec(source=source, destination=destination, partitioned_listing=False)
    options = transfer_options(spec, AwsSettings(), PLAN, delete_source=verb == "mv")
    return CopyJob(parse_location(source), parse_location(destination), AwsSettings(), options)


def problems(case: Case, s3: RacingS3, local: Path | None) -> list[str]:
    """What the three invariants find wrong (empty: nothing)."""
    found = []
    source = s3.buckets.get("src", {})
    if local is not None:
        destination = {
            f"p/{path.relative_to(local).as_posix()}": path.read_bytes()
            for path in local.rglob("*")
            if path.is_file()
        }
    else:
        destination = {"p/" + key[len("q/") :]: body for key, body in s3.buckets.get("dst", {}).items()}
    for key, body in destination.items():
        theirs = s3.written_at_destination["q/" + key[len("p/") :]]
        if body not in s3.versions[key] and body != b"kept" + key.encode() and body not in theirs:
            found.append(f"{key}: the destination is no version of its source (torn)")
    for key, versions in s3.versions.items():
        if s3.last_act.get(key) == "deleted" or not versions:
            continue
        latest = versions[-1]
        if latest not in (source.get(key), destination.get(key)) and key not in s3.in_window:
            found.append(f"{key}: its latest version is neither at the source nor at the destination")
    for key in case.at_destination:
        gone_by_them = "q/" + key[len("p/") :] in s3.deleted_at_destination
        if key not in destination and key in source and key not in s3.ever_deleted and not gone_by_them:
            found.append(f"{key}: deleted at the destination though the source holds it")
    if SERVERS[case.server] == (True, True) and (s3.in_window or s3.destination_window):
        windows = sorted(s3.in_window | s3.destination_window)
        found.append(f"{windows}: deleted after a HEAD though the server takes conditions")
    for key in sorted(s3.not_as_listed - s3.destination_window):
        found.append(f"{key}: deleted at the destination though another writer wrote it after the listing")
    return found


TALLY: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))


@pytest.fixture(scope="module", autouse=True)
def figures() -> Iterator[None]:
    """The property's figures, per server modelled, for RELIABILITY.md (scripts/reliability.py
    sets S3BULK_RELIABILITY_OUT; plain runs record nothing)."""
    yield
    out = os.environ.get("S3BULK_RELIABILITY_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as handle:
            for server, counts in TALLY.items():
                record = {"scenario": SCENARIO, "how": HOW, "operation": server, **counts}
                handle.write(json.dumps(record) + "\n")


SCENARIO = "a concurrent writer (in-memory store, hypothesis)"
HOW = (
    "cp, mv and sync (S3->S3, S3->local) of 1-6 keys while another writer overwrites or deletes "
    "a source (or writes a new one), or for sync S3->S3 a destination object (one the "
    "source lacks, which --delete deletes, or one it holds), before a drawn request, 1-3 times; "
    "the store answers conditions as the server modelled does (tests/unit/test_concurrent_writer.py). "
    "'412s' are requests refused for their condition (a transfer begun again, a source kept); "
    "'in the window' are mv deletes after a HEAD said unchanged and a write landed before the "
    "delete, on servers that take no conditional delete"
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_a_concurrent_writer_never_tears_loses_or_deletes_what_the_source_holds(case: Case) -> None:
    s3 = RacingS3(SERVERS[case.server], list(case.writes))
    s3.buckets["dst"], s3.buckets["src"] = {}, {}
    for key, size in case.keys.items():
        s3.buckets["src"][key] = s3.version(key, size)
    with tempfile.TemporaryDirectory() as directory:
        local = Path(directory) / "out" if case.shape.endswith("local") else None
        for key in case.at_destination | case.extra:
            if local is not None:
                (local / key[len("p/") :]).parent.mkdir(parents=True, exist_ok=True)
                (local / key[len("p/") :]).write_bytes(b"kept" + key.encode())
            else:
                s3.buckets["dst"]["q/" + key[len("p/") :]] = b"kept" + key.encode()
        destination = f"{local}/" if local is not None else "s3://dst/q/"
        report = run(job_for(case, destination), s3)
        found = problems(case, s3, local)
    tally = TALLY[case.server]
    tally["examples"] += 1
    tally["412s"] += s3.refused
    tally["items failed (named)"] += report.objects_failed
    tally["in the window"] += len(s3.in_window) + len(s3.destination_window)
    tally["torn, lost or deleted"] += len(found)
    assert not found, f"{case}: {found}; {report.failures[:3]}"
