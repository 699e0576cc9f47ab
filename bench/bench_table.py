"""Print an `s3bulk bench --output` JSON file as the Markdown tables in RESULTS.md.

uv run python bench/bench_table.py bench/out/engines-copy.json [--baseline serial]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("path", type=Path)
parser.add_argument("--baseline", default="", help="ratios against this strategy (default: the first)")
args = parser.parse_args()
data = json.loads(args.path.read_text())
spec = data["spec"]
print(f"{data['date']} UTC; {spec['runs']} runs per strategy, interleaved (order rotating); medians.\n")
for rtt, network in data["networks"].items():
    rows = [row for row in data["table"] if str(row["rtt_ms"]) == rtt]
    baseline = next((r for r in rows if r["strategy"] == args.baseline), rows[0])
    print(f"**{network}**\n")
    print(
        f"| strategy | wall s (median, range) | objects/s | Gb/s | x {baseline['strategy']} | CPU s "
        "| peak MiB | proxy CPU s | ms/item build / request | in flight | verdict (s3bulk's own) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        low, high = row["seconds_range"]
        ms = row["ms_per_item"]
        stages = f"{ms['build']:.2f} / {ms['request']:.1f}" if ms else ""
        print(
            f"| {row['strategy']} | {row['seconds']:.2f} ({low:.2f}-{high:.2f}) "
            f"| {row['objects_per_second']:,.0f} | {row['gigabits_per_second']:.2f} "
            f"| **{baseline['seconds'] / row['seconds']:.2f}x** | {row['cpu_seconds']:.2f} "
            f"| {row['peak_mib']:.0f} | {row['proxy_cpu_seconds']:.2f} | {stages} "
            f"| {row['concurrency_peak'] or ''} | {row['verdict']} |"
        )
    print()
