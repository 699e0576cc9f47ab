"""Downloading 10,000 named keys: `s3bulk cp --files-from` (a manifest of keys) and `s3bulk run`
(a file of `cp` lines) against `s5cmd run` of the same 10,000 `cp` lines, on a local MinIO (data
on tmpfs), same run, interleaved (order rotated), medians of N: wall, CPU and peak summed RSS of
each process tree.

    uv run python bench/bench_manifest.py [--runs 3] [--objects 10000] [--size 4KiB]
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

from s3bulk._benchmark.measure import clean_env, measure, s5cmd_binary, tmpfs_dir
from s3bulk._cli.options import parse_size
from s3bulk.testing import MinioServer

ROOT = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--size", default="4KiB")
    parser.add_argument("--output", default=str(ROOT / "out" / "manifest.json"))
    args = parser.parse_args()
    size = parse_size(args.size, "--size")
    scratch = tmpfs_dir("s3bulk-bench-manifest-")
    with MinioServer(data_dir=tmpfs_dir("s3bulk-bench-minio-")) as minio:
        env = clean_env(minio.client_env())
        endpoint = env["AWS_ENDPOINT_URL"]
        tree = scratch / "tree"
        tree.mkdir()
        names = [f"d{n % 100:02d}/f{n:06d}.bin" for n in range(args.objects)]
        for name in names:
            (tree / name).parent.mkdir(exist_ok=True)
            (tree / name).write_bytes(os.urandom(size))
        s5 = [s5cmd_binary(), "--endpoint-url", endpoint]
        subprocess.run([*s5, "mb", "s3://bench"], env=env, check=True, capture_output=True)
        subprocess.run([*s5, "cp", f"{tree}/*", "s3://bench/src/"], env=env, check=True, capture_output=True)
        manifest = scratch / "keys.txt"
        manifest.write_text("".join(name + "\n" for name in names))
        out = scratch / "out"

        def cp_lines(tool: str) -> Path:
            path = scratch / f"{tool}.txt"
            path.write_text("".join(f"cp s3://bench/src/{name} {out}/{tool}/{name}\n" for name in names))
            return path

        s3bulk = str(BIN / "s3bulk")
        tools = {
            "s3bulk cp --files-from": f"{s3bulk} cp -q --files-from {manifest} s3://bench/src/ {out}/named/",
            "s3bulk run": f"{s3bulk} run -q {cp_lines('run')}",
            "s5cmd run": f"{shlex.join(s5)} run {cp_lines('s5cmd')} > /dev/null",
        }
        runs = []
        for run in range(args.runs):
            order = list(tools.items())
            order = order[run % len(order) :] + order[: run % len(order)]
            for tool, command in order:
                shutil.rmtree(out, ignore_errors=True)
                result = measure(["sh", "-c", command], env, tool, "named download")
                landed = sum(1 for path in out.rglob("*") if path.is_file())
                assert landed == args.objects, (tool, landed)
                rate = args.objects / result.seconds
                runs.append({"tool": tool, "objects_per_second": rate} | result.__dict__)
                print(
                    f"run {run + 1} {tool:24} {result.seconds:6.2f}s {rate:7.0f} obj/s "
                    f"CPU {result.cpu_seconds:5.2f}s peak RSS {result.peak_rss_mib:6.1f} MiB",
                    flush=True,
                )
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{args.objects:,} named keys of {args.size}, local MinIO on tmpfs; medians of {args.runs}\n")
    print("| tool | obj/s | CPU s | peak RSS MiB | ÷ s5cmd run |")
    print("|---|---:|---:|---:|---:|")
    medians = {
        tool: {
            field: statistics.median(r[field] for r in runs if r["tool"] == tool)
            for field in ("objects_per_second", "cpu_seconds", "peak_rss_mib")
        }
        for tool in tools
    }
    for tool, row in medians.items():
        ratio = row["objects_per_second"] / medians["s5cmd run"]["objects_per_second"]
        print(
            f"| {tool} | {row['objects_per_second']:,.0f} | {row['cpu_seconds']:.2f} | "
            f"{row['peak_rss_mib']:.0f} | {ratio:.2f}x |"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"runs": runs, "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
