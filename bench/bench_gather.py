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

from s3bulk.benchmark.measure import Results, clean_env, measure
from s3bulk.benchmark.network import DelayedMinio
from s3bulk.testing.wtk import WtkSpec, write_files

ROOT = Path(__file__).resolve().parent
DATASET = "windspeed_100m"

H5PY_S3FS = textwrap.dedent(
    """
    import json, sys
    import h5py, numpy as np, s3fs
    from multiprocessing import Pool

    endpoint, column, out, mode, *urls = sys.argv[1:]

    def read(url):
        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint})
        with fs.open(url, "rb") as handle, h5py.File(handle, "r") as h5:
            values = h5["%s"][:, int(column)]
            return values, handle.cache.miss_count, handle.cache.total_requested_bytes

    if __name__ == "__main__":
        if mode == "serial":
            results = [read(url) for url in urls]
        else:
            with Pool(len(urls)) as pool:
                results = pool.map(read, urls)
        np.save(out, np.concatenate([r[0] for r in results]))
        print(json.dumps({"requests": sum(r[1] for r in results), "bytes": sum(r[2] for r in results)}))
    """
    % DATASET
)


def link_bandwidth(env: dict[str, str], bucket: str, key: str, size: int) -> float:
    """Bytes/s of 16 concurrent 16 MiB ranged GETs through the proxy (what the link carries)."""
    import obstore

    from s3bulk.config import AwsSettings
    from s3bulk.stores.objects import s3_store

    os.environ.update(env)
    store = s3_store(AwsSettings.from_env(), bucket)
    piece = 16 * 1024**2
    starts = [n * piece for n in range(min(16, size // piece))]

    async def wave() -> float:
        began = time.perf_counter()
        got = await asyncio.gather(
            *(obstore.get_range_async(store, key, start=s, end=s + piece) for s in starts)
        )
        return sum(len(g) for g in got) / (time.perf_counter() - began)

    return statistics.median(asyncio.run(wave()) for _ in range(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--times", type=int, default=8760)
    parser.add_argument("--locations", type=int, default=50_000)
    parser.add_argument("--column", type=int, default=31_337)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
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
    print(f"{len(paths)} files, {file_bytes / 1e6:,.0f} MB, shape ({spec.times}, {spec.locations}), chunks {spec.chunks}")

    scratch = Path(tempfile.mkdtemp(prefix="s3bulk-bench-gather-"))
    server = DelayedMinio(scratch / "minio", options.rtt_ms)
    results = Results()
    facts: dict[str, float] = {}
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
        env = clean_env(server.client_env())
        print(f"network: {server.describe()}")
        urls = [f"s3://bench/wtk/{path.name}" for path in paths]
        facts["bandwidth_bytes_per_s"] = link_bandwidth(env, "bench", f"wtk/{paths[0].name}", paths[0].stat().st_size)
        print(f"link: {facts['bandwidth_bytes_per_s'] / 1e6:,.0f} MB/s through the proxy")
        script = scratch / "h5py_s3fs.py"
        script.write_text(H5PY_S3FS)
        outputs = {}
        stats: dict[str, list[dict[str, float]]] = {}
        cache = scratch / "cache"
        for run in range(options.runs):
            shutil.rmtree(cache, ignore_errors=True)
            commands = {
                "h5py+s3fs serial": [sys.executable, str(script), server.endpoint, str(options.column)],
                "h5py+s3fs process per file": [sys.executable, str(script), server.endpoint, str(options.column)],
            }
            for tool, command in commands.items():
                out = scratch / f"{tool.replace(' ', '_')}.npy"
                mode = "serial" if tool.endswith("serial") else "pool"
                done = measure([*command, str(out), mode, *urls], env, tool, "gather", keep_stdout=True)
                results.runs.append(done)
                fetched = json.loads(done.stdout.splitlines()[-1])
                stats.setdefault(tool, []).append(fetched)
                outputs[tool] = out
                print(f"run {run + 1}: {tool:28s} {done.seconds:6.2f} s  {fetched['requests']} GETs  {fetched['bytes'] / 1e6:,.0f} MB")
            for tool in ("s3bulk cold", "s3bulk warm"):
                out = scratch / f"{tool.replace(' ', '_')}.npy"
                command = [sys.executable, "-m", "s3bulk", "gather", f"s3://bench/wtk/*.h5", "-d", DATASET]
                command += ["-s", f":,{options.column}", "-o", str(out), "--json", "--cache-dir", str(cache)]
                done = measure(command, env, tool, "gather", keep_stdout=True)
                results.runs.append(done)
                summary = json.loads(done.stdout.splitlines()[-1])["summary"]
                fetched = {
                    "requests": sum(summary["requests"].get(k, 0) for k in ("GET", "GET (HDF5 metadata)")),
                    "metadata_requests": summary["requests"].get("GET (HDF5 metadata)", 0),
                    "bytes": summary["bytes_done"],
                    "job_seconds": summary["wall_seconds"],
                }
                stats.setdefault(tool, []).append(fetched)
                outputs[tool] = out
                print(
                    f"run {run + 1}: {tool:28s} {done.seconds:6.2f} s  {fetched['requests']} GETs "
                    f"({fetched['metadata_requests']} metadata)  {fetched['bytes'] / 1e6:,.1f} MB  job {fetched['job_seconds']:.2f} s"
                )
            reference = np.load(outputs["h5py+s3fs serial"])
            for tool, out in outputs.items():
                assert np.array_equal(np.load(out), reference), f"{tool} gave a different array"
        facts["proxy_cpu_seconds"] = server.proxy_cpu_seconds()
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    summary = {}
    for tool in stats:
        summary[tool] = {
            "seconds": results.median("gather", tool, "seconds"),
            "cpu_seconds": results.median("gather", tool, "cpu_seconds"),
            "peak_rss_mib": results.median("gather", tool, "peak_rss_mib"),
            **{key: statistics.median(s[key] for s in stats[tool]) for key in stats[tool][0]},
        }
    needed = summary["s3bulk warm"]["bytes"]
    ideal = needed / facts["bandwidth_bytes_per_s"] + options.rtt_ms / 1000
    serial, pool = summary["h5py+s3fs serial"]["seconds"], summary["h5py+s3fs process per file"]["seconds"]
    cold, warm = summary["s3bulk cold"]["seconds"], summary["s3bulk warm"]["seconds"]
    ratios = {
        "cold_vs_serial": serial / cold,
        "cold_vs_process_per_file": pool / cold,
        "warm_vs_serial": serial / warm,
        "warm_job_vs_ideal": summary["s3bulk warm"]["job_seconds"] / ideal,
    }
    print("\nmedians of", options.runs, "runs:")
    for tool, row in summary.items():
        print(f"  {tool:28s} " + "  ".join(f"{k} {v:,.2f}" for k, v in row.items()))
    print(f"  bytes needed {needed / 1e6:,.1f} MB; ideal {ideal:.3f} s at {facts['bandwidth_bytes_per_s'] / 1e6:,.0f} MB/s + 1 RTT")
    print("  " + "  ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    Path(options.output).parent.mkdir(parents=True, exist_ok=True)
    Path(options.output).write_text(
        json.dumps(
            {
                "files": len(paths),
                "file_bytes": file_bytes,
                "shape": [spec.times, spec.locations],
                "chunks": list(spec.chunks),
                "column": options.column,
                "rtt_ms": options.rtt_ms,
                "network": server.describe(),
                "runs": options.runs,
                "facts": facts,
                "ideal_seconds": ideal,
                "summary": summary,
                "ratios": ratios,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
