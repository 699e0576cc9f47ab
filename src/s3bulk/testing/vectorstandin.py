"""An S3 Vectors stand-in for what moto lacks: ListVectors in segments and pages, QueryVectors by
brute force, the per-index write limits answered with 429s, and counts per second, so a test or
a benchmark checks a vectors job from the server's side.

    python -m s3bulk.testing.vectorstandin --port 9100 [--vectors-per-second 2500]

It speaks the service's REST-JSON protocol (a POST of a JSON body to `/{Operation}`, errors as
`x-amzn-ErrorType`), keeps each index in numpy (a million 1024-wide vectors is 4 GiB, not moto's
Python lists), and does not check signatures. Limits per index, as the service publishes them:
PutVectors and DeleteVectors together at most `requests_per_second` requests and
`vectors_per_second` vectors a second (a token bucket with a second's burst), above which it
answers 429 TooManyRequestsException. `GET /_standin/stats` gives the requests by operation, the
throttled ones, and per index the vectors written and deleted and the requests refused in each
second;
`POST /_standin/hold?after=N` answers N more requests, then holds every later one unanswered
until `POST /_standin/release`: a test stops a job at an exact point of its work (and kills it
there) without racing it; `POST /_standin/hold-pages?pages=K` does so per ListVectors segment
(each segment's next K pages answered, its later ones held; other requests answered): a listing's
segments run side by side, so a count over all requests could fall on either of them.
`POST /_standin/repeat-token` makes every later ListVectors page give the token it was asked
with (a service bug that would make a listing go on forever);
`POST /_standin/error-pages?after=N[&times=K]` answers the ListVectors after N more (K of them,
or all) with 200 and an error's body, no vectors and no token (what a client that trusts a 200
takes for the end).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
from aiohttp import web

from s3bulk.testing.servers import Server

MAX_PUT = 500
MAX_DELETE = 500
MAX_GET = 100
MAX_LIST = 1000
MAX_SEGMENTS = 16


class StandInError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _validation(message: str) -> StandInError:
    return StandInError(400, "ValidationException", message)


class _Rate:
    """A token bucket that answers at once (a server refuses, it does not queue)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens, self.updated = rate, time.monotonic()

    def take(self, count: float) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens < count:
            return False
        self.tokens -= count
        return True


class Index:
    """One index's vectors in slots: a key keeps its slot while it lives, and a listing walks the
    slots in order, so a page token is just the slot to go on from."""

    def __init__(self, dimension: int, metric: str, non_filterable: list[str]) -> None:
        self.dimension, self.metric, self.non_filterable = dimension, metric, non_filterable
        self.slots: dict[str, int] = {}
        self.keys: list[str | None] = []
        self.data = np.zeros((1024, dimension), dtype=np.float32)
        self.hashes = np.zeros(1024, dtype=np.uint32)
        self.alive = np.zeros(1024, dtype=bool)
        self.metadata: list[Any] = []

    def put(self, key: str, vector: np.ndarray, metadata: Any) -> None:
        slot = self.slots.get(key)
        if slot is None:
            slot = len(self.keys)
            if slot == len(self.alive):
                grown = 2 * len(self.alive)
                self.data = np.resize(self.data, (grown, self.dimension))
                self.hashes = np.resize(self.hashes, grown)
                self.alive = np.concatenate([self.alive, np.zeros(grown - slot, dtype=bool)])
            self.slots[key] = slot
            self.keys.append(key)
            self.metadata.append(None)
            self.hashes[slot] = zlib.crc32(key.encode())
            self.alive[slot] = True
        self.data[slot] = vector
        self.metadata[slot] = metadata

    def delete(self, key: str) -> None:
        slot = self.slots.pop(key, None)
        if slot is not None:
            self.alive[slot] = False
            self.keys[slot] = None
            self.metadata[slot] = None

    def entry(self, slot: int, data: bool, metadata: bool) -> dict[str, Any]:
        found: dict[str, Any] = {"key": self.keys[slot]}
        if data:
            found["data"] = {"float32": self.data[slot]}
        if metadata and self.metadata[slot] is not None:
            found["metadata"] = self.metadata[slot]
        return found

    def page(self, start: int, count: int, segment: int, segments: int) -> tuple[list[int], int | None]:
        """Up to `count` live slots of one segment from `start` on, and where the next page starts."""
        end = len(self.keys)
        chosen = self.alive[start:end] & (self.hashes[start:end] % segments == segment)
        slots = np.flatnonzero(chosen)[: count + 1] + start
        if len(slots) > count:
            return [int(each) for each in slots[:count]], int(slots[count])
        return [int(each) for each in slots], None

    def query(self, vector: np.ndarray, top: int, allowed: np.ndarray) -> list[tuple[int, float]]:
        """The `top` nearest live, allowed slots, exactly. Every slot's distance is computed in
        place (a copy of the live rows cost 3 ms a query at 3,000 x 256) by einsum, not `@`:
        OpenBLAS's threads spin on a busy machine (a matrix-vector product took ~3 ms of CPU
        where one thread takes 0.1 ms)."""
        count = len(self.keys)
        live = np.flatnonzero(self.alive[:count] & allowed)
        if not len(live):
            return []
        rows = self.data[:count]
        if self.metric == "cosine":
            norms = np.sqrt(np.einsum("ij,ij->i", rows, rows)) * (np.linalg.norm(vector) or 1.0)
            distances = 1.0 - np.einsum("ij,j->i", rows, vector) / np.where(norms == 0, 1.0, norms)
        else:
            apart = rows - vector
            distances = np.sqrt(np.einsum("ij,ij->i", apart, apart))
        order = np.argsort(distances[live], kind="stable")[:top]
        return [(int(live[each]), float(distances[live[each]])) for each in order]


def matches(metadata: Any, condition: dict[str, Any]) -> bool:
    """The service's metadata filter, as far as a stand-in needs: $and, $or, and per key a value
    (equality) or $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists."""
    metadata = metadata or {}
    for name, wanted in condition.items():
        if name == "$and":
            if not all(matches(metadata, each) for each in wanted):
                return False
            continue
        if name == "$or":
            if not any(matches(metadata, each) for each in wanted):
                return False
            continue
        value = metadata.get(name)
        tests = wanted if isinstance(wanted, dict) else {"$eq": wanted}
        for operator, operand in tests.items():
            if not _holds(operator, value, operand, name in metadata):
                return False
    return True


def _holds(operator: str, value: Any, operand: Any, present: bool) -> bool:
    if operator == "$exists":
        return present == bool(operand)
    if not present:
        return operator in ("$ne", "$nin")
    values = value if isinstance(value, list) else [value]
    checks: dict[str, Callable[[], bool]] = {
        "$eq": lambda: operand in values,
        "$ne": lambda: operand not in values,
        "$in": lambda: any(each in operand for each in values),
        "$nin": lambda: not any(each in operand for each in values),
        "$gt": lambda: value > operand,
        "$gte": lambda: value >= operand,
        "$lt": lambda: value < operand,
        "$lte": lambda: value <= operand,
    }
    if operator not in checks:
        raise _validation(f"unknown filter operator {operator}")
    return bool(checks[operator]())


class StandIn:
    """The service's state and operations; `app()` serves them."""

    def __init__(self, vectors_per_second: float, requests_per_second: float) -> None:
        self.vectors_per_second, self.requests_per_second = vectors_per_second, requests_per_second
        self.buckets: dict[str, dict[str, Index]] = {}
        self.rates: dict[tuple[str, str], tuple[_Rate, _Rate]] = {}
        self.requests: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()
        self.written: dict[str, Counter[int]] = defaultdict(Counter)  # index -> second -> vectors
        self.deleted: dict[str, Counter[int]] = defaultdict(Counter)
        self.refused: dict[str, Counter[int]] = defaultdict(Counter)  # index -> second -> 429s
        self.started = time.monotonic()
        self.answered = 0
        self.hold_at: int | None = None
        self.held = 0
        self.pages_per_segment: int | None = None  # hold-pages: each segment's pages to answer
        self.pages: Counter[tuple[int, int]] = Counter()  # (segments, segment) -> pages since then
        self.released = asyncio.Event()
        self.repeat_token = False
        self.error_pages: tuple[int, int] | None = None  # ListVectors answered with errors: (from, to)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_get("/_standin/stats", self._stats)
        app.router.add_post("/_standin/hold", self._hold)
        app.router.add_post("/_standin/hold-pages", self._hold_pages)
        app.router.add_post("/_standin/release", self._release)
        app.router.add_post("/_standin/repeat-token", self._repeat_token)
        app.router.add_post("/_standin/error-pages", self._error_pages)
        app.router.add_post("/{operation}", self._handle)
        return app

    async def _hold(self, request: web.Request) -> web.Response:
        self.hold_at, self.held = self.answered + int(request.query["after"]), 0
        self.released.clear()
        return web.Response(text="holding")

    async def _hold_pages(self, request: web.Request) -> web.Response:
        self.pages_per_segment, self.held = int(request.query["pages"]), 0
        self.pages.clear()
        self.released.clear()
        return web.Response(text="holding")

    async def _repeat_token(self, request: web.Request) -> web.Response:
        self.repeat_token = True
        return web.Response(text="repeating")

    async def _error_pages(self, request: web.Request) -> web.Response:
        first = self.requests["ListVectors"] + int(request.query["after"])
        self.error_pages = first, first + int(request.query.get("times", 1 << 62))
        return web.Response(text="erring")

    async def _release(self, request: web.Request) -> web.Response:
        self.hold_at = self.pages_per_segment = None
        self.released.set()
        return web.Response(text="released")

    async def _stats(self, request: web.Request) -> web.Response:
        stats = {
            "requests": self.requests,
            "throttled": self.throttled,
            "written": {index: dict(seconds) for index, seconds in self.written.items()},
            "deleted": {index: dict(seconds) for index, seconds in self.deleted.items()},
            "refused": {index: dict(seconds) for index, seconds in self.refused.items()},
            "held": self.held,
        }
        return web.Response(
            body=orjson.dumps(stats, option=orjson.OPT_NON_STR_KEYS), content_type="application/json"
        )

    async def _handle(self, request: web.Request) -> web.Response:
        operation = request.match_info["operation"]
        if (self.hold_at is not None and self.answered >= self.hold_at) or await self._segment_held(
            operation, request
        ):
            self.held += 1
            await self.released.wait()
        self.answered += 1
        self.requests[operation] += 1
        erring = self.error_pages
        if operation == "ListVectors" and erring and erring[0] < self.requests[operation] <= erring[1]:
            error = {"__type": "InternalServerException", "message": "We encountered an internal error."}
            return web.Response(body=orjson.dumps(error), content_type="application/json")
        try:
            body = orjson.loads(await request.read() or b"{}")
            handler = getattr(self, "op_" + operation, None)
            if handler is None:
                raise StandInError(400, "UnknownOperationException", f"no operation {operation}")
            reply = handler(body)
        except StandInError as error:
            if error.status == 429:
                self.throttled[operation] += 1
            return web.Response(
                status=error.status,
                body=orjson.dumps({"message": error.message}),
                headers={"x-amzn-ErrorType": f"{error.code}:", "Content-Type": "application/json"},
            )
        except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as error:
            return web.Response(
                status=400,
                body=orjson.dumps({"message": f"malformed request: {error!r}"}),
                headers={"x-amzn-ErrorType": "ValidationException:", "Content-Type": "application/json"},
            )
        return web.Response(
            body=orjson.dumps(reply or {}, option=orjson.OPT_SERIALIZE_NUMPY), content_type="application/json"
        )

    async def _segment_held(self, operation: str, request: web.Request) -> bool:
        """Whether a ListVectors is past its segment's pages to answer (hold-pages); counts it if not."""
        if operation != "ListVectors" or self.pages_per_segment is None:
            return False
        try:
            body = orjson.loads(await request.read() or b"{}")
            segment = int(body.get("segmentCount") or 1), int(body.get("segmentIndex") or 0)
        except (TypeError, ValueError, orjson.JSONDecodeError):
            return False  # answered (with its error) as ever
        if self.pages[segment] >= self.pages_per_segment:
            return True
        self.pages[segment] += 1
        return False

    # ---- buckets and indexes -------------------------------------------------------------------
    def _index(self, body: dict[str, Any]) -> tuple[str, Index]:
        bucket, name = body.get("vectorBucketName"), body.get("indexName")
        if not bucket and body.get("indexArn"):
            bucket, _, name = str(body["indexArn"]).split(":bucket/", 1)[1].partition("/index/")
        if bucket not in self.buckets:
            raise StandInError(404, "NotFoundException", f"vector bucket {bucket} not found")
        index = self.buckets[bucket].get(str(name))
        if index is None:
            raise StandInError(404, "NotFoundException", f"index {name} not found")
        return str(name), index

    def op_CreateVectorBucket(self, body: dict[str, Any]) -> None:
        name = body["vectorBucketName"]
        if name in self.buckets:
            raise StandInError(409, "ConflictException", f"vector bucket {name} exists")
        self.buckets[name] = {}

    def op_CreateIndex(self, body: dict[str, Any]) -> None:
        bucket, name = body["vectorBucketName"], body["indexName"]
        if bucket not in self.buckets:
            raise StandInError(404, "NotFoundException", f"vector bucket {bucket} not found")
        if name in self.buckets[bucket]:
            raise StandInError(409, "ConflictException", f"index {name} exists")
        config = body.get("metadataConfiguration") or {}
        self.buckets[bucket][name] = Index(
            int(body["dimension"]),
            body.get("distanceMetric", "cosine"),
            config.get("nonFilterableMetadataKeys", []),
        )

    def op_GetIndex(self, body: dict[str, Any]) -> dict[str, Any]:
        name, index = self._index(body)
        found = {
            "vectorBucketName": body.get("vectorBucketName"),
            "indexName": name,
            "dataType": "float32",
            "dimension": index.dimension,
            "distanceMetric": index.metric,
        }
        if index.non_filterable:
            found["metadataConfiguration"] = {"nonFilterableMetadataKeys": index.non_filterable}
        return {"index": found}

    def op_DeleteIndex(self, body: dict[str, Any]) -> None:
        name, _ = self._index(body)
        del self.buckets[body["vectorBucketName"]][name]

    # ---- vectors -------------------------------------------------------------------------------
    def _admit(self, body: dict[str, Any], name: str, count: int, operation: str) -> None:
        key = (str(body.get("vectorBucketName")), name)
        vectors, requests = self.rates.setdefault(
            key, (_Rate(self.vectors_per_second), _Rate(self.requests_per_second))
        )
        if not requests.take(1) or not vectors.take(count):
            self.refused[name][self._second()] += 1
            raise StandInError(
                429, "TooManyRequestsException", f"{operation}: rate exceeded for index {name}"
            )

    def _second(self) -> int:
        return int(time.monotonic() - self.started)

    def op_PutVectors(self, body: dict[str, Any]) -> None:
        name, index = self._index(body)
        vectors = body["vectors"]
        if not 1 <= len(vectors) <= MAX_PUT:
            raise _validation(f"PutVectors takes 1 to {MAX_PUT} vectors, not {len(vectors)}")
        rows = np.array([each["data"]["float32"] for each in vectors], dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != index.dimension:
            raise _validation(f"vectors must have dimension {index.dimension}")
        if not np.isfinite(rows).all():
            raise _validation("vector data must be finite")
        self._admit(body, name, len(vectors), "PutVectors")
        for each, row in zip(vectors, rows, strict=True):
            index.put(each["key"], row, each.get("metadata"))
        self.written[name][self._second()] += len(vectors)

    def op_DeleteVectors(self, body: dict[str, Any]) -> None:
        name, index = self._index(body)
        keys = body["keys"]
        if not 1 <= len(keys) <= MAX_DELETE:
            raise _validation(f"DeleteVectors takes 1 to {MAX_DELETE} keys, not {len(keys)}")
        self._admit(body, name, len(keys), "DeleteVectors")
        for key in keys:
            index.delete(key)
        self.deleted[name][self._second()] += len(keys)

    def op_GetVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        _, index = self._index(body)
        keys = body["keys"]
        if not 1 <= len(keys) <= MAX_GET:
            raise _validation(f"GetVectors takes 1 to {MAX_GET} keys, not {len(keys)}")
        data, metadata = bool(body.get("returnData")), bool(body.get("returnMetadata"))
        found = [index.slots[key] for key in keys if key in index.slots]
        return {"vectors": [index.entry(slot, data, metadata) for slot in found]}

    def op_ListVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        _, index = self._index(body)
        count = int(body.get("maxResults") or MAX_LIST)
        segments, segment = int(body.get("segmentCount") or 1), int(body.get("segmentIndex") or 0)
        if not 1 <= count <= MAX_LIST or not 1 <= segments <= MAX_SEGMENTS or not 0 <= segment < segments:
            raise _validation("maxResults 1-1000, segmentCount 1-16, segmentIndex below segmentCount")
        token = body.get("nextToken")
        start = _untoken(token, segments, segment) if token else 0
        slots, following = index.page(start, count, segment, segments)
        data, metadata = bool(body.get("returnData")), bool(body.get("returnMetadata"))
        reply: dict[str, Any] = {"vectors": [index.entry(slot, data, metadata) for slot in slots]}
        if following is not None:
            reply["nextToken"] = (
                token if self.repeat_token and token else _token(following, segments, segment)
            )
        return reply

    def op_QueryVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        _, index = self._index(body)
        top = int(body["topK"])
        vector = np.asarray(body["queryVector"]["float32"], dtype=np.float32)
        if top < 1 or vector.shape != (index.dimension,):
            raise _validation(f"topK >= 1 and a query vector of dimension {index.dimension}")
        allowed = np.ones(len(index.keys), dtype=bool)
        condition = body.get("filter")
        if condition:
            allowed = np.array([matches(each, condition) for each in index.metadata], dtype=bool)
        found = []
        for slot, distance in index.query(vector, top, allowed):
            entry = index.entry(slot, False, bool(body.get("returnMetadata")))
            if body.get("returnDistance"):
                entry["distance"] = distance
            found.append(entry)
        return {"vectors": found}


def _token(slot: int, segments: int, segment: int) -> str:
    return base64.urlsafe_b64encode(f"{segments}.{segment}.{slot}".encode()).decode()


def _untoken(token: str, segments: int, segment: int) -> int:
    try:
        count, index, slot = base64.urlsafe_b64decode(token.encode()).decode().split(".")
    except ValueError:
        raise _validation("invalid nextToken") from None
    if (int(count), int(index)) != (segments, segment):
        raise _validation("nextToken belongs to another segment")
    return int(slot)


class VectorsStandInServer(Server):
    """The stand-in as a subprocess on a free loopback port (its own process, as a service is)."""

    health_path = "/_standin/stats"

    def __init__(self, vectors_per_second: float = 2500.0, requests_per_second: float = 1000.0) -> None:
        super().__init__()
        self.vectors_per_second, self.requests_per_second = vectors_per_second, requests_per_second

    def command(self) -> list[str]:
        import sys

        return [
            sys.executable,
            "-m",
            "s3bulk.testing.vectorstandin",
            "--port",
            str(self.port),
            "--vectors-per-second",
            str(self.vectors_per_second),
            "--requests-per-second",
            str(self.requests_per_second),
        ]

    def client_env(self) -> dict[str, str]:
        return super().client_env() | {"AWS_ENDPOINT_URL_S3VECTORS": self.endpoint}

    def stats(self) -> dict[str, Any]:
        found: dict[str, Any] = orjson.loads(self._admin("GET", "stats"))
        return found

    def hold_after(self, answers: int) -> None:
        self._admin("POST", f"hold?after={answers}")

    def hold_pages(self, pages: int) -> None:
        """Each ListVectors segment's next `pages` pages answered, its later ones held until `release`."""
        self._admin("POST", f"hold-pages?pages={pages}")

    def release(self) -> None:
        self._admin("POST", "release")

    def repeat_tokens(self) -> None:
        self._admin("POST", "repeat-token")

    def error_pages(self, after: int, times: int | None = None) -> None:
        """The ListVectors after `after` more (`times` of them, or all) answer 200 with an error's
        body."""
        self._admin("POST", f"error-pages?after={after}" + (f"&times={times}" if times else ""))

    def _admin(self, method: str, path: str) -> bytes:
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint}/_standin/{path}", method=method)
        with urllib.request.urlopen(request, timeout=30) as reply:
            answer: bytes = reply.read()
        return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--vectors-per-second", type=float, default=2500.0, help="per index; 0: no limit")
    parser.add_argument("--requests-per-second", type=float, default=1000.0, help="per index; 0: no limit")
    args = parser.parse_args()
    stand_in = StandIn(args.vectors_per_second, args.requests_per_second)
    web.run_app(stand_in.app(), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
