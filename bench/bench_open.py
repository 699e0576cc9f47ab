"""Reading one large object sequentially as a file, from Python: `s3bulk.open(url)` (ranged GETs,
the next ones in flight while one is read) against obstore's own buffered reader (one ranged GET
after another: what `s3bulk.open` was before) and boto3's streaming body, with and without RTT.
Same run, interleaved, medians of N; each reader in its own process, wall time of the read.

    uv run python bench/bench_open.py [--runs 3] [--size 256MiB] [--rtt 0,20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from s3bulk._benchmark.measure import clean_env, tmpfs_dir
from s3bulk._benchmark.network import DelayedMinio
from s3bulk._cli.options import parse_size

ROOT = Path(__file__).resolve().parent
MiB = 1024 * 1024

READERS = {
    "s3bulk.open": """
import s3bulk
with s3bulk.open(URL) as f:
    while f.read(1 << 20): pass
""",
    "obstore reader": """
import io, obstore
from s3bulk._config import AwsSettings
from s3bulk._stores.objects import ObjectFile, s3_store
store = s3_store(AwsSettings.from_env(), "bench")
with io.BufferedReader(ObjectFile(obstore.open_reader(store, "big.bin", buffer_size=8 << 20)), 8 << 20) as f:
    while f.read(1 << 20): pass
""",
    "obstore stream": """
import obstore
from s3bulk._config import AwsSettings
from s3bulk._stores.objects import s3_store
store = s3_store(AwsSettings.from_env(), "bench")
for chunk in obstore.get(store, "big.bin").stream(min_chunk_size=1 << 20): pass
""",
    "boto3 get_object": """
import boto3
body = boto3.client("s3").get_object(Bucket="bench", Key="big.bin")["Body"]
while body.read(1 << 20): pass
""",
}
TIMED = "import time; began = time.perf_counter()\n{code}\nprint(time.perf_counter() - began)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", default="256MiB")
    parser.add_argument("--rtt", default="0,20", help="round-trip times to measure, ms")
    parser.add_argument("--output", default=str(ROOT / "out" / "open.json"))
    args = parser.parse_args()
    size = parse_size(args.size, "--size")
    results: dict[str, dict[str, float]] = {}
    for rtt in (float(each) for each in args.rtt.split(",")):
        with DelayedMinio(tmpfs_dir("s3bulk-bench-minio-"), rtt) as minio:
            env = clean_env(minio.client_env())
            env["URL"] = "s3://bench/big.bin"
            setup = "import boto3, os\nc = boto3.client('s3')\nc.create_bucket(Bucket='bench')\n"
            setup += f"c.put_object(Bucket='bench', Key='big.bin', Body=os.urandom({size}))"
            subprocess.run([sys.executable, "-c", setup], env=env, check=True)
            seconds: dict[str, list[float]] = {name: [] for name in READERS}
            for _ in range(args.runs):
                for name, code in READERS.items():
                    program = TIMED.format(code=code.replace("URL", "os.environ['URL']"))
                    done = subprocess.run(
                        [sys.executable, "-c", "import os\n" + program],
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    seconds[name].append(float(done.stdout.strip().splitlines()[-1]))
            label = f"{rtt:g} ms RTT ({minio.describe()})"
            results[label] = {name: statistics.median(values) for name, values in seconds.items()}
            print(label)
            base = results[label]["obstore reader"]
            for name, median in results[label].items():
                mib_s = size / MiB / median
                print(
                    f"  {name:<18} {median:6.2f} s  {mib_s:7.0f} MiB/s  {base / median:5.2f}x obstore reader"
                )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(
        json.dumps({"size": size, "runs": args.runs, "median_seconds": results}, indent=2)
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
