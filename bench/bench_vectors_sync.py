"""`vectors sync` against the obvious boto3 script, same run, interleaved, medians of N, whole
process (wall, CPU of the tree, peak RSS), on the S3 Vectors stand-in (its own process).

    uv run python bench/bench_vectors_sync.py [--vectors 100000] [--runs 3]

An index of N x 1024 vectors is loaded from a Parquet source by `s3bulk vectors put` (so it
carries content hashes); then the source is edited, 1% of rows changed and 1% gone, and each
tool makes the index equal to it again, starting from the same index state each time (the
stand-in's index is reloaded between runs by putting the original back). The stand-in's limits
are lifted (0): what is compared is the work each tool does, not the service's rate.

The boto3 script is what the API reference leads to without a content hash: list every key
(ListVectors paginator), GetVectors of every source key 100 at a time with data and metadata,
compare, put the changed rows 500 at a time, delete the gone keys 500 at a time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from s3bulk._benchmark.measure import clean_env, measure
from s3bulk.testing.vectorstandin import VectorsStandInServer

DIMENSION = 1024
ROOT = Path(__file__).resolve().parent

BOTO3 = textwrap.dedent(
    """
    import os, sys, boto3, numpy as np, pyarrow.parquet as pq
    endpoint, region = os.environ["AWS_ENDPOINT_URL_S3VECTORS"], os.environ["AWS_REGION"]
    client = boto3.client("s3vectors", endpoint_url=endpoint, region_name=region)
    index, path = sys.argv[1], sys.argv[2]
    where = {"vectorBucketName": "bench", "indexName": index}
    stored = set()
    for page in client.get_paginator("list_vectors").paginate(**where):
        stored.update(vector["key"] for vector in page["vectors"])
    table = pq.read_table(path)
    keys = table.column("key").to_pylist()
    vectors = np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    genres = table.column("genre").to_pylist()
    changed = []
    for start in range(0, len(keys), 100):
        batch = keys[start : start + 100]
        found = client.get_vectors(**where, keys=batch, returnData=True, returnMetadata=True)["vectors"]
        have = {vector["key"]: vector for vector in found}
        for offset, key in enumerate(batch):
            row = start + offset
            old = have.get(key)
            same = old is not None and np.array_equal(
                np.asarray(old["data"]["float32"], dtype=np.float32), vectors[row]
            ) and (old.get("metadata") or {}).get("genre") == genres[row]
            if not same:
                changed.append(row)
    for start in range(0, len(changed), 500):
        rows = changed[start : start + 500]
        client.put_vectors(**where, vectors=[
            {"key": keys[row], "data": {"float32": vectors[row].tolist()}, "metadata": {"genre": genres[row]}}
            for row in rows
        ])
    gone = sorted(stored - set(keys))
    for start in range(0, len(gone), 500):
        client.delete_vectors(**where, keys=gone[start : start + 500])
    print(len(changed), len(gone))
    """
)


def write_source(path: Path, keys: list[str], vectors: np.ndarray, genres: list[str]) -> None:
    table = pa.table(
        {
            "key": keys,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION),
            "genre": genres,
        }
    )
    pq.write_table(table, path, row_group_size=20_000)


def _kib(text: str) -> int:
    units = {"G": 1024**2, "M": 1024}
    return int(float(text[:-1]) * units[text[-1].upper()])


def drop_index(env: dict[str, str], index: str) -> None:
    import boto3

    client = boto3.client(
        "s3vectors",
        endpoint_url=env["AWS_ENDPOINT_URL_S3VECTORS"],
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    client.delete_index(vectorBucketName="bench", indexName=index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tools", default="s3bulk vectors sync,boto3 script")
    parser.add_argument(
        "--boto3-memory", default="", help="e.g. 16G: the boto3 script's address space (ulimit -v)"
    )
    parser.add_argument("--output", default=str(ROOT / "out" / "vectors_sync.json"))
    args = parser.parse_args()
    count = args.vectors
    work = Path(tempfile.mkdtemp(prefix="s3bulk-bench-vsync-"))
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    keys = [f"doc-{n:08d}" for n in range(count)]
    genres = [f"g{n % 11}" for n in range(count)]
    write_source(work / "original.parquet", keys, vectors, genres)
    step = 100  # 1% changed, 1% gone
    edited = vectors.copy()
    edited[0::step] += np.float32(0.5)
    keep = [n for n in range(count) if n % step != 1]
    write_source(work / "edited.parquet", [keys[n] for n in keep], edited[keep], [genres[n] for n in keep])
    del vectors, edited  # 8 GB at 1,000,000 x 1024: the tools need the machine, not this driver
    s3bulk = [sys.executable, "-m", "s3bulk"]
    runs: dict[str, list[tuple[float, float, float, dict[str, int]]]] = {
        tool: [] for tool in args.tools.split(",")
    }
    with VectorsStandInServer(vectors_per_second=0, requests_per_second=0) as server:
        env = clean_env(server.client_env())
        subprocess.run(
            [*s3bulk, "vectors", "create-bucket", "bench"], env=env, check=True, capture_output=True
        )
        limits = ["--vectors-per-second", "1000000", "--requests-per-second", "100000"]
        for round_ in range(args.runs):
            order = list(runs)[round_ % len(runs) :] + list(runs)[: round_ % len(runs)]
            for tool in order:
                index = f"i{round_}-{tool.split()[0]}"
                subprocess.run(
                    [*s3bulk, "vectors", "create-index", "--bucket", "bench", "--index", index, "--dimension",
                     str(DIMENSION)],
                    env=env, check=True, capture_output=True,
                )  # fmt: skip
                where = ["--bucket", "bench", "--index", index, "--metadata-columns", "genre", "-q", *limits]
                original, edited_path = str(work / "original.parquet"), str(work / "edited.parquet")
                subprocess.run([*s3bulk, "vectors", "put", original, *where], env=env, check=True)
                before = server.stats()["requests"]
                if tool.startswith("s3bulk"):
                    command = [*s3bulk, "vectors", "sync", edited_path, *where, "--delete"]
                else:
                    command = [sys.executable, "-c", BOTO3, index, str(work / "edited.parquet")]
                    if args.boto3_memory:
                        limit = _kib(args.boto3_memory)
                        command = ["sh", "-c", f'ulimit -v {limit} && exec "$@"', "sh", *command]
                run = measure(command, env, tool, "sync")
                after = server.stats()["requests"]
                drop_index(env, index)  # the stand-in holds every index in memory
                if run.returncode != 0:
                    print(f"  {tool} failed after {run.seconds:.1f} s, peak {run.peak_rss_mib:,.0f} MiB")
                    continue
                sent = {name: after.get(name, 0) - before.get(name, 0) for name in after}
                runs[tool].append((run.seconds, run.cpu_seconds, run.peak_rss_mib, sent))
    results = {}
    runs = {tool: samples for tool, samples in runs.items() if samples}
    print(f"sync of {count:,} x {DIMENSION}, 1% changed, 1% gone")
    for tool, samples in runs.items():
        wall, cpu, rss = (statistics.median(each[n] for each in samples) for n in range(3))
        sent = {name: value for name, value in samples[-1][3].items() if value}
        results[tool] = {"wall": wall, "cpu": cpu, "rss_mib": rss, "requests": sent}
        print(f"  {tool:20s} {wall:7.2f} s wall {cpu:7.2f} s CPU {rss:8.1f} MiB  requests {sent}")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
