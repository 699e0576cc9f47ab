"""Engine behaviour users rely on: retries that back off and give up on final errors, work spread
over processes, and exit codes that reflect the job even across many back-to-back runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import Endpoint, bucket_digests, make_tree, new_bucket, run_cli

import s3bulk
from s3bulk._errors import ItemError, S3Error, classify
from s3bulk._stores.retry import RetryPolicy, with_retries


def test_full_jitter_stays_under_the_cap() -> None:
    policy = RetryPolicy(base_seconds=0.1, cap_seconds=2.0)
    delays = [policy.delay(attempt) for attempt in range(1, 12) for _ in range(50)]
    assert all(0 <= delay <= 2.0 for delay in delays)
    assert max(delays) > 1.0  # grows towards the cap


def test_retryable_errors_are_retried_then_succeed() -> None:
    attempts = []

    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise S3Error(503, "SlowDown", "reduce your request rate")
        return "ok"

    retries: list[ItemError] = []
    policy = RetryPolicy(base_seconds=0.001)
    assert asyncio.run(with_retries(flaky, policy, on_retry=retries.append)) == "ok"
    assert len(attempts) == 3 and len(retries) == 2


def test_final_errors_are_not_retried() -> None:
    attempts = []

    async def denied() -> None:
        attempts.append(1)
        raise S3Error(403, "AccessDenied", "no")

    with pytest.raises(S3Error, match="AccessDenied"):
        asyncio.run(with_retries(denied, RetryPolicy(base_seconds=0.001)))
    assert len(attempts) == 1


def test_classification_of_common_failures() -> None:
    assert classify(ConnectionResetError("reset by peer")).retryable
    assert classify(TimeoutError("timed out")).retryable
    assert not classify(FileNotFoundError(2, "No such file", "/x")).retryable
    answer = "Server returned non-2xx status code: 503 Service Unavailable: <Code>SlowDown</Code>"
    assert classify(RuntimeError(answer)).retryable


@pytest.mark.parametrize("workers", [1, 2])
def test_work_spreads_over_worker_processes(
    minio: Endpoint, aws_env: dict, tmp_path: Path, workers: int
) -> None:
    bucket = new_bucket(minio)
    files = {f"d{i % 7}/f{i:05d}": i.to_bytes(4, "big") for i in range(3000)}
    make_tree(tmp_path / "src", files)
    up = s3bulk.copy(f"{tmp_path}/src/", f"s3://{bucket}/", workers=workers, concurrency=16)
    assert up.ok and up.objects_done == 3000 and up.workers == workers
    down = s3bulk.copy(f"s3://{bucket}/", f"{tmp_path}/out/", workers=workers, concurrency=16)
    assert down.ok and down.objects_done == 3000
    assert down.requests["LIST"] >= 3  # three pages of 1,000
    assert all((tmp_path / "out" / key).read_bytes() == data for key, data in files.items())
    assert len(bucket_digests(minio, bucket)) == 3000


@pytest.mark.campaign  # make reliability: the engine fifty times in a row, for a once-seen race
def test_fifty_back_to_back_cli_runs_all_exit_zero(minio: Endpoint, bucket: str, tmp_path: Path) -> None:
    """obstore's runtime can abort at interpreter shutdown; the exit code must not show it."""
    (tmp_path / "one.txt").write_bytes(b"1")
    codes = []
    for index in range(50):
        direction = (
            ["cp", str(tmp_path / "one.txt"), f"s3://{bucket}/k{index}"]
            if index % 2 == 0
            else ["cp", f"s3://{bucket}/k{index - 1}", f"{tmp_path}/back{index}"]
        )
        result = run_cli(minio.env, *direction)
        codes.append((result.returncode, result.stderr[-200:]))
    assert [code for code, _ in codes] == [0] * 50, [c for c in codes if c[0] != 0]


def test_a_killed_worker_loses_nothing_and_fails_the_job(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """SIGKILL one worker mid-upload: its descriptors go to the other worker, every object still
    arrives intact, and the exit code says something went wrong."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    files = {f"d{i % 5}/f{i:05d}": i.to_bytes(4, "big") * 64 for i in range(4000)}
    make_tree(tmp_path / "src", files)
    command = [sys.executable, "-m", "s3bulk", "cp", "--workers", "2", "--concurrency", "4"]
    process = subprocess.Popen(
        [*command, f"{tmp_path}/src/", f"s3://{bucket}/"],
        env=minio.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = minio.client()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the job is under way, then kill a worker
        listed = client.list_objects_v2(Bucket=bucket, MaxKeys=200).get("KeyCount", 0)
        driver = psutil.Process(process.pid)
        helpers = [  # a forkserver starts the workers once the driver has threads (its resolver's)
            child
            for child in driver.children()
            if any(name in " ".join(child.cmdline()) for name in ("forkserver", "resource_tracker"))
        ]
        children = [child for child in driver.children(recursive=True) if child not in helpers]
        if listed >= 200 and children:
            children[0].send_signal(signal.SIGKILL)
            break
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1, stderr
    assert "died" in stderr
    stored = bucket_digests(minio, bucket)
    assert len(stored) == 4000
    assert stored == {key: __import__("hashlib").sha256(data).hexdigest() for key, data in files.items()}


def test_byte_budget_bounds_bytes_in_flight_and_lets_oversized_items_run_alone() -> None:
    from s3bulk._engine.budget import ByteBudget

    budget = ByteBudget(10)
    peak = 0
    running: list[int] = []

    async def item(cost: int) -> None:
        nonlocal peak
        held = await budget.acquire(cost)
        running.append(cost)
        peak = max(peak, budget.used)
        if cost > 10:
            assert running == [cost]  # an oversized item runs with nothing else in flight
        await asyncio.sleep(0.001)
        running.remove(cost)
        await budget.release(held)

    async def main() -> None:
        await asyncio.gather(*(item(cost) for cost in [4, 4, 4, 25, 3, 3, 3, 3, 9, 0]))

    asyncio.run(main())
    assert peak <= 10 and budget.used == 0


def test_a_streamed_download_counts_its_buffers_not_its_body() -> None:
    """A download the native part streams into its file (16 KiB to 8 MiB, single-part ETag or
    none) counts what a GET in flight holds, so a 16 MiB budget admits 32 GETs of 4 MiB, not 4;
    one fetched whole counts its size; one from 8 MiB what its GET (or its ranges in flight, above
    the threshold) holds, streamed."""
    from s3bulk._stores.routes import STREAMED_HELD, Parts, bytes_held

    parts = Parts(size=8 * 1024**2, in_flight=4, threshold=64 * 1024**2)
    single, multipart = '"' + "ab" * 16 + '"', '"' + "ab" * 16 + '-3"'
    assert bytes_held(4 * 1024**2, single, parts) == STREAMED_HELD < 4 * 1024**2
    assert bytes_held(4 * 1024**2, "", parts) == STREAMED_HELD
    assert bytes_held(1024**2, single, parts) == STREAMED_HELD
    assert bytes_held(10_000, single, parts) == 10_000  # written at once, under 16 KiB
    assert bytes_held(4 * 1024**2, multipart, parts) == 4 * 1024**2  # the signed client, whole
    assert bytes_held(100 * 1024**2, single, parts) == 4 * STREAMED_HELD  # ranges, streamed
    assert bytes_held(20 * 1024**2, multipart, parts) == STREAMED_HELD  # one GET, streamed
    assert bytes_held(9 * 1024**2, "", parts) == STREAMED_HELD
    low = Parts(size=5 * 1024**2, in_flight=4, threshold=8 * 1024**2)
    assert bytes_held(9 * 1024**2, "", low) == 2 * STREAMED_HELD  # 2 ranges


def test_a_large_download_asks_for_the_ranges_of_its_parts_side_by_side() -> None:
    """Ranges smaller than the object's parts are asked for the first of each part, then the
    second of each, ... so that its parts come, and are hashed, side by side in SIMD lanes
    (native/src/parthash.rs); ranges no smaller go in order; under the threshold, one GET one
    byte past the size. Every byte is asked for once."""
    from s3bulk._stores.routes import Parts, spans

    MiB = 1024**2
    parts = Parts(size=8 * MiB, in_flight=4, threshold=64 * MiB)
    size = 100 * MiB
    side_by_side = list(spans(size, parts, 50 * MiB))
    assert side_by_side[:4] == [(0, 8 * MiB), (50 * MiB, 58 * MiB), (8 * MiB, 16 * MiB), (58 * MiB, 66 * MiB)]
    assert side_by_side[-2:] == [(48 * MiB, 50 * MiB), (98 * MiB, 100 * MiB)]
    for asked in (
        side_by_side,
        list(spans(size, parts, 8 * MiB)),
        list(spans(size, parts, 5 * MiB)),
        list(spans(size, parts, None)),
    ):
        ordered = sorted(asked)  # each starts where the one before ended, up to the size
        assert [start for start, _ in ordered] == [0] + [end for _, end in ordered[:-1]]
        assert ordered[-1][1] == size
    assert list(spans(size, parts, 8 * MiB)) == sorted(spans(size, parts, 8 * MiB))
    assert list(spans(20 * MiB, parts, 8 * MiB)) == [(0, 20 * MiB + 1)]


def test_a_large_upload_counts_its_parts_read_as_they_are_sent() -> None:
    """A file above the threshold is sent in parts read from it as they go (native/src/
    filebody.rs), each counted at what it holds, not its size; a small file is read whole; a
    key with a dot segment is no exception."""
    from s3bulk._stores.routes import STREAMED_HELD, Parts, upload_held

    parts = Parts(size=8 * 1024**2, in_flight=4, threshold=64 * 1024**2)
    assert upload_held(100 * 1024**2, parts) == 4 * STREAMED_HELD
    assert upload_held(10 * 1024**2, parts) == 10 * 1024**2


def test_byte_budget_serves_waiters_in_order_and_a_cancelled_waiter_holds_nothing() -> None:
    from s3bulk._engine.budget import ByteBudget

    async def main() -> None:
        budget = ByteBudget(10)
        await budget.acquire(8)
        order: list[str] = []

        async def wait(name: str, cost: int) -> None:
            await budget.acquire(cost)
            order.append(name)

        first, second, third = (asyncio.create_task(wait(n, c)) for n, c in (("a", 6), ("b", 2), ("c", 2)))
        await asyncio.sleep(0)
        assert order == []  # "b" fits beside the 8 held, but does not jump ahead of "a"
        first.cancel()
        for _ in range(3):  # the cancellation, then the grant, then "b" running on
            await asyncio.sleep(0)
        assert order == ["b"] and budget.used == 10  # with "a" gone, "b" fits and "c" waits
        await budget.release(8)
        await asyncio.gather(second, third)
        assert order == ["b", "c"] and budget.used == 4
        granted = asyncio.create_task(budget.acquire(7))
        await budget.release(2)  # room for 7 is handed over, then the task is cancelled
        granted.cancel()
        await asyncio.gather(granted, return_exceptions=True)
        assert budget.used == 2

    asyncio.run(main())


class _Phases:
    """How many items are sending requests, and how many have sent their last one, at most."""

    requesting = local = most_requesting = most_local = 0
    enough: asyncio.Event


class _LocalWorkJob:
    """Items that send a request, say they are done with requests, then wait for local work (as
    a download waits for its MD5 in the lanes) until 8 of them wait together."""

    def __init__(self, items: int) -> None:
        from s3bulk._config import AwsSettings

        self.settings = AwsSettings()
        self.preflight_requests: dict[str, int] = {}
        self.preflight_notes: list[str] = []
        self.items = items

    async def partitions(self, stats):
        yield (0, self.items)

    def retry_partitions(self, rows):
        return iter(())

    async def open(self, ctx) -> None:
        _Phases.requesting = _Phases.local = _Phases.most_requesting = _Phases.most_local = 0
        _Phases.enough = asyncio.Event()

    async def expand(self, descriptor, ctx):
        yield list(range(*descriptor))

    async def run(self, item, ctx) -> int:
        from s3bulk._stores.retry import done_with_requests

        _Phases.requesting += 1
        _Phases.most_requesting = max(_Phases.most_requesting, _Phases.requesting)
        await asyncio.sleep(0.001)  # the request
        _Phases.requesting -= 1
        await done_with_requests()
        _Phases.local += 1
        _Phases.most_local = max(_Phases.most_local, _Phases.local)
        if _Phases.local >= 8:
            _Phases.enough.set()
        with contextlib.suppress(TimeoutError):  # bounded: a failing run still ends
            await asyncio.wait_for(_Phases.enough.wait(), 1.0)
        _Phases.local -= 1
        return 1

    def item_id(self, item) -> str:
        return str(item)

    def cost(self, item) -> int:
        return 1

    def describe(self, item):
        return str(item), "", 1

    async def close(self, ctx) -> None:
        pass


def test_an_item_done_with_requests_gives_its_slot_to_the_next() -> None:
    """With 4 requests in flight, items waiting only for work on this machine (a download's MD5
    in the lanes) let others send theirs: 8 wait together, while requests stay at 4."""
    from s3bulk._engine.driver import Engine
    from s3bulk._engine.loop import run_loop
    from s3bulk._engine.strategies import choose, in_the_driver
    from s3bulk._engine.worker import EngineOptions
    from s3bulk._report import Report

    strategy = in_the_driver(choose("hybrid", None, 4))
    report = run_loop(
        Engine(strategy, EngineOptions(max_in_flight_bytes=1024)).run(_LocalWorkJob(24), Report("t"))
    )
    assert report.objects_done == 24, report
    assert _Phases.most_requesting <= 4
    assert _Phases.most_local >= 8


def test_a_job_wide_request_gets_twice_an_item_s_attempts_once_the_service_was_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listing's page that fails stops the whole job (an item's failure stops only the item):
    through 30% of connections reset, six attempts of a page all failed now and then. Before the
    service was ever reached, a wrong endpoint fails as soon as before (12 attempts: 56 s)."""
    from s3bulk._stores import retry
    from s3bulk._stores.retry import Retrier

    def failing_until(succeeds_at: int) -> tuple[list[int], Callable[[], Awaitable[str]]]:
        attempts: list[int] = []

        async def reset() -> str:
            attempts.append(1)
            if len(attempts) < succeeds_at:
                raise ConnectionResetError("Connection reset by peer (os error 104)")
            return "page"

        return attempts, reset

    retrier = Retrier(RetryPolicy(max_attempts=3, base_seconds=0.001))
    monkeypatch.setattr(retry, "_service_reached", False)
    attempts, page = failing_until(6)
    with pytest.raises(ItemError, match="reset"):
        asyncio.run(retrier(page, "list s3://b/p/", job_wide=True))
    assert len(attempts) == 3
    monkeypatch.setattr(retry, "_service_reached", True)
    attempts, page = failing_until(6)
    assert asyncio.run(retrier(page, "list s3://b/p/", job_wide=True)) == "page"
    assert len(attempts) == 6
    attempts, item = failing_until(6)
    with pytest.raises(ItemError, match="reset"):
        asyncio.run(retrier(item, "get s3://b/p/k"))
    assert len(attempts) == 3
