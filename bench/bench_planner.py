"""The driver at scale, measured without a server (issue 67, item 3).

A synthetic store lists N keys as fast as Python can take them: each page is made from the key
numbers it covers (keys `k/0000000000` ... fixed width, so the byte order is the number order),
never stored, so the store itself holds nothing that grows with N. The real runner then runs a
real job on it: `cp` (S3 -> S3 copies, each answered at once), `sync` (the destination holds the
same keys, every 100th of another size: 1% to copy, and with --delete 1 in 200 keys only there),
and `rm` (DeleteObjects answered at once). Everything of s3bulk runs as it would against S3: the
listing in key ranges and its checks, the sync merge and its diff, filters, the planner, the
dispatcher and its descriptors, the worker's bounded concurrency, progress, the journal.

Each run is a fresh process (peak RSS is the process's own, `ru_maxrss`):

    .venv/bin/python bench/bench_planner.py --keys 1000000,10000000 --commands cp,sync,rm --runs 3

prints keys planned per second and the driver's peak RSS per run, and their medians.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from typing import Any
from unittest import mock

WIDTH = 10
WHEN = "2026-11-27T10:00:00.000Z"
LATER = "2026-11-28T10:00:00.000Z"


class _Keys:
    """Key number i as text, and the number of keys before a text (a sorted sequence of N keys
    that is never built)."""

    def __init__(self, prefix: str, count: int) -> None:
        self.prefix, self.count = prefix, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, number: int) -> str:
        return f"{self.prefix}{number:0{WIDTH}d}"

    def first_after(self, text: str) -> int:
        return bisect.bisect_right(self, text)  # type: ignore[arg-type]

    def first_from(self, text: str) -> int:
        return bisect.bisect_left(self, text)  # type: ignore[arg-type]


BLOCK = 1000  # keys k/BBBBBBBIII: a page's entries are a block's template, its number filled in
_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    "<Name>{bucket}</Name><Prefix>{prefix}</Prefix><KeyCount>{count}</KeyCount><MaxKeys>{most}</MaxKeys>"
    "<IsTruncated>{more}</IsTruncated>"
)
_ENTRY = (
    "<Contents><Key>k/#######{index:03d}</Key><LastModified>{when}</LastModified>"
    "<ETag>&quot;{index:032x}&quot;</ETag><Size>{size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
)


class Synthetic:
    """Two buckets of made-up keys: `src` holds N, `dst` (for sync) the same N with every 100th
    of another size, and every 200th key shifted past the source's last (so --delete deletes
    them). Requests are answered at once, and counted. A page is ListObjectsV2's XML, as S3
    sends it, made from a template of a block of 1,000 entries (key number i's size and ETag
    follow from i mod 1,000) with the block's number filled in: ~0.1 µs a key, so the store is
    not what bounds the planner that parses it."""

    def __init__(self, count: int, command: str) -> None:
        self.count = count
        self.command = command
        self.requests: dict[str, int] = {}
        self.entries = {bucket: self._template(bucket) for bucket in ("src", "dst")}

    def _template(self, bucket: str) -> list[bytes]:
        other = bucket == "dst" and self.command == "sync"
        return [
            _ENTRY.format(
                index=index,
                when=LATER if other else WHEN,
                size=index % 997 + (1 if other and index % 100 == 0 else 0),
            ).encode()
            for index in range(BLOCK)
        ]

    def keys(self, bucket: str) -> _Keys:
        if bucket != "dst" or self.command != "sync":
            return _Keys("k/", self.count)
        return _Keys("k/", self.count + self.count // 200)  # the last 0.5% only there: deleted

    def entries_of(self, bucket: str, start: int, stop: int) -> bytes:
        """The `<Contents>` of key numbers start..stop, block by block."""
        template, pieces = self.entries[bucket], []
        while start < stop:
            block, index = divmod(start, BLOCK)
            end = min(stop, (block + 1) * BLOCK)
            pieces.append(
                b"".join(template[index : index + end - start]).replace(b"#######", b"%07d" % block)
            )
            start = end
        return b"".join(pieces)


class Meter:
    def __init__(self, counts: dict[str, int]) -> None:
        self.requests = counts


def _etag_of(key: str) -> str:
    """The ETag a listing gives key number N (`_ENTRY`)."""
    return f"{int(key[-WIDTH:]) % BLOCK:032x}"


_STORES: dict[int, Synthetic] = {}


class Maker:
    """What `Stores.make` takes, pickled as a number (the engine pickles the job for its worker)."""

    def __init__(self, store: Synthetic) -> None:
        self.number = id(store)
        _STORES[self.number] = store

    def __call__(self, *_: Any, **__: Any) -> SyntheticStorage:
        return SyntheticStorage(_STORES[self.number])


class SyntheticStorage:
    """The storage seam's verbs a cp, sync or rm of objects calls, on `Synthetic`."""

    def __init__(self, store: Synthetic) -> None:
        self.store = store
        self.meter = Meter(store.requests)

    def _count(self, verb: str) -> None:
        self.store.requests[verb] = self.store.requests.get(verb, 0) + 1

    async def list_objects_v2(
        self,
        bucket: str,
        prefix: str = "",
        *,
        start_after: str | None = None,
        continuation_token: str | None = None,
        delimiter: str | None = None,
        max_keys: int = 1000,
    ) -> Any:
        from s3bulk._stores import s3xml

        self._count("LIST")
        keys = self.store.keys(bucket)
        after = continuation_token or start_after or ""
        start = max(keys.first_after(after), keys.first_from(prefix))
        end = keys.first_from(prefix + "\U0010ffff") if prefix else len(keys)
        stop = min(start + max_keys, end)
        more = stop < end
        head = _HEAD.format(
            bucket=bucket, prefix=prefix, count=stop - start, most=max_keys, more=str(more).lower()
        )
        token = f"<NextContinuationToken>{keys[stop - 1]}</NextContinuationToken>" if more else ""
        body = b"".join(
            (
                head.encode(),
                self.store.entries_of(bucket, start, stop),
                token.encode(),
                b"</ListBucketResult>",
            )
        )
        what = f"list s3://{bucket}/{prefix}"
        s3xml.expect(body, "ListBucketResult", what)  # as `S3Client.list_objects_v2` reads a page
        return s3xml.parse_list_objects_v2(body, what=what)

    async def copy(self, *_: Any, size: int = 0, etag: str = "", **__: Any) -> Any:
        from s3bulk._stores.conditional import Version

        self._count("COPY")
        return Version(etag, size)

    async def write_conditions(self, bucket: str, prefix: str) -> Any:
        """As S3: If-None-Match and If-Match on every write, CopyObject's too (sync's writes
        carry them: the version listed, or none)."""
        from s3bulk._stores.conditional import WriteConditions

        return WriteConditions(none_match=True, match=True, copy=True)

    async def delete_many(self, bucket: str, keys: list[str], etags: Any = None) -> dict[str, str]:
        """As S3: a key named with an ETag it does not have is refused (sync --delete's keys
        carry the listed one; the first asks with one no version has, to learn this)."""
        self._count("DELETE")
        return {
            key: "PreconditionFailed (412)" for key, etag in (etags or {}).items() if etag != _etag_of(key)
        }

    async def head(self, bucket: str, key: str, *_: Any, **__: Any) -> dict[str, str]:
        self._count("HEAD")
        return {"etag": f'"{_etag_of(key)}"'}

    async def close(self) -> None:
        return None


def _spec(command: str) -> Any:
    if command == "cp":
        from s3bulk._commands.copy import CopySpec

        return CopySpec(source="s3://src/k/", destination="s3://dst/k/")
    if command == "sync":
        from s3bulk._commands.sync import SyncSpec

        return SyncSpec(source="s3://src/k/", destination="s3://dst/k/", delete=True)
    from s3bulk._commands.remove import RemoveSpec

    return RemoveSpec(target="s3://src/k/")


def run_once(command: str, count: int, parse: str = "native") -> dict[str, Any]:
    """One job in this process: its report's counts, keys/s and the peak RSS; `parse`: "python"
    reads every listing page in Python (`s3xml.native_columns` off), as before the native reader."""
    from s3bulk._commands import command_for
    from s3bulk._stores import s3xml

    if parse == "python":
        s3xml.native_columns = None
    from s3bulk._engine.loop import run_loop
    from s3bulk._runner import execute

    store = Synthetic(count, command)
    maker = Maker(store)
    spec = _spec(command)
    built = command_for(spec).build

    async def build(self: Any, *args: Any, **kwargs: Any) -> Any:
        job = await built(*args, **kwargs)
        for holder in (getattr(getattr(job, "mover", None), "stores", None), getattr(job, "sides", None)):
            if holder is not None:
                holder.make = maker
        return job

    with ExitStack() as stack:
        for module in ("transfer", "sync", "remove"):  # what a command makes by itself
            stack.enter_context(mock.patch(f"s3bulk._commands.{module}.Storage", maker))
        stack.enter_context(mock.patch.object(type(command_for(spec)), "build", build))
        started = time.perf_counter()
        cpu = time.process_time()
        report = run_loop(execute(spec, settings=_settings(), on_progress=_progress(command, count)))
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "command": command,
        "parse": parse,
        "keys": count,
        "wall": wall,
        "cpu": cpu,
        "keys_per_second": count / wall,
        "peak_rss": peak,
        "done": report.objects_done,
        "unchanged": report.objects_unchanged,
        "deleted": report.objects_deleted,
        "failed": report.objects_failed,
        "first_failure": report.failures[0].reason if report.failures else "",
        "requests": dict(store.requests),
    }


def _progress(command: str, count: int) -> Any:
    """With S3BULK_BENCH_PROGRESS=SECONDS: a line on stderr every so often (keys through the
    plan, CPU seconds, peak RSS so far), so a run too long to finish still says how it went."""
    every = float(os.environ.get("S3BULK_BENCH_PROGRESS", "0"))
    if not every:
        return None
    last = [time.perf_counter()]

    def show(report: Any) -> None:
        now = time.perf_counter()
        if now - last[0] < every:
            return
        last[0] = now
        through = report.objects_done + report.objects_unchanged + report.objects_deleted
        cpu = time.process_time()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{command} {count:,}: {through:,} keys through, cpu {cpu:.1f} s, "
            f"{through / max(cpu, 1e-9):,.0f} keys/cpu-s, peak RSS {peak:.1f} MiB, "
            f"load {os.getloadavg()[0]:.1f}",
            file=sys.stderr,
            flush=True,
        )

    return show


def _settings() -> Any:
    from s3bulk._config import AwsSettings

    return AwsSettings(endpoint_url="http://127.0.0.1:9", anonymous=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", default="1000000", help="comma-separated key counts")
    parser.add_argument("--commands", default="cp,sync,rm")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--parse", default="native", help="native, python, or both (interleaved): who reads listing pages"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # command:count, run in this process
    args = parser.parse_args()
    if args.one:
        command, count, parse = args.one.split(":")
        print(json.dumps(run_once(command, int(count), parse)))
        return
    results: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    parses = ["native", "python"] if args.parse == "both" else [args.parse]
    with tempfile.TemporaryDirectory() as state:
        env = dict(os.environ, S3BULK_STATE_DIR=state)
        for count in (int(each.replace("_", "")) for each in args.keys.split(",")):
            for _ in range(args.runs):
                for command, parse in (  # interleaved: a run of each, then again
                    (command, parse) for command in args.commands.split(",") for parse in parses
                ):
                    done = subprocess.run(
                        [sys.executable, __file__, "--one", f"{command}:{count}:{parse}"],
                        env=env,
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    if done.returncode:
                        sys.exit(f"{command} {count}: {done.stderr[-3000:]}")
                    row = json.loads(done.stdout.splitlines()[-1])
                    results.setdefault((command, parse, count), []).append(row)
                    print(
                        f"{command:5} {parse:6} {count:>12,} keys: {row['keys_per_second']:>10,.0f} keys/s  "
                        f"{row['keys'] / row['cpu']:>10,.0f} keys/cpu-s  "
                        f"cpu {row['cpu']:7.1f} s  peak RSS {row['peak_rss'] / 2**20:7.1f} MiB  "
                        f"done {row['done']:,} unchanged {row['unchanged']:,} deleted {row['deleted']:,}  "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
    print("\nmedians (command, parse, keys: keys/s, CPU keys/s, peak RSS MiB, load at the end)")
    for (command, parse, count), rows in results.items():
        rate = statistics.median(row["keys_per_second"] for row in rows)
        per_cpu = statistics.median(row["keys"] / row["cpu"] for row in rows)
        peak = statistics.median(row["peak_rss"] for row in rows) / 2**20
        print(
            f"{command:5} {parse:6} {count:>12,}: {rate:>10,.0f} keys/s  {per_cpu:>10,.0f} keys/cpu-s  "
            f"{peak:7.1f} MiB  load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
