"""A throttling proxy for S3 Vectors: what moto lacks, so rate control can be tested for real.

It forwards every request to an upstream (moto's server) over real sockets, but polices each
index's PutVectors like the service does: a token bucket per index (vectors/s), and answers
above it alternate between 429 TooManyRequestsException and 503 ServiceUnavailableException.
It counts what it accepted and refused, with timestamps, so a test can check the client's rate
from the server's side. It runs an event loop in a thread of the test process.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from s3bulk.testing.servers import free_port


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


class ThrottlingProxy:
    def __init__(self, upstream: str, vectors_per_second: float, burst: float | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.rate = vectors_per_second
        self.burst = burst if burst is not None else vectors_per_second
        self.log = ProxyLog()
        self.port = 0
        self._buckets: dict[str, tuple[float, float]] = {}  # index -> (tokens, updated)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThrottlingProxy:
        self.port = free_port()
        self._thread = threading.Thread(target=self._serve, name="throttling-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the throttling proxy did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with aiohttp.ClientSession() as session:
            self._session = session
            app = web.Application(client_max_size=64 * 1024**2)
            app.router.add_route("POST", "/{operation}", self._handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()

    def _admit(self, index: str, count: int) -> bool:
        now = time.monotonic()
        tokens, updated = self._buckets.get(index, (self.burst, now))
        tokens = min(self.burst, tokens + (now - updated) * self.rate)
        if tokens < count:
            self._buckets[index] = (tokens, now)
            return False
        self._buckets[index] = (tokens - count, now)
        return True

    async def _handle(self, request: web.Request) -> web.Response:
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
