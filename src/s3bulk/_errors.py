"""Errors users see, and the line between failures worth retrying and final ones.

Every message is one line that names the problem and, where there is one, the fix. Messages pass
through `redact` so a secret that slipped into an exception text (a URL, a server echo) is never
printed, logged or journaled.
"""

from __future__ import annotations

import asyncio
import errno
import html
import importlib.util
import re

_SECRETS: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a credential so `redact` can scrub it from any text shown to users."""
    if value and len(value) >= 4:
        _SECRETS.add(value)


def redact(text: str) -> str:
    for secret in _SECRETS:
        text = text.replace(secret, "****")
    return text


class S3BulkError(Exception):
    """A problem the user can act on; str() is the one-line message."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class UsageError(S3BulkError):
    """Bad input: a malformed URL, a conflicting option, a missing file. Nothing was done."""

    exit_code = 2


# What each optional part of s3bulk needs beyond the core (pyproject's optional-dependencies)
EXTRAS = {
    "vectors": ("numpy", "pyarrow"),
    "parquet": ("pyarrow",),  # map's .parquet output (s3bulk[vectors] has it too)
    "arrays": ("numpy", "h5py", "numcodecs", "isal", "imagecodecs", "blosc2", "hdf5plugin"),
    "xarray": ("xarray", "h5netcdf", "numpy", "h5py"),
    "ray": ("ray",),
    "bench": ("psutil", "matplotlib"),
    "fsspec": ("fsspec",),
}


def require_extra(extra: str, what: str) -> None:
    """Refuse, in one line that says what to install, a feature whose extra is not installed:
    `import s3bulk` and the core commands never need one."""
    missing = [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]
    if missing:
        absent = ", ".join(missing)
        raise UsageError(
            f"{what} needs the {extra} extra ({absent} not installed): pip install 's3bulk[{extra}]'"
        )


class JobAborted(S3BulkError):
    """The job must stop (`--on-error abort` met a bad row): items in flight finish, nothing new
    starts, and the journal keeps what was done, so a run after the fix resumes from there."""


class JobInterrupted(KeyboardInterrupt):
    """The job was stopped by Ctrl-C or SIGTERM: what ran was finished or cleaned up (multipart
    uploads aborted, temporary files removed) and journaled. str() is the line for Python,
    naming the job and the call that finishes it (`s3bulk.resume(job_id)`); `in_the_shell()`
    the CLI's (`s3bulk cp --resume JOB`). A KeyboardInterrupt, so code that stops on one
    still does."""

    exit_code = 130

    def __init__(self, stopped: str, job_id: str = "", command: str = "") -> None:
        self.stopped, self.job_id, self.command = stopped, job_id, command
        super().__init__(f"{stopped}; finish it with: s3bulk.resume({job_id!r})" if job_id else stopped)

    def in_the_shell(self) -> str:
        """The line the CLI prints: the command that finishes the job (`command` is how it is
        run: `vectors put`)."""
        if not self.job_id or not self.command:
            return str(self)
        return f"{self.stopped}; finish it with: s3bulk {self.command} --resume {self.job_id}"


class ItemError(S3BulkError):
    """One object failed; `retryable` says whether trying again may help."""

    throttled = False  # the service asked us to slow down (adaptive concurrency backs off)
    unreachable = False  # no connection at all (refused, down): the service may be restarting
    # no other item can succeed either (bad credentials, no such bucket, the destination refuses
    # us): the job stops at the first one, with one line, instead of failing every item alike
    job_wide = False
    # the destination refused the write for want of permission (AccessDenied, EACCES): the job
    # stops when it happens before anything was written (`Mover._refused_destination`)
    denied = False

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class S3Error(ItemError):
    """An error answer from the service: HTTP status plus the S3 error code."""

    RETRYABLE_CODES = frozenset(
        {
            "SlowDown",
            "RequestTimeout",
            "RequestTimeTooSkewed",
            "InternalError",
            "ServiceUnavailable",
            "Throttling",
            "ThrottlingException",
            "TooManyRequestsException",
            "XMinioServerNotInitialized",
            # the body the service received is not the one sent (Content-MD5, the signed payload
            # hash, the x-amz-checksum-*): changed on the way, so sending it again is the cure
            "BadDigest",
            "XAmzContentSHA256Mismatch",
            "XAmzContentChecksumMismatch",
        }
    )

    # What a second attempt may cure, as botocore's retry modes have it: these statuses, 429 and
    # 509 (throttles), and the codes above. Not 501 NotImplemented (each attempt is refused
    # alike: it was tried six times), 505, 508, 511 ...
    RETRYABLE_STATUSES = frozenset({500, 502, 503, 504, 509})

    THROTTLE_CODES = frozenset(
        {"SlowDown", "Throttling", "ThrottlingException", "TooManyRequestsException", "ServiceUnavailable"}
    )

    # Answers about the account, the credentials or the bucket, never about one key.
    JOB_WIDE_CODES = frozenset(
        {
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
            "InvalidToken",
            "TokenRefreshRequired",
            "AccountProblem",
            "AllAccessDisabled",
            "NoSuchBucket",
            "InvalidBucketName",
            "PermanentRedirect",
            "AuthorizationHeaderMalformed",
        }
    )

    region = ""  # where the service says the bucket is, when it said (a wrong-region answer)
    storage_class = ""  # an archived object's class, when the refusal names it (InvalidObjectState)

    def __init__(self, status: int, code: str, message: str, what: str = "") -> None:
        self.status = status
        self.code = code
        self.message = message  # the service's own words
        self.throttled = status in (429, 503, 509) or code in self.THROTTLE_CODES
        self.job_wide = code in self.JOB_WIDE_CODES
        self.denied = code == "AccessDenied"
        retryable = status in self.RETRYABLE_STATUSES or status == 429 or code in self.RETRYABLE_CODES
        if status == 501 or code == "NotImplemented":  # no request of its kind would fare better
            retryable, self.job_wide = False, True
        if status == 507 or code == "XMinioStorageFull":  # the server's disk is full: so is every write
            retryable, self.job_wide = False, True
            message = f"{message.rstrip('.')}; the server has no space left: free some, then resume the job"
        if 300 <= status < 400 and "redirect" not in message:  # whose Location this client did not see
            message = f"{message.rstrip('.')}; a redirect, and s3bulk follows no redirect".lstrip("; ")
        hint = _HINTS.get(code, "") or next(
            (hint for known, words, hint in _MESSAGE_HINTS if code == known and words in message), ""
        )
        text = f"{what}: " if what else ""
        text += f"{code or 'HTTP ' + str(status)} ({status})"
        if message:
            text += f": {message}"
        if hint:
            text = f"{text.rstrip('.')}; {hint}"
        super().__init__(text, retryable=retryable)


class NoSuchObject(S3Error, FileNotFoundError):
    """A 404 (no such key, version or bucket) as a public entry point raises it: caught by
    `except FileNotFoundError` as a missing file is, and by `except s3bulk.S3Error`."""


class NotPermitted(S3Error, PermissionError):
    """A 403 (AccessDenied, a key or signature the service refuses) as a public entry point
    raises it: caught by `except PermissionError` as a file one may not read is, and by
    `except s3bulk.S3Error`."""


def as_builtin(error: S3Error) -> S3Error:
    """`error`, the same line and fields, as the builtin error Python's own file functions raise
    for it where there is one (a 404 a FileNotFoundError, a 403 a PermissionError): what the
    public entry points raise (`_api.base.with_builtin_errors`). Inside, errors stay S3Errors:
    code that catches a local OSError there (a full disk) must not catch the service's answer."""
    kind: type[NoSuchObject] | type[NotPermitted]
    if error.status == 404 or error.code in ("NoSuchKey", "NoSuchBucket", "NoSuchVersion"):
        kind = NoSuchObject
    elif error.status == 403:
        kind = NotPermitted
    else:
        return error
    if isinstance(error, kind):
        return error
    twin = kind.__new__(kind)
    twin.__dict__.update(error.__dict__)
    twin.args = error.args  # str() is the one line; errno below leaves it so (no strerror)
    twin.errno = errno.ENOENT if kind is NoSuchObject else errno.EACCES
    return twin


def changed_meanwhile(error: BaseException) -> bool:
    """Whether the service refused a request for its condition (412 PreconditionFailed to an
    If-Match or x-amz-copy-source-if-match): the object is no longer the version asked for,
    another writer changed it since it was listed or since the first request of its transfer."""
    return isinstance(error, S3Error) and (error.status == 412 or error.code == "PreconditionFailed")


class WrittenMeanwhile(ItemError):
    """A conditional write the service refused (412 to If-None-Match: * or If-Match: ETAG): the
    destination holds another object than the write was allowed to replace (one written, or
    changed, since it was listed). Not `changed_meanwhile`: no read of the source begins again."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class BytesMismatch(ItemError, OSError):
    """The bytes a read gave contradict what the object says of itself (its full-object checksum,
    or its ETag where that is an MD5): they changed on the way. An OSError too, so that a file's
    reader (`s3bulk.open`) fails as files fail."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        ItemError.__init__(self, message, retryable=retryable)
        self.errno = errno.EIO


_HINTS = {
    "NotImplemented": "the service does not implement this request, so s3bulk cannot do this there",
    "NoSuchBucket": "check the bucket name (and AWS_ENDPOINT_URL / --endpoint-url)",
    "InvalidAccessKeyId": "check AWS_ACCESS_KEY_ID / AWS_PROFILE",
    "SignatureDoesNotMatch": "check AWS_SECRET_ACCESS_KEY / AWS_PROFILE",
    "AccessDenied": "check the credentials' permissions for this bucket and key "
    "(a requester-pays bucket also needs --request-payer requester)",
}
# (code, words in the message) -> what to do: answers whose code alone says too little
_MESSAGE_HINTS = (
    ("InvalidRequest", "Server Side Encryption", "an SSE-C object is read with its key (--sse-c-key)"),
    (
        "InvalidRequest",
        "encryption parameters are not applicable",
        "the object is not SSE-C: drop --sse-c-key",
    ),
    ("InvalidArgument", "customer-provided encryption", "give the SSE-C key as 32 bytes (--sse-c-key)"),
)

_CODE_IN_BODY = re.compile(r"<Code>([^<]+)</Code>")
_MESSAGE_IN_BODY = re.compile(r"<Message>([^<]*)</Message>")
_STATUS_IN_TEXT = re.compile(r"\b([1-5]\d\d) [A-Z][A-Za-z ]+")


def classify(exc: BaseException, what: str = "") -> ItemError:
    """Turn any exception from a store, the network or the disk into an ItemError.

    obstore folds the service's answer into its message text, so the S3 error code and status are
    recovered from it; network-level failures (resets, timeouts) are retryable, disk and
    validation failures are final.
    """
    if isinstance(exc, ItemError):
        return exc
    full = html.unescape(redact(str(exc)).strip())  # obstore passes the service's XML on as is
    # object_store appends its error's Debug form, whose every retry says "retry_timeout": read
    # as a network failure's words, any error (a 403, a redirect) was retried as one. Only its
    # kind ("kind: Connect", no connection made) is read from it (`transient`).
    text = full.split("\n\nDebug source:", 1)[0]
    code_match = _CODE_IN_BODY.search(text)
    if code_match:
        status_match = _STATUS_IN_TEXT.search(text)
        status = int(status_match.group(1)) if status_match else 400
        message_match = _MESSAGE_IN_BODY.search(text)
        return S3Error(status, code_match.group(1), message_match.group(1) if message_match else "", what)
    prefix = f"{what}: " if what else ""
    name = type(exc).__name__
    if isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError)):
        return transient(f"{prefix}{name}: {text}", text, isinstance(exc, ConnectionRefusedError))
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):  # passes: wait and retry
        return transient(f"{prefix}{exc.strerror or text}", text)
    if isinstance(exc, OSError) and exc.filename is not None:  # local disk: final
        reason = exc.strerror or text
        return ItemError(f"{prefix}{reason}: {exc.filename}", retryable=False)
    lowered = text.lower()
    network: tuple[str, ...] = ("connection", "timed out", "timeout", "reset", "broken pipe")
    network += ("error sending request", "cannot connect", "connect call failed")
    # a body cut mid-stream (reqwest/hyper: "request or response body error", "error decoding
    # response body"; aiohttp: "payload is not completed"): the next attempt gets it whole
    network += ("body error", "decoding response body", "unexpected eof", "payload is not completed")
    if any(word in lowered for word in network):
        return transient(f"{prefix}{text.splitlines()[0]}", full, False)
    status_match = _STATUS_IN_TEXT.search(text)
    if status_match:
        status = int(status_match.group(1))
        return (
            S3Error(status, "", "", what)
            if status != 404
            else ItemError(f"{prefix}not found (404)", retryable=False)
        )
    first_line = text.splitlines()[0] if text else name
    return ItemError(f"{prefix}{first_line}", retryable=False)


# How clients say no connection could be made at all: obstore (reqwest's error kind), aiohttp, the OS.
_UNREACHABLE = ("kind: connect", "cannot connect to host", "connection refused", "connect call failed")


# How TLS says the endpoint's certificate is not one it trusts: rustls (the native part, obstore's
# reqwest) and OpenSSL (aiohttp).
_UNTRUSTED = ("invalid peer certificate", "certificate verify failed")


def transient(message: str, text: str, refused: bool = False) -> ItemError:
    """A network failure: retryable, and marked unreachable when no connection was made at all.
    But a certificate TLS does not trust is no failure of the network: every attempt meets the
    same certificate (each refusal retried cost the user seconds of back-off), and no other
    request of the job can pass either, so it stops the job at once, saying how to trust it."""
    if any(marker in text.lower() for marker in _UNTRUSTED):
        untrusted = ItemError(
            f"{message} (trust its certificate authority with AWS_CA_BUNDLE or the profile's ca_bundle)",
            retryable=False,
        )
        untrusted.job_wide = True
        return untrusted
    error = ItemError(message, retryable=True)
    error.unreachable = refused or any(marker in text.lower() for marker in _UNREACHABLE)
    return error
