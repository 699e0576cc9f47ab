"""The event loop every s3bulk coroutine runs in, on its own: a short command (`ls`, `cat`) needs
it without the rest of the engine."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` in a fresh event loop of this thread: uvloop where it is installed (its wake-ups
    from obstore's threads and its socket handling cost a fraction of asyncio's own loop)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
