"""Network faults between s3bulk and MinIO (toxiproxy): 5,000-object uploads, downloads and syncs
under connection resets, stalls, bandwidth caps and jittery latency. Each run ends with the
destination identical to the source, or with the failed keys listed and a non-zero exit; never a
truncated file or object counted as done."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import Endpoint, bucket_problems, new_bucket, run_cli, tree_problems

from s3bulk._benchmark.network import ToxiproxyServer

OBJECTS = 5000
MiB = 1024 * 1024
# Three objects above the multipart threshold, so parts and ranged GETs meet the faults too.
SIZE_ARGS = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]


@dataclass(frozen=True)
class Toxic:
    kind: str
    stream: str
    attributes: dict[str, int]
    toxicity: float = 1.0


@dataclass(frozen=True)
class Fault:
    name: str
    how: str  # for RELIABILITY.md
    toxics: tuple[Toxic, ...]
    env: dict[str, str] = field(default_factory=dict)


FAULTS = [
    Fault(
        "resets",
        "toxiproxy reset_peer: 30% of connections get a TCP RST 300 ms after they open, mid-body or not",
        (Toxic("reset_peer", "downstream", {"timeout": 300}, 0.3),),
    ),
    Fault(
        "stalls",
        "toxiproxy timeout 0: 3% of connections go silent for good; S3BULK_READ_TIMEOUT=2",
        (Toxic("timeout", "downstream", {"timeout": 0}, 0.03),),
        {"S3BULK_READ_TIMEOUT": "2"},
    ),
    Fault(
        "bandwidth",
        "toxiproxy bandwidth: 2 MB/s per connection each way",
        (Toxic("bandwidth", "downstream", {"rate": 2000}), Toxic("bandwidth", "upstream", {"rate": 2000})),
    ),
    Fault(
        "jitter",
        "toxiproxy latency: 25 ms +/- 25 ms each way (up to 100 ms round trips, reordered completions)",
        (
            Toxic("latency", "downstream", {"latency": 25, "jitter": 25}),
            Toxic("latency", "upstream", {"latency": 25, "jitter": 25}),
        ),
    ),
]


def _size(i: int) -> int:
    if i < 3:
        return 12 * MiB + 12_345 * i  # multipart uploads, ranged downloads
    if i % 100 == 0:
        return MiB + i  # bodies long enough to be cut mid-way
    return 2048 + (i * 7919) % 14_000


def _body(i: int, version: int = 0) -> bytes:
    seed = hashlib.sha256(f"{i}/{version}".encode()).digest()
    size = _size(i)
    return (seed * (size // len(seed) + 1))[:size]


def _write_tree(root: Path, bodies: dict[str, bytes]) -> None:
    for relative, data in bodies.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@dataclass
class Run:
    operation: str
    exit_code: int
    summary: dict[str, int]
    failed: set[str]  # file names the run named as failed
    problems: list[str]  # differences between source and destination
    seconds: float

    @property
    def lost(self) -> list[str]:
        """Items that differ at the destination although the run did not name them as failed."""
        return [problem for problem in self.problems if problem.rsplit("/", 1)[-1] not in self.failed]


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[ToxiproxyServer]:
    with ToxiproxyServer() as server:
        yield server


def _run(env: dict[str, str], operation: str, *args: str) -> tuple[int, dict[str, int], set[str], float]:
    started = time.monotonic()
    done = run_cli(env, *args, "--json", *SIZE_ARGS, timeout=600)
    seconds = time.monotonic() - started
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    summaries = [line["summary"] for line in lines if "summary" in line]
    assert summaries, f"{operation}: no summary (exit {done.returncode}): {done.stderr[-1500:]}"
    failed = {line["source"].rsplit("/", 1)[-1] for line in lines if line.get("status") == "failed"}
    if done.returncode != 0:
        assert summaries[-1]["objects_failed"] > 0, f"{operation}: exit {done.returncode}, no failure named"
    return done.returncode, summaries[-1], failed, seconds


def run_under_fault(
    fault: Fault, minio: Endpoint, proxy: ToxiproxyServer, workdir: Path, objects: int = OBJECTS
) -> list[Run]:
    """Upload, download, then sync a changed tree back, all through the faulty proxy."""
    name = f"fault-{fault.name}"
    port = proxy.proxy(name, f"127.0.0.1:{minio.server.port}")
    for toxic in fault.toxics:
        proxy.toxic(name, toxic.kind, toxic.stream, toxic.toxicity, **toxic.attributes)
    env = minio.env | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"} | fault.env
    bucket = new_bucket(minio, fault.name)
    bodies = {f"d{i % 10}/f{i:05d}.bin": _body(i) for i in range(objects)}
    source, target = workdir / "src", workdir / "down"
    _write_tree(source, bodies)
    runs = []

    Outcome = tuple[int, dict[str, int], set[str], float]

    def record(operation: str, outcome: Outcome, problems: list[str]) -> None:
        code, summary, failed, seconds = outcome
        runs.append(Run(operation, code, summary, failed, problems, seconds))

    outcome = _run(env, "upload", "cp", f"{source}/", f"s3://{bucket}/p/")
    record("cp upload", outcome, bucket_problems(minio, bucket, "p/", bodies))
    outcome = _run(env, "download", "cp", f"s3://{bucket}/p/", f"{target}/")
    record("cp download", outcome, tree_problems(target, bodies))
    # A tenth of the files changed, 250 added, 250 removed: sync --delete has all three to do.
    changed = dict(bodies)
    for i in range(0, objects, 10):
        changed[f"d{i % 10}/f{i:05d}.bin"] = _body(i, version=1)
    for i in range(objects, objects + 250):
        changed[f"d{i % 10}/f{i:05d}.bin"] = _body(i)
    for i in range(5, objects, objects // 250):
        changed.pop(f"d{i % 10}/f{i:05d}.bin", None)
    shutil.rmtree(source)
    _write_tree(source, changed)
    outcome = _run(env, "sync", "sync", "--delete", "--checksum", f"{source}/", f"s3://{bucket}/p/")
    record("sync upload", outcome, bucket_problems(minio, bucket, "p/", changed))
    return runs


# every fault's scenario runs in `make reliability`'s rounds, not in `make test`, whose ten
# minutes they would take two of (a 2 MB/s link, 100 ms round trips, resets, stalls); the
# single-fault promises stay there (tests/integration/test_hostile.py, test_never_delete.py, test_crashes.py)
CAMPAIGN_ONLY = {fault.name for fault in FAULTS}


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(fault, marks=pytest.mark.campaign) if fault.name in CAMPAIGN_ONLY else fault
        for fault in FAULTS
    ],
    ids=[fault.name for fault in FAULTS],
)
def test_faults_lose_nothing(
    fault: Fault,
    minio: Endpoint,
    toxiproxy: ToxiproxyServer,
    tmp_path: Path,
    reliability: Callable[..., None],
) -> None:
    runs = run_under_fault(fault, minio, toxiproxy, tmp_path)
    for run in runs:
        reliability(
            f"network: {fault.name}",
            fault.how,
            operation=run.operation,
            items=run.summary["objects_total"],
            done=run.summary["objects_done"],
            failed=run.summary["objects_failed"],
            lost=len(run.lost),
            retries=run.summary["retries"],
            exit_code=run.exit_code,
            seconds=round(run.seconds, 1),
        )
    for run in runs:
        assert run.lost == [], f"{run.operation}: reported done but wrong: {run.lost[:5]}"
        assert run.exit_code == 0, f"{run.operation}: failed {sorted(run.failed)[:5]}"
        assert run.problems == []


def _summary_text(summary: dict[str, object]) -> str:
    """The summary a user without --json reads, for this run's report (with --stats)."""
    import io

    from s3bulk._cli.progress import print_summary
    from s3bulk._report import Report

    fields = {name: summary[name] for name in Report.__dataclass_fields__ if name in summary}
    out = io.StringIO()
    print_summary(Report(**(fields | {"failures": []})), stats=True, out=out, err=io.StringIO())
    return out.getvalue()


@pytest.mark.campaign
def test_throttling_backs_off_and_loses_nothing(
    minio: Endpoint, tmp_path: Path, reliability: Callable[..., None]
) -> None:
    """A proxy answers 503 SlowDown or 429 to 2% of requests at random and to any above 300/s
    (burst 50). Upload and download of 2,000 objects finish exactly; every refusal is retried
    once and counted as a throttle; the in-flight limit is halved (visible in the report); the
    retries stay within a third of the items."""
    from s3bulk.testing.throttle import S3ThrottlingProxy

    count = 2000
    bodies = {f"t{i % 4}/f{i:05d}.txt": f"object {i}\n".encode() * (1 + i % 50) for i in range(count)}
    source, target = tmp_path / "src", tmp_path / "down"
    _write_tree(source, bodies)
    bucket = new_bucket(minio, "throttled")
    how = "proxy answers 503 SlowDown / 429 to 2% of requests at random and above 300 requests/s"
    with S3ThrottlingProxy(
        minio.server.endpoint, refuse_share=0.02, requests_per_second=300, burst=50
    ) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        for operation, args, check in (
            (
                "cp upload",
                ["cp", f"{source}/", f"s3://{bucket}/p/"],
                lambda: bucket_problems(minio, bucket, "p/", bodies),
            ),
            (
                "cp download",
                ["cp", f"s3://{bucket}/p/", f"{target}/"],
                lambda: tree_problems(target, bodies),
            ),
        ):
            refused_before = sum(proxy.log.refused.values())
            done = run_cli(env, *args, "--json")
            summary = json.loads(done.stdout.splitlines()[-1])["summary"]
            refused = sum(proxy.log.refused.values()) - refused_before
            reliability(
                "throttling",
                how,
                operation=operation,
                items=count,
                done=summary["objects_done"],
                failed=summary["objects_failed"],
                lost=len(check()),
                retries=summary["retries"],
                throttles=summary["throttles"],
                limit_cuts=summary["limit_cuts"],
                exit_code=done.returncode,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            assert summary["objects_done"] == count and check() == []
            assert summary["throttles"] == summary["retries"] == refused > 0  # each refusal: one retry
            assert summary["retries"] <= count // 3
            assert summary["limit_cuts"] > 0 and summary["concurrency"] < summary["concurrency_peak"]
            assert "in flight (limit lowered" in _summary_text(summary)
        assert proxy.log.accepted["PUT"] == count  # nothing was stored twice
