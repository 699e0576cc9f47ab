"""`cp -n` of 10,000 files onto a MinIO prefix that holds half of them (issue 66): s3bulk's
conditional PUTs (If-None-Match: *, one request per object, a 412 where the object is there)
against the HEAD-then-PUT path s3bulk takes where a server ignores the condition (Garage), and
against `s5cmd cp -n`. Interleaved, the order rotating each round, medians of N runs; requests
counted by MinIO itself (its Prometheus counters), so every tool is counted the same way.

    .venv/bin/python bench/bench_conditional.py [--runs 3] [--count 10000]

The HEAD path runs s3bulk's own CLI with its probe of the destination answering "honours
nothing" (as Garage's does), by a `sitecustomize` on PYTHONPATH that every process of the job
(driver, forkserver, workers) imports at start: the code path of a server that ignores the
headers, on the same MinIO.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from s3bulk._benchmark.measure import Results, clean_env, measure, s5cmd_binary
from s3bulk.testing import MinioServer

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from bench_sync import server_requests  # noqa: E402

BIN = Path(sys.executable).parent
S3BULK = str(BIN / "s3bulk")

_IGNORES_CONDITIONS = """
from s3bulk._stores.conditional import WriteConditions
from s3bulk._stores.writes import Writes


async def _honours_nothing(self, bucket, prefix):
    return WriteConditions()


Writes.write_conditions = _honours_nothing
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--output", default=str(ROOT / "out" / "conditional.json"))
    args = parser.parse_args()
    count = args.count
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    data_dir = Path(tempfile.mkdtemp(prefix="s3bulk-bench-minio-", dir=shm))
    work = Path(tempfile.mkdtemp(prefix="s3bulk-bench-conditional-"))
    patch = work / "ignores"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(_IGNORES_CONDITIONS)
    files, half = work / "files", work / "half"
    files.mkdir()
    half.mkdir()
    block = os.urandom(args.size + 1000)
    for n in range(count):
        body = block[n % 997 : n % 997 + args.size]
        (files / f"f{n:06d}").write_bytes(body)
        if n % 2 == 0:
            (half / f"f{n:06d}").write_bytes(b"old " + body[:16])
    results = Results()
    requests: dict[str, list[dict[str, int]]] = {}
    try:
        with MinioServer(data_dir=data_dir, public_metrics=True) as minio:
            env = clean_env(minio.client_env()) | {"S3BULK_STATE_DIR": str(work / "jobs")}
            endpoint = env["AWS_ENDPOINT_URL"]
            s5 = [s5cmd_binary(), "--endpoint-url", endpoint]
            subprocess.run([*s5, "mb", "s3://bench"], env=env, check=True, capture_output=True)
            tools = {
                "s3bulk if-none-match": ([S3BULK, "cp", "-n"], env),
                "s3bulk head+put": ([S3BULK, "cp", "-n"], env | {"PYTHONPATH": str(patch)}),
                "s5cmd cp -n": ([*s5, "cp", "-n"], env),
            }
            names = list(tools)
            for index in range(args.runs):
                order = names[index % len(names) :] + names[: index % len(names)]
                for tool in order:
                    prefix = f"r{index}-{tool.split()[0]}-{tool.split()[1].replace('+', '')}"
                    subprocess.run(
                        [S3BULK, "cp", f"{half}/", f"s3://bench/{prefix}/"],
                        env=env,
                        check=True,
                        stdout=subprocess.DEVNULL,
                    )
                    command, tool_env = tools[tool]
                    source = f"{files}/*" if tool.startswith("s5cmd") else f"{files}/"
                    before = server_requests(endpoint)
                    run = measure([*command, source, f"s3://bench/{prefix}/"], tool_env, tool, "cp -n")
                    delta = {api: n for api, n in (server_requests(endpoint) - before).items() if n}
                    requests.setdefault(tool, []).append(delta)
                    results.runs.append(run)
                    kept = _kept_old(env, prefix, count)
                    print(
                        f"round {index} {tool:22} {run.seconds:7.2f}s wall {run.cpu_seconds:6.2f}s CPU "
                        f"{run.peak_rss_mib:6.1f} MiB exit {run.returncode}  {delta}  old kept {kept:,}  "
                        f"load {load()}",
                        flush=True,
                    )
        summary = {
            tool: {
                "wall_s": statistics.median(r.seconds for r in results.runs if r.tool == tool),
                "cpu_s": statistics.median(r.cpu_seconds for r in results.runs if r.tool == tool),
                "peak_rss_mib": statistics.median(r.peak_rss_mib for r in results.runs if r.tool == tool),
                "requests": requests[tool],
            }
            for tool in tools
        }
        print(json.dumps(summary, indent=1))
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(summary, indent=1))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def _kept_old(env: dict[str, str], prefix: str, count: int) -> int:
    """How many of the objects that were there before the copy still hold their old bytes (all of
    them: -n replaces none), by the sizes a listing shows (old bodies are 20 bytes)."""
    listed = subprocess.run(
        [S3BULK, "ls", "-r", "--json", f"s3://bench/{prefix}/"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    sizes = [json.loads(line)["size"] for line in listed]
    assert len(sizes) == count, len(sizes)
    return sum(1 for size in sizes if size == 20)


if __name__ == "__main__":
    main()
