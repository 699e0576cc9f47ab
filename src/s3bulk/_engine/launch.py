"""Starting workers: as processes (one interpreter per core), as threads of the main process, or
(`ray_launch.py`) as Ray tasks anywhere in a cluster.

All kinds get the same things, a connection to the driver and the job, and run the same loop
(`worker.py`), so engines differ only in how their workers exist. Processes are forked only from
a single-threaded parent, never from one whose native runtime threads (obstore's Tokio) would not
survive the fork; otherwise a forkserver starts them.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
from multiprocessing.connection import Connection
from typing import Protocol

from s3bulk._engine.job import Job
from s3bulk._engine.worker import EngineOptions, thread_main, worker_main


class WorkerHandle(Protocol):
    """What the driver needs of a worker besides its pipe: whether it lives, and how to end it."""

    def is_alive(self) -> bool: ...

    @property
    def exitcode(self) -> int | None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...


def _single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


Context = (
    multiprocessing.context.ForkContext
    | multiprocessing.context.ForkServerContext
    | multiprocessing.context.SpawnContext
)


def _process_context() -> Context:
    """fork when this process has one OS thread (then nothing can be lost in the fork, and workers
    inherit imports for free); otherwise a forkserver, whose clean process forks the workers."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and _single_threaded():
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["s3bulk._engine.worker", "s3bulk._commands.copy"])
        return context
    return multiprocessing.get_context("spawn")


class Launcher(Protocol):
    """Starts a job's workers, each connected to the driver by one duplex connection."""

    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[Connection, WorkerHandle]]:
        """Start `count` workers; return the driver's end of each one's connection and its handle."""
        ...

    def close(self) -> None: ...


class ProcessLauncher:
    def __init__(self) -> None:
        self.context = _process_context()

    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[Connection, WorkerHandle]]:
        started: list[tuple[Connection, WorkerHandle]] = []
        fork = self.context.get_start_method() == "fork"
        for index in range(count):
            parent, child = self.context.Pipe(duplex=True)
            # A forked child inherits the driver's ends of every pipe made so far; it must close
            # them, or no worker would ever see EOF if the driver died.
            inherited = (*(conn.fileno() for conn, _ in started), parent.fileno()) if fork else ()
            process = self.context.Process(
                target=worker_main, args=(child, job, options, index, inherited), daemon=True
            )
            process.start()
            child.close()
            started.append((parent, process))
        return started

    def close(self) -> None:
        pass


class _ThreadWorker:
    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    @property
    def exitcode(self) -> int | None:
        return None if self.thread.is_alive() else 0

    def terminate(self) -> None:
        """A thread cannot be killed; the driver closing its end of the pipe stops it instead
        (the worker cancels its items as if the driver had died)."""

    def kill(self) -> None:
        """See `terminate`."""

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)


class ThreadLauncher:
    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[Connection, WorkerHandle]]:
        pickled = pickle.dumps(job)  # pickled once for all threads
        started: list[tuple[Connection, WorkerHandle]] = []
        for index in range(count):
            parent, child = multiprocessing.Pipe(duplex=True)
            thread = threading.Thread(
                target=thread_main,
                args=(child, pickled, options, index),
                name=f"s3bulk-worker-{index}",
                daemon=True,
            )
            thread.start()
            started.append((parent, _ThreadWorker(thread)))
        return started

    def close(self) -> None:
        pass
