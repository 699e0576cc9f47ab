"""Bytes of a large object that have moved while the object is still on its way, for the live
line: a 200 MB file is counted as its parts are stored and its ranges written, not all at once
when it ends (the line stood at `0 B/600.0 MiB ... 0 B/s` until then).

Counted where a piece ends, never per chunk: a part of a multipart upload or copy once the
service confirmed it (`multipart._in_parts`, which uploads, copies in parts and relays share),
a range of a download once the native writer has written it (`downloads._in_lanes`). That is one
call per part (8 MiB by default), so transfers pay nothing they could measure. The engine sets
`piece_counter` in each task that runs items (`_engine/worker.py`) and takes an item's pieces
back out when the item ends, done or not, since its whole size is then counted as done (or not
at all). Outside a job (single-object verbs, fsspec) nobody listens.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable


def _nobody(count: int) -> None:
    """Pieces moved where no job counts them."""


piece_counter: contextvars.ContextVar[Callable[[int], None]] = contextvars.ContextVar(
    "piece_counter", default=_nobody
)


def count_moved(count: int) -> None:
    """`count` bytes of the object being moved in this task have arrived where they go."""
    piece_counter.get()(count)
