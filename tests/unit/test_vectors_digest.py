"""The content hash (`s3bulk_hash`) made where the body is written (native/src/vectors.rs), held
equal on random rows to the Python function s3bulk computed it with before (per row: the
float32 bytes' CRC64NVME, then the canonical metadata text's, combined): vectors a sync compares
must hash as those an older s3bulk stored. And the body carries the hash only where asked, the
user's own metadata unchanged beside it."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import s3bulk_native
from s3bulk._vectors.digest import HASH_KEY, content_hashes, hash_room, without_hash_texts
from s3bulk._vectors.payload import put_vectors_body


def python_content_hash(vector: np.ndarray, metadata: dict[str, Any] | None) -> str:
    """The hash as s3bulk computed it in Python until the body's writer made it (issue 63)."""
    values = np.ascontiguousarray(vector, dtype=np.float32).view(np.uint8)
    digest = s3bulk_native.checksum("CRC64NVME", values)
    own = {name: value for name, value in (metadata or {}).items() if name != HASH_KEY}
    if own:
        text = orjson.dumps(own, option=orjson.OPT_SORT_KEYS)
        digest = s3bulk_native.crc_combine(
            "CRC64NVME", digest, s3bulk_native.checksum("CRC64NVME", text), len(text)
        )
    return digest.hex()


scalars = st.one_of(
    st.text(max_size=20),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
entries = st.one_of(
    st.none(),
    st.dictionaries(
        st.one_of(st.text(min_size=1, max_size=12), st.just(HASH_KEY)),
        st.one_of(scalars, st.lists(st.text(max_size=8), max_size=4)),
        max_size=6,
    ),
)


@st.composite
def batches(draw: st.DrawFn) -> tuple[np.ndarray, list[dict[str, Any] | None]]:
    rows = draw(st.integers(1, 12))
    dimension = draw(st.integers(1, 40))
    floats = st.floats(width=32, allow_nan=False, allow_infinity=False)
    vectors = draw(arrays(np.float32, (rows, dimension), elements=floats))
    metadata = draw(st.lists(entries, min_size=rows, max_size=rows))
    return vectors, metadata


@settings(max_examples=300, deadline=None)
@given(batches())
def test_the_native_hash_is_the_python_hash_of_each_row(batch: tuple[np.ndarray, list[Any]]) -> None:
    vectors, metadata = batch
    expected = [python_content_hash(vectors[n], metadata[n]) for n in range(len(vectors))]
    assert content_hashes(vectors, metadata) == expected
    keys = [f"k{n}" for n in range(len(vectors))]
    body = orjson.loads(put_vectors_body("b", "i", keys, vectors, metadata, hashed=True))
    for n, entry in enumerate(body["vectors"]):
        own = {name: value for name, value in (metadata[n] or {}).items() if name != HASH_KEY}
        assert entry["metadata"] == own | {HASH_KEY: expected[n]}
        assert np.array(entry["data"]["float32"], dtype=np.float32).tobytes() == vectors[n].tobytes()


def test_a_body_carries_the_users_metadata_alone_unless_the_hash_is_asked_for() -> None:
    vectors = np.random.default_rng(5).standard_normal((3, 8)).astype(np.float32)
    metadata: list[dict[str, Any] | None] = [{"genre": "drama", "year": 1999}, None, {HASH_KEY: "stale"}]
    plain = orjson.loads(put_vectors_body("b", "i", ["a", "b", "c"], vectors, metadata))
    assert [entry.get("metadata") for entry in plain["vectors"]] == [
        {"genre": "drama", "year": 1999},
        None,
        None,
    ]
    hashed = orjson.loads(put_vectors_body("b", "i", ["a", "b", "c"], vectors, metadata, hashed=True))
    assert [set(entry["metadata"]) for entry in hashed["vectors"]] == [
        {"genre", "year", HASH_KEY},
        {HASH_KEY},
        {HASH_KEY},
    ]
    assert hashed["vectors"][2]["metadata"][HASH_KEY] == python_content_hash(vectors[2], None)


def test_a_row_at_the_limits_goes_without_its_hash() -> None:
    """50 keys, or filterable metadata the hash would push past 2 KB (the hash filterable where
    the index does not declare it): that row goes without; one with room keeps it."""
    full = {f"m{n}": n for n in range(50)}
    near = {"text": "x" * 2010}
    metadata: list[dict[str, Any] | None] = [full, near, {"a": 1}, None]
    texts = [orjson.dumps(entry, option=orjson.OPT_SORT_KEYS) if entry else None for entry in metadata]
    assert hash_room(texts, metadata, frozenset()) == bytes([0, 0, 1, 1])
    assert hash_room(texts, metadata, frozenset({"text", HASH_KEY})) == bytes([0, 1, 1, 1])


def test_listed_metadata_texts_lose_only_the_hash_key() -> None:
    texts = ['{"genre":"x","s3bulk_hash":"0123456789abcdef"}', '{"s3bulk_hash":"0"}', None, '{"a":1}']
    assert without_hash_texts(texts) == ['{"genre":"x"}', None, None, '{"a":1}']
