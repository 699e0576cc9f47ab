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
import re
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

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


def bench_bucket(direct: dict[str, str]) -> Any:
    """A boto3 client of the server (not through the proxy), with the bucket "bench" made."""
    import boto3

    uploader = boto3.client(
        "s3",
        endpoint_url=direct["AWS_ENDPOINT_URL"],
        aws_access_key_id=direct["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=direct["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    uploader.create_bucket(Bucket="bench")
    return uploader


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
    parser.add_argument("--output", default=None)
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="--peers: the file variants to read, comma-separated"
    )
    parser.add_argument(
        "--tools",
        default="",
        help="--peers: only these tools (comma-separated, as in peer_tools: 's3bulk xarray cold,h5coro'); "
        "default all",
    )
    parser.add_argument("--no-zero-rtt", action="store_true", help="--peers: the --rtt-ms profile only")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="issue 68: h5netcdf+s3fs through xarray, h5coro, kerchunk, s3bulk gather and xarray backend, "
        "gzip/LZF/Blosc-Zstd/SZIP variants, at 0 and --rtt-ms",
    )
    options = parser.parse_args()
    if options.peers:
        options.output = options.output or str(ROOT / "out" / "gather-peers.json")
        main_peers(options)
        return
    options.output = options.output or str(ROOT / "out" / "gather.json")

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
        uploader = bench_bucket(direct)
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


# ---- issue 68: the strongest peers, 0 and 20 ms RTT, every filter variant ---------------------------
PEERS = ROOT / "gather_peers.py"
VARIANTS = ("gzip", "lzf", "blosc-zstd", "szip")
_METRIC = re.compile(r"^minio_api_requests_(total|traffic_sent_bytes)\{[^}]*\}\s+([0-9.e+]+)", re.M)


def server_counts(endpoint: str) -> tuple[int, int]:
    """(requests, bytes sent) MinIO has served so far: every tool counted the same way."""
    with urllib.request.urlopen(f"{endpoint}/minio/metrics/v3/api/requests", timeout=10) as response:
        text = response.read().decode()
    requests = sent = 0
    for kind, value in _METRIC.findall(text):
        if kind == "total":
            requests += int(float(value))
        else:
            sent += int(float(value))
    return requests, sent


def peer_tools(variant: str, only: str = "") -> list[str]:
    tools = ["s3bulk gather cold", "s3bulk gather warm", "s3bulk xarray cold", "s3bulk xarray warm"]
    if variant == "gzip":
        tools += ["s3bulk xarray by name cold", "xarray-h5netcdf-s3fs", "h5coro", "kerchunk", "vz-icechunk"]
    chosen = [tool.strip() for tool in only.split(",") if tool.strip()]
    return [tool for tool in tools if tool in chosen] if chosen else tools


def cache_name(tool: str) -> str:
    """Each s3bulk tool's own index cache (a warm run follows its own cold one)."""
    if tool.startswith("s3bulk xarray by name"):
        return "xarray-by-name"
    return tool.split()[1] if tool.startswith("s3bulk") else tool


def peer_command(
    tool: str, variant: str, column: int, out: Path, scratch: Path
) -> tuple[list[str], dict[str, str]]:
    """The command of one tool on one variant's files, and what its environment adds."""
    glob = f"s3://bench/{variant}/*.h5"
    cache = scratch / f"cache-{variant}-{cache_name(tool)}"
    if tool.startswith("s3bulk gather"):
        command = [sys.executable, "-m", "s3bulk", "gather", glob, "-d", DATASET, "-s", f":,{column}"]
        return [*command, "-o", str(out), "--json", "--cache-dir", str(cache)], {}
    urls = sorted(f"s3://bench/{variant}/{path.name}" for path in (scratch / "files" / variant).glob("*.h5"))
    if tool.startswith("s3bulk xarray by name"):
        return [sys.executable, str(PEERS), "s3bulk-xarray-by-name", str(column), str(out), *urls], {
            "S3BULK_CACHE_DIR": str(cache)
        }
    if tool.startswith("s3bulk xarray"):
        return [sys.executable, str(PEERS), "s3bulk-xarray", str(column), str(out), glob], {
            "S3BULK_CACHE_DIR": str(cache)
        }
    if tool == "kerchunk":
        return [
            sys.executable,
            str(PEERS),
            "kerchunk",
            str(column),
            str(out),
            str(scratch / "references.json"),
        ], {}
    if tool == "vz-icechunk":
        return [sys.executable, str(PEERS), tool, str(column), str(out), str(scratch / "icechunk")], {}
    return [sys.executable, str(PEERS), tool, str(column), str(out), *urls], {}


def run_peer_profile(
    name: str, endpoint_env: dict[str, str], metrics: str, options: argparse.Namespace, scratch: Path
) -> dict[str, object]:
    """Every tool on every variant, interleaved, `options.runs` rounds; medians and ratios."""
    env = clean_env(endpoint_env)
    results = Results()
    rows: dict[str, list[dict[str, float]]] = {}
    said: dict[str, str] = {}
    began = time.perf_counter()
    gzip_urls = sorted(f"s3://bench/gzip/{p.name}" for p in (scratch / "files" / "gzip").glob("*.h5"))
    shutil.rmtree(scratch / "icechunk", ignore_errors=True)
    built_peers = (("kerchunk", scratch / "references.json"), ("vz-icechunk", scratch / "icechunk"))
    for peer, built in [
        (peer, built) for peer, built in built_peers if peer in peer_tools("gzip", options.tools)
    ]:
        command = [sys.executable, str(PEERS), f"{peer}-build", "0", str(built), *gzip_urls]
        build = measure(command, env, f"{peer} build", name, keep_stdout=True)
        said[peer] = f"references built once per profile in {build.seconds:.2f} s (not in its times)"
        if build.returncode != 0:
            said[peer] = "its references could not be built (its error is in the log)"
        print(f"[{name}] {peer}: {said[peer]}")
    work = [
        (variant, tool) for variant in options.variant_list for tool in peer_tools(variant, options.tools)
    ]
    for run in range(options.runs):
        for variant in options.variant_list:  # cold means cold: no index cache
            for tool in ("gather", "xarray", "xarray-by-name"):
                shutil.rmtree(scratch / f"cache-{variant}-{tool}", ignore_errors=True)
        shift = run * 3 % len(work)
        order = work[shift:] + work[:shift]
        order.sort(key=lambda pair: pair[1].endswith("warm"))  # warm after its cold, in every round
        reference = None
        for variant, tool in order:
            label = f"{variant}: {tool}"
            out = scratch / f"{variant}-{tool.replace(' ', '_')}.npy"
            command, extra = peer_command(tool, variant, options.column, out, scratch)
            before = server_counts(metrics)
            done = measure(command, env | extra, label, name, keep_stdout=True)
            if done.returncode != 0 or not done.stdout.strip():  # what a peer cannot read is said
                said[label] = f"failed: exit {done.returncode} (its error is in the log)"
                print(f"run {run + 1}: {label:40s} FAILED")
                continue
            after = server_counts(metrics)
            last = json.loads(done.stdout.splitlines()[-1])
            job = last["summary"]["wall_seconds"] if "summary" in last else last["job_seconds"]
            row = {
                "seconds": done.seconds,
                "job_seconds": job,
                "requests": after[0] - before[0],
                "bytes": after[1] - before[1],
            }
            rows.setdefault(label, []).append(row)
            results.runs.append(done)
            values = np.load(out).reshape(-1)
            reference = values if reference is None else reference
            assert np.array_equal(values, reference), f"{label} gave a different array"
            print(
                f"run {run + 1}: {label:40s} {done.seconds:6.2f} s (job {job:5.2f} s)  "
                f"{row['requests']} requests  {row['bytes'] / 1e6:,.1f} MB"
            )
    summary = {
        label: {
            "seconds": results.median(name, label, "seconds"),
            "cpu_seconds": results.median(name, label, "cpu_seconds"),
            "peak_rss_mib": results.median(name, label, "peak_rss_mib"),
            **{key: statistics.median(row[key] for row in found) for key in found[0]},
        }
        for label, found in rows.items()
    }
    print(f"[{name}] medians of {options.runs} runs ({time.perf_counter() - began:.0f} s):")
    for label, row in summary.items():
        print(f"  {label:40s} " + "  ".join(f"{k} {v:,.2f}" for k, v in row.items()))
    return {"summary": summary, "said": said}


def ratios(summary: dict[str, dict[str, float]]) -> dict[str, float]:
    """What issue 68's goals compare, each of two tools measured in the same run."""

    def ratio(slow: str, fast: str) -> float:
        if slow in summary and fast in summary:
            return summary[slow]["seconds"] / summary[fast]["seconds"]
        return float("nan")

    found = {
        "xarray cold vs h5netcdf+s3fs": ratio("gzip: xarray-h5netcdf-s3fs", "gzip: s3bulk xarray cold"),
        "xarray cold vs kerchunk (refs built)": ratio("gzip: kerchunk", "gzip: s3bulk xarray cold"),
        "xarray cold vs h5coro": ratio("gzip: h5coro", "gzip: s3bulk xarray cold"),
        "xarray by name cold vs h5netcdf+s3fs": ratio(
            "gzip: xarray-h5netcdf-s3fs", "gzip: s3bulk xarray by name cold"
        ),
        "xarray cold vs VirtualiZarr + Icechunk (refs built)": ratio(
            "gzip: vz-icechunk", "gzip: s3bulk xarray cold"
        ),
        "gather cold vs VirtualiZarr + Icechunk (refs built)": ratio(
            "gzip: vz-icechunk", "gzip: s3bulk gather cold"
        ),
        "gather cold vs h5netcdf+s3fs": ratio("gzip: xarray-h5netcdf-s3fs", "gzip: s3bulk gather cold"),
        "gather cold vs kerchunk (refs built)": ratio("gzip: kerchunk", "gzip: s3bulk gather cold"),
        "gather cold vs h5coro": ratio("gzip: h5coro", "gzip: s3bulk gather cold"),
    }
    for variant in VARIANTS[1:]:  # the goal: a variant's time within 1.3x of gzip's
        for tool in ("gather", "xarray"):
            found[f"{variant} time / gzip time, {tool} cold"] = ratio(
                f"{variant}: s3bulk {tool} cold", f"gzip: s3bulk {tool} cold"
            )
    return found


def main_peers(options: argparse.Namespace) -> None:
    import h5py

    options.variant_list = [variant for variant in options.variants.split(",") if variant in VARIANTS]
    spec_of = {
        variant: WtkSpec(times=options.times, locations=options.locations, compression=variant)
        for variant in options.variant_list
    }
    scratch = Path(tempfile.mkdtemp(prefix="s3bulk-bench-peers-"))
    files = ROOT / "out" / f"wtk-peers-{options.files}x{options.times}x{options.locations}"
    for variant, spec in spec_of.items():
        data = files / variant
        if not data.is_dir():
            print(f"generating {options.files} {variant} files into {data} (once; kept for later runs)")
            partial = data.with_name(variant + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            write_files(partial, options.files, spec)
            partial.rename(data)
    (scratch / "files").symlink_to(files)
    sizes = {
        variant: sum(p.stat().st_size for p in (files / variant).glob("*.h5"))
        for variant in options.variant_list
    }
    print(
        f"{options.files} files a variant, {options.times} x {options.locations}, "
        f"chunks {next(iter(spec_of.values())).chunks}"
    )
    print("bytes a variant: " + ", ".join(f"{k} {v / 1e6:,.0f} MB" for k, v in sizes.items()))
    server = DelayedMinio(scratch / "minio", options.rtt_ms, public_metrics=True)
    profiles: dict[str, object] = {}
    try:
        server.start()
        direct = server.minio.client_env()
        uploader = bench_bucket(direct)
        for variant in options.variant_list:
            for path in sorted((files / variant).glob("*.h5")):
                uploader.upload_file(str(path), "bench", f"{variant}/{path.name}")
        metrics = direct["AWS_ENDPOINT_URL"]
        wanted = [(f"{options.rtt_ms:g} ms RTT", server.client_env()), ("0 ms RTT", direct)]
        for name, env in wanted[:1] if options.no_zero_rtt else wanted:
            profile = run_peer_profile(name, env, metrics, options, scratch)
            profile["ratios"] = ratios(profile["summary"])  # type: ignore[arg-type]
            print(f"[{name}] " + "  ".join(f"{k} {v:.2f}x" for k, v in profile["ratios"].items()))  # type: ignore[union-attr]
            profiles[name] = profile
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    not_measured = {
        "h5py ROS3": "h5py's wheel here has no ros3 driver ({})".format(
            ", ".join(sorted(h5py.registered_drivers()))
        ),
        "hidefix": "reads local files only (no S3)",
        "h5coro on lzf, blosc-zstd, szip": "h5coro decodes deflate and shuffle only",
    }
    Path(options.output).parent.mkdir(parents=True, exist_ok=True)
    Path(options.output).write_text(
        json.dumps(
            {
                "files": options.files,
                "shape": [options.times, options.locations],
                "chunks": list(next(iter(spec_of.values())).chunks),
                "column": options.column,
                "bytes": sizes,
                "runs": options.runs,
                "profiles": profiles,
                "not_measured": not_measured,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
