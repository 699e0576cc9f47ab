"""Vectors benchmark (issue 5), all in one run against moto's S3 Vectors server on loopback:

1. client CPU per 500 x 1024 PutVectors batch: boto3 `put_vectors` (rows as Python lists, as
   users write it) against s3bulk (orjson body from numpy, SigV4, aiohttp), each sent to moto,
   CPU of the client process only (moto runs in its own process);
2. end to end, vectors/s into moto for the seed's three loaders: boto3 + ThreadPoolExecutor,
   boto3 + ProcessPoolExecutor (one process per core, each reading its own row groups), and
   `s3bulk vectors put` (one process, rate limit lifted: moto does not throttle);
3. the most vectors/s one s3bulk process can build and sign (payloads/s x 500, nothing sent).

moto is a Python server on the same 2 cores, so (2) measures moto as much as the loaders: the
client CPU columns say how much of the machine each loader left to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from s3bulk._benchmark.measure import clean_env, measure
from s3bulk.testing import MotoServer

DIMENSION = 1024
BATCH = 500
ROOT = Path(__file__).resolve().parent

LOADER = textwrap.dedent(
    """
    import sys, boto3, pyarrow.parquet as pq
    from concurrent.futures import {pool}
    path, bucket, index, endpoint, workers = sys.argv[1:6]
    client = None

    def init():
        global client
        client = boto3.client("s3vectors", endpoint_url=endpoint, region_name="us-east-1")

    def load(group):
        if client is None:
            init()
        table = pq.ParquetFile(path).read_row_group(group)
        keys, vectors = table.column("key").to_pylist(), table.column("vector").to_pylist()
        for start in range(0, len(keys), 500):
            rows = zip(keys[start:start + 500], vectors[start:start + 500])
            batch = [{{"key": k, "data": {{"float32": v}}}} for k, v in rows]
            client.put_vectors(vectorBucketName=bucket, indexName=index, vectors=batch)
        return len(keys)

    if __name__ == "__main__":
        groups = range(pq.ParquetFile(path).metadata.num_row_groups)
        with {pool}(int(workers)) as pool:
            print(sum(pool.map(load, groups)))
    """
)


def boto3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3vectors", endpoint_url=endpoint, region_name="us-east-1")


def make_index(endpoint: str, bucket: str, index: str) -> None:
    client = boto3_client(endpoint)
    buckets = {entry["vectorBucketName"] for entry in client.list_vector_buckets()["vectorBuckets"]}
    if bucket not in buckets:
        client.create_vector_bucket(vectorBucketName=bucket)
    client.create_index(
        vectorBucketName=bucket,
        indexName=index,
        dataType="float32",
        dimension=DIMENSION,
        distanceMetric="cosine",
    )


def cpu_per_batch(endpoint: str, vectors: np.ndarray, batches: int) -> dict[str, list[float]]:
    """Client CPU seconds per batch, alternating boto3 and s3bulk so both see the same moto."""
    from s3bulk._config import AwsSettings
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.payload import put_vectors_body

    make_index(endpoint, "bench-cpu", "boto3")
    make_index(endpoint, "bench-cpu", "s3bulk")
    client = boto3_client(endpoint)
    keys = [f"doc-{n}" for n in range(BATCH)]
    timings: dict[str, list[float]] = {"boto3": [], "s3bulk": []}

    async def main() -> None:
        ours = VectorsClient(AwsSettings.from_env())
        try:
            await ours.put_vectors(put_vectors_body("bench-cpu", "s3bulk", keys, vectors[:BATCH]))  # warm-up
            client.put_vectors(
                vectorBucketName="bench-cpu",
                indexName="boto3",
                vectors=[
                    {"key": k, "data": {"float32": v}}
                    for k, v in zip(keys, vectors[:BATCH].tolist(), strict=True)
                ],
            )
            for number in range(batches):
                rows = vectors[(number % 4) * BATCH : (number % 4 + 1) * BATCH]
                began = time.process_time()
                batch = [{"key": k, "data": {"float32": v}} for k, v in zip(keys, rows.tolist(), strict=True)]
                client.put_vectors(vectorBucketName="bench-cpu", indexName="boto3", vectors=batch)
                timings["boto3"].append(time.process_time() - began)
                began = time.process_time()
                await ours.put_vectors(put_vectors_body("bench-cpu", "s3bulk", keys, rows))
                timings["s3bulk"].append(time.process_time() - began)
        finally:
            await ours.close()

    asyncio.run(main())
    return timings


def build_and_sign_rate(vectors: np.ndarray, seconds: float = 3.0) -> float:
    """Vectors/s one process builds and signs (what it could send if the network were free)."""
    from s3bulk._config import AwsSettings
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.payload import hashed, put_vectors_body

    client = VectorsClient(AwsSettings.from_env())
    keys = [f"doc-{n}" for n in range(BATCH)]
    url = f"{client.endpoint}/PutVectors"
    built = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        rows = vectors[(built % 4) * BATCH : (built % 4 + 1) * BATCH]
        body = hashed(put_vectors_body("bench", "idx", keys, rows))  # what a job's builder thread does
        client.sign("POST", url, {"Content-Type": "application/json"}, body.data, body_sha256=body.sha256)
        built += 1
    return built * BATCH / (time.perf_counter() - began)


def write_source(path: Path, rows: int) -> None:
    vectors = np.random.default_rng(7).standard_normal((rows, DIMENSION)).astype(np.float32)
    table = pa.table(
        {
            "key": [f"doc-{n:07d}" for n in range(rows)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION),
        }
    )
    pq.write_table(table, path, row_group_size=2500)


def end_to_end(
    endpoint: str, env: dict[str, str], source: Path, rows: int, runs: int
) -> list[dict[str, Any]]:
    scripts = Path(tempfile.mkdtemp(prefix="s3bulk-bench-vectors-"))
    for name, pool in (("threads", "ThreadPoolExecutor"), ("processes", "ProcessPoolExecutor")):
        (scripts / f"boto3_{name}.py").write_text(LOADER.format(pool=pool))
    cores = os.cpu_count() or 2
    results = []
    for run in range(runs):
        loaders = [
            ("boto3 + ThreadPoolExecutor(8)", [sys.executable, str(scripts / "boto3_threads.py")], "8"),
            (
                "boto3 + ProcessPoolExecutor",
                [sys.executable, str(scripts / "boto3_processes.py")],
                str(cores),
            ),
            ("s3bulk (one process)", None, ""),
        ]
        loaders = loaders[run % 3 :] + loaders[: run % 3]  # rotate the order between runs
        for tool, script, workers in loaders:
            index = f"e2e-{run}-{len(results)}"
            make_index(endpoint, "bench-e2e", index)
            if script is None:
                command = [
                    sys.executable,
                    "-m",
                    "s3bulk",
                    "vectors",
                    "put",
                    str(source),
                    "--bucket",
                    "bench-e2e",
                    "--index",
                    index,
                    "--vectors-per-second",
                    "1e9",
                    "--requests-per-second",
                    "1e9",
                    "--json",
                ]
            else:
                command = [*script, str(source), "bench-e2e", index, endpoint, workers]
            result = measure(command, env, tool, "put", keep_stdout=True)
            stored = count_vectors(endpoint, "bench-e2e", index)
            results.append(
                {
                    "tool": tool,
                    "run": run,
                    "seconds": result.seconds,
                    "cpu_seconds": result.cpu_seconds,
                    "vectors_per_second": rows / result.seconds,
                    "stored": stored,
                    "returncode": result.returncode,
                }
            )
            boto3_client(endpoint).delete_index(vectorBucketName="bench-e2e", indexName=index)  # frees moto
            print(
                f"  {tool}: {result.seconds:.2f}s, {rows / result.seconds:,.0f} vectors/s, "
                f"CPU {result.cpu_seconds:.2f}s, stored {stored:,}"
            )
    return results


def count_vectors(endpoint: str, bucket: str, index: str) -> int:
    reply = boto3_client(endpoint).list_vectors(vectorBucketName=bucket, indexName=index)
    return len(reply["vectors"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=10_000, help="vectors for the end-to-end loads")
    parser.add_argument("--batches", type=int, default=20, help="batches for the CPU comparison")
    parser.add_argument("--output", default=str(ROOT / "out" / "vectors.json"))
    args = parser.parse_args()

    with MotoServer() as moto:
        env = clean_env(moto.client_env())
        env["AWS_ENDPOINT_URL_S3VECTORS"] = moto.endpoint
        os.environ.update(env)
        vectors = np.random.default_rng(3).standard_normal((4 * BATCH, DIMENSION)).astype(np.float32)

        print(f"1. client CPU per {BATCH} x {DIMENSION} batch ({args.batches} each, alternating)")
        timings = cpu_per_batch(moto.endpoint, vectors, args.batches)
        cpu = {tool: statistics.median(values) for tool, values in timings.items()}
        ratio = cpu["boto3"] / cpu["s3bulk"]
        print(
            f"  boto3 {cpu['boto3'] * 1000:.1f} ms, s3bulk {cpu['s3bulk'] * 1000:.1f} ms: {ratio:.1f}x less"
        )

        print("3. build + sign only, one process")
        rates = [build_and_sign_rate(vectors) for _ in range(args.runs)]
        each = ", ".join(f"{rate:,.0f}" for rate in rates)
        print(f"  {statistics.median(rates):,.0f} vectors/s (runs: {each})")

        print(f"2. end to end: {args.rows:,} x {DIMENSION} from Parquet into moto, {args.runs} runs")
        with tempfile.TemporaryDirectory() as directory:
            source = Path(directory) / "embeddings.parquet"
            write_source(source, args.rows)
            loads = end_to_end(moto.endpoint, env, source, args.rows, args.runs)

    summary = {
        "cpu_per_batch_seconds": {tool: round(value, 4) for tool, value in cpu.items()},
        "cpu_ratio": round(cpu["boto3"] / cpu["s3bulk"], 1),
        "cpu_per_batch_runs": timings,
        "build_and_sign_vectors_per_second": rates,
        "end_to_end": loads,
        "end_to_end_median_vectors_per_second": {
            tool: statistics.median(entry["vectors_per_second"] for entry in loads if entry["tool"] == tool)
            for tool in dict.fromkeys(entry["tool"] for entry in loads)
        },
        "end_to_end_median_cpu_seconds": {
            tool: statistics.median(entry["cpu_seconds"] for entry in loads if entry["tool"] == tool)
            for tool in dict.fromkeys(entry["tool"] for entry in loads)
        },
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(summary, indent=2))
    print(
        json.dumps(
            {key: value for key, value in summary.items() if "median" in key or key == "cpu_ratio"}, indent=2
        )
    )


if __name__ == "__main__":
    main()
