"""Run one command, and measure it the same way whatever the tool: wall time, CPU seconds of its
whole process tree, and the tree's peak memory.

Memory is the sum of PSS (proportional set size) over the tree: forked workers share their
parent's pages copy-on-write, and summing RSS would count those shared pages once per process.
For a single process (s5cmd) PSS and RSS are the same thing. CPU comes from wait4(): the child's
rusage includes every descendant it waited for (s3bulk's workers, a process pool's children).
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
    peak_rss_mib: float
    returncode: int
    cpu_seconds: float = 0.0
    stdout: str = ""


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)

    def median(self, workload: str, tool: str, attribute: str) -> float:
        values = [getattr(r, attribute) for r in self.runs if r.workload == workload and r.tool == tool]
        return statistics.median(values) if values else float("nan")


def _tree_pss(process: psutil.Process) -> int:
    total = 0
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += member.memory_full_info().pss
    return total


def measure(
    command: list[str], env: dict[str, str], tool: str, workload: str, *, keep_stdout: bool = False
) -> Run:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, env=env, stdout=out if keep_stdout else subprocess.DEVNULL, stderr=err
        )
        watched = psutil.Process(process.pid)
        peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _tree_pss(watched))
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
    cpu = usage.ru_utime + usage.ru_stime
    return Run(tool, workload, seconds, peak / 1024**2, process.returncode, cpu, stdout)


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(extra)
    return env


def tmpfs_dir(prefix: str) -> Path:
    """A scratch directory in memory when /dev/shm exists: disk writeback is not what we measure."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
