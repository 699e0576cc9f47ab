"""A vector's content hash, kept in its metadata (`HASH_KEY`) by every put s3bulk makes, so a
later `vectors sync` compares a source with an index from a listing of keys and metadata alone,
without reading every vector back (4 KB a vector at 1,024 values, and a GetVectors per 100).

The hash covers the float32 bytes and the metadata the user gave (in a canonical form: sorted
keys, orjson's text), not the hash key itself: 16 hex digits of BLAKE2b. `vectors create-index`
declares the key non-filterable, so it takes nothing from the 2 KB of filterable metadata.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import orjson

from s3bulk._vectors.validate import metadata_problem

HASH_KEY = "s3bulk_hash"


def content_hash(vector: np.ndarray, metadata: dict[str, Any] | None) -> str:
    digest = hashlib.blake2b(np.ascontiguousarray(vector, dtype=np.float32).tobytes(), digest_size=8)
    own = {name: value for name, value in (metadata or {}).items() if name != HASH_KEY}
    if own:
        digest.update(orjson.dumps(own, option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()


def with_hashes(
    vectors: np.ndarray, metadata: list[dict[str, Any] | None] | None, non_filterable: frozenset[str]
) -> list[dict[str, Any] | None]:
    """Each row's metadata with its content hash added (the user's own keys unchanged), where
    the service's limits leave room for it: a row at 50 keys, 40 KB, or 2 KB of filterable
    metadata (the hash filterable in an index that does not say otherwise) goes without, and
    `vectors sync` compares it by reading it back."""
    rows = metadata if metadata is not None else [None] * len(vectors)
    hashed: list[dict[str, Any] | None] = []
    for vector, entry in zip(vectors, rows, strict=True):
        own = {name: value for name, value in (entry or {}).items() if name != HASH_KEY}
        candidate = {**own, HASH_KEY: content_hash(vector, own)}
        hashed.append(candidate if not metadata_problem(candidate, non_filterable) else (own or None))
    return hashed


def without_hash(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metadata as the user gave it: the hash key left out (None when nothing else is left)."""
    if not metadata:
        return None
    own = {name: value for name, value in metadata.items() if name != HASH_KEY}
    return own or None
