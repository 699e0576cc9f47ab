"""The ray engine's overhead against hybrid on one machine (issue 7): a 10,000-object server-side
copy on a local MinIO, s5cmd as the native peer, in the same run, order rotating, medians.

    uv run python bench/bench_ray.py [--runs 3] [--objects 10000]

Tools: hybrid (the default engine); ray joining a running one-node cluster (--ray-address, what
a cluster user does); ray with its own local instance (no address: Ray's start-up is in the
wall time); s5cmd. Every tool is a fresh process, start-up included.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from s3bulk._benchmark.measure import clean_env, measure, s5cmd_binary, tmpfs_dir
from s3bulk.testing import MinioServer
from s3bulk.testing.raycluster import RayCluster

ROOT = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
S3BULK = str(BIN / "s3bulk")
S5CMD = s5cmd_binary()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--output", default=str(ROOT / "out" / "ray.json"))
    args = parser.parse_args()
    with MinioServer() as minio:
        env = clean_env(minio.client_env())
        s5 = [S5CMD, "--endpoint-url", env["AWS_ENDPOINT_URL"]]
        for bucket in ("bench", "copydst"):
            subprocess.run([*s5, "mb", f"s3://{bucket}"], env=env, check=True, capture_output=True)
        print(f"preparing {args.objects} x 4 KiB objects")
        work = tmpfs_dir("s3bulk-bench-ray-")
        for index in range(args.objects):
            (work / f"obj{index:06d}.bin").write_bytes(index.to_bytes(4, "big") * 1024)
        subprocess.run(
            [S3BULK, "cp", f"{work}/", "s3://bench/small/"], env=env, check=True, capture_output=True
        )
        with RayCluster(cpus=2, env=env) as cluster:
            joined = env | cluster.client_env()
            tools = {
                "hybrid": (env, ["--engine", "hybrid"]),
                "ray (running cluster)": (joined, ["--engine", "ray", "--ray-address", cluster.address]),
                "ray (own instance)": (env, ["--engine", "ray"]),
            }
            seconds: dict[str, list[float]] = {name: [] for name in [*tools, "s5cmd"]}
            for run in range(args.runs):
                names = list(seconds)
                order = names[run % len(names) :] + names[: run % len(names)]
                for name in order:
                    subprocess.run([*s5, "rm", "s3://copydst/*"], env=env, capture_output=True)
                    if name == "s5cmd":
                        command, tool_env = [*s5, "cp", "s3://bench/small/*", "s3://copydst/x/"], env
                    else:
                        tool_env, flags = tools[name]
                        command = [S3BULK, "cp", "s3://bench/small/", "s3://copydst/x/", *flags]
                    result = measure(command, tool_env, name, "copy")
                    listed = subprocess.run(
                        [*s5, "ls", "s3://copydst/x/*"], env=env, capture_output=True, text=True
                    ).stdout
                    copied = sum(1 for line in listed.splitlines() if line.strip())
                    assert copied == args.objects, f"{name}: {copied} objects copied"
                    seconds[name].append(result.seconds)
                    rate = args.objects / result.seconds
                    print(f"run {run + 1} {name:22} {result.seconds:7.2f}s {rate:8.0f} obj/s")
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print()
    print("| tool | wall s (median) | runs | objects/s | x hybrid |")
    print("|---|---|---|---|---|")
    for name, median in medians.items():
        runs = " / ".join(f"{value:.2f}" for value in seconds[name])
        ratio = medians["hybrid"] / median
        print(f"| {name} | {median:.2f} | {runs} | {args.objects / median:,.0f} | {ratio:.2f}x |")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"objects": args.objects, "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main()
