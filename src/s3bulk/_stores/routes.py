"""How an object moves, decided once (`download_route`): the way a download is fetched,
checked and landed, and what it holds in memory meanwhile, which the byte budget counts
(`bytes_held`); and the same for an upload (`upload_held`). The command that plans an item and
the storage seam that fetches it read the one decision.

The ways, by size, ETag and key (`Way`): a key with a '.' or '..' segment goes through the
signed client, whole (object_store's signer, which the native GETs use, would sign another
path: `native_http.signs_as_sent`); an empty object is one GET of nothing; up to
`WHOLE_BODY_MAX` under a single-part ETag, or none, the native batch GETs fetch, check and land
it (`gets.py`), and under a multipart ETag the signed client fetches it
whole and it is hashed in Python; above, the native GETs stream it into its file: whole up to the
multipart threshold, else in ranges, `parts.in_flight` at once.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from s3bulk._stores import native_http
from s3bulk._stores.etags import single_part_md5
from s3bulk._stores.s3 import quote_key

MiB = 1024**2
# Bodies up to this size arrive whole, in one ranged GET, and are written with one call.
# Streaming a 1 MiB body in 256 KiB chunks costs an await and a Rust-to-Python crossing per
# chunk; measured on 400 x 1 MiB downloads (async engine, 3 alternating runs): 1.19 -> 1.06 user
# CPU s. (Under a single-part ETag or none, the native part streams them: `bytes_held`.)
# Larger ones are written as they come by the native part's writer thread (`_fetch_streamed`):
# above the multipart threshold in ranges of the part size, each at its offset.
WHOLE_BODY_MAX = 8 * MiB
# Bodies obstore fetched (under a multipart ETag) up to this size are written by the event loop
# itself; larger ones by a thread, so the loop keeps dispatching while the kernel copies them (a
# 1 MiB write takes ~0.3 ms here).
SMALL_BODY_MAX = 256 * 1024
# Local files from this size are checked in SIMD lanes with others (digests.py); a smaller one
# costs less to hash at once (4 KiB: 5 us) than to gather. Downloads are hashed in lanes by the
# native batch GETs (gets.py, native/src/gets.rs).
LANES_MIN = 16 * 1024
# Downloads from this size up to WHOLE_BODY_MAX, under a single-part ETag or none, are streamed
# into their files chunk by chunk by the native part's writer thread (native/src/gets.rs:
# STREAM_MIN, the same size), whose queue holds at most 4 MiB of chunks per bucket.
STREAMED_MIN = 16 * 1024
# What one of those is counted in the byte budget. It holds its connection's read buffers (up to
# 128 KiB each: native/src/transport.rs) and its chunks waiting for the writer, not its
# whole body: counted at 512 KiB, a 16 MiB budget admits 32 GETs of 1 MiB (bench/RESULTS.md,
# issue 19's twelfth and sixteenth sessions: 2,000 x 1 MiB peaks at ~72 MiB); 16 were too few at
# 20 ms RTT.
STREAMED_HELD = 512 * 1024


@dataclass(frozen=True)
class Parts:
    """How large objects move: in parts of `size` bytes, `in_flight` at once, above `threshold`."""

    size: int = 8 * MiB
    in_flight: int = 8
    threshold: int = 64 * MiB


class Way(enum.Enum):
    """How a download is fetched (the module's docstring says when each is taken)."""

    SIGNED = "signed"  # a key only botocore's signer signs as named: whole, in memory
    EMPTY = "empty"  # nothing to fetch (a range of nothing is answered 416)
    NATIVE = "native"  # the native batch GETs fetch, check and land it
    WHOLE = "whole"  # the signed client fetches it whole; hashed by its parts' likely size
    STREAMED = "streamed"  # one native GET of the whole object, streamed into its file
    RANGED = "ranged"  # native GETs of its ranges, each written at its offset


class Route(NamedTuple):
    way: Way
    held: int  # what it holds in memory while it runs, for the byte budget


def download_route(key: str, size: int, etag: str, parts: Parts) -> Route:
    """How the object `key` of `size` bytes, listed with `etag`, is downloaded, and what that
    holds in memory: a GET the native part streams into its file holds its connection's buffers
    and a chunk or two (`STREAMED_HELD`), not its body; above the threshold, that for each range
    in flight; the signed client's holds the whole body."""
    if not native_http.signs_as_sent(f"/{quote_key(key)}"):
        return Route(Way.SIGNED, size)
    if size > parts.threshold and size > WHOLE_BODY_MAX:
        return Route(Way.RANGED, STREAMED_HELD * min(parts.in_flight, -(-size // parts.size)))
    if size > WHOLE_BODY_MAX:
        return Route(Way.STREAMED, STREAMED_HELD)
    if not size:
        return Route(Way.EMPTY, 0)
    if etag and single_part_md5(etag) is None:
        return Route(Way.WHOLE, size)
    return Route(Way.NATIVE, min(size, STREAMED_HELD) if size >= STREAMED_MIN else size)


def bytes_held(key: str, size: int, etag: str, parts: Parts) -> int:
    """What downloading this object holds in memory while it runs, for the byte budget."""
    return download_route(key, size, etag, parts).held


def spans(size: int, parts: Parts, part_size: int | None) -> Iterator[tuple[int, int]]:
    """The byte ranges a download from `WHOLE_BODY_MAX` asks for, in the order it asks, made
    as they are asked for (a listing that says 5 TiB made 655,360 tasks up front, 1.4 GB in
    15 s): one GET up to the threshold (one byte past the size: `Downloads._fetch_streamed`);
    above it, ranges of `parts.size`, and where the object's parts (`part_size`, hashed as they
    come) are larger, the first range of each part, then the second of each, ... so that the
    parts come, and are hashed, side by side."""
    if size <= parts.threshold:
        yield 0, size + 1
        return
    step = parts.size
    if not part_size or part_size <= step:
        for start in range(0, size, step):
            yield start, min(start + step, size)
        return
    for offset in range(0, part_size, step):  # the n-th range of every part, then the next
        for first in range(0, size, part_size):
            start, end = first + offset, min(first + part_size, size)
            if start < end:
                yield start, min(start + step, end)


def upload_held(key: str, size: int, parts: Parts) -> int:
    """What uploading this file holds in memory while it runs, for the byte budget: a small one
    is read whole; a large one's parts in flight are read from the file as they are sent, each
    holding a chunk or two (`STREAMED_HELD`), except under a key only botocore's signer signs
    as named (a dot segment), whose parts are read whole (`S3Client.upload_part`)."""
    if size <= parts.threshold:
        return size
    streamed = native_http.signs_as_sent(f"/{quote_key(key)}")
    return (STREAMED_HELD if streamed else parts.size) * parts.in_flight
