"""fsspec's bulk calls, as pandas/xarray/dask users make them, on s3bulk's filesystem
(`s3bulk://`) against s3fs, obstore's fsspec adapter and the matching s3bulk command, same run,
interleaved, medians of N, whole process (wall, CPU, peak RSS of the process tree).

    uv run python bench/bench_fsspec.py [--runs 3] [--rtt 0,20] [--small 10000] [--large 2000]

Workloads: `fs.get(prefix, dir, recursive=True)` of SMALL x 4 KiB and LARGE x 1 MiB, `fs.put` of
the same trees, `fs.find` of 100,000 keys (the listing data set bench_transfers.py keeps in
.tools/, else the SMALL keys), `fs.cat_ranges` of 5,000 ranges, `fs.rm` of SMALL. The tools take
turns in a new order each round. obstore's adapter is left out of `get` of a prefix: it fetches
the directories' names as objects (404).
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

from s3bulk._benchmark.measure import clean_env, measure, tmpfs_dir
from s3bulk._benchmark.network import DelayedMinio

ROOT = Path(__file__).resolve().parent
LISTING = ROOT.parent / ".tools" / "bench-minio-100000"  # bench_transfers.py's 100,000 keys, kept
UNSUPPORTED = {("obstore fsspec", "get")}  # fails: GETs each directory's name (404)

FILESYSTEMS = {
    "s3bulk fsspec": "import fsspec; fs = fsspec.filesystem('s3bulk'); P = ''",
    "s3fs": ("import os, s3fs; fs = s3fs.S3FileSystem(endpoint_url=os.environ['AWS_ENDPOINT_URL']); P = ''"),
    "obstore fsspec": (
        "import os; from obstore.fsspec import FsspecStore; "
        "fs = FsspecStore('s3', endpoint=os.environ['AWS_ENDPOINT_URL'], "
        "region=os.environ.get('AWS_REGION', 'us-east-1'), client_options={'allow_http': True}); P = ''"
    ),
}
CALLS = {
    "get": "fs.get('bench/{tree}', os.environ['OUT'] + '/', recursive=True)",
    "put": "fs.put(os.environ['TREE'], 'bench/put-' + os.environ['RUN'], recursive=True)",
    "find": "assert len(fs.find('bench/' + os.environ['MANY'])) == int(os.environ['MANY_COUNT'])",
    "cat_ranges": (
        "names = sorted(fs.find('bench/small'))[:5000]; "
        "got = fs.cat_ranges(names, [100] * len(names), [200] * len(names)); assert len(got) == len(names)"
    ),
    "rm": "fs.rm('bench/put-' + os.environ['RUN'], recursive=True)",
    "read_parquet": (
        "import pandas as pd; frame = pd.read_parquet('bench/parquet/{tree}', filesystem=fs); "
        "assert len(frame) == int(os.environ['ROWS_' + '{tree}'.upper()])"
    ),
}
COMMANDS = {  # the matching s3bulk command, where one matches
    "get": ["cp", "s3://bench/{tree}/", "{out}/"],
    "put": ["cp", "{tree_dir}/", "s3://bench/put-{run}/"],
    "find": ["ls", "-r", "s3://bench/{many}/"],
    "rm": ["rm", "s3://bench/put-{run}/"],
}


def make_tree(directory: Path, count: int, size: int) -> None:
    for n in range(count):
        sub = directory / f"d{n % 100:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{n:06d}").write_bytes(os.urandom(size))


def make_parquet(directory: Path) -> dict[str, int]:
    """One file of 256 MiB of float64s, and 200 files of 1 MiB: rows in each set."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    (directory / "many").mkdir(parents=True, exist_ok=True)
    one = 32 * 1024 * 1024
    pq.write_table(
        pa.table({"x": rng.standard_normal(one)}), directory / "one.parquet", row_group_size=1 << 20
    )
    each = 128 * 1024
    for n in range(200):
        pq.write_table(pa.table({"x": rng.standard_normal(each)}), directory / f"many/part-{n:03d}.parquet")
    return {"ROWS_ONE.PARQUET": one, "ROWS_MANY": 200 * each}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rtt", default="0")
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=2_000)
    parser.add_argument("--workloads", default="get-small,get-large,put-small,find,cat_ranges,rm")
    parser.add_argument("--tools", default=",".join([*FILESYSTEMS, "s3bulk command"]))
    parser.add_argument("--output", default=str(ROOT / "out" / "fsspec.json"))
    args = parser.parse_args()
    tools = args.tools.split(",")
    work = tmpfs_dir("s3bulk-bench-fsspec-")
    trees = {"small": (args.small, 4096), "large": (args.large, 1024 * 1024)}
    for name, (count, size) in trees.items():
        make_tree(work / "trees" / name, count, size)
    results: dict[str, dict[str, dict[str, float]]] = {}
    s3bulk = [sys.executable, "-m", "s3bulk"]
    kept = (LISTING / ".ready").exists()
    for rtt in (float(each) for each in args.rtt.split(",")):
        with DelayedMinio(LISTING if kept else tmpfs_dir("s3bulk-bench-minio-"), rtt) as minio:
            env = clean_env(minio.client_env())
            env["SMALL"] = str(args.small)
            env["MANY"], env["MANY_COUNT"] = ("many", "100000") if kept else ("small", str(args.small))
            subprocess.run([*s3bulk, "mb", "s3://bench"], env=env, capture_output=True)  # kept: exists
            for name in trees:
                subprocess.run(
                    [*s3bulk, "cp", f"{work}/trees/{name}/", f"s3://bench/{name}/", "-q"], env=env, check=True
                )
            if "read_parquet" in args.workloads:
                env |= {name: str(rows) for name, rows in make_parquet(work / "parquet").items()}
                subprocess.run(
                    [*s3bulk, "cp", f"{work}/parquet/", "s3://bench/parquet/", "-q"], env=env, check=True
                )
            label = f"{rtt:g} ms RTT ({minio.describe()})"
            runs: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
            for round_ in range(args.runs):
                for workload in args.workloads.split(","):
                    call, _, tree = workload.partition("-")
                    tree = tree or "small"
                    turn = tools[round_ % len(tools) :] + tools[: round_ % len(tools)]
                    for tool in turn:
                        if (tool, call) in UNSUPPORTED:
                            continue
                        run = f"{round_}-{tool.replace(' ', '_')}"
                        out = Path(tempfile.mkdtemp(dir=work))
                        if call == "rm":  # something to delete: the put's objects, placed by s3bulk
                            subprocess.run(
                                [*s3bulk, "cp", f"{work}/trees/small/", f"s3://bench/put-{run}/", "-q"],
                                env=env,
                                check=True,
                            )
                        case = env | {"OUT": str(out), "TREE": f"{work}/trees/{tree}", "RUN": run}
                        if tool == "s3bulk command":
                            if call not in COMMANDS:
                                continue
                            places = {
                                "tree": tree,
                                "out": out,
                                "tree_dir": f"{work}/trees/{tree}",
                                "run": run,
                            }
                            words = [word.format(**places, many=env["MANY"]) for word in COMMANDS[call]]
                            command = [*s3bulk, *words, *(["-q"] if call != "find" else [])]
                        else:
                            program = f"import os\n{FILESYSTEMS[tool]}\n{CALLS[call].format(tree=tree)}"
                            command = [sys.executable, "-c", program]
                        done = measure(command, case, tool, workload)
                        if done.returncode == 0:
                            runs.setdefault(workload, {}).setdefault(tool, []).append(
                                (done.seconds, done.cpu_seconds, done.peak_rss_mib)
                            )
                        shutil.rmtree(out, ignore_errors=True)
                        if call == "put":
                            subprocess.run(
                                [*s3bulk, "rm", f"s3://bench/put-{run}/", "-q"], env=env, capture_output=True
                            )
            results[label] = {}
            print(label)
            for workload, by_tool in runs.items():
                results[label][workload] = {}
                print(f"  {workload}")
                for tool, samples in by_tool.items():
                    wall = statistics.median(s[0] for s in samples)
                    cpu = statistics.median(s[1] for s in samples)
                    peak = statistics.median(s[2] for s in samples)
                    results[label][workload][tool] = {
                        "wall": wall,
                        "cpu": cpu,
                        "peak_mib": peak,
                        "n": len(samples),
                    }
                    print(f"    {tool:<16} {wall:7.2f} s wall {cpu:7.2f} s CPU {peak:7.1f} MiB")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"runs": args.runs, "results": results}, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
