"""Signed HTTP to an AWS-shaped service: botocore's credential chain, a request count by kind,
and two ways to send: the native part (object_store's SigV4 signer on hyper's client,
`native_http`: the S3 client) or aiohttp with botocore's signer (the S3 Vectors client). The
base of both s3bulk's S3 client (XML) and its S3 Vectors client (JSON): they differ in the
service name they sign for and in how an error answer is read.

No boto3 client is on this path: botocore's per-request serialisation is the very cost the seed
articles measured, so only its signer and credentials are borrowed. Retries are not made here:
the storage seam (`stores.storage`) wraps each request with the one retry policy.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any, ClassVar

from s3bulk._config import AwsSettings, read_timeout_seconds
from s3bulk._errors import ItemError, S3Error, transient
from s3bulk._stores import native_http
from s3bulk._stores.native_http import Body, FileRange
from s3bulk._stores.objects import as_text, client_options
from s3bulk._stores.retry import Meter, log

if TYPE_CHECKING:
    import ssl

    import aiohttp

# aiohttp is imported when the first request is sent, not with this module: it costs ~0.2 s,
# and a command that never sends a signed request (a help text, a local gather) never pays it.


async def content_md5(body: bytes | bytearray | memoryview) -> str:
    """The Content-MD5 of a body this client sends, which the service checks before it stores
    anything (the signer leaves HTTPS payloads unsigned, so this is what catches a body changed
    on the way); a large body is hashed by a thread, beside the event loop."""
    if len(body) > 256 * 1024:
        digest = await asyncio.to_thread(lambda: hashlib.md5(body, usedforsecurity=False).digest())
    else:
        digest = hashlib.md5(body, usedforsecurity=False).digest()
    return base64.b64encode(digest).decode()


def tls_context(settings: AwsSettings, endpoint: str) -> ssl.SSLContext | bool:
    """How aiohttp checks `endpoint`'s certificates: not at all (--no-verify-ssl), against a CA
    bundle's alone (`AwsSettings.tls_bundle`, as botocore does), or the default context's (True)."""
    if not settings.verify_ssl:
        return False
    bundle = settings.tls_bundle(endpoint)
    if not bundle:
        return True
    import ssl  # as aiohttp is: only once a request is sent

    return ssl.create_default_context(cafile=bundle)


class SignedHttp:
    """One per process and event loop (its connection pool is the loop's)."""

    service: ClassVar[str]  # what requests are signed for: "s3", "s3vectors"
    # Sent by the native part (`stores.native_http`) rather than through aiohttp.
    native: ClassVar[bool] = False

    def __init__(
        self, settings: AwsSettings, endpoint: str, *, max_connections: int = 64, meter: Meter | None = None
    ) -> None:
        self.settings = settings
        self.endpoint = endpoint.rstrip("/")
        self.max_connections = max_connections
        self.meter = meter or Meter()
        self._region = settings.resolved_region
        self._session: aiohttp.ClientSession | None = None
        self._native_http: native_http.NativeHttp | None = None

    @property
    def requests(self) -> Any:
        return self.meter.requests

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(
                limit=self.max_connections, ttl_dns_cache=300, ssl=tls_context(self.settings, self.endpoint)
            )
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=read_timeout_seconds())
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=timeout, skip_auto_headers=["User-Agent", "Accept-Encoding"]
            )
        return self._session

    async def close(self) -> None:
        if self._native_http is not None:
            self._native_http.close()
            self._native_http = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def sign(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | bytearray | memoryview,
        region: str | None = None,
        body_sha256: str | None = None,
        as_session: Any = None,
    ) -> dict[str, str]:
        """The headers with SigV4's added (as they are, for anonymous access). `body_sha256`, the
        body's hex SHA-256 when the caller hashed it already (off the event loop), is signed
        instead of hashing the body again here. `as_session`: (credentials, service) of a
        directory bucket's session (`sessions.py`) instead of the settings' own."""
        credentials, service = as_session or (self.settings.credentials(), self.service)
        if credentials is None:
            return headers
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        signer = _signer(self.service == "s3")
        signer(credentials, service, region or self._region, body_sha256).add_auth(request)
        return dict(request.headers.items())

    async def send(
        self,
        kind: str,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        body: Body = b"",
        what: str = "",
        region: str | None = None,
        body_sha256: str | None = None,
        sign_payload: bool = True,
        as_session: Any = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One signed request (for `region`, else the settings'), counted as `kind`; an error
        answer raises `error()`'s S3Error, a network failure a retryable ItemError (marked
        unreachable when no connection was made). A `FileRange` body is read as it is sent by
        the native part, which checks it by its checksum, its signed SHA-256, or else its
        Content-MD5.
        Without `sign_payload` the native part signs UNSIGNED-PAYLOAD: for a body that carries
        its checksum, which the service checks. A URL object_store's signer would sign another
        path of (`native_http.signs_as_sent`) is signed here by botocore's signer, its body in
        memory (`S3Client.upload_part` reads a file's range first), and sent by the native part.
        `as_session`: signed with a directory bucket's session, (credentials, service)."""
        self.meter.requests[kind] += 1
        if self.native:
            signing = self._signing(region, body_sha256, sign_payload, as_session)
            if not native_http.signs_as_sent(url):
                assert not isinstance(body, FileRange)  # read first: botocore hashes what it signs
                headers, signing = (
                    self.sign(method, url, dict(headers or {}), body, region, body_sha256, as_session),
                    None,
                )
            try:
                status, reply_headers, payload = await self._native().send(
                    method, url, headers or {}, body, signing
                )
            except native_http.NativeFailure as exc:
                raise self.failure(url, what or kind, str(exc), exc.unreachable) from None
        else:
            assert not isinstance(body, FileRange)  # the native part's alone
            assert as_session is None  # directory buckets: the S3 client's, native
            status, reply_headers, payload = await self._send_aiohttp(
                kind, method, url, headers or {}, body, what, region, body_sha256
            )
        if log.isEnabledFor(logging.DEBUG):  # the URL names buckets and keys; headers, never
            log.debug("%s %s: %d, %d bytes", method, url, status, len(payload))
        if status >= 300:
            raise self.error(status, reply_headers, payload, what or kind)
        return status, reply_headers, payload

    def failure(self, url: str, what: str, message: str, unreachable: bool) -> ItemError:
        """A request to `url` the native part got no answer to (or a body cut short), in its
        words: retryable, marked unreachable when no connection was made."""
        said = f"cannot connect to {url.split('/')[2]}: {message}" if unreachable else message
        return transient(f"{what}: {said}", message, unreachable)

    def _native(self) -> native_http.NativeHttp:
        if self._native_http is None:
            options = client_options(
                self.settings, self.max_connections, allow_http=True, endpoint=self.endpoint
            )
            self._native_http = native_http.NativeHttp(as_text(options))
        return self._native_http

    def _signing(
        self, region: str | None, body_sha256: str | None, sign_payload: bool = True, as_session: Any = None
    ) -> native_http.Signing | None:
        """What the native signer needs (None: anonymous, sent unsigned)."""
        credentials, service = as_session or (self.settings.credentials(), self.service)
        if credentials is None:
            return None
        digest = bytes.fromhex(body_sha256) if body_sha256 is not None else None
        return native_http.Signing(
            credentials.access_key,
            credentials.secret_key,
            credentials.token,
            service,
            region or self._region,
            digest,
            sign_payload,
        )

    async def _send_aiohttp(
        self,
        kind: str,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | bytearray | memoryview,
        what: str,
        region: str | None,
        body_sha256: str | None,
    ) -> tuple[int, dict[str, str], bytes]:
        began = time.perf_counter()
        signed = self.sign(method, url, dict(headers), body, region, body_sha256)
        self.meter.stage_seconds["build"] += time.perf_counter() - began
        import aiohttp
        import yarl

        try:
            async with self._http().request(  # a redirect is an answer, not followed (`native_http`)
                method, yarl.URL(url, encoded=True), headers=signed, data=_data(body), allow_redirects=False
            ) as response:
                return response.status, dict(response.headers), await response.read()
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            refused = isinstance(exc, ConnectionRefusedError | aiohttp.ClientConnectorError)
            raise transient(f"{what or kind}: {type(exc).__name__}: {exc}", str(exc), refused) from None

    def error(self, status: int, headers: dict[str, str], payload: bytes, what: str) -> S3Error:
        """The service's error answer as an S3Error (retryable, throttled, job-wide as its code says)."""
        raise NotImplementedError


@functools.cache
def _signer(s3: bool) -> Any:
    """botocore's SigV4 signer for S3 or another service, which signs the payload hash it is
    given, if any, instead of hashing the body: hashing a 6 MB body costs ~3 ms, which a caller
    can spend in a thread while the event loop sends other requests (hashlib releases the GIL)."""
    from botocore.auth import S3SigV4Auth, SigV4Auth

    class Signer(S3SigV4Auth if s3 else SigV4Auth):  # type: ignore[misc]
        def __init__(self, credentials: Any, service: str, region: str, body_sha256: str | None) -> None:
            super().__init__(credentials, service, region)
            self.body_sha256 = body_sha256

        def payload(self, request: Any) -> str:
            return self.body_sha256 if self.body_sha256 is not None else str(super().payload(request))

    return Signer


# Bodies past this size go out after their headers rather than joined to them (`_data`).
SEPARATE_BODY_BYTES = 64 * 1024


def _data(body: bytes | bytearray | memoryview) -> Any:
    """What aiohttp sends for `body`. From 3.12 on, aiohttp joins the headers and the body into
    one bytes object before it writes them: for a 6 MB PutVectors body, a copy of it per request
    made while the GIL is held, into freshly faulted pages (measured: 5% of `vectors put`'s
    wall time). A large body goes out after its headers instead, in two writes and no copy."""
    if len(body) <= SEPARATE_BODY_BYTES:
        return body or None
    return _after_headers()(body)


@functools.cache
def _after_headers() -> Any:
    import aiohttp

    class AfterHeaders(aiohttp.BytesPayload):
        """A body written after the headers have gone out on their own."""

        async def write_with_length(self, writer: Any, content_length: int | None) -> None:
            send_headers = getattr(writer, "send_headers", None)  # aiohttp < 3.12 does not join
            if send_headers is not None:
                send_headers()
            await super().write_with_length(writer, content_length)

    return AfterHeaders
