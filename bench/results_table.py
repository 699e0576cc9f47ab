"""Print bench/out/transfers.json as the Markdown table in RESULTS.md: medians, ranges, ratios."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "out" / "transfers.json")
data = json.loads(path.read_text())
runs = data["runs"]
print(f"{data['date']} UTC, {data['runs_per_tool']} runs per tool, interleaved, order alternating.\n")
print(
    "| workload | objects | s5cmd s (median, range) | s3bulk s (median, range) | throughput s3bulk/s5cmd "
    "| s5cmd MiB | s3bulk MiB | memory ratio |"
)
print("|---|---|---|---|---|---|---|---|")
for row in data["summary"]:
    name = row["workload"]

    def times(tool: str, name: str = name) -> list[float]:
        return [r["seconds"] for r in runs if r["workload"] == name and r["tool"] == tool]

    def span(tool: str) -> str:
        values = times(tool)
        return f"{statistics.median(values):.2f} ({min(values):.1f}-{max(values):.1f})"

    ratio = row["s5cmd"]["seconds"] / row["s3bulk"]["seconds"]
    peer_rss, our_rss = row["s5cmd"]["peak_rss_mib"], row["s3bulk"]["peak_rss_mib"]
    print(
        f"| {name} | {row['objects']:,} | {span('s5cmd')} | {span('s3bulk')} | **{ratio:.2f}x** "
        f"| {peer_rss:.0f} | {our_rss:.0f} | {our_rss / peer_rss:.2f} |"
    )
