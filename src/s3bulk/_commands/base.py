"""What every command is made of: a typed spec (what the user asked for) and a Command (how that
becomes a job). The runner (`s3bulk._runner`) knows only these two shapes, never a command by name.

A spec is a frozen dataclass with keyword-only fields: every default is written once, there; every
check runs once, on construction, whoever builds it (the CLI, the Python API, a journal being
resumed). It serialises to the journal as plain JSON with a format version.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError
from s3bulk._report import Report

SPEC_VERSION = 2  # 1: the untyped `{"args": {...}}` of s3bulk before typed specs (still read)
MiB = 1024**2


def patterns(value: str | Iterable[str], name: str) -> tuple[str, ...]:
    """One glob or several. A str is one pattern: iterating it would make one pattern per
    character, and `exclude="*.log"` would then exclude everything."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, bytes | bytearray) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a str or a sequence of str, not {type(value).__name__}")
    found = tuple(value)
    for each in found:
        if not isinstance(each, str):
            raise TypeError(f"{name} must hold str, not {type(each).__name__}")
    return found


def location(value: str | os.PathLike[str], name: str) -> str:
    """A location as the CLI would see it: a str, or a path (a `Path` loses any trailing '/', so
    a directory given as a Path is copied with its name, like `dir` without the slash)."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{name} must be a str or a path, not {type(value).__name__}")


def locations(value: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], name: str) -> tuple[str, ...]:
    """One location or several, each a str or a path."""
    if isinstance(value, str | os.PathLike):
        return (location(value, name),)
    if isinstance(value, bytes | bytearray) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a str, a path or a sequence of them, not {type(value).__name__}")
    return tuple(location(each, name) for each in value)


def manifest(value: str, flag: str) -> str:
    """--files-from's file; stdin ("-") is first copied beside the journals, so a resume can
    read the same names again."""
    if value != "-":
        return value
    from s3bulk._journal.local import state_dir
    from s3bulk._sources.manifest import spool_stdin

    return spool_stdin(state_dir() / "manifests")


def absolute(place: str) -> str:
    """Local paths are journaled absolute, so a job resumes the same from any directory."""
    if "://" in place:
        return place
    full = os.path.abspath(os.path.expanduser(place))
    return full + "/" if place.endswith("/") and full != "/" else full


@dataclass(frozen=True, kw_only=True)
class Spec:
    """What the user asked for. Subclasses add their fields and say which are locations."""

    command: ClassVar[str]  # the registry's name for it: "cp", "sync", "vectors-put", ...
    concurrency_help: ClassVar[str] = "Requests in flight per worker."  # what --concurrency counts
    engine: EngineSpec = field(default_factory=EngineSpec)
    dry_run: bool = False

    # ---- what the runner asks of every spec ---------------------------------------------------
    def places(self) -> tuple[str, str]:
        """(source, destination) as the report names them."""
        raise NotImplementedError

    def s3_locations(self) -> tuple[str, ...]:
        """Its s3:// URLs, the one written to first: a ray job's journal goes beside the data."""
        return ()

    def one_worker_reason(self) -> str:
        """Why this job must run as one worker, or "": a --max-delete cap is one count that
        every delete of the job takes from (`engine.caps.DeleteCap`)."""
        if getattr(self, "max_delete", None) is not None:
            return "--max-delete keeps one count of the job's deletes"
        return ""

    def needs_credentials(self) -> bool:
        """Whether the job talks to a service (a gather of local files does not)."""
        return bool(self.s3_locations())

    def absolute(self) -> Self:
        """This spec with local paths made absolute: the form that is journaled."""
        return self

    def part_size_for_memory(self) -> int:
        """One part of a large object, the least a worker must be able to hold (--max-memory)."""
        return 8 * MiB

    def leaving_out(self, pattern: str) -> Self:
        """This spec with keys matching `pattern` left out (a ray job's own journal objects)."""
        return self

    def with_engine(self, **changes: Any) -> Self:
        """This spec with some engine settings replaced (--resume --engine async, say)."""
        wanted = {name: value for name, value in changes.items() if value is not None}
        if not wanted:
            return self
        return dataclasses.replace(self, engine=dataclasses.replace(self.engine, **wanted))

    # ---- the journal's form -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data = {each.name: getattr(self, each.name) for each in dataclasses.fields(self)}
        data["engine"] = self.engine.to_json()
        return {name: list(value) if isinstance(value, tuple) else value for name, value in data.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        names = {each.name for each in dataclasses.fields(cls)}
        known: dict[str, Any] = {name: value for name, value in data.items() if name in names}
        if "engine" in known:
            known["engine"] = EngineSpec.from_json(known["engine"])
        return cls(**known)

    @classmethod
    def from_v1(cls, args: dict[str, Any]) -> Self:
        """A journal of s3bulk before typed specs: the same names, flat, the engine's among them."""
        fields = {name: value for name, value in args.items() if name != "engine"}
        return cls.from_json(fields | {"engine": EngineSpec.from_json(args).to_json()})


@dataclass(frozen=True)
class JobPlan:
    """What the runner decided before the job is built: its id (empty without a journal) and
    how many workers with how many bytes in flight each (after --max-memory)."""

    job_id: str
    workers: int
    max_in_flight_bytes: int


class Command:
    """How a spec becomes a job. One instance per command, in the registry (`commands.COMMANDS`)."""

    name: ClassVar[str]  # the spec's `command`
    spec: ClassVar[type[Spec]]
    journaled: ClassVar[bool] = True  # gather is rerun whole: it keeps no journal

    @property
    def cli_name(self) -> str:
        """How the user runs it: `s3bulk cp`, `s3bulk vectors put`."""
        return self.name.replace("-", " ")

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The job (engine/job.py) for `spec`, after every check that needs the service (a missing
        bucket, a missing index): what is refused here leaves nothing behind."""
        raise NotImplementedError

    def settle(self, spec: Spec, plan: JobPlan) -> Spec:
        """The spec with what depends on the job's id filled in (vectors: the rejects file)."""
        return spec

    def python_bound(self, spec: Spec) -> bool:
        """Whether each item costs enough Python CPU (building payloads, hashing, decoding) that
        more interpreters make the job faster. Transfers are not: obstore moves their bytes on
        its own threads, so the default engine runs them in one process (`runner._strategy`)."""
        return False

    def verb(self, job: Job) -> str:
        """What the report calls the job: "upload", "sync (download)", "rm"."""
        return self.name

    def rows(self, spec: Spec, journal: str | None) -> Any:
        """Where the job's per-item records go on their own, in the driver (map's `output=`):
        an object with `write(records)` and `close(completed)`, or None. `journal` is the path of
        the journal a resume or retry goes on with (None: a new job, or one without a journal)."""
        return None

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """After the engine ran (`completed`) or stopped early: gather publishes its file here, or
        removes what it had begun."""

    def load_spec(self, data: dict[str, Any]) -> Spec:
        """The spec a journal holds, in its format version."""
        version = data.get("version")
        if version == SPEC_VERSION:
            return self.spec.from_json(data["spec"])
        if version is None and "args" in data:
            return self.spec.from_v1(data["args"])
        raise UsageError(
            f"this job's journal has format {version!r}, which this s3bulk does not read "
            f"(it reads {SPEC_VERSION} and 1): resume it with the s3bulk that wrote it"
        )


def as_epoch(moment: Any) -> float | None:
    """Seconds since the epoch from a datetime (naive: local time) or a number; None stays."""
    if moment is None or isinstance(moment, int | float):
        return moment
    if isinstance(moment, datetime.datetime):
        return moment.timestamp()
    raise UsageError(f"{moment!r}: give a time as a datetime or seconds since the epoch")
