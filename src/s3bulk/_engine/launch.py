"""Starting workers: as processes (one interpreter per core), as threads of the main process, as a
task of the driver's own event loop (inline), or (`ray_launch.py`) as Ray tasks anywhere in a
cluster.

All kinds get the same things, a link to the driver and the job, and run the same loop
(`worker.py`), so engines differ only in how their workers exist. Processes are forked only from
a single-threaded parent, never from one whose native runtime threads (obstore's Tokio) would not
survive the fork; otherwise a forkserver starts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from s3bulk._engine.job import Job
from s3bulk._engine.links import InlineLink, PipeLink, WorkerLink
from s3bulk._engine.messages import Crash
from s3bulk._engine.worker import EngineOptions, inline_main, thread_main, worker_main


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
    """Starts a job's workers, each connected to the driver by one link."""

    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[WorkerLink, WorkerHandle]]:
        """Start `count` workers; return the driver's end of each one's link and its handle."""
        ...

    def close(self) -> None: ...


@contextlib.contextmanager
def _main_left_out() -> Iterator[None]:
    """Start a spawned or forkserver child without re-running the caller's main script in it:
    multiprocessing would run it again (a script without a `__main__` guard would start its job
    twice; code piped to `python -` cannot be found at all). Workers need nothing from it: a job
    is pickled whole, and a function of `__main__` travels by value (cloudpickle, `map`)."""
    main = sys.modules.get("__main__")
    spec, path = getattr(main, "__spec__", None), getattr(main, "__file__", None)
    if main is None or (spec is None and path is None):
        yield
        return
    main.__spec__ = None  # what multiprocessing reads first
    if path is not None:
        del main.__file__
    try:
        yield
    finally:
        main.__spec__ = spec
        if path is not None:
            main.__file__ = path


class ProcessLauncher:
    def __init__(self) -> None:
        self.context = _process_context()

    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[WorkerLink, WorkerHandle]]:
        started: list[tuple[PipeLink, WorkerHandle]] = []
        fork = self.context.get_start_method() == "fork"
        for index in range(count):
            parent, child = self.context.Pipe(duplex=True)
            # A forked child inherits the driver's ends of every pipe made so far; it must close
            # them, or no worker would ever see EOF if the driver died.
            inherited = (*(link.conn.fileno() for link, _ in started), parent.fileno()) if fork else ()
            process = self.context.Process(
                target=worker_main, args=(child, job, options, index, inherited), daemon=True
            )
            with _main_left_out():
                process.start()
            child.close()
            started.append((PipeLink(parent), process))
        return list(started)

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
    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[WorkerLink, WorkerHandle]]:
        pickled = pickle.dumps(job)  # pickled once for all threads
        started: list[tuple[WorkerLink, WorkerHandle]] = []
        for index in range(count):
            parent, child = multiprocessing.Pipe(duplex=True)
            thread = threading.Thread(
                target=thread_main,
                args=(child, pickled, options, index),
                name=f"s3bulk-worker-{index}",
                daemon=True,
            )
            thread.start()
            started.append((PipeLink(parent), _ThreadWorker(thread)))
        return started

    def close(self) -> None:
        pass


class _InlineWorker:
    """A worker that is a task of the driver's loop. Ending it is cancelling it; it cannot be
    waited for synchronously (the loop that runs it is the caller's), nor needs to be."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task

    def is_alive(self) -> bool:
        return not self.task.done()

    @property
    def exitcode(self) -> int | None:
        if not self.task.done():
            return None
        return 1 if self.task.cancelled() or self.task.exception() else 0

    def terminate(self) -> None:
        self.task.cancel()

    def kill(self) -> None:
        self.task.cancel()

    def join(self, timeout: float | None = None) -> None:
        """See the class: nothing to wait for."""


class InlineLauncher:
    """One worker in the driver's own event loop and thread: no process, no pipe, no pickled
    message. A job whose per-item Python work is small next to its I/O (obstore moves the bytes
    on its own threads) runs fastest this way on a machine it shares with the service."""

    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[WorkerLink, WorkerHandle]]:
        started: list[tuple[WorkerLink, WorkerHandle]] = []
        for index in range(count):
            link = InlineLink()
            own_job = pickle.loads(pickle.dumps(job))  # a worker's job keeps its own clients
            task = asyncio.get_running_loop().create_task(
                inline_main(link, own_job, options, index), name=f"s3bulk-worker-{index}"
            )
            task.add_done_callback(_report_crash(link))
            started.append((link, _InlineWorker(task)))
        return started

    def close(self) -> None:
        pass


def _report_crash(link: InlineLink) -> Callable[[asyncio.Task[None]], None]:
    """A worker task that raised tells the driver as a process would: Crash, then gone."""

    def done(task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        link.from_worker(Crash(f"{type(error).__name__}: {error}"))
        assert link.loop is not None
        link.loop.call_soon(link.lost, "the worker task raised")

    return done
