"""S3 Vectors without a server: the PutVectors body (compact, exact, the native writer against orjson),
row validation, throttling answers, the default engine's choice, page-by-page reads of large row
groups, and the signature of a body hashed in a thread."""

from __future__ import annotations

import os
import tracemalloc
from typing import Any

import numpy as np
import orjson
import pytest

from s3bulk._vectors.payload import put_vectors_body
from s3bulk._vectors.validate import check_rows


def test_throttling_answers_are_retryable_and_marked() -> None:
    from s3bulk._stores.vectors import _error

    slow = _error("PutVectors", 429, "TooManyRequestsException:", b'{"message":"Rate exceeded"}')
    busy = _error("PutVectors", 503, "", b'{"__type":"ServiceUnavailableException","message":"later"}')
    assert slow.retryable and slow.throttled and slow.code == "TooManyRequestsException"
    assert busy.retryable and busy.throttled and "later" in str(busy)


def test_payload_is_compact_and_exact() -> None:
    vectors = np.random.default_rng(1).standard_normal((500, 1024)).astype(np.float32)
    body = put_vectors_body("b", "i", [f"k{n}" for n in range(500)], vectors)
    parsed = orjson.loads(body)
    assert len(parsed["vectors"]) == 500 and parsed["vectorBucketName"] == "b"
    back = np.array([entry["data"]["float32"] for entry in parsed["vectors"]], dtype=np.float32)
    assert back.tobytes() == vectors.tobytes()
    as_float64_text = len(orjson.dumps(vectors.astype(np.float64).tolist()))
    assert len(body) < 0.6 * as_float64_text  # boto3 sends the float64 text


def test_the_native_body_is_the_text_orjson_writes_for_floats_of_every_exponent() -> None:
    """The rows are written by s3bulk_native with a patched zmij (native/vendor/zmij); orjson,
    which writes float32 with zmij as published, is the independent reference. Random bit
    patterns cover every exponent, fixed and scientific notation, subnormals and both zeros."""
    bits = np.random.default_rng(3).integers(0, 2**32, size=200 * 1024, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    values[~np.isfinite(values)] = 1.5
    edges = [-1.0000001e-6, 1e-7, 0.0, -0.0, 1.0, 12.34, 123456789.0, 3.4028235e38, 1e-45, -1.1754944e-38]
    values[: len(edges)] = edges
    vectors = values.reshape(200, 1024)
    keys = [f"k{n}" for n in range(200)]
    metadata: list[dict[str, Any] | None] = [{"n": n} if n % 3 else None for n in range(200)]
    body = put_vectors_body("b", "i", keys, vectors, metadata)
    entries = [
        {"key": key, "data": {"float32": vectors[n]}} | ({"metadata": metadata[n]} if metadata[n] else {})
        for n, key in enumerate(keys)
    ]
    expected = {"vectorBucketName": "b", "indexName": "i", "vectors": entries}
    assert bytes(body) == orjson.dumps(expected, option=orjson.OPT_SERIALIZE_NUMPY)
    back = np.array([entry["data"]["float32"] for entry in orjson.loads(body)["vectors"]], dtype=np.float32)
    assert back.tobytes() == vectors.tobytes()


def test_the_native_writer_refuses_what_json_cannot_carry() -> None:
    vectors = np.ones((3, 4), dtype=np.float32)
    vectors[2, 1] = np.inf
    with pytest.raises(ValueError, match="row 2 holds NaN or infinity"):
        put_vectors_body("b", "i", ["a", "b", "c"], vectors)


def test_bad_rows_are_named_with_their_reason() -> None:
    vectors = np.ones((8, 4), dtype=np.float32)
    vectors[1, 2] = np.nan
    vectors[2, 0] = np.inf
    vectors[3] = 0.0
    keys = ["ok", "nan", "inf", "zero", "", "ok", "x" * 1025, "meta"]
    metadata: list[dict[str, Any] | None] = [None] * 7 + [{"blob": "y" * 3000}]
    problems = check_rows(keys, vectors, metadata, dimension=4, metric="cosine")
    assert problems == {
        1: "vector has NaN or infinite values",
        2: "vector has NaN or infinite values",
        3: "all-zero vector: a cosine index cannot store it",
        4: "key length 0 is outside 1-1024",
        5: "duplicate key 'ok' in the same batch (row 0 has it too)",
        6: "key length 1025 is outside 1-1024",
        7: "filterable metadata is 3,011 bytes (at most 2,048); declare big keys non-filterable when "
        "creating the index",
    }
    assert (
        check_rows(
            ["meta"],
            vectors[:1],
            [{"blob": "y" * 3000}],
            dimension=4,
            metric="cosine",
            non_filterable=frozenset({"blob"}),
        )
        == {}
    )
    assert check_rows(["z"], np.zeros((1, 4), np.float32), None, dimension=4, metric="euclidean") == {}
    huge = {"blob": "y" * 41_000}
    assert (
        "metadata is 41,011 bytes (at most 40,960)"
        in check_rows(
            ["m"], vectors[:1], [huge], dimension=4, metric="cosine", non_filterable=frozenset({"blob"})
        )[0]
    )
    many = {f"k{n}": n for n in range(51)}
    assert check_rows(["m"], vectors[:1], [many], dimension=4, metric="cosine")[0] == (
        "metadata has 51 keys (at most 50)"
    )
    wrong = check_rows(["a", "b"], np.ones((2, 3), np.float32), None, dimension=4, metric="cosine")
    assert wrong == {
        0: "dimension 3 does not match the index's 4",
        1: "dimension 3 does not match the index's 4",
    }


def test_the_default_engine_adds_processes_only_when_the_rate_and_the_cores_call_for_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One index at its write limit is one process's work; a lifted limit or many indexes ask
    for more than one process builds, so they get one process per core, where there are cores
    for them: one process already keeps more than one core busy."""
    from s3bulk._commands.put_vectors import PutVectorsCommand, PutVectorsSpec

    command = PutVectorsCommand()
    one = PutVectorsSpec(sources=("a.parquet",), bucket="b", indexes=("i",))
    lifted = PutVectorsSpec(sources=("a.parquet",), bucket="b", indexes=("i",), vectors_per_second=1e9)
    many = PutVectorsSpec(sources=("a.parquet",), bucket="b", indexes=tuple(f"i{n}" for n in range(10)))
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert not command.python_bound(one)
    assert command.python_bound(lifted)
    assert command.python_bound(many)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert not command.python_bound(lifted)
    assert not command.python_bound(many)


def test_a_large_row_group_is_read_page_by_page(tmp_path: Any) -> None:
    """Parquet writers put a million rows in a group by default (4 GB of 1024-float vectors): a
    loader that read a group's column whole would hold all of it before sending one batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from s3bulk._sources.embeddings import EmbeddingSpec, plan_slices, read_slice

    rows, dimension = 20_000, 512
    vectors = np.random.default_rng(3).standard_normal((rows, dimension)).astype(np.float32)
    table = pa.table(
        {
            "key": [f"k{n}" for n in range(rows)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension),
        }
    )
    path = tmp_path / "one-group.parquet"
    pq.write_table(table, path, row_group_size=rows, compression="none")
    spec = EmbeddingSpec((str(path),), key_column="key", vector_column="vector")
    (piece,) = list(plan_slices(spec))
    chunks = read_slice(piece, spec, 500)
    tracemalloc.start()  # the file's bytes as Python reads them for pyarrow
    try:
        before = pa.total_allocated_bytes()
        first = next(chunks)
        held = pa.total_allocated_bytes() - before + tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(first.vectors, vectors[:500])
    assert held < 16 * 1024**2, f"reading 500 rows held {held / 1024**2:.0f} MiB of a 40 MiB group"
    assert sum(len(chunk.keys) for chunk in chunks) == rows - 500


def test_a_body_hashed_in_a_thread_is_signed_as_botocore_would_sign_it() -> None:
    """The builder thread's SHA-256 stands in for the one botocore would compute: the canonical
    request (what the signature covers) is the same, and a wrong hash would change it."""
    import hashlib

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from s3bulk._stores.http import _signer

    credentials = Credentials("AKID", "secret")
    body = put_vectors_body("b", "i", ["k"], np.ones((1, 4), np.float32))
    request = AWSRequest("POST", "https://s3vectors.us-east-1.api.aws/PutVectors", data=body)
    request.headers["X-Amz-Date"] = "20261124T000000Z"
    botocores = SigV4Auth(credentials, "s3vectors", "us-east-1").canonical_request(request)
    hashed = _signer(False)(credentials, "s3vectors", "us-east-1", hashlib.sha256(body).hexdigest())
    assert hashed.canonical_request(request) == botocores
    wrong = _signer(False)(credentials, "s3vectors", "us-east-1", hashlib.sha256(b"other").hexdigest())
    assert wrong.canonical_request(request) != botocores
