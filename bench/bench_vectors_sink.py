"""`vectors put` against the lean reference (bench/vectors_lean.py), both into a stand-in S3
Vectors endpoint that answers at once (bench/vectors_sink, Go), so the loaders are what is
measured: vectors/s, CPU of the process tree, peak summed RSS of the tree. Same run,
interleaved, medians of N (issue 19, goal 5), with and without `--content-hash` (issue 63: the
sink's index does not declare the hash's key, as most indexes do not, so a put adds it only
when asked).

    uv run python bench/bench_vectors_sink.py [--runs 3] [--files 20] [--rows 5000] [--sink PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from s3bulk._benchmark.measure import clean_env, measure

ROOT = Path(__file__).resolve().parent
SINK = ROOT.parent / ".tools" / "bin" / "vectors-sink"
DIMENSION = 1024


def build_sink(sink: Path = SINK) -> Path:
    source = ROOT / "vectors_sink" / "main.go"
    if not sink.exists() or sink.stat().st_mtime < source.stat().st_mtime:
        sink.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(sink), "."], cwd=source.parent, check=True)
    return sink


def write_sources(directory: Path, files: int, rows: int) -> None:
    rng = np.random.default_rng(7)
    for number in range(files):
        vectors = rng.standard_normal((rows, DIMENSION)).astype(np.float32)
        keys = [f"doc-{number:03d}-{row:06d}" for row in range(rows)]
        table = pa.table(
            {"key": keys, "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION)}
        )
        pq.write_table(table, directory / f"part-{number:03d}.parquet", row_group_size=2500)


def stored(endpoint: str) -> int:
    with urllib.request.urlopen(f"{endpoint}/count") as reply:
        return int(reply.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows", type=int, default=5000, help="vectors per file")
    parser.add_argument("--output", default=str(ROOT / "out" / "vectors_sink.json"))
    parser.add_argument("--sink", default=str(SINK), help="where the Go sink is built")
    args = parser.parse_args()
    total = args.files * args.rows
    work = Path(tempfile.mkdtemp(prefix="s3bulk-bench-vectors-"))
    sink = subprocess.Popen(
        [str(build_sink(Path(args.sink))), "-dimension", str(DIMENSION)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert sink.stdout is not None
        endpoint = sink.stdout.readline().strip()
        write_sources(work, args.files, args.rows)
        env = clean_env(
            {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1"}
        )
        env["AWS_ENDPOINT_URL_S3VECTORS"] = endpoint
        put = [
            sys.executable, "-m", "s3bulk", "vectors", "put", str(work), "--bucket", "b", "--index", "i",
            "--vectors-per-second", "1e9", "--requests-per-second", "1e9",
        ]  # fmt: skip
        tools = {
            "lean reference": [sys.executable, str(ROOT / "vectors_lean.py"), str(work), "b", "i", endpoint],
            "s3bulk": put,
            "s3bulk hashed": [*put, "--content-hash"],
        }
        runs: list[dict[str, float | str]] = []
        for run in range(args.runs):
            order = list(tools.items())[run % 3 :] + list(tools.items())[: run % 3]  # each first in turn
            for tool, command in order:
                before = stored(endpoint)
                result = measure(command, env, tool, "vectors put")
                arrived = stored(endpoint) - before
                runs.append(
                    {
                        "tool": tool,
                        "seconds": result.seconds,
                        "vectors_per_second": total / result.seconds,
                        "cpu_seconds": result.cpu_seconds,
                        "peak_rss_mib": result.peak_rss_mib,
                        "stored": arrived,
                    }
                )
                rate = total / result.seconds
                print(
                    f"run {run + 1} {tool:15} {result.seconds:6.2f}s {rate:8,.0f} vectors/s CPU "
                    f"{result.cpu_seconds:6.2f}s peak RSS {result.peak_rss_mib:6.1f} MiB stored {arrived:,}",
                    flush=True,
                )
                if arrived != total:
                    raise SystemExit(f"{tool} stored {arrived:,} of {total:,} vectors")
    finally:
        sink.terminate()
        sink.wait()
        shutil.rmtree(work, ignore_errors=True)
    fields = ("vectors_per_second", "cpu_seconds", "peak_rss_mib")
    medians = {
        tool: {
            field: statistics.median(float(r[field]) for r in runs if r["tool"] == tool) for field in fields
        }
        for tool in tools
    }
    spans = {
        tool: {field: [float(r[field]) for r in runs if r["tool"] == tool] for field in fields}
        for tool in tools
    }
    lean = medians["lean reference"]
    print(f"\n{total:,} x {DIMENSION} from {args.files} Parquet files into a sink that answers at once")
    print(f"medians of {args.runs} (min-max)")
    for tool, row in medians.items():
        rate, cpu, rss = (spans[tool][field] for field in fields)
        print(
            f"  {tool:15} {row['vectors_per_second']:8,.0f} vectors/s ({min(rate):,.0f}-{max(rate):,.0f})  "
            f"CPU {row['cpu_seconds']:6.2f}s ({min(cpu):.2f}-{max(cpu):.2f})  "
            f"RSS {row['peak_rss_mib']:6.1f} MiB ({min(rss):.0f}-{max(rss):.0f})"
        )
    for tool in ("s3bulk", "s3bulk hashed"):
        ours = medians[tool]
        print(
            f"  {tool} / lean: {ours['vectors_per_second'] / lean['vectors_per_second']:.2f}x vectors/s, "
            f"{ours['cpu_seconds'] / lean['cpu_seconds']:.2f}x CPU, "
            f"{ours['peak_rss_mib'] / lean['peak_rss_mib']:.2f}x peak RSS"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"runs": runs, "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
