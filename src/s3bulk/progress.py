"""Live progress on a terminal and the final summary, for people and (with --json) machines."""

from __future__ import annotations

import sys
from typing import Any, TextIO

import orjson

from s3bulk.diagnosis import describe_cpu, per_item_ms, verdict
from s3bulk.pricing import PRICE_SOURCE
from s3bulk.report import Report, human_bytes


def _rate_line(report: Report) -> str:
    """Counts first, so a narrow terminal cuts the least important part (the rate and ETA)."""
    seconds = max(report.wall_seconds, 1e-9)
    if report.command.startswith("vectors"):
        return _vectors_line(report, seconds)
    rate = report.bytes_done / seconds
    line = (
        f"{report.objects_done:,}/{report.objects_total:,} obj  "
        f"{human_bytes(report.bytes_done)}/{human_bytes(report.bytes_total)}  "
        f"retries {report.retries}  failed {report.objects_failed}  "
        f"{report.objects_done / seconds:,.0f} obj/s  {human_bytes(rate)}/s"
    )
    remaining = report.bytes_total - report.bytes_done
    if rate > 0 and remaining > 0:
        line += f"  ETA {remaining / rate:,.0f}s"
    return line


def _vectors_line(report: Report, seconds: float) -> str:
    rate = report.vectors_done / seconds
    line = (
        f"{report.vectors_done:,}/{report.objects_total:,} vectors  {rate:,.0f} vec/s  "
        f"batches in flight {report.in_flight}  throttles {report.throttles}  "
        f"rejected {report.vectors_rejected:,}  failed batches {report.objects_failed}"
    )
    remaining = report.objects_total - report.vectors_done - report.vectors_rejected
    if rate > 0 and remaining > 0:
        line += f"  ETA {remaining / rate:,.0f}s"
    return line


class LiveProgress:
    """A one-line live display on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.live: Any = None
        self.enabled = enabled and sys.stderr.isatty()

    def __enter__(self) -> LiveProgress:
        if self.enabled:  # rich is imported only for terminals: it costs ~0.1 s of start-up
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._text = Text
            self.live = Live(Text(""), console=Console(stderr=True), refresh_per_second=8, transient=True)
            self.live.__enter__()
        return self

    def update(self, report: Report) -> None:
        if self.live is not None:
            self.live.update(self._text(f"{report.command}: {_rate_line(report)}"))

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)


def print_summary(report: Report, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
    verb = "would do" if report.dry_run else "done"
    seconds = report.wall_seconds
    extras = [
        f"{count:,} {label}"
        for count, label in (
            (report.objects_unchanged, "unchanged"),
            (report.objects_already_done, "already done earlier"),
            (report.objects_deleted, "deleted"),
        )
        if count
    ]
    if report.command.startswith("vectors"):
        rate = report.vectors_done / seconds if seconds else 0.0
        out.write(
            f"{report.command} {verb}: {report.vectors_done:,} vectors in {report.objects_done:,} batches "
            f"({human_bytes(report.bytes_done)} of JSON) in {seconds:.2f}s ({rate:,.0f} vectors/s); "
            + "".join(f"{extra}, " for extra in extras)
            + f"{report.vectors_rejected:,} rejected rows, {report.objects_failed:,} failed batches, "
            + f"{report.retries:,} retries ({report.throttles:,} throttled)\n"
        )
    else:
        noun = "range reads" if report.command == "gather" else "objects"
        out.write(
            f"{report.command} {verb}: {report.objects_done:,} {noun}, {human_bytes(report.bytes_done)} "
            f"in {seconds:.2f}s ({report.objects_per_second:,.0f} obj/s, "
            f"{report.gigabits_per_second:.2f} Gb/s); "
            + "".join(f"{extra}, " for extra in extras)
            + f"{report.objects_failed:,} failed, {report.objects_skipped:,} skipped, "
            + f"{report.retries:,} retries\n"
        )
    for note in report.notes:
        out.write(f"{note}\n")
    if report.requests:
        requests = ", ".join(f"{kind} {count:,}" for kind, count in sorted(report.requests.items()))
        out.write(f"requests: {requests} ({_dollars(report.request_cost)} at {PRICE_SOURCE})\n")
    if report.engine and (report.objects_done or report.objects_failed):
        stages = ", ".join(f"{stage} {ms:.2f}" for stage, ms in per_item_ms(report).items())
        cuts = (
            f" (limit lowered {report.limit_cuts:,} times, {report.concurrency:,} at the end)"
            if report.limit_cuts
            else ""
        )
        out.write(
            f"engine {report.engine}: {report.workers} worker(s), up to {report.concurrency_peak:,} "
            f"in flight{cuts}; ms per item: {stages}; {describe_cpu(report)}\n"
        )
        out.write(f"where the time went: {verdict(report)}\n")
    if report.job_id:
        hint = f"; rerun failures: --retry-failed {report.job_id}" if report.objects_failed else ""
        if report.aborted:
            hint = f"; after the fix, finish it: --resume {report.job_id}"
        out.write(f"job {report.job_id}{hint}\n")
    if report.aborted:
        err.write(f"error: stopped: {report.aborted}\n")
    for failure in report.failures:
        if not failure.source:  # a job-level problem (a worker crash), not one object
            err.write(f"error: {failure.reason}\n")
            continue
        arrow = f" -> {failure.destination}" if failure.destination else ""
        label = "skipped" if failure.skipped else "failed"
        err.write(f"{label}: {failure.source}{arrow}: {failure.reason}\n")


def _dollars(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.6f}".rstrip("0").rstrip(".")


def json_line(data: Any, out: TextIO = sys.stdout) -> None:
    out.write(orjson.dumps(data).decode() + "\n")
