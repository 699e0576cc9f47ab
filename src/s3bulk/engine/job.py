"""What an engine runs: a Job turns descriptors into items and items into results.

The split keeps workers shared-nothing. The driver only produces *descriptors* (a key range, a
batch of local paths): small, picklable, never bulk data. Each worker process expands descriptors
into items with its own clients and runs them. Every engine uses the same Job, so results differ
only by execution strategy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from s3bulk.report import WorkerStats


@dataclass
class WorkerContext:
    """Per-process state handed to a job: its stats and a way to hand off split work."""

    worker_id: int
    stats: WorkerStats = field(default_factory=WorkerStats)
    split: Callable[[list[Any]], None] = lambda descriptors: None
    want_split: Callable[[], bool] = lambda: False


class Job(Protocol):
    """A bulk job. Instances are pickled to worker processes, so keep them to plain settings."""

    def partitions(self) -> AsyncIterator[Any]:
        """Driver side: the initial descriptors (streamed, so huge sources stay bounded)."""
        ...

    async def open(self, ctx: WorkerContext) -> None:
        """Worker side: build this process's clients."""
        ...

    def expand(self, descriptor: Any, ctx: WorkerContext) -> AsyncIterator[list[Any]]:
        """Worker side: the items of one descriptor, in batches (e.g. one listing page)."""
        ...

    async def run(self, item: Any, ctx: WorkerContext) -> int:
        """Worker side: do one item; return bytes moved; raise ItemError on failure."""
        ...

    def cost(self, item: Any) -> int:
        """Bytes this item holds in memory while it runs (0 when bytes never pass through us)."""
        ...

    def describe(self, item: Any) -> tuple[str, str, int]:
        """(source, destination, size) for reports and failure lists."""
        ...

    async def close(self, ctx: WorkerContext) -> None: ...
