"""Listing on each S3 server the project builds (issue 23): `s3bulk ls -r` of 200,000 keys as one
chain of pages (`--list-ranges off`) and in parallel key ranges (`on`), and what `auto` picks,
with and without RTT (toxiproxy's latency toxic on loopback). Interleaved (order rotated), medians
of N, whole process (wall, CPU, peak RSS); every run must print every key.

Keys are laid out as many datasets are: 200 "directories" of 1,000 keys. On MinIO every
StartAfter restarts a directory walk; on Garage, whose metadata is an ordered database, it is a
seek, as on S3: where the ranges can show what they are for.

    uv run python bench/bench_list_servers.py [--runs 3] [--keys 200000] [--rtt 0,20] [--servers minio,garage]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from s3bulk._benchmark.measure import clean_env, measure, tmpfs_dir
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


def server_cpu(server: object) -> float:
    """CPU seconds the server process (and its children) used so far: where a listing is the
    server's work on the same two cores, this is the floor no client can go under."""
    import psutil

    process = psutil.Process(server.process.pid)  # type: ignore[attr-defined]
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        times = member.cpu_times()
        total += times.user + times.system
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rtt", default="0,20", help="round-trip times, ms")
    parser.add_argument("--servers", default="minio,garage", help=f"any of {','.join(SERVERS)}")
    args = parser.parse_args()
    rows = []
    for name in args.servers.split(","):
        data = tmpfs_dir(f"s3bulk-bench-{name}-")
        for index, rtt in enumerate(float(each) for each in args.rtt.split(",")):
            server = SERVERS[name](data)  # the data seeded at the first RTT, kept for the others
            with DelayedMinio(None, rtt, server=server) as delayed:
                env = clean_env(delayed.client_env())
                if index == 0:
                    seed(server.client_env(), args.keys)
                found: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in MODES}
                for run in range(args.runs):
                    for mode in MODES[run % 3 :] + MODES[: run % 3]:
                        command = [
                            str(Path(sys.executable).parent / "s3bulk"),
                            "ls",
                            "-r",
                            "s3://bench/keys/",
                        ]
                        before = server_cpu(server)
                        result = measure([*command, "--list-ranges", mode], env, name, mode, keep_stdout=True)
                        served = server_cpu(server) - before
                        lines = result.stdout.count("\n")
                        if result.returncode or lines != args.keys:
                            raise SystemExit(f"{name} {mode}: exit {result.returncode}, {lines} keys")
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
                }
                rows.append((name, rtt, delayed.describe(), medians))
    print(f"\n`s3bulk ls -r` of {args.keys:,} keys, medians of {args.runs}\n")
    print(
        "| server | RTT | off: keys/s | on: keys/s | on ÷ off | auto: keys/s | auto ÷ best "
        "| client CPU s off / on | server CPU s off / on |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    for name, rtt, _, medians in rows:
        (off, off_cpu, off_server), (on, on_cpu, on_server) = medians["off"], medians["on"]
        auto = medians["auto"][0]
        rate = {mode: args.keys / values[0] for mode, values in medians.items()}
        print(
            f"| {name} | {rtt:g} ms | {rate['off']:,.0f} | {rate['on']:,.0f} | {off / on:.2f}x | "
            f"{rate['auto']:,.0f} | {min(off, on) / auto:.2f}x | {off_cpu:.2f} / {on_cpu:.2f} "
            f"| {off_server:.2f} / {on_server:.2f} |"
        )


if __name__ == "__main__":
    main()
