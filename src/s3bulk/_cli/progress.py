"""Live progress on a terminal and the final summary, for people and (with --json) machines."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

import orjson

from s3bulk._pricing import PRICE_SOURCE
from s3bulk._report import Report, describe_cpu, human_bytes, per_item_ms, verdict
from s3bulk._text import is_utf8, printable


def _rate_line(report: Report) -> str:
    """Counts first, so a narrow terminal cuts the least important part (the rate and ETA).
    Bytes count as they move (the parts and ranges of objects still on their way), and totals
    that are still growing (the listing or walk goes on) are found so far: "1,868/2,560+ obj",
    with no ETA until they are whole."""
    seconds = max(report.wall_seconds, 1e-9)
    if report.command.startswith("vectors"):
        return _vectors_line(report, seconds)
    moved = report.bytes_done + report.bytes_underway  # a piece fetched again counts again, until
    if report.total_known:  # its object ends: never shown past the total
        moved = min(moved, max(report.bytes_total, report.bytes_done))
    rate = moved / seconds
    more = "" if report.total_known else "+"
    line = (
        f"{report.objects_done:,}/{report.objects_total:,}{more} obj  "
        f"{human_bytes(moved)}/{human_bytes(report.bytes_total)}{more}  "
        f"retries {report.retries}  failed {report.objects_failed}  "
        f"{report.objects_done / seconds:,.0f} obj/s  {human_bytes(rate)}/s"
    )
    return line + _eta(report, report.bytes_total - moved, rate)


def _vectors_line(report: Report, seconds: float) -> str:
    rate = report.vectors_done / seconds
    more = "" if report.total_known else "+"
    line = (
        f"{report.vectors_done:,}/{report.objects_total:,}{more} vectors  {rate:,.0f} vec/s  "
        f"batches in flight {report.in_flight}  throttles {report.throttles}  "
        f"rejected {report.vectors_rejected:,}  failed batches {report.objects_failed}"
    )
    return line + _eta(report, report.objects_total - report.vectors_done - report.vectors_rejected, rate)


def _eta(report: Report, remaining: float, rate: float) -> str:
    """The time left at the rate so far, once the total is known (before, it would be the
    time to finish what was found, which is not the job)."""
    if report.total_known and rate > 0 and remaining > 0:
        return f"  ETA {remaining / rate:,.0f}s"
    return ""


ENABLED = True  # --no-progress sets it off


# without a terminal (CI logs, nohup): one stats line this often (S3BULK_STATS_INTERVAL seconds)
def _stats_seconds() -> float:
    try:
        return max(0.1, float(os.environ.get("S3BULK_STATS_INTERVAL") or 10))
    except ValueError:
        return 10.0


STATS_SECONDS = _stats_seconds()


class LiveProgress:
    """A one-line live display on stderr when it is a terminal; otherwise a plain stats line every
    STATS_SECONDS (as rclone --stats does), so a long job in a CI log shows it is moving."""

    def __init__(self, enabled: bool) -> None:
        self.live: Any = None
        wanted = enabled and ENABLED
        self.enabled = wanted and sys.stderr.isatty()
        self.periodic = wanted and not self.enabled
        self._next_line = time.monotonic() + STATS_SECONDS

    def __enter__(self) -> LiveProgress:
        if self.enabled:  # rich is imported only for terminals: it costs ~0.1 s of start-up
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._text = Text
            self.live = Live(Text(""), console=Console(stderr=True), refresh_per_second=8, transient=True)
            self.live.__enter__()
        return self

    def write(self, line: str, out: TextIO) -> None:
        """A line for people while the live line runs: on a terminal, through the console that
        draws the live line, which clears it first and draws it again below (written to the
        terminal directly, the line went on where the live line ended: `... 0 B/supload: ...`)."""
        if self.live is not None and out.isatty():
            self.live.console.print(self._text(line), soft_wrap=True, highlight=False, markup=False)
        else:
            out.write(line + "\n")

    def update(self, report: Report) -> None:
        if self.live is not None:
            self.live.update(self._text(printable(f"{report.command}: {_rate_line(report)}")))
        elif self.periodic and time.monotonic() >= self._next_line:
            self._next_line = time.monotonic() + STATS_SECONDS
            sys.stderr.write(printable(f"{report.command}: {_rate_line(report)}") + "\n")
            sys.stderr.flush()

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)


LONG_JOB_SECONDS = 30.0  # a job this long also shows requests, the engine and where time went
SHOWN_OBJECTS = 10  # objects named one line each, as `aws s3 cp` names them, before only counting


def object_line(command: str, record: dict[str, Any]) -> str:
    """`aws s3`'s line for one object: "upload: ./a.txt to s3://b/a.txt", "delete: s3://b/k"."""
    source, destination = record.get("source", ""), record.get("destination", "")
    if command == "map":
        if record.get("skipped"):
            return f"skip: {source} ({record['skipped']})"
        return f"map: {source}" + (f" to {destination}" if destination else "")
    if command == "restore":  # "restore: s3://b/k (requested)", "(already restored)", ...
        return f"restore: {source} ({record.get('restore', '')})"
    if not destination:
        return f"delete: {source}"
    if command == "mv" or record.get("verb") == "mv":  # run's lines say their own verb
        verb = "move"
    elif source.startswith("s3://"):
        verb = "copy" if destination.startswith("s3://") else "download"
    else:
        verb = "upload"
    return f"{verb}: {source} to {destination}"


# a vectors command's items (one, several), and what its bytes are ("" when none worth naming)
VECTORS_ITEMS = {
    "vectors export": ("file", "files", "of vectors"),
    "vectors delete": ("request", "requests", ""),
    "vectors query": ("file", "files", ""),
}
BATCHES = ("batch", "batches", "of JSON")  # put, sync, copy: PutVectors


def summary_line(report: Report) -> str:
    """What the job did, in one line: counts always, a rate once it means something."""
    verb = "stopped" if report.aborted else "would do" if report.dry_run else "done"
    seconds = report.wall_seconds
    if report.command.startswith("vectors"):
        rate = report.vectors_done / seconds if seconds else 0.0
        item, items, carried = VECTORS_ITEMS.get(report.command, BATCHES)
        noun = items if report.objects_done != 1 else item
        one, many = ("query", "queries") if report.command == "vectors query" else ("vector", "vectors")
        vectors = f"{report.vectors_done:,} {one if report.vectors_done == 1 else many}"
        head = f"{report.command} {verb}: {vectors} in {report.objects_done:,} {noun} "
        head += f"({human_bytes(report.bytes_done)} {carried}) " if carried else ""
        head += f"in {seconds:.2f}s" + ("" if report.dry_run or rate < 1 else f" ({rate:,.0f} {many}/s)")
        counts = [(report.vectors_rejected, "rejected rows"), (report.objects_failed, f"failed {items}")]
    else:
        noun = "range read" if report.command == "gather" else "object"
        # what was moved: a sync's deletes are items of its own, counted apart ("N deleted")
        done = (
            report.objects_done - report.objects_deleted
            if report.command.startswith("sync")
            else report.objects_done
        )
        head = (
            f"{report.command} {verb}: {done:,} {noun}{'' if done == 1 else 's'}, "
            f"{human_bytes(report.bytes_done)} in {seconds:.2f}s"
        )
        rates = _rates(report) if seconds >= 1 else ""
        head += f" ({rates})" if rates else ""
        counts = [(report.objects_failed, "failed"), (report.objects_skipped, "skipped")]
    counts = [
        *((count, outcome) for outcome, count in report.outcomes.items()),  # restore: requested, ...
        (report.objects_unchanged, "unchanged"),
        (report.objects_already_done, "already done earlier"),
        (0 if report.command == "rm" else report.objects_deleted, "deleted"),  # rm's are what it did
        *counts,
        (report.objects_unverified, "not verified (no MD5 ETag, no checksum)"),
        (report.retries, f"retries ({report.throttles:,} throttled)" if report.throttles else "retries"),
    ]
    extras = [f"{count:,} {label}" for count, label in counts if count]
    return head + ("; " + ", ".join(extras) if extras else "")


def _rates(report: Report) -> str:
    """The rates that mean something: none rounds to 0 (three large objects in four seconds are
    no "0 obj/s"), and bytes too few for Gb/s are said in bytes."""
    rates = [f"{report.objects_per_second:,.0f} obj/s"] if report.objects_per_second >= 1 else []
    if report.gigabits_per_second >= 0.005:
        rates.append(f"{report.gigabits_per_second:.2f} Gb/s")
    elif report.bytes_done:
        rates.append(f"{human_bytes(report.bytes_done / report.wall_seconds)}/s")
    return ", ".join(rates)


def print_summary(
    report: Report,
    command: str = "",
    *,
    stats: bool = False,
    quiet: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """The end of a job for people: one summary line (and notes); requests, the engine and where
    the time went for long jobs or with `stats`; every failure on stderr; and, when something
    failed, the command that reruns it. `quiet`: the failures only."""
    out, err = out or sys.stdout, err or sys.stderr
    if not quiet:
        _line(out, summary_line(report))
        for note in report.notes:
            _line(out, note)
        if stats or report.wall_seconds >= LONG_JOB_SECONDS:
            _print_stats(report, out)
    if report.aborted:
        _line(err, f"error: stopped: {report.aborted}")
    for failure in report.failures:
        if not failure.source:  # a job-level problem (a worker crash), not one object
            _line(err, f"error: {failure.reason}")
            continue
        arrow = f" -> {failure.destination}" if failure.destination else ""
        label = "skipped" if failure.skipped else "failed"
        _line(err, f"{label}: {failure.source}{arrow}: {failure.reason}")
    if report.job_id and (report.aborted or report.objects_failed):
        name = command or report.command.split()[0]
        if report.aborted:
            _line(
                err, f"job {report.job_id}: after the fix, finish it: s3bulk {name} --resume {report.job_id}"
            )
        else:
            _line(
                err, f"job {report.job_id}: rerun the failures: s3bulk {name} --retry-failed {report.job_id}"
            )


def _print_stats(report: Report, out: TextIO) -> None:
    if report.requests:
        requests = ", ".join(f"{kind} {count:,}" for kind, count in sorted(report.requests.items()))
        _line(out, f"requests: {requests} ({_dollars(report.request_cost)} at {PRICE_SOURCE})")
    if report.engine and (report.objects_done or report.objects_failed):
        stages = ", ".join(f"{stage} {ms:.2f}" for stage, ms in per_item_ms(report).items())
        cuts = (
            f" (limit lowered {report.limit_cuts:,} times, {report.concurrency:,} at the end)"
            if report.limit_cuts
            else ""
        )
        workers = "one worker in this process" if report.inline else f"{report.workers} worker(s)"
        _line(
            out,
            f"engine {report.engine}: {workers}, up to {report.concurrency_peak:,} "
            f"in flight{cuts}; ms per item: {stages}; {describe_cpu(report)}",
        )
        _line(out, f"where the time went: {verdict(report)}")
    if report.job_id:
        _line(out, f"job {report.job_id}")


def _line(stream: TextIO, text: str) -> None:
    stream.write(printable(text) + "\n")


def _dollars(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.6f}".rstrip("0").rstrip(".")


def json_line(data: Any, out: TextIO | None = None) -> None:
    """One JSON object per line. Keys stay exact (the encoder escapes control characters); a
    local name that is not UTF-8 (its bytes kept as surrogates) is written with visible escapes."""
    try:
        text = orjson.dumps(data).decode()
    except TypeError:  # orjson refuses surrogates: they come only from such local names
        text = orjson.dumps(_escaped(data)).decode()
    (out or sys.stdout).write(text + "\n")


def _escaped(data: Any) -> Any:
    if isinstance(data, str):
        return printable(data) if not is_utf8(data) else data
    if isinstance(data, dict):
        return {_escaped(key): _escaped(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_escaped(value) for value in data]
    return data
