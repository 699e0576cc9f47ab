"""`ls -r --output x.parquet` against `ls -r --json > file` (issue 67): the same listing, from
bench_planner.py's synthetic store (N keys made as they are asked for, no server), written as a
table or as JSON lines; wall, CPU and peak RSS of each run's own process, interleaved.

    .venv/bin/python bench/bench_ls_table.py --keys 1000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

HERE = Path(__file__).parent


def _child(count: int, args: list[str]) -> None:
    """In the run's own process: s3bulk's CLI, its storage the synthetic store."""
    sys.path.insert(0, str(HERE))
    import bench_planner

    maker = bench_planner.Maker(bench_planner.Synthetic(count, "cp"))
    from s3bulk._main import main

    sys.argv = ["s3bulk", *args]
    with mock.patch("s3bulk._stores.storage.Storage", maker):
        main()


def _run(count: int, args: list[str], out: Path | None) -> tuple[float, float, int]:
    started = time.perf_counter()
    with open(out or os.devnull, "wb") as stdout:
        process = subprocess.Popen(
            [sys.executable, __file__, "--child", str(count), *args],
            stdout=stdout,
            env=dict(
                os.environ,
                AWS_ENDPOINT_URL="http://127.0.0.1:9",
                AWS_ACCESS_KEY_ID="b",
                AWS_SECRET_ACCESS_KEY="b",
            ),
        )
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status:
        sys.exit(f"{args}: exit status {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(int(sys.argv[2]), sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            for name in ("json", "parquet", "csv", "arrow"):
                if name == "json":
                    out, cli = Path(scratch, "l.jsonl"), ["ls", "-r", "--json", "s3://src/k/"]
                else:
                    out, cli = None, ["ls", "-r", "--output", f"{scratch}/l.{name}", "s3://src/k/"]
                wall, cpu, peak = _run(args.keys, cli, out)
                size = (out or Path(scratch, f"l.{name}")).stat().st_size
                rows.setdefault(name, []).append((wall, cpu, peak))
                print(
                    f"{name:8} {args.keys:,} keys: {wall:6.1f} s wall  {cpu:6.1f} s CPU  "
                    f"peak RSS {peak / 2**20:6.1f} MiB  {size / 2**20:6.1f} MiB written",
                    flush=True,
                )
    print(f"\nmedians ({args.keys:,} keys; load {os.getloadavg()[0]:.1f} at the end)")
    for name, found in rows.items():
        wall = statistics.median(row[0] for row in found)
        cpu = statistics.median(row[1] for row in found)
        peak = statistics.median(row[2] for row in found) / 2**20
        print(f"{name:8} {wall:6.1f} s wall  {cpu:6.1f} s CPU  {peak:6.1f} MiB")


if __name__ == "__main__":
    main()
