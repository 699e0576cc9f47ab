"""A misbehaving S3 server, for tests: a real server's answers (MinIO's), passed through a proxy
on loopback that breaks them the ways real services, proxies and networks do, per bucket, per
operation, per key or per request.

    with MinioServer() as minio, HostileS3(minio.endpoint) as hostile:
        hostile.misbehave(ErrorIn200("InternalError"), operation="ListObjectsV2", after=1)
        # a client pointed at hostile.endpoint (with MinIO's credentials) now gets page 2 of
        # every listing as 200 OK and an <Error>

Real servers behave too well to show what a client does when S3 answers 200 OK with an error
(documented for CopyObject, UploadPartCopy and CompleteMultipartUpload), when a listing breaks
mid-way, a continuation token comes round again, pages bring no new key under fresh tokens
forever, keys said to be URL-encoded are sent as they are, a redirect points at another host, a
listing lies about a size or lists a key twice, or a body trickles or stops. Each `Fault` below
is one of those; a `Rule` says which requests it applies to. Requests go on to the server with
their Host header unchanged, so the server checks the signature the client made for the proxy's
address.

`Recorder` is a second loopback server that only records what reaches it (the target of a
`Redirect`): a test asks it whether credentials arrived there.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, unquote_plus

from aiohttp import web

from s3bulk.testing.throttle import LoopbackProxy

_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class Exchange:
    """One request as the proxy sees it, and the server's answer to it (fetched on demand:
    a fault that answers in the server's place never sends the request on)."""

    request: web.Request
    body: bytes
    operation: str
    bucket: str
    key: str
    # the request sent on (with another body, if given), and the server's answer
    forward: Callable[..., Awaitable[tuple[int, dict[str, str], bytes]]]


Answer = web.StreamResponse


class Fault:
    """What a rule does to a request. The default sends it on and passes the answer back."""

    async def answer(self, exchange: Exchange) -> Answer:
        status, headers, body = await exchange.forward()
        return self.reply(exchange, status, headers, self.rewrite(exchange, body))

    def rewrite(self, exchange: Exchange, body: bytes) -> bytes:
        return body

    @staticmethod
    def reply(exchange: Exchange, status: int, headers: dict[str, str], body: bytes) -> Answer:
        if exchange.request.method == "HEAD":  # no body, and the object's own Content-Length
            return web.Response(status=status, headers=headers)
        headers = {name: value for name, value in headers.items() if name.lower() != "content-length"}
        return web.Response(status=status, body=body, headers=headers)

    def __str__(self) -> str:
        return type(self).__name__


def _error_xml(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{message}</Message><RequestId>hostile</RequestId></Error>"
    ).encode()


@dataclass
class ErrorIn200(Fault):
    """200 OK with an <Error> body, and the request never done (a copy not made, a page not
    listed): what S3 documents for CopyObject, UploadPartCopy and CompleteMultipartUpload, and
    what a service failing mid-listing has sent."""

    code: str = "InternalError"
    message: str = "We encountered an internal error. Please try again."

    async def answer(self, exchange: Exchange) -> Answer:
        return web.Response(
            status=200, body=_error_xml(self.code, self.message), content_type="application/xml"
        )


@dataclass
class Status(Fault):
    """An error answer (`status` and an S3 <Error> of `code`), the request never done."""

    status: int = 500
    code: str = "InternalError"

    async def answer(self, exchange: Exchange) -> Answer:
        body = _error_xml(self.code, "hostile") if exchange.request.method != "HEAD" else b""
        return web.Response(status=self.status, body=body, content_type="application/xml")


@dataclass
class RefusesChecksums(Fault):
    """A store that predates AWS's integrity change of December 2024 (B2, OVH, Hetzner and the
    like): a request carrying an x-amz-checksum-* header (with `mode`, x-amz-checksum-mode too)
    or an unsigned payload is refused, 400 InvalidArgument naming it, as B2 answers, and never
    done; any other goes on to the server."""

    mode: bool = False
    refusals: int = 0  # requests refused so far

    async def answer(self, exchange: Exchange) -> Answer:
        refused = self.refused(exchange.request.headers)
        if refused is None:
            return await super().answer(exchange)
        self.refusals += 1
        message = f"Unsupported header '{refused}' received for this API call."
        body = _error_xml("InvalidArgument", message) if exchange.request.method != "HEAD" else b""
        return web.Response(status=400, body=body, content_type="application/xml")

    def refused(self, headers: Any) -> str | None:
        """The header a request is refused for (None: it is taken)."""
        for name in headers:
            lowered = name.lower()
            if lowered == "x-amz-checksum-mode" and not self.mode:
                continue
            if lowered.startswith(("x-amz-checksum-", "x-amz-sdk-checksum-", "x-amz-trailer")):
                return str(lowered)
        if "UNSIGNED" in headers.get("x-amz-content-sha256", ""):
            return "x-amz-content-sha256"
        return None


@dataclass
class NotXml(Fault):
    """200 OK with something that is not the operation's answer (a captive portal, a proxy's
    page), the request never done."""

    body: bytes = b"<html><body>Service temporarily unavailable</body></html>"

    async def answer(self, exchange: Exchange) -> Answer:
        return web.Response(status=200, body=self.body, content_type="text/html")


class TruncatedWithoutToken(Fault):
    """A listing page that says more follows (IsTruncated) but gives no token to go on with."""

    def rewrite(self, exchange: Exchange, body: bytes) -> bytes:
        body = re.sub(rb"<NextContinuationToken>[^<]*</NextContinuationToken>", b"", body)
        return re.sub(rb"<IsTruncated>false</IsTruncated>", b"<IsTruncated>true</IsTruncated>", body)


class RepeatToken(Fault):
    """A listing page asked for with a token that says more follows, under that same token: the
    same page, forever (a page asked for without a token passes as it is)."""

    def rewrite(self, exchange: Exchange, body: bytes) -> bytes:
        asked = exchange.request.query.get("continuation-token")
        if not asked:
            return body
        token = asked.replace("&", "&amp;").replace("<", "&lt;").encode()
        body = re.sub(rb"<NextContinuationToken>[^<]*</NextContinuationToken>", b"", body)
        return re.sub(
            rb"<IsTruncated>[^<]*</IsTruncated>",
            b"<IsTruncated>true</IsTruncated><NextContinuationToken>" + token + b"</NextContinuationToken>",
            body,
        )


class _Pages:
    """Fresh continuation tokens, never given before (what a broken listing hands out forever)."""

    def __init__(self) -> None:
        self._given = itertools.count(1)

    def fresh(self, body: bytes) -> bytes:
        """The page said to be truncated, under a token of its own."""
        token = b"hostile-%d" % next(self._given)
        body = re.sub(rb"<NextContinuationToken>[^<]*</NextContinuationToken>", b"", body)
        return re.sub(
            rb"<IsTruncated>[^<]*</IsTruncated>",
            b"<IsTruncated>true</IsTruncated><NextContinuationToken>" + token + b"</NextContinuationToken>",
            body,
        )


class SamePageFreshToken(Fault):
    """A listing whose every page is its first page again, the same keys under a fresh token each
    time (which no cycle of tokens gives away): listed, counted and copied forever."""

    def __init__(self) -> None:
        self._pages = _Pages()
        self._first: dict[tuple[str, str], bytes] = {}  # (bucket, prefix) -> its first page

    async def answer(self, exchange: Exchange) -> Answer:
        where = (exchange.bucket, exchange.request.query.get("prefix", ""))
        if "continuation-token" in exchange.request.query and where in self._first:
            return _xml_answer(self._pages.fresh(self._first[where]))
        status, headers, body = await exchange.forward()
        if status != 200:
            return self.reply(exchange, status, headers, body)
        self._first[where] = body
        return self.reply(exchange, status, headers, self._pages.fresh(body))


class EmptyPages(Fault):
    """A listing whose first page says more follows, and every page after it holds no key and
    says more follows, under a fresh token: forever."""

    def __init__(self) -> None:
        self._pages = _Pages()

    async def answer(self, exchange: Exchange) -> Answer:
        if "continuation-token" not in exchange.request.query:
            status, headers, body = await exchange.forward()
            return self.reply(exchange, status, headers, self._pages.fresh(body) if status == 200 else body)
        prefix = html.escape(exchange.request.query.get("prefix", ""), quote=False)
        empty = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/'
            f'2006-03-01/"><Name>{exchange.bucket}</Name><Prefix>{prefix}</Prefix><KeyCount>0</KeyCount>'
            "<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>"
        )
        return _xml_answer(self._pages.fresh(empty.encode()))


def _xml_answer(body: bytes) -> Answer:
    return web.Response(status=200, body=body, content_type="application/xml")


@dataclass
class RawKeysSaidEncoded(Fault):
    """A listing that says its keys are URL-encoded (EncodingType=url) and sends them as they
    are: `a+b` reads as "a b", `c%41d` as "cAd". With `only_when_asked`, it lies only to a
    request that asked for URL encoding (and answers others as they are)."""

    only_when_asked: bool = False

    def rewrite(self, exchange: Exchange, body: bytes) -> bytes:
        asked = exchange.request.query.get("encoding-type") == "url"
        if self.only_when_asked and not asked:
            return body
        encoded = b"<EncodingType>url</EncodingType>" in body

        def raw(found: re.Match[bytes]) -> bytes:
            text = found.group(2).decode()
            key = unquote_plus(text) if encoded else html.unescape(text)
            return b"<%s>%s</%s>" % (found.group(1), html.escape(key, quote=False).encode(), found.group(1))

        body = re.sub(rb"<(Key|Prefix)>([^<]*)</(?:Key|Prefix)>", raw, body)
        if not encoded:
            body = body.replace(
                b"</ListBucketResult>", b"<EncodingType>url</EncodingType></ListBucketResult>"
            )
        return body


@dataclass
class ListedTwice(Fault):
    """A listing that gives `key`'s entry (every entry, when None) twice in a row."""

    key: str | None = None

    def rewrite(self, exchange: Exchange, body: bytes) -> bytes:
        def entry(found: re.Match[bytes]) -> bytes:
            text = found.group(0)
            listed = re.search(rb"<Key>([^<]*)</Key>", text)
            if self.key is not None and (listed is None or unquote(listed.group(1).decode()) != self.key):
                return text
            return text + text

        return re.sub(rb"<Contents>.*?</Contents>", entry, body, flags=re.DOTALL)


@dataclass
class Listed(Fault):
    """A listing that gives `key` (every key, when None) `value` as its `field` ("Size",
    "LastModified", "ETag"): a size S3 cannot hold, a time that is no time, an ETag that is no
    MD5."""

    field: str
    value: object
    key: str | None = None

    def rewrite(self, exchange: Exchange, body: bytes) -> bytes:
        name = self.field.encode()
        new = b"<%s>%s</%s>" % (name, str(self.value).encode(), name)
        return _rewrite_entries(body, self.key, b"<%s>[^<]*</%s>" % (name, name), new)


def _rewrite_entries(body: bytes, key: str | None, field_pattern: bytes, new: bytes) -> bytes:
    def entry(found: re.Match[bytes]) -> bytes:
        text = found.group(0)
        listed = re.search(rb"<Key>([^<]*)</Key>", text)
        if key is not None and (listed is None or unquote(listed.group(1).decode()) != key):
            return text
        return re.sub(field_pattern, new, text)

    return re.sub(rb"<Contents>.*?</Contents>", entry, body, flags=re.DOTALL)


@dataclass
class Redirect(Fault):
    """A redirect (`status`) to the same path at another host (`to`, e.g. a Recorder's
    endpoint), the request never done."""

    to: str
    status: int = 307

    async def answer(self, exchange: Exchange) -> Answer:
        location = self.to.rstrip("/") + str(exchange.request.rel_url)
        body = _error_xml(
            "TemporaryRedirect", "Please re-send this request to the specified temporary endpoint."
        )
        return web.Response(status=self.status, body=body, headers={"Location": location})


@dataclass
class FlipByte(Fault):
    """The answer's body with one byte changed, its size right: what a broken middlebox does."""

    def rewrite(self, exchange: Exchange, body: bytes) -> bytes:
        if len(body) < 1:
            return body
        middle = len(body) // 2
        return body[:middle] + bytes([body[middle] ^ 1]) + body[middle + 1 :]


class FlipRequestByte(Fault):
    """The request's body passed on with one byte changed, its size right: a broken middlebox on
    the way up, which only a checksum the service checks can catch."""

    async def answer(self, exchange: Exchange) -> Answer:
        body = FlipByte().rewrite(exchange, exchange.body)
        status, headers, reply = await exchange.forward(body)
        return self.reply(exchange, status, headers, reply)


@dataclass
class SlowBody(Fault):
    """The answer's body at `bytes_per_second`, after its headers came at once: a slow loris.
    `sent` counts the body's bytes written before the client hung up: how long it bore the pace,
    measured in the server's own time, whatever the client spent starting."""

    bytes_per_second: int = 1
    sent: int = 0

    async def answer(self, exchange: Exchange) -> Answer:
        status, headers, body = await exchange.forward()
        response = _streamed(status, headers, len(body))
        await response.prepare(exchange.request)
        step = max(1, self.bytes_per_second // 10)
        for start in range(0, len(body), step):
            await response.write(body[start : start + step])
            self.sent += len(body[start : start + step])
            await asyncio.sleep(0.1)
        await response.write_eof()
        return response


@dataclass
class CutBody(Fault):
    """The answer's headers (its full Content-Length), then `after` bytes of its body, then the
    connection reset: a link that drops mid-body."""

    after: int = 0

    async def answer(self, exchange: Exchange) -> Answer:
        status, headers, body = await exchange.forward()
        response = _streamed(status, headers, len(body))
        await response.prepare(exchange.request)
        if self.after:
            await response.write(body[: self.after])
        transport = exchange.request.transport
        assert transport is not None
        transport.abort()
        return response


@dataclass
class Meanwhile(Fault):
    """Another writer: `change()` (a PUT or DELETE of the same object, sent straight to the
    server) runs just before the request goes on, or with `after`, once the server has done it
    and before its answer goes back: the object changes between two requests of a job."""

    change: Callable[[], object]
    after: bool = False

    async def answer(self, exchange: Exchange) -> Answer:
        if not self.after:
            await asyncio.to_thread(self.change)
        status, headers, body = await exchange.forward()
        if self.after:
            await asyncio.to_thread(self.change)
        return self.reply(exchange, status, headers, body)


class LostAnswer(Fault):
    """The request is done by the server, but the connection is reset before its answer."""

    async def answer(self, exchange: Exchange) -> Answer:
        await exchange.forward()
        transport = exchange.request.transport
        assert transport is not None
        transport.abort()
        return web.Response()


def _streamed(status: int, headers: dict[str, str], length: int) -> web.StreamResponse:
    response = web.StreamResponse(status=status)
    for name, value in headers.items():
        if name.lower() not in _HOP_BY_HOP:
            response.headers[name] = value
    response.content_length = length
    return response


@dataclass
class Rule:
    """`fault` for the requests that match: an operation ("ListObjectsV2", "CopyObject",
    "GetObject", ... as S3's API names them), a bucket, a key, and `when` (e.g. `continued`: a
    listing's pages after its first); after the first `after` that match, for `times` of them
    (None: every one after)."""

    fault: Fault
    operation: str | None = None
    bucket: str | None = None
    key: str | None = None
    after: int = 0
    times: int | None = None
    when: Callable[[Exchange], bool] | None = None
    matched: int = 0  # requests that matched so far
    applied: int = 0  # ... and got the fault

    def takes(self, exchange: Exchange) -> bool:
        if self.operation is not None and exchange.operation != self.operation:
            return False
        if self.bucket is not None and exchange.bucket != self.bucket:
            return False
        if self.key is not None and exchange.key != self.key:
            return False
        if self.when is not None and not self.when(exchange):
            return False
        self.matched += 1
        if self.matched <= self.after or (self.times is not None and self.applied >= self.times):
            return False
        self.applied += 1
        return True


def continued(exchange: Exchange) -> bool:
    """A listing request for a page after the first (it carries a continuation token)."""
    return "continuation-token" in exchange.request.query


@dataclass
class Seen:
    """A request the proxy handled: its operation, where, the fault it got ("" for none), when
    it came and when its answer went (`time.monotonic()`, to order it among what another writer
    did meanwhile)."""

    operation: str
    bucket: str
    key: str
    fault: str
    at: float = 0.0
    done: float = 0.0


@dataclass
class HostileLog:
    seen: list[Seen] = field(default_factory=list)

    def count(self, operation: str, *, faulted: bool | None = None) -> int:
        return sum(
            1
            for each in self.seen
            if each.operation == operation and (faulted is None or bool(each.fault) == faulted)
        )


class HostileS3(LoopbackProxy):
    """The proxy: `misbehave` adds a rule (the first that takes a request applies), `reset`
    removes them all, `log` tells what was seen."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.rules: list[Rule] = []
        self.log = HostileLog()
        self._lock = threading.Lock()

    def misbehave(
        self,
        fault: Fault,
        *,
        operation: str | None = None,
        bucket: str | None = None,
        key: str | None = None,
        after: int = 0,
        times: int | None = None,
        when: Callable[[Exchange], bool] | None = None,
    ) -> Rule:
        rule = Rule(fault, operation, bucket, key, after, times, when)
        with self._lock:
            self.rules.append(rule)
        return rule

    def reset(self) -> None:
        with self._lock:
            self.rules.clear()
            self.log = HostileLog()

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{path:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await self._gate()
        body = await request.read()
        bucket, key = _bucket_and_key(request.path)
        operation = operation_of(request.method, bucket, key, request.query, request.headers)

        async def forward(sent: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
            return await self._forward(request, body if sent is None else sent)

        exchange = Exchange(request, body, operation, bucket, key, forward)
        with self._lock:
            rule = next((rule for rule in self.rules if rule.takes(exchange)), None)
        seen = Seen(operation, bucket, key, str(rule.fault) if rule else "", time.monotonic())
        self.log.seen.append(seen)
        fault = rule.fault if rule is not None else Fault()
        try:
            return await fault.answer(exchange)
        finally:
            seen.done = time.monotonic()

    async def _forward(self, request: web.Request, body: bytes) -> tuple[int, dict[str, str], bytes]:
        headers = {name: value for name, value in request.headers.items() if name.lower() not in _HOP_BY_HOP}
        headers["Host"] = request.headers["Host"]  # signed by the client: the server must see the same
        async with self._session.request(
            request.method,
            f"{self.upstream}{request.rel_url}",
            data=body or None,
            headers=headers,
            skip_auto_headers=["Content-Type", "Accept-Encoding"],
            allow_redirects=False,
        ) as reply:
            data = await reply.read()
            passed = {name: value for name, value in reply.headers.items() if name.lower() not in _HOP_BY_HOP}
            if request.method == "HEAD":
                passed["Content-Length"] = reply.headers.get("Content-Length", "0")
            return reply.status, passed, data


def _bucket_and_key(path: str) -> tuple[str, str]:
    """(bucket, key) of a path-style request path."""
    bucket, _, key = path.lstrip("/").partition("/")
    return bucket, key


def operation_of(method: str, bucket: str, key: str, query: Any, headers: Any) -> str:
    """S3's name for a request's operation, from its method, path and query."""
    copy = "x-amz-copy-source" in headers
    if not bucket:
        return "ListBuckets"
    if method == "GET":
        if not key:
            for name, operation in (
                ("uploads", "ListMultipartUploads"),
                ("versions", "ListObjectVersions"),
                ("location", "GetBucketLocation"),
            ):
                if name in query:
                    return operation
            return "ListObjectsV2" if query.get("list-type") == "2" else "ListObjects"
        if "uploadId" in query:
            return "ListParts"
        return "GetObjectTagging" if "tagging" in query else "GetObject"
    if method == "HEAD":
        return "HeadObject" if key else "HeadBucket"
    if method == "PUT":
        if not key:
            return "CreateBucket"
        if "partNumber" in query:
            return "UploadPartCopy" if copy else "UploadPart"
        if "tagging" in query:
            return "PutObjectTagging"
        return "CopyObject" if copy else "PutObject"
    if method == "POST":
        if "delete" in query:
            return "DeleteObjects"
        if "uploads" in query:
            return "CreateMultipartUpload"
        return "CompleteMultipartUpload" if "uploadId" in query else "PostObject"
    if method == "DELETE":
        if not key:
            return "DeleteBucket"
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    return method


@dataclass
class Received:
    method: str
    url: str
    headers: dict[str, str]


class Recorder(LoopbackProxy):
    """A loopback server that records every request that reaches it and answers 403: where a
    `Redirect` points, to tell whether credentials followed it."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:1")  # never called
        self.received: list[Received] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{path:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append(Received(request.method, str(request.url), dict(request.headers)))
        return web.Response(status=403, body=_error_xml("AccessDenied", "recorded"))

    def credentials_seen(self) -> list[str]:
        """The credential headers (and Referers) any request brought here, by name."""
        wanted = ("authorization", "x-amz-security-token", "referer", "x-amz-content-sha256")
        return sorted(
            {name.lower() for each in self.received for name in each.headers if name.lower() in wanted}
        )
