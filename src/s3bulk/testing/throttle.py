"""Throttling proxies: what moto and MinIO lack, so rate control can be tested for real.

Each forwards every request to an upstream over real sockets, from an event loop in a thread of
the test process, and counts what it accepted and refused, with timestamps, so a test can check
the client's behaviour from the server's side.
- ThrottlingProxy (S3 Vectors, in front of moto) polices each index's PutVectors like the service
  does: a token bucket per index (vectors/s); answers above it alternate between 429
  TooManyRequestsException and 503 ServiceUnavailableException.
- S3ThrottlingProxy (S3, in front of MinIO) refuses a seeded random share of all requests and any
  request above a requests/s bucket, alternating 503 SlowDown and 429, as S3 does under load, and
  can deny some methods (403 AccessDenied, as a bucket policy does). The
  client signs for the proxy's address; requests go on with their Host header unchanged, so
  MinIO checks the same signature.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from s3bulk.testing.servers import free_port


class _Bucket:
    """A token bucket that answers at once: a server refuses, it does not queue."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.updated = burst, time.monotonic()

    def take(self, count: float = 1.0) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens < count:
            return False
        self.tokens -= count
        return True


class LoopbackProxy:
    """An aiohttp server on a free loopback port, run by its own event loop in a thread.

    `hold_after(n)` lets n more requests through, then holds every later one unanswered until
    `release()`: a test can stop a job at an exact point of its work (and kill it there) without
    racing it, however fast the machine is.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._session: aiohttp.ClientSession
        self._admitted = 0
        self._hold_at: int | None = None
        self._released: asyncio.Event | None = None
        self.held = 0  # requests held since the last hold_after()

    def hold_after(self, answers: int) -> None:
        self._hold_at = self._admitted + answers
        self.held = 0

    def release(self) -> None:
        self._hold_at = None
        if self._loop is not None and self._released is not None:
            self._loop.call_soon_threadsafe(self._released.set)

    async def _gate(self) -> None:
        """Called first by every handler: counts the request, or holds it (see `hold_after`)."""
        assert self._released is not None
        if self._hold_at is not None and self._admitted >= self._hold_at:
            self.held += 1
            self._released.clear()
            await self._released.wait()
        self._admitted += 1

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Any:
        self.port = free_port()
        self._thread = threading.Thread(target=self._serve, name=type(self).__name__, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError(f"{type(self).__name__} did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    def _serve(self) -> None:
        asyncio.run(self._main())

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._released = asyncio.Event()
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            self._session = session
            app = web.Application(client_max_size=1024**3)
            self.routes(app)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()


@dataclass
class ProxyLog:
    accepted: Counter[str] = field(default_factory=Counter)  # PutVectors requests, per index
    refused: Counter[str] = field(default_factory=Counter)
    vectors: Counter[str] = field(default_factory=Counter)  # vectors accepted, per index
    puts: list[tuple[float, str, int]] = field(default_factory=list)  # (time, index, vectors) accepted
    refusals: list[float] = field(default_factory=list)  # when each PutVectors was refused
    last: dict[str, bytes] = field(default_factory=dict)  # the last body of each other operation

    def peak_rate(self, window: float = 2.0, index: str | None = None) -> float:
        """The most vectors/s accepted over any `window` seconds (for one index, or all)."""
        events = [(when, count) for when, name, count in self.puts if index is None or name == index]
        best, start, total = 0.0, 0, 0
        for end in range(len(events)):
            total += events[end][1]
            while events[end][0] - events[start][0] > window:
                total -= events[start][1]
                start += 1
            best = max(best, total / window)
        return best


class ThrottlingProxy(LoopbackProxy):
    def __init__(self, upstream: str, vectors_per_second: float, burst: float | None = None) -> None:
        super().__init__(upstream)
        self.rate = vectors_per_second
        self.burst = burst if burst is not None else vectors_per_second
        self.log = ProxyLog()
        self._buckets: dict[str, _Bucket] = {}

    def routes(self, app: web.Application) -> None:
        app.router.add_route("POST", "/{operation}", self._handle)

    def _admit(self, index: str, count: int) -> bool:
        bucket = self._buckets.setdefault(index, _Bucket(self.rate, self.burst))
        return bucket.take(count)

    async def _handle(self, request: web.Request) -> web.Response:
        await self._gate()
        operation = request.match_info["operation"]
        body = await request.read()
        if operation == "PutVectors":
            payload = orjson.loads(body)
            index, count = payload["indexName"], len(payload["vectors"])
            if not self._admit(index, count):
                refused = sum(self.log.refused.values())
                self.log.refused[index] += 1
                self.log.refusals.append(time.monotonic())
                code, status = (
                    ("TooManyRequestsException", 429)
                    if refused % 2 == 0
                    else ("ServiceUnavailableException", 503)
                )
                error = {"message": f"Rate exceeded for index {index}"}
                return web.Response(
                    status=status,
                    body=orjson.dumps(error),
                    headers={"x-amzn-ErrorType": f"{code}:", "Content-Type": "application/json"},
                )
            self.log.accepted[index] += 1
            self.log.vectors[index] += count
            self.log.puts.append((time.monotonic(), index, count))
        else:
            self.log.last[operation] = body
        headers = {
            name: value
            for name, value in request.headers.items()
            if name.lower() not in ("host", "content-length")
        }
        async with self._session.post(f"{self.upstream}/{operation}", data=body, headers=headers) as reply:
            data = await reply.read()
            passed = {
                name: value
                for name, value in reply.headers.items()
                if name.lower() in ("content-type", "x-amzn-errortype", "x-amzn-requestid")
            }
            return web.Response(status=reply.status, body=data, headers=passed)


@dataclass
class S3ProxyLog:
    accepted: Counter[str] = field(default_factory=Counter)  # per HTTP method
    received: Counter[str] = field(default_factory=Counter)  # request body bytes sent on, per method
    refused: Counter[str] = field(default_factory=Counter)  # per reason: "random", "rate"
    times: list[float] = field(default_factory=list)  # when each request was accepted
    refusals: list[float] = field(default_factory=list)  # when each request was refused
    # GETs of a bucket itself (ListObjects, ListObjectVersions, ...: no key), per bucket
    bucket_reads: Counter[str] = field(default_factory=Counter)

    def peak_rate(self, window: float = 1.0) -> float:
        """The most requests/s accepted over any `window` seconds."""
        best, start = 0.0, 0
        for end, when in enumerate(self.times):
            while when - self.times[start] > window:
                start += 1
            best = max(best, (end - start + 1) / window)
        return best


_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class S3ThrottlingProxy(LoopbackProxy):
    def __init__(
        self,
        upstream: str,
        *,
        refuse_share: float = 0.0,
        requests_per_second: float = float("inf"),
        burst: float | None = None,
        seed: int = 1,
    ) -> None:
        super().__init__(upstream)
        self.refuse_share = refuse_share
        rate = requests_per_second
        self._bucket = _Bucket(rate, burst if burst is not None else min(rate, 1e9))
        self._random = random.Random(seed)
        self.log = S3ProxyLog()
        self.denied_methods: set[str] = set()  # answered 403 AccessDenied, as a bucket policy would
        # a requester-pays bucket: a request without x-amz-request-payer is answered 403, as S3 does
        self.requester_pays = False
        self.corrupt_bodies = 0  # the next this many object bodies (GET answers) get one byte flipped
        self.corrupt_uploads = 0  # ... and the next this many PUT bodies (objects, parts) on their way in
        # ListObjectsV2 pages with their keys in reverse, as S3 Express directory buckets list
        self.unordered_listings = False
        # the next this many CompleteMultipartUpload requests reach the server, which completes the
        # upload, but their connection is reset before the answer: as a flaky network loses it
        self.lost_completions = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{path:.*}", self._handle)

    def _refusal(self) -> str:
        if self._random.random() < self.refuse_share:
            return "random"
        return "" if self._bucket.take() else "rate"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await self._gate()
        body = await request.read()
        unpaid = self.requester_pays and request.headers.get("x-amz-request-payer", "").lower() != "requester"
        if request.method in self.denied_methods or unpaid:
            self.log.refused["denied"] += 1
            xml = "<Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>"
            return web.Response(status=403, body=xml.encode(), content_type="application/xml")
        reason = self._refusal()
        if reason:
            self.log.refused[reason] += 1
            self.log.refusals.append(time.monotonic())
            status = 503 if len(self.log.refusals) % 2 else 429
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                "<Message>Please reduce your request rate.</Message></Error>"
            )
            return web.Response(status=status, body=xml.encode(), content_type="application/xml")
        self.log.accepted[request.method] += 1
        self.log.received[request.method] += len(body)
        self.log.times.append(time.monotonic())
        bucket, _, key = request.path.lstrip("/").partition("/")
        if request.method == "GET" and bucket and not key:
            self.log.bucket_reads[bucket] += 1
        headers = {name: value for name, value in request.headers.items() if name.lower() not in _HOP_BY_HOP}
        headers["Host"] = request.headers["Host"]  # signed by the client: MinIO must see the same
        if self.corrupt_uploads and request.method == "PUT" and len(body) > 1:
            self.corrupt_uploads -= 1
            body = body[: len(body) // 2] + bytes([body[len(body) // 2] ^ 1]) + body[len(body) // 2 + 1 :]
            self.log.refused["corrupted"] += 1
        url = f"{self.upstream}{request.rel_url}"
        async with self._session.request(
            request.method,
            url,
            data=body if body else None,
            headers=headers,
            skip_auto_headers=["Content-Type", "Accept-Encoding"],  # only what the client asked for
        ) as reply:
            data = await reply.read()
            if self.lost_completions and request.method == "POST" and "uploadId" in request.query:
                self.lost_completions -= 1
                self.log.refused["lost"] += 1
                assert request.transport is not None
                request.transport.abort()  # done upstream; the client hears a reset, no answer
                return web.Response()
            passed = {name: value for name, value in reply.headers.items() if name.lower() not in _HOP_BY_HOP}
            if request.method == "HEAD":  # no body, and the object's own Content-Length
                passed["Content-Length"] = reply.headers.get("Content-Length", "0")
                return web.Response(status=reply.status, headers=passed)
            if self.unordered_listings and request.query.get("list-type") == "2" and reply.status == 200:
                data = _reversed_contents(data)
            object_body = request.method == "GET" and not request.query and reply.status in (200, 206)
            if self.corrupt_bodies and object_body and len(data) > 1:  # an object's bytes, not a listing
                self.corrupt_bodies -= 1  # a bit flipped on the way, as a broken middlebox would
                data = data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 1]) + data[len(data) // 2 + 1 :]
                self.log.refused["corrupted"] += 1
            return web.Response(status=reply.status, body=data, headers=passed)


def _reversed_contents(xml: bytes) -> bytes:
    """A ListObjectsV2 answer with its <Contents> entries in reverse order."""
    entries = re.findall(rb"<Contents>.*?</Contents>", xml, flags=re.DOTALL)
    if len(entries) < 2:
        return xml
    start = xml.index(entries[0])
    end = xml.index(entries[-1]) + len(entries[-1])
    return xml[:start] + b"".join(reversed(entries)) + xml[end:]
