"""One large object through pipes: `s3bulk cat` against `s5cmd cat` and `aws s3 cp URL -`, and
stdin upload (`s3bulk pipe`) against `s5cmd pipe` and `aws s3 cp - URL`, on a local MinIO (data on
tmpfs), same run, interleaved, medians of N: wall, CPU and peak summed RSS of each process tree.

    uv run python bench/bench_streams.py [--runs 3] [--size 1GiB]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from s3bulk._benchmark.measure import clean_env, measure, tmpfs_dir
from s3bulk._cli.options import parse_size
from s3bulk.testing import MinioServer

ROOT = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--output", default=str(ROOT / "out" / "streams.json"))
    args = parser.parse_args()
    size = parse_size(args.size, "--size")
    scratch = tmpfs_dir("s3bulk-bench-streams-")
    with MinioServer(data_dir=tmpfs_dir("s3bulk-bench-minio-")) as minio:
        env = clean_env(minio.client_env())
        endpoint = env["AWS_ENDPOINT_URL"]
        source = scratch / "big.bin"
        with source.open("wb") as handle:
            for _ in range(size // (64 * 1024 * 1024) or 1):
                handle.write(os.urandom(min(size, 64 * 1024 * 1024)))
        s5 = [str(BIN / "s5cmd"), "--endpoint-url", endpoint]
        aws = [str(BIN / "aws"), "--endpoint-url", endpoint, "s3"]
        subprocess.run([*s5, "mb", "s3://bench"], env=env, check=True, capture_output=True)
        subprocess.run(
            [*s5, "cp", str(source), "s3://bench/big.bin"], env=env, check=True, capture_output=True
        )
        s3bulk = [str(BIN / "s3bulk")]
        url = "s3://bench/big.bin"
        workloads = {
            "cat": {
                "s3bulk": f"{shlex.join([*s3bulk, 'cat', url])} > /dev/null",
                "s5cmd": f"{shlex.join([*s5, 'cat', url])} > /dev/null",
                "aws s3 cp": f"{shlex.join([*aws, 'cp', url, '-'])} > /dev/null",
            },
            "pipe": {
                "s3bulk": f"{shlex.join([*s3bulk, 'pipe', 's3://bench/up-s3bulk'])} < {source}",
                "s5cmd": f"{shlex.join([*s5, 'pipe', 's3://bench/up-s5cmd'])} < {source}",
                "aws s3 cp": f"{shlex.join([*aws, 'cp', '-', 's3://bench/up-aws'])} < {source}",
            },
        }
        runs = []
        for run in range(args.runs):
            for workload, tools in workloads.items():
                order = list(tools.items())
                order = order[run % len(order) :] + order[: run % len(order)]  # rotate who goes first
                for tool, command in order:
                    result = measure(["sh", "-c", command], env, tool, workload)
                    rate = size / result.seconds / 1024**2
                    runs.append(
                        {"workload": workload, "tool": tool, "mib_per_second": rate} | result.__dict__
                    )
                    print(
                        f"run {run + 1} {workload:5} {tool:10} {result.seconds:6.2f}s {rate:7.0f} MiB/s "
                        f"CPU {result.cpu_seconds:5.2f}s peak RSS {result.peak_rss_mib:6.1f} MiB",
                        flush=True,
                    )
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{args.size} object, local MinIO on tmpfs; medians of {args.runs}\n")
    print("| workload | tool | MiB/s | CPU s | peak RSS MiB | ÷ s5cmd |")
    print("|---|---|---:|---:|---:|---:|")
    summary = []
    for workload, tools in workloads.items():
        medians = {
            tool: {
                field: statistics.median(
                    r[field] for r in runs if r["tool"] == tool and r["workload"] == workload
                )
                for field in ("mib_per_second", "cpu_seconds", "peak_rss_mib")
            }
            for tool in tools
        }
        for tool, row in medians.items():
            ratio = row["mib_per_second"] / medians["s5cmd"]["mib_per_second"]
            print(
                f"| {workload} | {tool} | {row['mib_per_second']:,.0f} | {row['cpu_seconds']:.2f} | "
                f"{row['peak_rss_mib']:.0f} | {ratio:.2f}x |"
            )
            summary.append({"workload": workload, "tool": tool, **row, "vs_s5cmd": ratio})
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
