"""`s3bulk bench WORKLOAD`: the seed articles' comparison, on your machine, in one command."""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

import typer

from s3bulk._config import parse_size
from s3bulk._errors import UsageError, require_extra

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$")


def parse_rtts(text: str) -> list[float]:
    """'0,20ms' -> [0.0, 20.0] (milliseconds)."""
    values = []
    for part in text.split(","):
        match = _DURATION.match(part)
        if not match:
            raise UsageError(f"--rtt: cannot read {part!r}: use e.g. 20ms, or 0,20ms for both")
        number, unit = float(match.group(1)), match.group(2) or "ms"
        values.append(number * 1000 if unit == "s" else number)
    return values


def bench_command(
    workload: str = typer.Argument(..., help="download, upload, copy or list."),
    objects: int = typer.Option(2000, "--objects", help="How many objects (keys for list)."),
    size: str = typer.Option("1MiB", "--size", help="Object size (list uses empty objects)."),
    strategies: str = typer.Option(
        "",
        "--strategies",
        help="Comma-separated engines and peers: serial, threads, async, processes, hybrid, auto, ray, "
        "s5cmd, rclone, boto3-threads, boto3-processes, aioboto3; for list: paginator, sequential, "
        "partitioned. Default: every engine but ray, and s5cmd (list: paginator, sequential, "
        "partitioned, s5cmd).",
    ),
    runs: int = typer.Option(3, "--runs", help="Rounds; each strategy runs once per round, interleaved."),
    rtt: str = typer.Option("0", "--rtt", help="Added round-trip time, e.g. 20ms; '0,20ms' runs both."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Passed to s3bulk's engines."),
    max_in_flight: str | None = typer.Option(None, "--max-in-flight", help="Passed to s3bulk's engines."),
    output: Path | None = typer.Option(None, "--output", help="Write every run and the medians as JSON."),
    chart: Path | None = typer.Option(None, "--chart", help="Draw the medians into this PNG."),
) -> int:
    """Run a workload against a throwaway local MinIO once per engine and peer tool, and print
    wall time, objects/s, Gb/s, CPU and peak memory (medians), like the seed articles' tables."""
    require_extra("bench", "s3bulk bench")
    from s3bulk._benchmark.suite import Bench, BenchSpec, default_strategies, format_table

    chosen = [name.strip() for name in strategies.split(",") if name.strip()] or default_strategies(workload)
    spec = BenchSpec(
        workload,
        objects,
        0 if workload == "list" else parse_size(size, "--size"),
        chosen,
        runs,
        parse_rtts(rtt),
        concurrency,
        output,
        chart,
        max_in_flight,
    )
    bench = Bench(spec, say=lambda line: print(line, flush=True))
    # a killed bench must still stop its servers: SIGTERM unwinds like Ctrl-C does
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bench.run()
    print(format_table(bench.table(), bench.networks))
    bench.save()
    return 0 if all(row["failed_runs"] == 0 for row in bench.table()) else 1


COMMANDS = {"bench": bench_command}  # found by s3bulk._cli: the commands this module adds
