"""How a job runs, as the user asked: one typed, validated value shared by every command.

The engine's knobs used to travel as loose entries of a dict (`args.get("concurrency", 64)`), with
their defaults restated wherever they were read. Here each is written once, checked once (on
construction, so the CLI, the Python API and a resumed journal all get the same one-line errors),
and serialised with the job's spec.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from s3bulk._config import AwsSettings
from s3bulk._engine.strategies import ENGINES
from s3bulk._errors import UsageError

MiB = 1024**2


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    engine: str = "hybrid"  # one of ENGINES (engine/strategies.py)
    workers: int | None = None  # worker processes or threads; None: the strategy's own count
    concurrency: int = 64  # requests in flight per worker (auto: a quarter of its ceiling)
    max_in_flight_bytes: int = 16 * MiB  # object bytes held in memory at once, per worker
    max_memory: int | None = None  # the whole job's cap, interpreters included (runner.plan_memory)
    max_attempts: int | None = None  # per request, for errors worth retrying (None: the AWS config's)
    ray_address: str | None = None  # --engine ray: the cluster (None: a local instance)
    journal_url: str | None = None  # --engine ray: where the object-store journal goes
    bwlimit: int | None = None  # bytes/s the whole job moves, all workers together (--bwlimit)
    tpslimit: float | None = None  # requests/s the whole job sends (--tpslimit)

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise UsageError(f"unknown engine {self.engine!r}: use one of {', '.join(ENGINES)}")
        if self.workers is not None and self.workers < 1:
            raise UsageError("--workers must be at least 1")
        if self.workers is not None and self.engine in ("serial", "async"):
            raise UsageError(f"--workers does not apply to --engine {self.engine} (one worker): drop it")
        if self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.max_in_flight_bytes < 1:
            raise UsageError("--max-in-flight must be at least 1 byte")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise UsageError("max_attempts must be at least 1")
        if self.bwlimit is not None and self.bwlimit < 1:
            raise UsageError("--bwlimit must be at least 1 byte/s (e.g. 10MiB)")
        if self.tpslimit is not None and not self.tpslimit > 0:
            raise UsageError("--tpslimit must be more than 0 requests/s")
        if self.max_memory is not None and self.engine == "ray":
            raise UsageError("--max-memory applies to one machine: with --engine ray, size the cluster")

    def attempts(self, settings: AwsSettings) -> int:
        """Attempts per request: the job's own, else the AWS config's (AWS_MAX_ATTEMPTS)."""
        return self.max_attempts if self.max_attempts is not None else settings.max_attempts

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EngineSpec:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)
