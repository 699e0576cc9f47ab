"""`make reliability`: run the reliability scenarios and write RELIABILITY.md from what they measured.

The scenarios are the test suite's own (tests/test_faults.py, test_crashes.py,
test_reliability.py, test_ray.py's killed worker and driver, and the bad-input tests): each
records its figures through the `reliability` fixture when S3BULK_RELIABILITY_OUT names a file.
Here the network faults run several rounds, the crash tests run S3BULK_CRASH_TRIALS seeded trials
per job kind, and every bad-input check is listed with its pass/fail from pytest's JUnit report.
A scenario that fails still gets its row (the figures say what went wrong) and the script exits
non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "reliability"

# Checks without figures of their own: what each proves, and the test that proves it.
CHECKS = [
    (
        "keys with '..', absolute paths, 300-byte segments",
        "tests/test_cp.py::test_hostile_keys_are_refused_and_nothing_escapes",
    ),
    (
        "any key (NUL bytes, '.', '..', empty and 256-byte segments; hypothesis, 400"
        " examples) maps below the destination or is refused",
        "tests/test_urls.py::test_any_key_maps_below_the_destination_or_is_refused",
    ),
    (
        "Unicode normalisation twins stay two objects and two files",
        "tests/test_reliability.py::test_unicode_normalisation_twins_stay_two_objects_and_two_files",
    ),
    (
        "symbolic links: outside the tree, loops, dangling; --follow-symlinks",
        "tests/test_cp.py::test_symlinks_are_skipped_unless_followed_and_loops_never_are",
    ),
    (
        "a destination file that appears during its download is left alone",
        "tests/test_reliability.py::test_a_file_that_appears_during_its_download_is_left_alone",
    ),
    (
        "a full disk stops the job; --resume finishes it",
        "tests/test_reliability.py::test_a_full_disk_stops_the_download_and_resume_finishes_it",
    ),
    (
        "an unreadable file fails alone, the rest is uploaded",
        "tests/test_cp.py::test_unreadable_local_file_fails_alone",
    ),
    (
        "malformed and truncated Parquet, unknown index/column/options: one line, exit 2, nothing stored",
        "tests/test_vectors_load.py::test_bad_input_is_refused_before_anything_is_sent",
    ),
    (
        "vectors with NaN/Inf, wrong dimension, oversized metadata, bad keys: each rule's exact reason",
        "tests/test_vectors_load.py::test_every_rule_rejects_its_rows_with_the_reason",
    ),
    (
        "a dimension that differs from the index's",
        "tests/test_vectors_load.py::test_dimension_mismatch_with_the_index_is_named",
    ),
    (
        "malformed URLs name the problem",
        "tests/test_urls.py::test_malformed_locations_name_the_problem",
    ),
    (
        "any text as a location parses or is a one-line usage error (hypothesis)",
        "tests/test_urls.py::test_any_text_parses_or_is_refused_with_a_usage_error",
    ),
    (
        "unknown flags and conflicting options: one line, exit 2",
        "tests/test_cp.py::test_bad_input_is_one_line_and_exit_2",
    ),
    (
        "wrong credentials never print the secret",
        "tests/test_cp.py::test_wrong_credentials_never_print_the_secret",
    ),
    (
        "the secret key appears in no output, --json, journal or job listing; --no-verify-ssl warns",
        "tests/test_reliability.py::test_the_secret_key_appears_nowhere",
    ),
]
ONCE = [
    "tests/test_crashes.py",
    "tests/test_reliability.py",
    "tests/test_ray.py::test_a_killed_ray_worker_is_replaced_by_the_others_exactly",
    "tests/test_ray.py::test_a_killed_driver_resumes_from_the_object_store_on_another_machine",
    "tests/test_faults.py::test_throttling_backs_off_and_loses_nothing",
    *sorted({node for _, node in CHECKS}),
]


def run_pytest(nodes: list[str], env: dict[str, str], junit: Path) -> int:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *nodes]
    print("+", " ".join(command[3:6]), f"... ({len(nodes)} test ids)", flush=True)
    return subprocess.run(command, cwd=ROOT, env=env).returncode


def outcomes(junit_files: list[Path]) -> dict[str, str]:
    """'file::test' -> 'passed' / 'failed (...)', from pytest's JUnit reports."""
    results: dict[str, str] = {}
    for junit in junit_files:
        if not junit.exists():
            continue
        for case in ElementTree.parse(junit).iter("testcase"):
            path = "tests/" + case.get("classname", "").split(".")[-1] + ".py"
            name = case.get("name", "").split("[")[0]
            failed = case.find("failure") is not None or case.find("error") is not None
            key = f"{path}::{name}"
            if failed or key not in results:
                results[key] = "**failed**" if failed else f"passed ({float(case.get('time', 0)):.1f} s)"
    return results


def _summarise(values: list[Any]) -> str:
    if all(isinstance(value, list) for value in values):
        flat = [item for value in values for item in value]
        if flat and all(isinstance(item, int | float) for item in flat):
            return f"{sum(flat):,} in all (max {max(flat):,} per trial)"
        return "; ".join(str(item) for item in flat)
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in values):
        if len(values) == 1:
            return f"{values[0]:,}"
        low, high, middle = min(values), max(values), statistics.median(values)
        return f"{middle:,} ({low:,}-{high:,})" if low != high else f"{low:,}"
    distinct = sorted({str(value) for value in values})
    return ", ".join(distinct)


def render(records: list[dict[str, Any]], checks: dict[str, str], rounds: int, trials: int) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    lines = [
        "# Reliability",
        "",
        f"Generated by `make reliability` (scripts/reliability.py) on {time.strftime('%Y-%m-%d')} "
        f"at commit `{commit.stdout.strip() or '?'}`: network faults {rounds} round(s), "
        f"{trials} seeded SIGKILL trials per job kind. MinIO (and moto's server for S3 Vectors) "
        "on loopback; faults made by toxiproxy and by the throttling proxy in "
        "`s3bulk.testing.throttle`. Every scenario is a test in `tests/`, which checks the "
        "destination key by key (checksums) after the run; *lost* counts items reported done "
        "but missing or different there. Several runs: median (min-max).",
        "",
    ]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[record["scenario"]].append(record)
    for scenario, entries in groups.items():
        lines += [f"## {scenario}", "", f"How: {entries[0]['how']}.", ""]
        by_operation: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entry in entries:
            by_operation[str(entry.get("operation", ""))].append(entry)
        columns = [key for key in entries[0] if key not in ("scenario", "how", "operation")]
        header = (["operation"] if any(by_operation) else []) + ["runs", *columns]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for operation, rows in by_operation.items():
            cells = [operation] if any(by_operation) else []
            cells += [str(len(rows))] + [_summarise([row.get(column) for row in rows]) for column in columns]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Bad input, hostile input and secrets", "", "| check | test | result |", "|---|---|---|"]
    for what, node in CHECKS:
        lines.append(f"| {what} | `{node.split('::')[1]}` | {checks.get(node, 'not run')} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the 5,000-object network faults")
    parser.add_argument("--trials", type=int, default=10, help="SIGKILL trials per job kind")
    parser.add_argument("--output", type=Path, default=ROOT / "RELIABILITY.md")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    figures = OUT / "figures.jsonl"
    figures.unlink(missing_ok=True)
    env = os.environ | {"S3BULK_RELIABILITY_OUT": str(figures), "S3BULK_CRASH_TRIALS": str(args.trials)}
    junits = [OUT / "once.xml", *(OUT / f"faults-{round_}.xml" for round_ in range(args.rounds))]
    codes = [run_pytest(ONCE, env, junits[0])]
    for round_ in range(args.rounds):
        codes.append(run_pytest(["tests/test_faults.py::test_faults_lose_nothing"], env, junits[round_ + 1]))
    records = [json.loads(line) for line in figures.read_text().splitlines()] if figures.exists() else []
    records.sort(key=lambda record: (not record["scenario"].startswith("network"), record["scenario"]))
    args.output.write_text(render(records, outcomes(junits), args.rounds, args.trials))
    print(f"wrote {args.output} ({len(records)} records); pytest exit codes {codes}")
    return 0 if not any(codes) else 1


if __name__ == "__main__":
    sys.exit(main())
