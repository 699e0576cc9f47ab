"""`vectors export` against the obvious boto3 script, same run, interleaved, medians of N, whole
process (wall, CPU of the tree, peak RSS of the tree), on the S3 Vectors stand-in (its own
process, limits lifted: export reads, and the service publishes no ListVectors rate).

    uv run python bench/bench_vectors_export.py [--vectors 200000,50000] [--runs 3] [--boto3-max N]

The boto3 script is what the ListVectors documentation leads to: one paginator over the index
with data and metadata, rows gathered in lists, written as one Parquet file at the end. Each
index size runs in turn, so peak memory against the index's size shows which tool stays flat.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

from s3bulk._benchmark.measure import clean_env, measure
from s3bulk.testing.vectorstandin import VectorsStandInServer

DIMENSION = 1024
ROOT = Path(__file__).resolve().parent

BOTO3 = textwrap.dedent(
    """
    import os, sys, boto3, pyarrow as pa, pyarrow.parquet as pq, json
    endpoint, region = os.environ["AWS_ENDPOINT_URL_S3VECTORS"], os.environ["AWS_REGION"]
    client = boto3.client("s3vectors", endpoint_url=endpoint, region_name=region)
    keys, data, metadata = [], [], []
    pages = client.get_paginator("list_vectors").paginate(
        vectorBucketName="bench", indexName=sys.argv[1], returnData=True, returnMetadata=True
    )
    for page in pages:
        for vector in page["vectors"]:
            keys.append(vector["key"])
            data.append(vector["data"]["float32"])
            metadata.append(json.dumps(vector.get("metadata")))
    table = pa.table({"key": keys, "vector": data, "metadata": metadata})
    pq.write_table(table, sys.argv[2])
    print(len(keys))
    """
)


async def load(endpoint: str, index: str, count: int) -> None:
    """`count` random vectors into a new index, straight through the wire client (no limits)."""
    from s3bulk._config import AwsSettings
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.payload import put_vectors_body

    client = VectorsClient(AwsSettings.from_env(vectors_endpoint_url=endpoint))
    rng = np.random.default_rng(5)
    try:
        await client.create_index("bench", index, DIMENSION)
        pending: set[asyncio.Task[None]] = set()
        for start in range(0, count, 500):
            rows = min(500, count - start)
            vectors = rng.standard_normal((rows, DIMENSION)).astype(np.float32)
            keys = [f"doc-{n:08d}" for n in range(start, start + rows)]
            metadata = [{"lang": "en" if n % 2 else "fr", "n": n} for n in range(start, start + rows)]
            body = put_vectors_body("bench", index, keys, vectors, metadata)
            pending.add(asyncio.ensure_future(client.put_vectors(body)))
            if len(pending) >= 8:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.gather(*pending)
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", default="200000,50000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tools", default="s3bulk vectors export,boto3 paginator")
    parser.add_argument(
        "--boto3-max", type=int, default=0, help="run the boto3 script only on indexes this large or smaller"
    )
    parser.add_argument("--output", default=str(ROOT / "out" / "vectors_export.json"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="s3bulk-bench-export-"))
    results: dict[str, dict[str, dict[str, float]]] = {}
    with VectorsStandInServer(vectors_per_second=0, requests_per_second=0) as server:
        env = clean_env(server.client_env())
        os.environ.update(server.client_env())
        from s3bulk._config import AwsSettings
        from s3bulk._stores.vectors import VectorsClient

        async def bucket() -> None:
            client = VectorsClient(AwsSettings.from_env(vectors_endpoint_url=server.endpoint))
            await client.create_vector_bucket("bench")
            await client.close()

        asyncio.run(bucket())
        s3bulk = [sys.executable, "-m", "s3bulk"]
        tools = {
            "s3bulk vectors export": lambda index, out: [
                *s3bulk,
                "vectors",
                "export",
                str(out),
                "--bucket",
                "bench",
                "--index",
                index,
                "-q",
            ],
            "boto3 paginator": lambda index, out: [
                sys.executable,
                "-c",
                BOTO3,
                index,
                str(out / "all.parquet"),
            ],
        }
        for count in (int(each) for each in args.vectors.split(",")):
            index = f"i{count}"
            asyncio.run(load(server.endpoint, index, count))
            chosen = [
                tool
                for tool in args.tools.split(",")
                if not (tool.startswith("boto3") and args.boto3_max and count > args.boto3_max)
            ]
            runs: dict[str, list[tuple[float, float, float]]] = {tool: [] for tool in chosen}
            for round_ in range(args.runs):
                order = chosen[round_ % len(chosen) :] + chosen[: round_ % len(chosen)]
                for tool in order:
                    out = work / f"{index}-{round_}-{tool.split()[0]}"
                    if tool.startswith("boto3"):
                        out.mkdir(parents=True)
                    run = measure(tools[tool](index, out), env, tool, index)
                    if run.returncode != 0:
                        raise SystemExit(f"{tool} failed: {run.stdout}")
                    runs[tool].append((run.seconds, run.cpu_seconds, run.peak_rss_mib))
                    shutil.rmtree(out, ignore_errors=True)
            label = f"{count:,} x {DIMENSION}"
            results[label] = {}
            print(label)
            for tool, samples in runs.items():
                wall, cpu, rss = (statistics.median(each[n] for each in samples) for n in range(3))
                results[label][tool] = {
                    "wall": wall,
                    "cpu": cpu,
                    "rss_mib": rss,
                    "vectors_per_second": count / wall,
                }
                rate = count / wall
                print(
                    f"  {tool:24s} {wall:7.2f} s wall {cpu:7.2f} s CPU {rss:8.1f} MiB {rate:9,.0f} vectors/s"
                )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
