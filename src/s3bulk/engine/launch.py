"""Starting workers: as processes (one interpreter per core) or as threads of the main process.

Both kinds get the same things, a pipe to the driver and the job, and run the same loop
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

from s3bulk.engine.job import Job
from s3bulk.engine.worker import EngineOptions, thread_main, worker_main


class WorkerHandle(Protocol):
    def is_alive(self) -> bool: ...

    @property
    def exitcode(self) -> int | None: ...

    def terminate(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...


def _single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _process_context() -> multiprocessing.context.BaseContext:
    """fork when this process has one OS thread (then nothing can be lost in the fork, and workers
    inherit imports for free); otherwise a forkserver, whose clean process forks the workers."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and _single_threaded():
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["s3bulk.engine.worker", "s3bulk.transfers"])
        return context
    return multiprocessing.get_context("spawn")


class ProcessLauncher:
    in_process = False

    def __init__(self) -> None:
        self.context = _process_context()

    def pipe(self) -> tuple[Connection, Connection]:
        return self.context.Pipe(duplex=True)

    def start(
        self, index: int, conn: Connection, job: Job, options: EngineOptions, driver_fds: tuple[int, ...]
    ) -> WorkerHandle:
        # A forked child inherits the driver's ends of every pipe made so far; it must close them,
        # or no worker would ever see EOF if the driver died.
        inherited = driver_fds if self.context.get_start_method() == "fork" else ()
        process = self.context.Process(
            target=worker_main, args=(conn, job, options, index, inherited), daemon=True
        )
        process.start()
        conn.close()
        return process


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

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)


class ThreadLauncher:
    in_process = True

    def __init__(self) -> None:
        self._pickled = b""  # one launcher per run, so one job: pickled once for all threads

    def pipe(self) -> tuple[Connection, Connection]:
        return multiprocessing.Pipe(duplex=True)

    def start(
        self, index: int, conn: Connection, job: Job, options: EngineOptions, driver_fds: tuple[int, ...]
    ) -> WorkerHandle:
        self._pickled = self._pickled or pickle.dumps(job)
        thread = threading.Thread(
            target=thread_main,
            args=(conn, self._pickled, options, index),
            name=f"s3bulk-worker-{index}",
            daemon=True,
        )
        thread.start()
        return _ThreadWorker(thread)
