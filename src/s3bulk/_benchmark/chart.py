"""The bench result as a PNG: objects/s per strategy, one bar per round-trip time."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def draw(spec: Any, rows: list[dict[str, Any]], networks: dict[float, str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    strategies = list(dict.fromkeys(row["strategy"] for row in rows))
    rtts = list(dict.fromkeys(row["rtt_ms"] for row in rows))
    height = 0.8 / max(1, len(rtts))
    figure, axes = plt.subplots(figsize=(8, 1.2 + 0.45 * len(strategies) * max(1, len(rtts)) ** 0.5))
    for index, rtt in enumerate(rtts):
        values = {row["strategy"]: row["objects_per_second"] for row in rows if row["rtt_ms"] == rtt}
        positions = [n + index * height for n in range(len(strategies))]
        label = "loopback" if rtt == 0 else f"{rtt:g} ms RTT"
        axes.barh(positions, [values.get(name, 0) for name in strategies], height=height, label=label)
    axes.set_yticks([n + height * (len(rtts) - 1) / 2 for n in range(len(strategies))], strategies)
    axes.invert_yaxis()
    unit = "keys/s" if spec.workload == "list" else "objects/s"
    axes.set_xlabel(f"{unit} (median of {spec.runs} runs; higher is better)")
    size = f" x {spec.size:,} B" if spec.workload != "list" else " keys"
    axes.set_title(f"s3bulk bench {spec.workload}: {spec.objects:,}{size}", fontsize=10)
    axes.legend(fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
