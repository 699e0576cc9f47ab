"""A vector's content hash, kept in its metadata (`HASH_KEY`) where it costs the user nothing, so
a later `vectors sync` compares a source with an index from a listing of keys and metadata
alone, without reading every vector back (4 KB a vector at 1,024 values, and a GetVectors per 100).

What is stored is what the user gave: a put writes the hash only into an index whose
non-filterable keys include it (as `vectors create-index` and `vectors copy --create` make
them), or when asked (`--content-hash`, `content_hash=True`). A filterable key would take room
from the 2 KB of filterable metadata and one of the 50 keys, and show up in every answer the
user's application reads. Export, query and copy hand the user's metadata back without it.

The hash covers the float32 bytes and the metadata the user gave in a canonical form (orjson's
text, keys sorted, the hash key left out), as one CRC64NVME: 16 hex digits. What it guards
against is a change, not an adversary: 64 bits of CRC tell any edit of an embedding from none.
The body's writer makes it (`native/src/vectors.rs`), where the row's bytes are, a batch at a
time without the GIL; the body carries the same canonical text as the row's metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

import s3bulk_native
from s3bulk._vectors.validate import MAX_FILTERABLE_METADATA_BYTES, MAX_METADATA_KEYS, metadata_problem

HASH_KEY = "s3bulk_hash"
# what the hash adds to a row's metadata text: ,"s3bulk_hash":"0123456789abcdef"
HASH_BYTES = len(orjson.dumps({HASH_KEY: "0" * 16})) - 1

Metadata = Sequence[dict[str, Any] | None] | None


def canonical(metadata: dict[str, Any] | None) -> bytes | None:
    """The user's metadata as the hash covers it and a body carries it: orjson's text, keys
    sorted, the hash key left out (a stale one from an export would lie); None when empty."""
    if not metadata:
        return None
    if HASH_KEY in metadata:
        metadata = {name: value for name, value in metadata.items() if name != HASH_KEY}
        if not metadata:
            return None
    return orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS)


def canonical_texts(metadata: Metadata, rows: int) -> list[bytes | None]:
    """`canonical` of each row's metadata (None for every row when there is none)."""
    return [None] * rows if metadata is None else [canonical(entry) for entry in metadata]


def content_hashes(vectors: np.ndarray, metadata: Metadata) -> list[str]:
    """Each row's content hash, as a put writes it (native, the GIL released for the hashing)."""
    rows = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    return s3bulk_native.content_hashes(rows, canonical_texts(metadata, len(rows)))


def hash_room(texts: list[bytes | None], metadata: Metadata, non_filterable: frozenset[str]) -> bytes:
    """1 for each row whose metadata has room for the hash under the service's limits, 0 for
    one at 50 keys, 40 KB, or 2 KB of filterable metadata (the hash filterable in an index that
    does not declare it): that row goes without, and `vectors sync` reads it back to compare.
    Exact (`metadata_problem`) only for the rare row near a limit."""
    if metadata is None:
        return b"\x01" * len(texts)
    flags = bytearray(len(texts))
    for row, (text, entry) in enumerate(zip(texts, metadata, strict=True)):
        if text is None or entry is None:
            flags[row] = 1
            continue
        keys = len(entry) - (HASH_KEY in entry)
        if keys < MAX_METADATA_KEYS and len(text) + HASH_BYTES <= MAX_FILTERABLE_METADATA_BYTES:
            flags[row] = 1
            continue
        own = {name: value for name, value in entry.items() if name != HASH_KEY}
        flags[row] = not metadata_problem({**own, HASH_KEY: "0" * 16}, non_filterable)
    return bytes(flags)


def without_hash(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metadata as the user gave it: the hash key left out (None when nothing else is left)."""
    if not metadata:
        return None
    own = {name: value for name, value in metadata.items() if name != HASH_KEY}
    return own or None


def without_hash_texts(texts: list[str | None]) -> list[str | None]:
    """Metadata texts as a listing sent them, each without the hash key: only those that hold
    it are read and written again."""
    marker = f'"{HASH_KEY}"'
    return [
        text if text is None or marker not in text else _dumped(without_hash(orjson.loads(text)))
        for text in texts
    ]


def _dumped(metadata: dict[str, Any] | None) -> str | None:
    return None if metadata is None else orjson.dumps(metadata).decode()
