"""PutVectors request bodies, written straight from numpy arrays by s3bulk_native (native/).

boto3 turns each float32 into a Python float and then into text: 0.6-0.7 s of CPU per batch of
500 x 1024 here, with a 10.6 MB body of float64 digits. Each float32 is written as the shortest
text that reads back as the same float32 (the text orjson writes), so the body is about half
the size and the service stores exactly the floats the user had. The rows take ~6 ms per
batch, written with the GIL released: with orjson they held it for 11 ms, half of all the
loader's work, while the event loop, Parquet and the hashing of other bodies waited.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

import s3bulk_native
from s3bulk._vectors.digest import canonical_texts, hash_room
from s3bulk._vectors.limits import MAX_REQUEST_BYTES, MAX_VECTORS_PER_REQUEST

__all__ = ["MAX_REQUEST_BYTES", "MAX_VECTORS_PER_REQUEST", "HashedBody", "hashed", "put_vectors_body"]


@dataclass(frozen=True)
class HashedBody:
    """A request body and the hex SHA-256 SigV4 signs for it. The body is a view of the native
    writer's bytearray: aiohttp slices what it sends, and a view's slice copies nothing."""

    data: memoryview
    sha256: str


def put_vectors_body(
    bucket: str,
    index: str,
    keys: Sequence[str],
    vectors: np.ndarray,
    metadata: Sequence[dict[str, Any] | None] | None = None,
    *,
    hashed: bool = False,
    non_filterable: frozenset[str] = frozenset(),
) -> bytearray:
    """The JSON body of one PutVectors request; `vectors` is an (n, dimension) float32 array.
    The JSON before each row (its key) is orjson's; the rows, each row's metadata (its
    canonical text, `digest.canonical`) and, when `hashed`, its content hash where the limits
    leave room (`non_filterable`: the index's) are the native writer's."""
    head = orjson.dumps({"vectorBucketName": bucket, "indexName": index})[:-1] + b',"vectors":['
    before = [b'{"key":' + orjson.dumps(key) + b',"data":{"float32":' for key in keys]
    texts = canonical_texts(metadata, len(keys))
    room = hash_room(texts, metadata, non_filterable) if hashed else b""
    rows = np.ascontiguousarray(vectors, dtype=np.float32)
    return s3bulk_native.put_vectors_body(head, before, rows, texts, room, b"]}")


def hashed(data: bytearray) -> HashedBody:
    """A body and its SHA-256, for a thread of the caller's: neither the writing (nor the
    content hashes in it) nor the SHA-256 holds the GIL, so two such threads and the event loop
    share the cores."""
    return HashedBody(memoryview(data), hashlib.sha256(data).hexdigest())
