"""Shared benchmark plumbing: run a command, time it, and sample the peak memory of its whole
process tree (s3bulk's workers included), so every tool is measured the same way.

Memory is the sum of PSS (proportional set size) over the tree: forked workers share their
parent's pages copy-on-write, and summing RSS would count those shared pages once per process.
For a single process (s5cmd) PSS and RSS are the same thing."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field

import psutil


@dataclass
class Run:
    tool: str
    workload: str
    seconds: float
    peak_rss_mib: float
    returncode: int


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)

    def median(self, workload: str, tool: str, attribute: str) -> float:
        values = [getattr(r, attribute) for r in self.runs if r.workload == workload and r.tool == tool]
        return statistics.median(values) if values else float("nan")


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += member.memory_full_info().pss
    return total


def measure(command: list[str], env: dict[str, str], tool: str, workload: str) -> Run:
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watched = psutil.Process(process.pid)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(watched))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    if process.returncode != 0:
        print(f"  ! {tool} {workload} exited {process.returncode}: {stderr.decode()[-500:]}")
    return Run(tool, workload, seconds, peak / 1024**2, process.returncode)


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(extra)
    return env
