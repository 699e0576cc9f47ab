"""`make reliability`: run the reliability scenarios and write RELIABILITY.md from what they measured.

The scenarios are the test suite's own (tests/integration/test_faults.py, test_crashes.py,
test_reliability.py, test_ray.py's killed worker and driver, the bad-input tests, and the
property over options in memory, tests/unit/test_properties.py, with --memory-examples): each
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
        "tests/integration/test_cp.py::test_hostile_keys_are_refused_and_nothing_escapes",
    ),
    (
        "any key (NUL bytes, '.', '..', empty and 256-byte segments; hypothesis, 400"
        " examples) maps below the destination or is refused",
        "tests/unit/test_urls.py::test_any_key_maps_below_the_destination_or_is_refused",
    ),
    (
        "Unicode normalisation twins stay two objects and two files",
        "tests/integration/test_reliability.py::test_unicode_normalisation_twins_stay_two_objects_and_two_files",
    ),
    (
        "symbolic links: outside the tree, loops, dangling; --follow-symlinks",
        "tests/integration/test_cp.py::test_symlinks_are_skipped_unless_followed_and_loops_never_are",
    ),
    (
        "a destination file that appears during its download is left alone",
        "tests/integration/test_reliability.py::test_a_file_that_appears_during_its_download_is_left_alone",
    ),
    (
        "a full disk stops the job; --resume finishes it",
        "tests/integration/test_reliability.py::test_a_full_disk_stops_the_download_and_resume_finishes_it",
    ),
    (
        "an unreadable file fails alone, the rest is uploaded",
        "tests/integration/test_cp.py::test_unreadable_local_file_fails_alone",
    ),
    (
        "malformed and truncated Parquet, unknown index/column/options: one line, exit 2, nothing stored",
        "tests/integration/test_vectors_load.py::test_bad_input_is_refused_before_anything_is_sent",
    ),
    (
        "vectors with NaN/Inf, wrong dimension, oversized metadata, bad keys: each rule's exact reason",
        "tests/integration/test_vectors_load.py::test_every_rule_rejects_its_rows_with_the_reason",
    ),
    (
        "a dimension that differs from the index's",
        "tests/integration/test_vectors_load.py::test_dimension_mismatch_with_the_index_is_named",
    ),
    (
        "malformed URLs name the problem",
        "tests/unit/test_urls.py::test_malformed_locations_name_the_problem",
    ),
    (
        "any text as a location parses or is a one-line usage error (hypothesis)",
        "tests/unit/test_urls.py::test_any_text_parses_or_is_refused_with_a_usage_error",
    ),
    (
        "unknown flags and conflicting options: one line, exit 2",
        "tests/integration/test_cp.py::test_bad_input_is_one_line_and_exit_2",
    ),
    (
        "wrong credentials never print the secret",
        "tests/integration/test_cp.py::test_wrong_credentials_never_print_the_secret",
    ),
    (
        "the secret key appears in no output, --json, journal or job listing; --no-verify-ssl warns",
        "tests/integration/test_reliability.py::test_the_secret_key_appears_nowhere",
    ),
]
# A hostile server (s3bulk.testing.hostile: MinIO's answers broken per request) and a hostile
# machine (issue 46): what each does, the test that does it, and what must come of it.
H = "tests/integration/test_hostile.py::"
W = "tests/integration/test_concurrent_writer.py::"
HOSTILE = [
    (
        "a directory that cannot be read: sync --delete keeps its objects, exit 1",
        H + "test_sync_delete_keeps_what_lies_under_a_directory_it_cannot_read",
    ),
    (
        "cp of a tree with a directory it cannot read: exit 1, the directory named",
        H + "test_cp_of_a_tree_with_a_directory_it_cannot_read_fails_and_names_it",
    ),
    (
        "a source root that cannot be read: one line, exit 2, nothing deleted",
        H + "test_a_source_root_it_cannot_read_is_one_line_and_nothing_is_deleted",
    ),
    (
        "listing page 2 is a 200 with an <Error>, not XML, or truncated without a token: "
        "sync --delete both ways deletes nothing, exit 1",
        H + "test_sync_delete_after_a_listing_that_broke_on_page_two_deletes_nothing",
    ),
    (
        "a listing page that was a 200 with an <Error> twice is retried, all keys listed",
        H + "test_a_listing_page_answered_200_with_an_error_is_retried_not_taken_as_the_end",
    ),
    (
        "ls -r whose first page is a 200 with AccessDenied: exit 1, nothing printed",
        H + "test_ls_of_a_listing_whose_first_page_is_an_error_fails",
    ),
    (
        "a continuation token that comes round again: ls, cp and du stop, exit 1",
        H + "test_a_continuation_token_that_comes_round_again_stops_the_listing",
    ),
    (
        "CopyObject answered 200 with AccessDenied: mv keeps every source, cp and sync exit 1",
        H + "test_a_copy_answered_200_with_an_error_is_a_failure_and_mv_keeps_its_source",
    ),
    (
        "UploadPartCopy or CompleteMultipartUpload answered 200 with an error: mv keeps its "
        "source, no upload left",
        H + "test_mv_in_parts_keeps_its_source_when_a_step_answered_200_with_an_error",
    ),
    (
        "rm of a key holding '?' or '[': that key only; a glob matching nothing: exit 1",
        H + "test_rm_of_a_key_that_exists_deletes_that_key_and_a_glob_that_matches_nothing_fails",
    ),
    (
        "a 307 to another host (ls, download, upload, head, cat): not followed, no credential sent there",
        H + "test_a_redirect_to_another_host_is_not_followed_and_no_credential_goes_there",
    ),
    (
        "a file rewritten, appended to or replaced during its multipart upload: nothing stored, exit 1",
        H + "test_a_file_that_changes_during_its_multipart_upload_is_not_stored_torn",
    ),
    (
        "cat and get of a body with one byte flipped: exit 1 / error",
        H + "test_cat_and_get_fail_a_body_of_the_right_size_and_wrong_bytes",
    ),
    (
        "a download whose ETag is no MD5: said 'not verified' in the summary and --json",
        H + "test_a_download_nothing_could_check_is_said_to_be_not_verified",
    ),
    (
        "a listed size of -5 or 1 PB, a LastModified that is no time: that object fails alone",
        H + "test_a_listed_entry_that_cannot_be_fails_alone",
    ),
    (
        "a key listed at 5 TiB: ranges made as they go, peak RSS under 150 MiB",
        H + "test_a_size_listed_at_5_tib_is_fetched_in_ranges_made_as_they_go",
    ),
    (
        "a range of a large download cut mid-body: that range fetched again, not the whole",
        H + "test_a_large_download_through_a_link_that_drops_retries_the_range_that_failed",
    ),
    (
        "ulimit -n 256 with --concurrency 1000: in flight lowered, 2,000 up and down, none failed",
        H + "test_a_low_open_file_limit_lowers_the_requests_in_flight_and_fails_nothing",
    ),
    (
        "two runs of one journal at once: the second refused in one line",
        H + "test_two_runs_of_one_journal_at_once_the_second_is_refused",
    ),
    (
        "a journal left without its job row: one line on --resume",
        H + "test_a_journal_left_without_its_job_is_one_line",
    ),
    (
        "a state directory that cannot be written, or anyone's: one line, exit 2",
        H + "test_a_state_directory_that_cannot_be_written_or_is_anyones_is_one_line",
    ),
    (
        "a full disk under the journal: the job stops in one line; --resume finishes it",
        H + "test_a_full_disk_under_the_journal_stops_the_job_in_one_line_and_resume_finishes_it",
    ),
    (
        "a body trickling at 10 bytes/s: cut after the read timeout's window, fetched again",
        H + "test_a_body_that_trickles_is_cut_and_asked_for_again",
    ),
    (
        "a read-only destination directory: one line, not one per file",
        H + "test_a_destination_that_refuses_every_write_is_one_line",
    ),
    (
        "an endpoint URL with user:pass@: refused, never printed",
        H + "test_an_endpoint_with_a_password_in_it_is_refused_and_never_printed",
    ),
    (
        "--log-level debug names every request, never a credential",
        H + "test_debug_logging_names_each_request_and_never_a_credential",
    ),
    (
        "any single listing, walk or copy failure (hypothesis): sync --delete and mv delete "
        "nothing the source holds",
        "tests/integration/test_never_delete.py::"
        "test_no_single_failure_makes_sync_delete_or_mv_delete_what_the_source_holds",
    ),
    (
        "any option (hypothesis: filters, windows, --files-from, guards, modes, directions, odd "
        "names), on MinIO from the command line: nothing the source holds deleted, nothing outside "
        "the scope touched, exit 0 only when done",
        "tests/integration/test_never_delete.py::"
        "test_no_option_makes_a_command_delete_what_the_source_holds_on_minio",
    ),
    (
        "any listing page (hypothesis, 1,500 pages: other forms, references, newlines, bytes that "
        "are no UTF-8, odd ETags, sizes and tokens) reads the same by the native and the Python reader",
        "tests/unit/test_stores_s3xml.py::test_the_native_page_reader_reads_every_page_as_the_python_one",
    ),
    (
        "the same property in memory, --memory-examples cases (its figures are the 'never delete: "
        "every option' table)",
        "tests/unit/test_properties.py::"
        "test_no_option_makes_a_job_delete_what_the_source_holds_or_leave_its_scope",
    ),
    (
        "a source overwritten between two UploadPartCopy of its copy (cp, mv): the new version "
        "lands whole, none torn",
        W + "test_a_source_overwritten_during_a_copy_in_parts_lands_whole",
    ),
    (
        "mv of a source overwritten after its copy (S3->S3, in parts, S3->local): the source kept, exit 1",
        W + "test_mv_keeps_a_source_overwritten_after_it_was_copied",
    ),
    (
        "an SSE-KMS object without a checksum replaced between the ranges of its download: never landed torn",
        W + "test_a_download_in_ranges_of_an_object_replaced_midway_never_lands_torn",
    ),
    (
        "a writer thread racing real cp and mv on MinIO (hypothesis): none torn, no latest version lost "
        "but in mv's named window",
        W + "test_a_writer_thread_racing_real_jobs_never_tears_or_loses_a_latest_version",
    ),
    (
        "an overwrite or delete before any request of cp, mv or sync (hypothesis, in-memory store, "
        "S3, versitygw and MinIO/Garage deletes): none torn, lost or deleted",
        "tests/unit/test_concurrent_writer.py::"
        "test_a_concurrent_writer_never_tears_loses_or_deletes_what_the_source_holds",
    ),
    (
        "bytes that contradict the object's CRC64NVME (SSE-KMS) or MD5 ETag: cat, get, get_to_file, "
        "open, fs.open and fs.cat_file fail",
        H + "test_every_read_entry_point_fails_bytes_that_contradict_the_object",
    ),
    (
        "s3bulk.open and fs.open answered a 307 to another host: no request goes there",
        H + "test_the_object_reader_follows_no_redirect_and_sends_no_credential_elsewhere",
    ),
    (
        "vectors put's files and prefix on S3, gather's metadata, doctor, open(url, 'wb') (one PUT "
        "and in parts), the ray journal's spec, import and parts answered a 307 to another host: "
        "no request goes there",
        H + "test_the_paths_once_on_obstore_follow_no_redirect_and_send_no_credential_elsewhere",
    ),
    (
        "fs.get into a directory holding a link to outside it (2 files, and 20 as a job): refused in "
        "one line before anything is written, as cp refuses it",
        "tests/integration/test_hostile_run2.py::test_fs_get_writes_nothing_through_a_link_to_outside_the_destination",
    ),
    (
        "fs.mv (one by one, and 17 paths as run's items): a source overwritten after its copy is "
        "kept, with the writer's bytes",
        "tests/integration/test_fsspec.py::test_mv_deletes_a_source_only_while_it_is_the_version_it_copied",
    ),
    (
        "vectors sync --delete with another key column than the put: one line, exit 2, nothing deleted",
        "tests/integration/test_vectors_lifecycle.py::"
        "test_sync_delete_with_another_key_column_than_the_put_used_is_refused_in_one_line",
    ),
    (
        "sync --retry-failed: a failed delete whose name the source now holds is kept (this "
        "run's listings), one still extra deleted",
        "tests/unit/test_commands_transfers.py::"
        "test_a_retried_sync_deletes_only_what_its_own_fresh_listing_finds_extra",
    ),
    (
        "a directory of an upload's source swapped for a link mid-upload (mv): nothing from "
        "outside uploaded or removed",
        "tests/unit/test_commands_transfers.py::"
        "test_a_directory_swapped_for_a_link_mid_upload_sends_nothing_from_outside",
    ),
]
ONCE = [
    "tests/unit/test_properties.py",
    "tests/integration/test_crashes.py",
    "tests/integration/test_hostile.py",
    "tests/integration/test_never_delete.py",
    "tests/integration/test_concurrent_writer.py",
    "tests/unit/test_concurrent_writer.py",
    "tests/integration/test_reliability.py",
    "tests/integration/test_ray.py::test_a_killed_ray_worker_is_replaced_by_the_others_exactly",
    "tests/integration/test_ray.py::test_a_killed_driver_resumes_from_the_object_store_on_another_machine",
    "tests/integration/test_faults.py::test_throttling_backs_off_and_loses_nothing",
    # kept out of make test for its ten minutes (marked campaign), run here
    "tests/integration/test_engine.py::test_fifty_back_to_back_cli_runs_all_exit_zero",
    "tests/integration/test_ray.py::test_cp_sync_rm_on_ray_match_hybrid",
    "tests/integration/test_map.py::test_results_equal_a_serial_loop",
    *sorted({node for _, node in CHECKS}),
]


# The properties in memory: thousands of cases in minutes, where the whole campaign takes hours;
# `--parts memory` runs only these and puts their sections and rows into the RELIABILITY.md there
# is, saying so at its top.
MEMORY = [
    "tests/unit/test_properties.py",
    "tests/unit/test_concurrent_writer.py",
]


def run_pytest(nodes: list[str], env: dict[str, str], junit: Path) -> int:
    # make test's 300 s a test is for its sizes: 10 SIGKILL trials of 1,200 files, or 100 cases of a
    # property that shrinks, take longer on a busy machine (2026-11-29: five such timed out, none failed)
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "timeout=3600",
        f"--junitxml={junit}", *nodes,
    ]  # fmt: skip
    print("+", " ".join(command[3:6]), f"... ({len(nodes)} test ids)", flush=True)
    return subprocess.run(command, cwd=ROOT, env=env).returncode


def outcomes(junit_files: list[Path]) -> dict[str, str]:
    """'file::test' -> 'passed' / 'failed (...)', from pytest's JUnit reports."""
    results: dict[str, str] = {}
    for junit in junit_files:
        if not junit.exists():
            continue
        for case in ElementTree.parse(junit).iter("testcase"):
            module = case.get("classname", "")  # tests.unit.test_properties
            path = module.replace(".", "/") + ".py"
            if not module.startswith("tests."):
                path = "tests/integration/" + module.split(".")[-1] + ".py"
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
        "on loopback; faults made by toxiproxy, by the throttling proxy in "
        "`s3bulk.testing.throttle`, and by the misbehaving server in `s3bulk.testing.hostile`. "
        "Every scenario is a test in `tests/`, which checks the "
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
    for title, rows in (
        ("A hostile server and a hostile machine", HOSTILE),
        ("Bad input, hostile input and secrets", CHECKS),
    ):
        lines += [f"## {title}", "", "| check | test | result |", "|---|---|---|"]
        for what, node in rows:
            lines.append(f"| {what} | `{node.split('::')[1]}` | {checks.get(node, 'not run')} |")
        lines.append("")
    return "\n".join(lines)


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """("## title" or "" for what comes first, its lines), in order."""
    parts: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith("## "):
            parts.append((line, []))
        parts[-1][1].append(line)
    return parts


def merged(existing: str, fresh: str, checks: dict[str, str], note: str) -> str:
    """`existing` RELIABILITY.md with `fresh`'s figure sections put in (each in place of the one
    of its title, else before the tables of checks), the result cells of `checks`' tests
    brought up to date, and `note` said under the first paragraph."""
    sections = _sections(existing)
    titles = [title for title, _ in sections]
    for title, lines in _sections(fresh)[1:]:
        if title.startswith("## A hostile server") or title.startswith("## Bad input, hostile"):
            continue
        if title in titles:
            sections[titles.index(title)] = (title, lines)
        else:
            at = next(
                (i for i, each in enumerate(titles) if each.startswith("## A hostile server")), len(titles)
            )
            sections.insert(at, (title, lines))
            titles.insert(at, title)
    out = [line for _, lines in sections for line in lines]
    for index, line in enumerate(out):
        for node, result in checks.items():
            name = node.split("::")[1]
            if line.startswith("| ") and f"| `{name}` |" in line:
                out[index] = line.rsplit("|", 2)[0] + f"| {result} |"
    first_blank = out.index("", 2) if "" in out[2:] else len(out)
    out[first_blank:first_blank] = ["", note]
    return "\n".join(out) + "\n"


def memory_only(args: argparse.Namespace, env: dict[str, str], figures: Path) -> int:
    """`--parts memory`: the properties in memory alone, merged into the existing file."""
    junit = OUT / "memory.xml"
    code = run_pytest(MEMORY, env, junit)
    records = [json.loads(line) for line in figures.read_text().splitlines()] if figures.exists() else []
    checks = {node: result for node, result in outcomes([junit]).items()}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    note = (
        f"The in-memory properties (`scripts/reliability.py --parts memory`: "
        f"{args.memory_examples:,} cases over options, {args.writer_examples:,} of the concurrent "
        f"writer) were run again on {time.strftime('%Y-%m-%d')} at commit "
        f"`{commit.stdout.strip() or '?'}`; every other figure is from the run named above."
    )
    text = merged(args.output.read_text(), render(records, checks, args.rounds, args.trials), checks, note)
    args.output.write_text(text)
    print(f"merged {len(records)} records into {args.output}; pytest exit code {code}")
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the 5,000-object network faults")
    parser.add_argument("--trials", type=int, default=10, help="SIGKILL trials per job kind")
    parser.add_argument("--examples", type=int, default=100, help="cases of the never-delete property")
    parser.add_argument(
        "--memory-examples", type=int, default=2000, help="cases of the property over options, in memory"
    )
    parser.add_argument(
        "--writer-examples",
        type=int,
        default=2000,
        help="cases of the concurrent-writer property (in memory)",
    )
    parser.add_argument("--output", type=Path, default=ROOT / "RELIABILITY.md")
    parser.add_argument(
        "--parts",
        choices=("all", "memory"),
        default="all",
        help="memory: only the in-memory properties, merged into the existing --output",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    figures = OUT / "figures.jsonl"
    figures.unlink(missing_ok=True)
    env = os.environ | {
        "S3BULK_RELIABILITY_OUT": str(figures),
        "S3BULK_CRASH_TRIALS": str(args.trials),
        "S3BULK_CRASH_FILES": "1200",  # make test's jobs are a third of these
        "S3BULK_CRASH_VECTORS": "20000",
        "S3BULK_PROPERTY_EXAMPLES": str(args.examples),
        "S3BULK_MEMORY_EXAMPLES": str(args.memory_examples),
        "S3BULK_WRITER_EXAMPLES": str(args.writer_examples),
        "S3BULK_PAGE_EXAMPLES": "1500",  # make test's 300
    }
    if args.parts == "memory":
        return memory_only(args, env, figures)
    # each tier in a session of its own, as make test runs them (both have a test_concurrent_writer)
    tiers = [
        [node for node in ONCE if node.startswith(prefix)] for prefix in ("tests/unit/", "tests/integration/")
    ]
    once = [OUT / "once-unit.xml", OUT / "once.xml"]
    faults = [OUT / f"faults-{round_}.xml" for round_ in range(args.rounds)]
    junits = [*once, *faults]
    codes = [run_pytest(nodes, env, junit) for nodes, junit in zip(tiers, once, strict=True)]
    for junit in faults:
        codes.append(run_pytest(["tests/integration/test_faults.py::test_faults_lose_nothing"], env, junit))
    records = [json.loads(line) for line in figures.read_text().splitlines()] if figures.exists() else []
    records.sort(key=lambda record: (not record["scenario"].startswith("network"), record["scenario"]))
    args.output.write_text(render(records, outcomes(junits), args.rounds, args.trials))
    print(f"wrote {args.output} ({len(records)} records); pytest exit codes {codes}")
    return 0 if not any(codes) else 1


if __name__ == "__main__":
    sys.exit(main())
