"""Gather benchmark (issue 6): one location across every year of WTK-like HDF5 files on MinIO
behind 20 ms of RTT, the seed's way and s3bulk's, in the same run, medians of N runs.

Tools, each a fresh process (start-up included, as a user runs them):
- h5py + s3fs, files one after another (the seed's serial script);
- h5py + s3fs, one process per file (the seed's `--mp`);
- `s3bulk gather`, cold (empty index cache) and warm (cached index).
Each prints the same array (checked equal) and what it fetched: requests and bytes (s3fs: its
cache's miss count and requested bytes; s3bulk: its report). The link's bandwidth through the
proxy is measured too, so warm can be set against bytes-needed / bandwidth.
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
import time
from pathlib import Path

import numpy as np

from s3bulk._arrays.gather import METADATA
from s3bulk._benchmark.measure import Results, clean_env, measure
from s3bulk._benchmark.network import DelayedMinio
from s3bulk.testing.wtk import WtkSpec, write_files

ROOT = Path(__file__).resolve().parent
DATASET = "windspeed_100m"

H5PY_S3FS = textwrap.dedent(
    """
    import json, sys, time
    import h5py, numpy as np, s3fs
    from multiprocessing import Pool

    began = time.perf_counter()  # after the imports: the job's own time, as s3bulk reports its own

    endpoint, column, out, mode, *urls = sys.argv[1:]

    def read(url):
        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint})
        with fs.open(url, "rb") as handle, h5py.File(handle, "r") as h5:
            values = h5[DATASET][:, int(column)]
            return values, handle.cache.miss_count, handle.cache.total_requested_bytes

    if __name__ == "__main__":
        if mode == "serial":
            results = [read(url) for url in urls]
        else:
            with Pool(len(urls)) as pool:
                results = pool.map(read, urls)
        np.save(out, np.concatenate([r[0] for r in results]))
        requests, fetched = sum(r[1] for r in results), sum(r[2] for r in results)
        seconds = time.perf_counter() - began
        print(json.dumps({"requests": requests, "bytes": fetched, "job_seconds": seconds}))
    """
).replace("DATASET", repr(DATASET))


def link_bandwidth(env: dict[str, str], bucket: str, key: str, streams: int) -> float:
    """Bytes/s of `streams` concurrent 16 MiB ranged GETs through the proxy."""
    import obstore

    from s3bulk._config import AwsSettings
    from s3bulk._stores.objects import s3_store

    os.environ.update(env)
    store = s3_store(AwsSettings.from_env(), bucket)
    piece = 16 * 1024**2

    async def wave() -> float:
        began = time.perf_counter()
        ranges = [(n * piece, (n + 1) * piece) for n in range(streams)]
        got = await asyncio.gather(*(obstore.get_range_async(store, key, start=a, end=b) for a, b in ranges))
        return sum(len(g) for g in got) / (time.perf_counter() - began)

    return statistics.median(asyncio.run(wave()) for _ in range(3))


def s3fs_run(script: Path, endpoint: str, column: int, out: Path, mode: str, urls: list[str]) -> list[str]:
    return [sys.executable, str(script), endpoint, str(column), str(out), mode, *urls]


def s3bulk_run(column: int, out: Path, cache: Path) -> list[str]:
    command = [sys.executable, "-m", "s3bulk", "gather", "s3://bench/wtk/*.h5", "-d", DATASET]
    return [*command, "-s", f":,{column}", "-o", str(out), "--json", "--cache-dir", str(cache)]


def run_profile(
    name: str, server: DelayedMinio, urls: list[str], options: argparse.Namespace, scratch: Path
) -> dict[str, object]:
    """All four tools, interleaved, `options.runs` times; medians and ratios."""
    env = clean_env(server.client_env())
    results = Results()
    stats: dict[str, list[dict[str, float]]] = {}
    cache = scratch / "cache"
    script = scratch / "h5py_s3fs.py"
    script.write_text(H5PY_S3FS)
    key = urls[0].removeprefix("s3://bench/")
    facts = {f"bandwidth_{n}_streams": link_bandwidth(env, "bench", key, n) for n in (1, 16)}
    print(f"\n[{name}] link: " + ", ".join(f"{k} {v / 1e6:,.0f} MB/s" for k, v in facts.items()))
    proxy_cpu = server.proxy_cpu_seconds()
    for run in range(options.runs):
        shutil.rmtree(cache, ignore_errors=True)
        outputs = {}
        groups = [["h5py+s3fs serial"], ["h5py+s3fs process per file"], ["s3bulk cold", "s3bulk warm"]]
        order = groups[run % 3 :] + groups[: run % 3]  # rotated each round; warm always after cold
        for tool in [tool for group in order for tool in group]:
            out = scratch / f"{tool.replace(' ', '_')}.npy"
            if tool.startswith("h5py"):
                mode = "serial" if tool.endswith("serial") else "pool"
                command = s3fs_run(script, server.endpoint, options.column, out, mode, urls)
            else:
                command = s3bulk_run(options.column, out, cache)
            done = measure(command, env, tool, name, keep_stdout=True)
            results.runs.append(done)
            last = json.loads(done.stdout.splitlines()[-1])
            if tool.startswith("h5py"):
                fetched = last
            else:
                summary = last["summary"]
                fetched = {
                    "requests": summary["requests"].get("GET", 0) + summary["requests"].get(METADATA, 0),
                    "metadata_requests": summary["requests"].get(METADATA, 0),
                    "bytes": summary["bytes_done"],
                    "job_seconds": summary["wall_seconds"],
                }
            stats.setdefault(tool, []).append(fetched)
            outputs[tool] = out
            print(
                f"run {run + 1}: {tool:28s} {done.seconds:6.2f} s (job {fetched['job_seconds']:5.2f} s)  "
                f"{fetched['requests']} GETs  {fetched['bytes'] / 1e6:,.1f} MB"
            )
        reference = np.load(outputs["h5py+s3fs serial"])
        for tool, out in outputs.items():
            assert np.array_equal(np.load(out), reference), f"{tool} gave a different array"
    summary: dict[str, dict[str, float]] = {}
    for tool, rows in stats.items():
        summary[tool] = {
            "seconds": results.median(name, tool, "seconds"),
            "cpu_seconds": results.median(name, tool, "cpu_seconds"),
            "peak_rss_mib": results.median(name, tool, "peak_rss_mib"),
            **{key: statistics.median(row[key] for row in rows) for key in rows[0]},
        }
    needed = summary["s3bulk warm"]["bytes"]
    ideal = needed / facts["bandwidth_16_streams"] + options.rtt_ms / 1000
    serial, pool = summary["h5py+s3fs serial"], summary["h5py+s3fs process per file"]
    cold, warm = summary["s3bulk cold"], summary["s3bulk warm"]
    ratios = {
        "cold_vs_serial": serial["seconds"] / cold["seconds"],
        "cold_vs_process_per_file": pool["seconds"] / cold["seconds"],
        "warm_vs_serial": serial["seconds"] / warm["seconds"],
        "job_cold_vs_serial": serial["job_seconds"] / cold["job_seconds"],
        "job_cold_vs_process_per_file": pool["job_seconds"] / cold["job_seconds"],
        "warm_job_vs_ideal": warm["job_seconds"] / ideal,
    }
    print(f"[{name}] medians of {options.runs} runs:")
    for tool, row in summary.items():
        print(f"  {tool:28s} " + "  ".join(f"{k} {v:,.2f}" for k, v in row.items()))
    print(f"  bytes needed {needed / 1e6:,.1f} MB: ideal {ideal:.3f} s (16 streams' bandwidth + 1 RTT)")
    print("  " + "  ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    facts["proxy_cpu_seconds"] = server.proxy_cpu_seconds() - proxy_cpu
    return {"facts": facts, "ideal_seconds": ideal, "summary": summary, "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--times", type=int, default=8760)
    parser.add_argument("--locations", type=int, default=100_000)  # the issue asks ≥ 100,000
    parser.add_argument("--column", type=int, default=31_337)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument(
        "--per-connection-mbps",
        type=int,
        default=90,
        help="second profile: cap each connection at this many MB/s (AWS: ~85-90 MB/s per request)",
    )
    parser.add_argument("--output", default=str(ROOT / "out" / "gather.json"))
    options = parser.parse_args()

    spec = WtkSpec(times=options.times, locations=options.locations)
    data = ROOT / "out" / f"wtk-{options.files}x{options.times}x{options.locations}"
    if not data.is_dir():  # generated under another name and renamed: never a half-written set
        print(f"generating {options.files} files into {data} (once; kept for later runs)")
        partial = data.with_name(data.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        write_files(partial, options.files, spec)
        partial.rename(data)
    paths = sorted(data.glob("*.h5"))[: options.files]
    file_bytes = sum(path.stat().st_size for path in paths)
    shape = (spec.times, spec.locations)
    print(f"{len(paths)} files, {file_bytes / 1e6:,.0f} MB; dataset {shape} {spec.dtype}")
    print(f"chunks {spec.chunks}, gzip + shuffle; selection ':,{options.column}' (one location, all years)")

    scratch = Path(tempfile.mkdtemp(prefix="s3bulk-bench-gather-"))
    server = DelayedMinio(scratch / "minio", options.rtt_ms)
    profiles = {}
    try:
        server.start()
        direct = server.minio.client_env()
        import boto3

        uploader = boto3.client(
            "s3",
            endpoint_url=direct["AWS_ENDPOINT_URL"],
            aws_access_key_id=direct["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=direct["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )
        uploader.create_bucket(Bucket="bench")
        for path in paths:
            uploader.upload_file(str(path), "bench", f"wtk/{path.name}")
        urls = [f"s3://bench/wtk/{path.name}" for path in paths]
        network = server.describe()
        print(f"network: {network}")
        rtt = f"{options.rtt_ms:g} ms RTT"
        profiles[rtt] = run_profile(rtt, server, urls, options, scratch)
        if options.per_connection_mbps and server.proxy is not None:
            server.proxy.toxic("minio", "bandwidth", "downstream", rate=options.per_connection_mbps * 1000)
            capped = f"{rtt}, {options.per_connection_mbps} MB/s per connection"
            profiles[capped] = run_profile(capped, server, urls, options, scratch)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    Path(options.output).parent.mkdir(parents=True, exist_ok=True)
    Path(options.output).write_text(
        json.dumps(
            {
                "files": len(paths),
                "file_bytes": file_bytes,
                "shape": [spec.times, spec.locations],
                "chunks": list(spec.chunks),
                "column": options.column,
                "network": network,
                "runs": options.runs,
                "profiles": profiles,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
