"""Does `vectors put` hold an index's published write limit for minutes without bursts of 429s?
The S3 Vectors stand-in (its own process) enforces 2,500 vectors/s and 1,000 requests/s per
index, as the service publishes them, and counts what it accepted in each second and what it
refused; `vectors put` runs at its defaults against it.

    uv run python bench/bench_vectors_rate.py [--minutes 10] [--dimension 128]

Prints the per-second rate the stand-in accepted (median, 5th and 95th percentiles, lowest and
highest, first and last seconds left out as the ramp), the 429s it answered and when, and the
client's whole-process CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from s3bulk._benchmark.measure import clean_env, measure
from s3bulk.testing.vectorstandin import VectorsStandInServer

ROOT = Path(__file__).resolve().parent
RATE = 2500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--dimension", type=int, default=128)
    parser.add_argument("--output", default=str(ROOT / "out" / "vectors_rate.json"))
    args = parser.parse_args()
    rows = int(args.minutes * 60 * RATE)
    work = Path(tempfile.mkdtemp(prefix="s3bulk-bench-rate-"))
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((rows, args.dimension)).astype(np.float32)
    table = pa.table(
        {
            "key": [f"k{n:09d}" for n in range(rows)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), args.dimension),
        }
    )
    pq.write_table(table, work / "rows.parquet", row_group_size=100_000)
    del vectors, table
    with VectorsStandInServer(vectors_per_second=RATE, requests_per_second=1000) as server:
        env = clean_env(server.client_env())
        s3bulk = [sys.executable, "-m", "s3bulk"]
        subprocess.run(
            [*s3bulk, "vectors", "create-bucket", "bench"], env=env, check=True, capture_output=True
        )
        create = [
            "vectors",
            "create-index",
            "--bucket",
            "bench",
            "--index",
            "i",
            "--dimension",
            str(args.dimension),
        ]
        subprocess.run([*s3bulk, *create], env=env, check=True, capture_output=True)
        run = measure(
            [
                *s3bulk,
                "vectors",
                "put",
                str(work / "rows.parquet"),
                "--bucket",
                "bench",
                "--index",
                "i",
                "-q",
            ],
            env,
            "s3bulk vectors put",
            "rate",
        )
        stats = server.stats()
    written = {int(second): count for second, count in stats["written"]["i"].items()}
    seconds = sorted(written)
    steady = [written.get(second, 0) for second in range(seconds[0] + 2, seconds[-1] - 1)]
    quantiles = statistics.quantiles(steady, n=20)
    result = {
        "vectors": rows,
        "wall_seconds": run.seconds,
        "client_cpu_seconds": run.cpu_seconds,
        "peak_rss_mib": run.peak_rss_mib,
        "seconds_measured": len(steady),
        "per_second_median": statistics.median(steady),
        "per_second_p5": quantiles[0],
        "per_second_p95": quantiles[-1],
        "per_second_min": min(steady),
        "per_second_max": max(steady),
        "throttled": stats["throttled"],
        "most_429s_in_a_second": max((stats.get("refused", {}).get("i") or {"0": 0}).values()),
        "seconds_with_429s": len(stats.get("refused", {}).get("i") or {}),
        "mean_rate": rows / run.seconds,
    }
    print(json.dumps(result, indent=2))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
