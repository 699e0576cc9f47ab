"""Functions the map tests run over objects: importable, as a user's module would be."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import zlib

_running = 0
_most = 0
_lock = threading.Lock()


def digest(obj, body):
    return f"{obj.key}:{len(body)}:{hashlib.sha256(body).hexdigest()[:16]}"


async def digest_async(obj, body):
    await asyncio.sleep(0)
    return digest(obj, body)


def compress(obj, body):
    if obj.key.endswith("skip"):
        return None
    time.sleep(0.01)  # a little work per object, so a kill lands midway
    return zlib.compress(body, 6)


def fails_on_sevens(obj, body):
    if obj.key.endswith("7"):
        raise ValueError(f"no sevens: {obj.key}")
    return len(body)


def sleeps(obj, body):
    """Waits 50 ms as a call to another service would; returns how many calls ran at once."""
    global _running, _most
    with _lock:
        _running += 1
        _most = max(_most, _running)
    time.sleep(0.05)
    with _lock:
        _running -= 1
        return _most


def lines_streamed(obj, reader):
    """stream=True: the object is read as a file, a line at a time."""
    return sum(1 for _ in reader)


def summary(obj, body):
    return {"size": len(body), "first": body[:1].hex()}


def slow_digest(obj, body):
    time.sleep(0.01)  # a little work per object, so a kill lands midway
    return {"digest": hashlib.sha256(body).hexdigest()}


def sevens_until_forgiven(obj, body):
    """Fails on keys ending in 7 until MAPFNS_FORGIVE is set: a bug fixed before --retry-failed."""
    import os

    if obj.key.endswith("7") and not os.environ.get("MAPFNS_FORGIVE"):
        raise ValueError(f"no sevens: {obj.key}")
    return {"size_seen": len(body)}
