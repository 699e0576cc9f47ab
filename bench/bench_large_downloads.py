"""Large downloads: `s3bulk cp s3://b/p/ out/` of 3 x 200 MiB against `s5cmd cp 's3://b/p/*' out/`,
the same MinIO, the same run, the tools in turns (order reversed every other round), medians of
N, at each round-trip time asked for (loopback; toxiproxy's latency where tc netem is not there).

    uv run python bench/bench_large_downloads.py [--runs 3] [--size 200MiB] [--count 3] [--rtt 0,20]
        [--uploaded-by s3bulk|s5cmd] [--variant NAME=OPTIONS ...] [--compare NAME=EXECUTABLE ...]

Each tool is measured from outside (`_benchmark.measure`): wall time of the process, CPU of its
tree, peak summed RSS. The objects are written once by `--uploaded-by`: s3bulk stores a
CRC64NVME with each (as S3 keeps every object written since December 2024: the download is
checked by it), s5cmd none (the download is checked by the MD5s of the parts its ETag names).
Data, MinIO's included, live in /dev/shm: the disk's writeback is not what is measured.
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
import time
from pathlib import Path

from s3bulk._benchmark.measure import Run, clean_env, measure, s5cmd_binary, server_cpu, tmpfs_dir
from s3bulk._benchmark.network import DelayedMinio
from s3bulk._cli.options import parse_size

ROOT = Path(__file__).resolve().parent
S3BULK = str(Path(sys.executable).parent / "s3bulk")
MiB = 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", default="200MiB")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--rtt", default="0,20", help="round-trip times to measure, ms")
    parser.add_argument("--uploaded-by", choices=["s3bulk", "s5cmd"], default="s3bulk")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=OPTIONS",
        help="this s3bulk again with cp options added, e.g. 'p16=--part-size 16MiB'; repeatable",
    )
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=EXECUTABLE",
        help="another s3bulk to measure beside this one (main's, say); repeatable",
    )
    parser.add_argument("--output", default=str(ROOT / "out" / "large_downloads.json"))
    args = parser.parse_args()
    size = args.bytes = parse_size(args.size, "--size")
    work = tmpfs_dir("s3bulk-bench-large-")
    source = work / "source"
    source.mkdir()
    block = os.urandom(size)
    for n in range(args.count):
        (source / f"big{n}.bin").write_bytes(block[n:] + block[:n])
    del block
    # each tool's executable and the options it adds to cp
    tools: dict[str, list[str]] = {"s5cmd": [], "s3bulk": [S3BULK]}
    tools |= {name: [executable] for name, executable in (c.split("=", 1) for c in args.compare)}
    tools |= {
        f"s3bulk {name}": [S3BULK, *shlex.split(options)]
        for name, options in (v.split("=", 1) for v in args.variant)
    }
    report: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg()}
    for rtt in (float(each) for each in args.rtt.split(",")):
        runs = one_setting(work, source, rtt, tools, args)
        report[f"rtt {rtt:g}"] = [run.__dict__ for run in runs]
    shutil.rmtree(work, ignore_errors=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=1))


def one_setting(
    work: Path, source: Path, rtt: float, tools: dict[str, list[str]], args: argparse.Namespace
) -> list[Run]:
    """Every tool `args.runs` times in turns against one MinIO `rtt` ms away; the table printed."""
    runs: list[Run] = []
    with DelayedMinio(work / f"minio-{rtt:g}", rtt) as minio:
        env = clean_env(minio.client_env())
        s5 = [s5cmd_binary(), "--endpoint-url", env["AWS_ENDPOINT_URL"]]
        subprocess.run([*s5, "mb", "s3://bench"], env=env, capture_output=True, check=True)
        upload = (
            [S3BULK, "cp", "-q", f"{source}/", "s3://bench/big/"]
            if args.uploaded_by == "s3bulk"
            else [*s5, "cp", f"{source}/*", "s3://bench/big/"]
        )
        subprocess.run(upload, env=env, check=True, stdout=subprocess.DEVNULL)
        assert minio.minio.process is not None
        server = minio.minio.process.pid
        target = work / "out"
        commands = {
            tool: ([*s5, "cp", "s3://bench/big/*", f"{target}/"] if tool == "s5cmd" else None)
            for tool in tools
        }
        for tool, words in tools.items():
            if tool != "s5cmd":
                commands[tool] = [words[0], "cp", "-q", *words[1:], "s3://bench/big/", f"{target}/"]
        print(f"{minio.describe()}: {args.count} x {args.size} uploaded by {args.uploaded_by}", flush=True)
        for round_ in range(args.runs):
            order = list(commands.items())
            for tool, command in order if round_ % 2 == 0 else reversed(order):
                assert command is not None
                shutil.rmtree(target, ignore_errors=True)
                os.sync()
                served = server_cpu(server)
                run = measure(command, env, tool, f"download rtt {rtt:g}")
                run.server_cpu_seconds = server_cpu(server) - served
                got = sorted(path.stat().st_size for path in target.iterdir()) if target.exists() else []
                assert run.returncode == 0 and got == [args.bytes] * args.count, (tool, got)
                runs.append(run)
                print(
                    f"  round {round_ + 1} {tool:16} {run.seconds:6.2f} s  CPU {run.cpu_seconds:5.2f} s  "
                    f"peak RSS {run.peak_rss_mib:5.1f} MiB  MinIO CPU {run.server_cpu_seconds:5.2f} s  "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    print_table(runs, tools, rtt)
    return runs


def print_table(runs: list[Run], tools: dict[str, list[str]], rtt: float) -> None:
    def median(tool: str, field: str) -> float:
        return statistics.median(getattr(run, field) for run in runs if run.tool == tool)

    s5cmd_seconds = median("s5cmd", "seconds")
    print(f"\n| RTT {rtt:g} ms | wall s | speed ÷ s5cmd | CPU s | peak RSS MiB | MinIO CPU s |")
    print("|---|---|---|---|---|---|")
    for tool in tools:
        seconds = median(tool, "seconds")
        cpu, rss, server = (median(tool, f) for f in ("cpu_seconds", "peak_rss_mib", "server_cpu_seconds"))
        print(
            f"| {tool} | {seconds:.2f} | {s5cmd_seconds / seconds:.2f}x | {cpu:.2f} | {rss:.1f} "
            f"| {server:.2f} |"
        )
    print(flush=True)


if __name__ == "__main__":
    main()
