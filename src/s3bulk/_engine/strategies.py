"""The execution strategies users can pick with `--engine`, as the seed articles compared them.

| engine    | workers                  | in flight per worker | what it shows                       |
|-----------|--------------------------|----------------------|-------------------------------------|
| serial    | 1 thread                 | 1                    | the baseline: one request at a time |
| threads   | cores + 4 threads        | 1                    | ThreadPoolExecutor's default shape; |
|           |                          |                      | I/O overlaps, CPU work shares a GIL |
| async     | the driver's event loop  | --concurrency        | many requests, one core             |
| processes | one process per core     | 1                    | ProcessPoolExecutor's shape         |
| hybrid    | one process per core     | --concurrency        | every core, many requests each      |
|           | (the default: for jobs   |                      | (transfers: one worker in the       |
|           | without Python work per  |                      | driver's loop, `in_the_driver`)     |
|           | item, one in the driver) |                      |                                     |
| auto      | one process per core     | AIMD: starts at      | hybrid that finds the service's     |
|           |                          | --concurrency, 1-4x  | knee itself and backs off on 503s   |
| ray       | one Ray task per cluster | --concurrency        | hybrid across many machines         |
|           | CPU                      |                      | (`ray_launch.py`)                   |

Every engine runs the same Job through the same worker loop, journal and report; only the number
and kind of workers and the in-flight limit differ, so their results are identical and their
timings comparable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from s3bulk._config import cores
from s3bulk._errors import UsageError
from s3bulk._stores.folders import MOST_OPEN

__all__ = [
    "AUTO_CEILING_FACTOR",
    "DEFAULT_ENGINE",
    "ENGINES",
    "Strategy",
    "choose",
    "cores",
    "in_the_driver",
    "within_open_files",
]

ENGINES = ("serial", "threads", "async", "processes", "hybrid", "auto", "ray")
DEFAULT_ENGINE = "hybrid"
AUTO_CEILING_FACTOR = 4


@dataclass(frozen=True)
class Strategy:
    name: str
    workers: int
    concurrency: int  # per worker; for adaptive, the ceiling
    in_process: bool  # threads of the main process rather than processes
    adaptive: bool = False
    inline: bool = False  # the one worker is a task of the driver's own event loop


def choose(name: str, workers: int | None, concurrency: int) -> Strategy:
    """The strategy for `--engine name`; `workers` and `concurrency` apply where they mean something."""
    if name not in ENGINES:
        raise UsageError(f"unknown engine {name!r}: use one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    if workers is not None and name in ("serial", "async"):
        raise UsageError(f"--workers does not apply to --engine {name} (one worker): drop it")
    if name == "serial":
        return Strategy(name, 1, 1, in_process=True)
    if name == "async":
        return Strategy(name, 1, concurrency, in_process=True, inline=True)
    if name == "threads":
        return Strategy(name, workers or min(32, cores() + 4), 1, in_process=True)
    if name == "processes":
        return Strategy(name, workers or cores(), 1, in_process=False)
    if name == "hybrid":
        return Strategy(name, workers or cores(), concurrency, in_process=False)
    if name == "ray":  # workers=0: one per CPU of the cluster, known once connected
        return Strategy(name, workers or 0, concurrency, in_process=False)
    return Strategy(
        name, workers or cores(), concurrency * AUTO_CEILING_FACTOR, in_process=False, adaptive=True
    )


def in_the_driver(strategy: Strategy) -> Strategy:
    """`strategy` with its one worker running in the driver's own event loop: what the default
    engine does for a job whose per-item Python work is small (runner._strategy), and what any
    engine does when --max-memory leaves no room for a second interpreter."""
    return replace(strategy, workers=1, in_process=True, inline=True)


# What a process holds open besides its requests: the interpreter and its libraries, the
# journal, the pipes to its workers, idle pooled connections, the directories downloads write
# in (`_stores.folders.MOST_OPEN`).
RESERVED_FILES = 128 + MOST_OPEN
# What one request in flight may hold open: its connection, the file it reads or writes, and
# a spare (a second connection pool's, a temporary file beside a target, the directory a native
# GET writes in: its own duplicate of the descriptor).
FILES_PER_REQUEST = 3


def raise_open_file_limit() -> int:
    """The soft limit on open files raised to the hard one, as s5cmd and rclone do (a shell's
    1,024 is a quarter of what --concurrency 1000 wants); returns the limit now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft if soft != resource.RLIM_INFINITY else wanted
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        return soft
    return wanted


def within_open_files(strategy: Strategy) -> tuple[Strategy, str]:
    """`strategy` with its requests in flight per worker lowered so that each process keeps its
    open files under its limit (after `raise_open_file_limit`), and the note that says so ("":
    they fit). Running out of files fails requests and, worse, makes directories unreadable to
    a walk: the job would fail items it need not, or skip what it cannot read."""
    limit = raise_open_file_limit()
    sharing = strategy.workers if strategy.in_process else 1  # threads share a process's files
    most = max(1, (limit - RESERVED_FILES) // (FILES_PER_REQUEST * max(1, sharing)))
    if strategy.concurrency <= most:
        return strategy, ""
    note = (
        f"{strategy.concurrency:,} requests in flight per worker lowered to {most:,}: this process may "
        f"open {limit:,} files (ulimit -n), and each request holds up to {FILES_PER_REQUEST}"
    )
    return replace(strategy, concurrency=most), note
