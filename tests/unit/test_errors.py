"""Errors read without a server: an object store's error by its first part and its kind."""

from __future__ import annotations


def test_an_object_store_error_is_read_by_its_first_part_and_its_kind() -> None:
    """object_store appends its error's Debug form, where every retry says "retry_timeout": a
    403 must not read as a network failure, a refused connection must read as unreachable."""
    from s3bulk._errors import classify

    debug = "\n\nDebug source:\nGeneric { source: RetryError { retry_timeout: 120s, inner: %s } }"
    denied = classify(Exception("Error performing GET http://h/b/k - 403 Forbidden" + debug % "Status"))
    assert not denied.retryable
    refused = classify(
        Exception("Error performing GET http://h/b/k - error sending request" + debug % "kind: Connect")
    )
    assert refused.retryable and refused.unreachable
