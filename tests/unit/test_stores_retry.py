"""Retries that back off with full jitter, give up on final errors at once, and give a job-wide
request more attempts once the service was reached; failures classified as users read them
(`_stores/retry.py`, `_errors.py`), without a server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

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
