"""The seed articles' object-processing experiment in one run: read every object under a prefix
and do CPU-bound Python work on each (zlib level 6 + SHA-256 of the body, ~1-2 ms), as boto3
serially, boto3 with a ThreadPoolExecutor (cpu+4), boto3 with a ProcessPoolExecutor, aioboto3 with
asyncio.gather under a semaphore, s3fs with multiprocessing.Pool, and `s3bulk.map`; with and
without RTT (toxiproxy on loopback). Interleaved (order rotated), medians of N: wall, CPU and peak
summed RSS of each process tree; every program checks it hashed every object.

    uv run python bench/bench_map.py [--runs 3] [--objects 10000] [--size 64KiB] [--rtt 0,20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

from s3bulk._benchmark.measure import clean_env, measure, tmpfs_dir
from s3bulk._benchmark.network import DelayedMinio
from s3bulk._cli.options import parse_size

ROOT = Path(__file__).resolve().parent

COMMON = """
import hashlib, os, sys, zlib
BUCKET, PREFIX, COUNT = "bench", "objects/", int(os.environ["OBJECTS"])
def work(body):
    return hashlib.sha256(zlib.compress(body, 6)).hexdigest()
def done(results):
    assert len(results) == COUNT, (len(results), COUNT)
def keys():
    return [f"{PREFIX}{n:06d}" for n in range(COUNT)]
"""

PROGRAMS = {
    "boto3 serial": """
import boto3
s3 = boto3.client("s3")
done([work(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()) for key in keys()])
""",
    "boto3 threads": """
import boto3
from concurrent.futures import ThreadPoolExecutor
s3 = boto3.client("s3", config=__import__("botocore.config").config.Config(max_pool_connections=64))
with ThreadPoolExecutor(os.cpu_count() + 4) as pool:
    done(list(pool.map(lambda key: work(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()), keys())))
""",
    "boto3 processes": """
import boto3
from concurrent.futures import ProcessPoolExecutor
_client = None
def one(key):
    global _client
    _client = _client or boto3.client("s3")
    return work(_client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
if __name__ == "__main__":
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        done(list(pool.map(one, keys(), chunksize=16)))
""",
    "aioboto3 gather": """
import asyncio, aioboto3
async def main():
    gate = asyncio.Semaphore(64)
    async with aioboto3.Session().client("s3") as s3:
        async def one(key):
            async with gate:
                reply = await s3.get_object(Bucket=BUCKET, Key=key)
                return work(await reply["Body"].read())
        return await asyncio.gather(*(one(key) for key in keys()))
done(asyncio.run(main()))
""",
    "s3fs + Pool": """
import multiprocessing, s3fs
_fs = None
def one(key):
    global _fs
    _fs = _fs or s3fs.S3FileSystem(client_kwargs={"endpoint_url": os.environ["AWS_ENDPOINT_URL"]})
    return work(_fs.cat_file(f"{BUCKET}/{key}"))
if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(os.cpu_count()) as pool:
        done(pool.map(one, keys(), chunksize=16))
""",
    "s3bulk.map": """
import s3bulk
if __name__ == "__main__":
    results = s3bulk.map(lambda obj, body: work(body), f"s3://{BUCKET}/{PREFIX}", journal=False)
    done([result for _, result in results])
""",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--size", default="64KiB")
    parser.add_argument("--rtt", default="0,20", help="round-trip times to measure, ms")
    parser.add_argument("--only", default="", help="comma-separated program names (default: all)")
    parser.add_argument("--output", default=str(ROOT / "out" / "map.json"))
    parser.add_argument(
        "--memory-at",
        default="",
        help="instead: s3bulk.map's peak memory over these object counts (1 KiB each), e.g. 10000,100000",
    )
    args = parser.parse_args()
    if args.memory_at:
        memory_by_count([int(each) for each in args.memory_at.split(",")], args.runs)
        return
    size = parse_size(args.size, "--size")
    chosen = [name for name in PROGRAMS if not args.only or name in args.only.split(",")]
    scratch = tmpfs_dir("s3bulk-bench-map-")
    for name in chosen:
        (scratch / f"{name.replace(' ', '_')}.py").write_text(COMMON + textwrap.dedent(PROGRAMS[name]))
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for rtt in (float(each) for each in args.rtt.split(",")):
        with DelayedMinio(tmpfs_dir("s3bulk-bench-minio-"), rtt) as minio:
            env = clean_env(minio.client_env()) | {"OBJECTS": str(args.objects)}
            direct = env | {"AWS_ENDPOINT_URL": minio.minio.endpoint}
            subprocess.run([sys.executable, "-c", seed_script(args.objects, size)], env=direct, check=True)
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
            for run in range(args.runs):
                order = chosen[run % len(chosen) :] + chosen[: run % len(chosen)]
                for name in order:
                    script = scratch / f"{name.replace(' ', '_')}.py"
                    result = measure([sys.executable, str(script)], env, name, "map")
                    if result.returncode != 0:
                        raise SystemExit(f"{name} failed: exit {result.returncode}")
                    runs[name].append(
                        {"seconds": result.seconds, "cpu": result.cpu_seconds, "rss": result.peak_rss_mib}
                    )
                    print(
                        f"rtt {rtt:g} run {run + 1} {name:16} {result.seconds:7.2f}s "
                        f"{args.objects / result.seconds:7.0f} obj/s CPU {result.cpu_seconds:6.2f}s "
                        f"peak RSS {result.peak_rss_mib:6.1f} MiB",
                        flush=True,
                    )
            label = f"{rtt:g} ms RTT ({minio.describe()})"
            summary[label] = {
                name: {
                    field: statistics.median(each[field] for each in values)
                    for field in ("seconds", "cpu", "rss")
                }
                for name, values in runs.items()
            }
    print(f"\n{args.objects:,} objects of {args.size}, zlib 6 + SHA-256 each; medians of {args.runs}\n")
    for label, rows in summary.items():
        fastest_peer = min(row["seconds"] for name, row in rows.items() if name != "s3bulk.map")
        print(f"{label}\n\n| program | obj/s | CPU s | peak RSS MiB | ÷ fastest peer |")
        print("|---|---:|---:|---:|---:|")
        for name, row in rows.items():
            rate = args.objects / row["seconds"]
            ratio = fastest_peer / row["seconds"]
            print(f"| {name} | {rate:,.0f} | {row['cpu']:.2f} | {row['rss']:.0f} | {ratio:.2f}x |")
        print()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(
        json.dumps({"objects": args.objects, "size": size, "medians": summary}, indent=1)
    )


def seed_script(count: int, size: int) -> str:
    return (
        "import boto3, os\nfrom concurrent.futures import ThreadPoolExecutor\n"
        "from botocore.config import Config\n"
        "s3 = boto3.client('s3', config=Config(max_pool_connections=32))\n"
        "s3.create_bucket(Bucket='bench')\n"
        f"with ThreadPoolExecutor(32) as pool: list(pool.map(lambda n: s3.put_object(Bucket='bench', "
        f"Key=f'objects/{{n:06d}}', Body=os.urandom({size})), range({count})))\n"
    )


def memory_by_count(counts: list[int], runs: int) -> None:
    """Peak summed RSS of `s3bulk.map` as the object count grows: flat when memory is bounded by
    the byte budget and the in-flight limit, not by the count (issue 22)."""
    scratch = tmpfs_dir("s3bulk-bench-map-")
    script = scratch / "s3bulk_map.py"
    script.write_text(COMMON + textwrap.dedent(PROGRAMS["s3bulk.map"]))
    rows = []
    for count in counts:
        with DelayedMinio(tmpfs_dir("s3bulk-bench-minio-"), 0) as minio:
            env = clean_env(minio.client_env()) | {"OBJECTS": str(count)}
            direct = env | {"AWS_ENDPOINT_URL": minio.minio.endpoint}
            subprocess.run([sys.executable, "-c", seed_script(count, 1024)], env=direct, check=True)
            found = [measure([sys.executable, str(script)], env, "s3bulk.map", "map") for _ in range(runs)]
            if any(result.returncode for result in found):
                raise SystemExit("s3bulk.map failed")
            rss = statistics.median(result.peak_rss_mib for result in found)
            rate = count / statistics.median(result.seconds for result in found)
            print(f"{count:,} objects: peak RSS {rss:.1f} MiB, {rate:,.0f} obj/s", flush=True)
            rows.append((count, rss, rate))
    print(f"\n| objects (1 KiB) | s3bulk.map peak RSS MiB (median of {runs}) | obj/s |\n|---:|---:|---:|")
    for count, rss, rate in rows:
        print(f"| {count:,} | {rss:.0f} | {rate:,.0f} |")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
