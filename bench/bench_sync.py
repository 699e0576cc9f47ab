"""`sync` benchmarks (issue 3), every peer in the same run against the same MinIO, interleaved,
medians of N runs. Requests are counted by the server (MinIO's Prometheus counters), so every
tool is counted the same way, HEADs included.

    uv run python bench/bench_sync.py [--runs 3] [--quick] [--only memory,throughput,unchanged,lambda]

- memory: peak memory of an unchanged S3 -> S3 sync of 10,000 vs 200,000 objects (pure listing
  and diff); flat in object count means the two are within 10%.
- throughput: local -> S3 sync of 2,000 x 256 KiB files into an empty prefix: s3bulk, s5cmd sync,
  aws s3 sync, rclone sync.
- unchanged: a sync where nothing changed (local -> S3 on the throughput data, and S3 -> S3 on
  10,000 objects): time and requests, s3bulk vs s5cmd, rclone and aws.
- lambda: the seed article's Lambda case, server-side copy of 2,000 objects with --max-memory 128MB.

MinIO keeps its data on tmpfs here: its synchronous disk writes make creating 400,000 objects on
this VM's disk take hours, and none of these workloads measures the server's disk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

from s3bulk._benchmark.measure import Results, clean_env, measure, s5cmd_binary
from s3bulk._benchmark.suite import rclone_env
from s3bulk.testing import MinioServer

ROOT = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
TOOLS = ROOT.parent / ".tools"
S3BULK = str(BIN / "s3bulk")
S5CMD = s5cmd_binary()
RCLONE = str(TOOLS / "bin" / "rclone")
AWS = str(TOOLS / "awscli" / "bin" / "aws")
_REQUESTS = re.compile(r'^minio_api_requests_total\{name="([^"]+)"[^}]*\}\s+([0-9.e+]+)', re.MULTILINE)


def server_requests(endpoint: str) -> Counter[str]:
    with urllib.request.urlopen(f"{endpoint}/minio/metrics/v3/api/requests", timeout=10) as response:
        text = response.read().decode()
    counts: Counter[str] = Counter()
    for api, value in _REQUESTS.findall(text):
        counts[api] += int(float(value))
    return counts


def make_files(directory: Path, count: int, size: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    block = os.urandom(size + 1000)
    for index in range(count):
        (directory / f"f{index:07d}.bin").write_bytes(block[index % 997 : index % 997 + size])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a twentieth of the sizes, one run")
    parser.add_argument("--only", default="memory,throughput,unchanged,lambda")
    parser.add_argument("--output", default=str(ROOT / "out" / "sync.json"))
    args = parser.parse_args()
    wanted = set(args.only.split(","))
    scale = 20 if args.quick else 1
    runs = 1 if args.quick else args.runs
    small_set, big_set, files = 10_000 // scale, 200_000 // scale, 2_000 // scale
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    data_dir = Path(tempfile.mkdtemp(prefix="s3bulk-bench-minio-", dir=shm))
    work = Path(tempfile.mkdtemp(prefix="s3bulk-bench-sync-"))
    results = Results()
    requests: dict[str, dict[str, list[int]]] = {}
    try:
        with MinioServer(data_dir=data_dir, public_metrics=True) as minio:
            env = clean_env(minio.client_env()) | {"S3BULK_STATE_DIR": str(work / "jobs")}
            endpoint = env["AWS_ENDPOINT_URL"]
            env |= rclone_env(endpoint, env)  # the remote "m:"
            s5 = [S5CMD, "--endpoint-url", endpoint]
            aws = [AWS, "--endpoint-url", endpoint, "s3"]

            def run(tool: str, workload: str, command: list[str]) -> None:
                before = server_requests(endpoint)
                result = measure(command, env, tool, workload)
                delta = server_requests(endpoint) - before
                requests.setdefault(workload, {}).setdefault(tool, []).append(sum(delta.values()))
                results.runs.append(result)
                kinds = ", ".join(f"{api} {n}" for api, n in sorted(delta.items()) if n)
                print(
                    f"{workload:28} {tool:8} {result.seconds:7.2f}s  {result.peak_rss_mib:6.1f} MiB  {kinds}",
                    flush=True,
                )

            def prepare(count: int, prefix: str) -> None:
                source = work / f"data-{count}"
                make_files(source, count, 0)
                for command in (
                    [S3BULK, "cp", f"{source}/", f"s3://bench/{prefix}-src/"],
                    [S3BULK, "cp", f"s3://bench/{prefix}-src/", f"s3://bench/{prefix}-dst/"],
                ):
                    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
                shutil.rmtree(source)

            subprocess.run([*s5, "mb", "s3://bench"], env=env, check=True, capture_output=True)
            print(f"preparing: {small_set:,} and {big_set:,} object pairs, {files:,} files", flush=True)
            started = time.perf_counter()
            if wanted & {"memory", "unchanged"}:
                prepare(small_set, "n10k")
            if "memory" in wanted:
                prepare(big_set, "n200k")
            make_files(work / "files", files, 256 * 1024)
            print(f"prepared in {time.perf_counter() - started:.0f}s", flush=True)

            if "unchanged" in wanted:
                # rclone keeps its own mtime in object metadata: its first sync over objects other
                # tools wrote rewrites every one (a CopyObject each). Let it do that once, unmeasured.
                subprocess.run(
                    [RCLONE, "sync", "m:bench/n10k-src/", "m:bench/n10k-dst/"],
                    env=env,
                    check=True,
                    capture_output=True,
                )

            for index in range(runs):
                flip = index % 2 == 1
                if "memory" in wanted:
                    for label, prefix in (("10k", "n10k"), ("200k", "n200k")):
                        source, destination = f"s3://bench/{prefix}-src/", f"s3://bench/{prefix}-dst/"
                        run("s3bulk", f"memory unchanged {label}", [S3BULK, "sync", source, destination])
                        run("s5cmd", f"memory unchanged {label}", [*s5, "sync", source + "*", destination])
                if "throughput" in wanted:
                    tools = {
                        "s3bulk": lambda p: [S3BULK, "sync", f"{work}/files/", f"s3://bench/{p}/"],
                        "s5cmd": lambda p: [*s5, "sync", f"{work}/files/", f"s3://bench/{p}/"],
                        "aws": lambda p: [
                            *aws,
                            "sync",
                            "--only-show-errors",
                            f"{work}/files/",
                            f"s3://bench/{p}/",
                        ],
                        "rclone": lambda p: [RCLONE, "sync", f"{work}/files/", f"m:bench/{p}/"],
                    }
                    for tool, command in reversed(tools.items()) if flip else tools.items():
                        prefix = f"up-{tool}-{index}"
                        run(tool, "sync upload 256KiB", command(prefix))
                        if "unchanged" in wanted:
                            run(tool, "unchanged local->S3", command(prefix))
                if "unchanged" in wanted:
                    source, destination = "s3://bench/n10k-src/", "s3://bench/n10k-dst/"
                    tools = {
                        "s3bulk": [S3BULK, "sync", source, destination],
                        "s5cmd": [*s5, "sync", source + "*", destination],
                        "rclone": [RCLONE, "sync", "m:bench/n10k-src/", "m:bench/n10k-dst/"],
                        "aws": [*aws, "sync", "--only-show-errors", source, destination],
                    }
                    for tool, command in reversed(tools.items()) if flip else tools.items():
                        run(tool, "unchanged S3->S3 10k", command)
                if "lambda" in wanted:
                    if index == 0:
                        make_files(work / "lambda", 2000, 1024)
                        subprocess.run(
                            [S3BULK, "cp", f"{work}/lambda/", "s3://bench/lambda-src/"],
                            env=env,
                            check=True,
                            stdout=subprocess.DEVNULL,
                        )
                    run(
                        "s3bulk",
                        "lambda copy 2000 128MB",
                        [
                            S3BULK,
                            "cp",
                            "--max-memory",
                            "128MB",
                            "s3://bench/lambda-src/",
                            f"s3://bench/lambda-{index}/",
                        ],
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)

    summary = []
    for workload in dict.fromkeys(r.workload for r in results.runs):
        for tool in dict.fromkeys(r.tool for r in results.runs if r.workload == workload):
            seconds = [r.seconds for r in results.runs if r.workload == workload and r.tool == tool]
            memory = [r.peak_rss_mib for r in results.runs if r.workload == workload and r.tool == tool]
            failed = [
                r.returncode
                for r in results.runs
                if r.workload == workload and r.tool == tool and r.returncode
            ]
            summary.append(
                {
                    "workload": workload,
                    "tool": tool,
                    "seconds": statistics.median(seconds),
                    "seconds_range": [min(seconds), max(seconds)],
                    "peak_mib": statistics.median(memory),
                    "requests": statistics.median(requests[workload][tool]),
                    "failed_runs": len(failed),
                }
            )
    print("\n| workload | tool | wall s (median, range) | requests | peak MiB |")
    print("|---|---|---|---|---|")
    for row in summary:
        low, high = row["seconds_range"]
        print(
            f"| {row['workload']} | {row['tool']} | {row['seconds']:.2f} ({low:.2f}-{high:.2f}) "
            f"| {row['requests']:,.0f} | {row['peak_mib']:.0f} |"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "runs_per_tool": runs,
                "runs": [r.__dict__ for r in results.runs],
                "requests": requests,
                "summary": summary,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
