"""Listing on each S3 server the project builds (issue 23): `s3bulk ls -r` of 200,000 keys as one
chain of pages (`--list-ranges off`) and in parallel key ranges (`on`), and what `auto` picks,
with and without RTT (toxiproxy's latency toxic on loopback). Interleaved (order rotated), medians
of N, whole process (wall, CPU, peak RSS); every run must print every key.

Keys are laid out as many datasets are: 200 "directories" of 1,000 keys. On MinIO every
StartAfter restarts a directory walk; on Garage, whose metadata is an ordered database, it is a
seek, as on S3: where the ranges can show what they are for.

    uv run python bench/bench_list_servers.py [--runs 3] [--keys 200000] [--rtt 0,20] [--servers minio,garage]
        [--compare before=PATH-TO-ANOTHER-s3bulk]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from s3bulk._benchmark.measure import clean_env, measure, server_cpu, tmpfs_dir
from s3bulk._benchmark.network import DelayedMinio
from s3bulk.testing import GarageServer, MinioServer, VersityServer

ROOT = Path(__file__).resolve().parent
SERVERS = {"minio": MinioServer, "versitygw": VersityServer, "garage": GarageServer}
MODES = ("off", "on", "auto")


def seed(env: dict[str, str], count: int) -> None:
    """`count` empty objects under keys/, 64 PUTs in flight (obstore: the fastest seeder here)."""
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        "bench",
        endpoint=env["AWS_ENDPOINT_URL"],
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region="us-east-1",
        client_options={"allow_http": True},
    )

    async def put_all() -> None:
        slots = asyncio.Semaphore(64)

        async def put(n: int) -> None:
            async with slots:
                await obstore.put_async(store, f"keys/{n // 1000:03d}/{n:06d}", b"")

        await asyncio.gather(*(put(n) for n in range(count)))

    import boto3

    boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    ).create_bucket(Bucket="bench")
    asyncio.run(put_all())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rtt", default="0,20", help="round-trip times, ms")
    parser.add_argument("--servers", default="minio,garage", help=f"any of {','.join(SERVERS)}")
    parser.add_argument(
        "--compare",
        default="",
        metavar="NAME=EXECUTABLE",
        help="another s3bulk (an earlier commit's, say) whose `on` and `auto` run beside this one's",
    )
    args = parser.parse_args()
    tools = {"": str(Path(sys.executable).parent / "s3bulk")}
    if args.compare:
        other, executable = args.compare.split("=", 1)
        tools[other] = executable
    modes = [
        f"{tool}:{mode}" if tool else mode for tool in tools for mode in (MODES if not tool else MODES[1:])
    ]
    rows = []
    for name in args.servers.split(","):
        data = tmpfs_dir(f"s3bulk-bench-{name}-")
        for index, rtt in enumerate(float(each) for each in args.rtt.split(",")):
            server = SERVERS[name](data)  # the data seeded at the first RTT, kept for the others
            with DelayedMinio(None, rtt, server=server) as delayed:
                env = clean_env(delayed.client_env())
                if index == 0:
                    seed(server.client_env(), args.keys)
                found: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in modes}
                for run in range(args.runs):
                    shift = run % len(modes)
                    for mode in modes[shift:] + modes[:shift]:
                        tool, _, switch = mode.rpartition(":")
                        command = [tools[tool], "ls", "-r", "s3://bench/keys/", "--list-ranges", switch]
                        before = server_cpu(server.process.pid)
                        result = measure(command, env, name, mode, keep_stdout=True)
                        served = server_cpu(server.process.pid) - before
                        lines = result.stdout.count("\n")
                        if result.returncode or lines != args.keys:
                            print(
                                f"{name} rtt {rtt:g} {mode}: exit {result.returncode}, {lines} keys",
                                flush=True,
                            )
                            continue  # a failed run leaves the mode without a median (the table says so)
                        found[mode].append((result.seconds, result.cpu_seconds, served))
                        print(
                            f"{name} rtt {rtt:g} run {run + 1} {mode:4} {result.seconds:6.2f}s "
                            f"{args.keys / result.seconds:8.0f} keys/s CPU {result.cpu_seconds:5.2f}s "
                            f"server CPU {served:5.2f}s",
                            flush=True,
                        )
                medians = {
                    mode: tuple(statistics.median(column) for column in zip(*results, strict=True))
                    for mode, results in found.items()
                    if results
                }
                rows.append((name, rtt, medians))
    print(f"\n`s3bulk ls -r` of {args.keys:,} keys, medians of {args.runs}\n")
    others = [mode for mode in modes if mode not in MODES]
    print(
        "| server | RTT | off: keys/s | on: keys/s | on ÷ off | auto: keys/s | auto ÷ best "
        "| client CPU s off / on | server CPU s off / on |" + "".join(f" {mode}: keys/s |" for mode in others)
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---|" + "---:|" * len(others))
    for name, rtt, medians in rows:
        rate = {mode: f"{args.keys / values[0]:,.0f}" for mode, values in medians.items()}
        wall = {mode: values[0] for mode, values in medians.items()}
        cpu = {mode: f"{values[1]:.2f}" for mode, values in medians.items()}
        spent = {mode: f"{values[2]:.2f}" for mode, values in medians.items()}
        ratio = f"{wall['off'] / wall['on']:.2f}x" if {"off", "on"} <= wall.keys() else "—"
        best = min((wall[mode] for mode in ("off", "on") if mode in wall), default=None)
        auto = f"{best / wall['auto']:.2f}x" if best and "auto" in wall else "—"
        print(
            f"| {name} | {rtt:g} ms | {rate.get('off', 'failed')} | {rate.get('on', 'failed')} | {ratio} | "
            f"{rate.get('auto', 'failed')} | {auto} | {cpu.get('off', '—')} / {cpu.get('on', '—')} "
            f"| {spent.get('off', '—')} / {spent.get('on', '—')} |"
            + "".join(f" {rate.get(mode, 'failed')} |" for mode in others)
        )


if __name__ == "__main__":
    main()
