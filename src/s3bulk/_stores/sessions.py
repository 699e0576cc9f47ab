"""Session authentication for S3 Express One Zone directory buckets (CreateSession).

A directory bucket's object and listing requests are signed with a session's credentials, not
the caller's own: `GET /?session` on the bucket, signed with the caller's, answers a key id, a
secret and a token that expire (five minutes on AWS). Each request then carries the token as
`x-amz-s3session-token` (no `x-amz-security-token`) and is signed with the session's key for the
service `s3express`. Sessions are cached per bucket and asked for again before they expire (a
fifth of their life, at most a minute, ahead), one CreateSession at a time per bucket however many
requests wait; a request refused with ExpiredToken (a clock that differs) drops the session, and
is sent once more with a new one.

Signing for `s3express` is what AWS checks; with an endpoint of one's own (a stand-in, a
gateway) requests are signed for `s3`, the only service an S3-compatible server checks
signatures for (docs/compatibility.md says what only AWS can confirm).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import NamedTuple

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, register_secret
from s3bulk._stores import s3xml
from s3bulk._urls import is_directory_bucket

SESSION_HEADER = "x-amz-s3session-token"
REFRESH_AHEAD_MAX = 60.0  # seconds: a session is renewed this long before it expires, at most


class SessionKeys(NamedTuple):
    """A session's key id and secret, shaped as botocore's ReadOnlyCredentials are (no token:
    the session's goes in its own header)."""

    access_key: str
    secret_key: str
    token: None = None


class Session(NamedTuple):
    credentials: SessionKeys  # the session's key id and secret (no token: it is a header)
    token: str
    expires: float  # time.time() it expires at
    renew_at: float  # time.time() a new one is asked for from

    @property
    def header(self) -> dict[str, str]:
        return {SESSION_HEADER: self.token}


def signing_service(settings: AwsSettings) -> str:
    """What a session's requests are signed for: AWS's `s3express`, or with an endpoint of
    one's own `s3`."""
    return "s3" if settings.endpoint_url else "s3express"


def takes_session(settings: AwsSettings, bucket: str, key: str, method: str) -> bool:
    """Whether this request is signed with the bucket's session: a directory bucket's objects,
    listings and DeleteObjects; not CreateBucket or DeleteBucket (regional, the caller's own).
    A directory bucket is one named so, unless the settings say every bucket or none is."""
    asked = settings.express_sessions
    if not bucket or settings.anonymous or asked is False or not (asked or is_directory_bucket(bucket)):
        return False
    return bool(key) or method not in ("PUT", "DELETE")


def parse_session(body: bytes, now: float, what: str) -> Session:
    """A CreateSession answer as a Session; one line if it is not one."""
    key_id, secret, token = (
        s3xml.find_text(body, tag) for tag in ("AccessKeyId", "SecretAccessKey", "SessionToken")
    )
    expiration = s3xml.find_text(body, "Expiration")
    if not (key_id and secret and token and expiration):
        raise ItemError(f"{what}: the answer holds no session's credentials", retryable=False)
    register_secret(secret)
    register_secret(token)
    expires = _epoch(expiration, what)
    life = max(expires - now, 0.0)
    renew_at = expires - min(REFRESH_AHEAD_MAX, life / 5)
    return Session(SessionKeys(key_id, secret), token, expires, renew_at)


def _epoch(moment: str, what: str) -> float:
    """Expiration as AWS writes it (ISO 8601) or as an HTTP date."""
    try:
        return datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(moment).timestamp()
    except (TypeError, ValueError):
        raise ItemError(f"{what}: the session's Expiration {moment!r} is no time", retryable=False) from None


class Sessions:
    """One client's sessions, per bucket. `create(bucket)` sends the CreateSession."""

    def __init__(
        self, create: Callable[[str], Awaitable[Session]], clock: Callable[[], float] = time.time
    ) -> None:
        self._create = create
        self._clock = clock
        self._held: dict[str, Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def of(self, bucket: str) -> Session:
        """The bucket's session, a new one if it has none or it is due for renewal."""
        held = self._held.get(bucket)
        if held is not None and self._clock() < held.renew_at:
            return held
        lock = self._locks.setdefault(bucket, asyncio.Lock())
        async with lock:  # one CreateSession per bucket, however many requests wait for it
            held = self._held.get(bucket)
            if held is None or self._clock() >= held.renew_at:
                held = self._held[bucket] = await self._create(bucket)
            return held

    def drop(self, bucket: str, session: Session) -> None:
        """The service refused `session` (expired): the next request asks for a new one."""
        if self._held.get(bucket) == session:
            del self._held[bucket]
