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


def test_only_statuses_a_second_attempt_may_cure_are_retried() -> None:
    """As botocore's retry modes: 500, 502, 503, 504 and the throttles (429, 509); not 501
    NotImplemented, which no request of its kind would fare better with (the job stops), nor
    505, 508, 511."""
    from s3bulk._errors import S3Error

    assert all(S3Error(status, "", "").retryable for status in (500, 502, 503, 504, 429, 509))
    assert S3Error(509, "", "").throttled and S3Error(429, "", "").throttled
    assert not any(S3Error(status, "", "").retryable for status in (501, 505, 508, 511))
    unsupported = S3Error(
        501, "NotImplemented", "A header you provided implies functionality that is not implemented"
    )
    assert unsupported.job_wide and "the service does not implement this request" in str(unsupported)
    assert S3Error(400, "NotImplemented", "").job_wide  # whatever status it comes with


def test_a_certificate_tls_does_not_trust_stops_the_job_at_once_saying_how_to_trust_it() -> None:
    """Every attempt meets the same certificate: retried, a refusal cost seconds of back-off for
    nothing. In the words of rustls (the native part, obstore) and of OpenSSL (aiohttp)."""
    from s3bulk._errors import classify, transient

    for said in (
        "cannot connect to 127.0.0.1:9000: invalid peer certificate: UnknownIssuer",
        "Cannot connect to host h:443 ssl:True [SSLCertVerificationError: certificate verify failed]",
    ):
        untrusted = transient(f"list s3://b/: {said}", said, refused=True)
        assert (untrusted.retryable, untrusted.job_wide) == (False, True)
        assert "AWS_CA_BUNDLE or the profile's ca_bundle" in str(untrusted)
    through_obstore = classify(
        Exception(
            "Error performing GET http://h/b/k - error sending request: "
            "invalid peer certificate: UnknownIssuer"
        )
    )
    assert not through_obstore.retryable
    refused = transient("list s3://b/: connection refused", "connection refused", refused=True)
    assert refused.retryable and refused.unreachable and not refused.job_wide
