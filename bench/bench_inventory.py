"""A job planned from a 1,000,000-row S3 Inventory on MinIO (issue 67): `cp --dry-run --inventory`
over Parquet and CSV inventories of made-up keys (an inventory may name keys its bucket does not
hold: a dry run reads no object), against the same dry run planned from `ls --inventory` alone.
Counts the LIST requests on the inventoried bucket (MinIO's own metrics are not needed: the proxy
of s3bulk.testing counts), the wall, CPU and peak RSS of each run's process.

    .venv/bin/python bench/bench_inventory.py --rows 1000000 --runs 1
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3

from s3bulk.testing import MinioServer, write_inventory
from s3bulk.testing.throttle import S3ThrottlingProxy


def rows(count: int) -> object:
    when = "2026-11-27T10:00:00.000Z"
    return ((f"data/{n:010d}", n % 997, when, f"{n:032x}") for n in range(count))


def run(env: dict[str, str], args: list[str]) -> tuple[float, float, int, int]:
    """wall, CPU, peak RSS (the process's own high-water mark, VmHWM, read until it exits: the
    rusage of a child forked from this process counts this one's pages before its exec) and exit
    status of one CLI run."""
    started = time.perf_counter()
    peak = 0
    with open(os.devnull, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "s3bulk", *args], env=env, stdout=out)
        while process.poll() is None:
            try:
                status_lines = Path(f"/proc/{process.pid}/status").read_text().splitlines()
            except OSError:
                break
            for line in status_lines:
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
            time.sleep(0.05)
        status = process.wait()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - _children_cpu[0]
    _children_cpu[0] = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - started, cpu, peak, status


_children_cpu = [0.0]  # CPU of the children waited for so far (RUSAGE_CHILDREN adds up)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, MinioServer(data_dir=Path(work, "minio")) as minio:
        client = boto3.client("s3", **_boto(minio.client_env()))
        for bucket in ("src", "dst", "inv"):
            client.create_bucket(Bucket=bucket)
        manifests = {}
        for kind in ("Parquet", "CSV"):
            started = time.perf_counter()
            manifests[kind] = write_inventory(
                client,
                "src",
                "inv",
                kind=kind,
                prefix=kind.lower(),
                rows=rows(args.rows),
                when=datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC),
            )
            print(
                f"{kind} inventory of {args.rows:,} rows written in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
        with S3ThrottlingProxy(minio.endpoint) as proxy:
            env = (
                dict(os.environ)
                | minio.client_env()
                | {"AWS_ENDPOINT_URL": proxy.endpoint, "S3BULK_STATE_DIR": f"{work}/jobs"}
            )
            for _ in range(args.runs):
                for kind, manifest in manifests.items():
                    for name, cli in (
                        (
                            "cp --dry-run",
                            ["cp", "-q", "--dry-run", "--inventory", manifest, "s3://src/", "s3://dst/"],
                        ),
                        ("ls", ["ls", "--inventory", manifest, "s3://src/"]),
                    ):
                        before = proxy.log.bucket_reads["src"]
                        wall, cpu, peak, status = run(env, cli)
                        lists = proxy.log.bucket_reads["src"] - before
                        print(
                            f"{kind:8} {name:13} {args.rows:,} rows: exit {status}, {wall:6.1f} s wall, "
                            f"{cpu:6.1f} s CPU ({args.rows / cpu:,.0f} rows per CPU-second), peak RSS "
                            f"{peak / 2**20:6.1f} MiB, LIST of the inventoried bucket: {lists}",
                            flush=True,
                        )
        print(f"load {os.getloadavg()[0]:.1f} at the end")


def _boto(env: dict[str, str]) -> dict[str, str]:
    return {
        "endpoint_url": env["AWS_ENDPOINT_URL"],
        "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "region_name": env["AWS_REGION"],
    }


if __name__ == "__main__":
    main()
