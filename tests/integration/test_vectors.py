"""S3 Vectors wire client and payloads against moto's server (the only local S3 Vectors), and the
row checks that keep bad vectors from ever being sent."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np
import pytest
from conftest import Endpoint

from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error
from s3bulk._stores.vectors import VectorsClient
from s3bulk._vectors.payload import put_vectors_body


def _settings(moto: Endpoint, monkeypatch: pytest.MonkeyPatch) -> AwsSettings:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in moto.server.client_env().items():
        monkeypatch.setenv(name, value)
    return AwsSettings.from_env()


def test_put_overwrite_and_get_back_exactly(moto: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(moto, monkeypatch)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((600, 16)).astype(np.float32)
    vectors[0, :3] = [1e-38, 3.4e38, -0.0]  # extremes must survive the text round trip
    keys = [f"doc-{n:04d}" for n in range(600)]
    metadata: list[dict[str, Any] | None] = [{"n": n, "title": f"t{n}"} for n in range(600)]

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
        client = VectorsClient(settings)
        try:
            await client.create_vector_bucket("emb")
            await client.create_index("emb", "idx", 16, "cosine")
            assert (await client.get_index("emb", "idx"))["dimension"] == 16
            for start in (0, 500):
                rows = slice(start, start + 500)
                await client.put_vectors(
                    put_vectors_body("emb", "idx", keys[rows], vectors[rows], metadata[rows])
                )
            first = await client.get_vectors("emb", "idx", ["doc-0000", "doc-0599"])
            await client.put_vectors(
                put_vectors_body("emb", "idx", ["doc-0599"], -vectors[599:600], [{"n": -1}])
            )
            again = await client.get_vectors("emb", "idx", ["doc-0599"])
            return first, again, dict(client.requests)
        finally:
            await client.close()

    first, again, requests = asyncio.run(scenario())
    by_key = {vector["key"]: vector for vector in first}
    for key, row in (("doc-0000", 0), ("doc-0599", 599)):
        stored = np.array(by_key[key]["data"]["float32"], dtype=np.float32)
        assert stored.tobytes() == vectors[row].tobytes()  # bit for bit
        assert by_key[key]["metadata"] == metadata[row]
    overwritten = np.array(again[0]["data"]["float32"], dtype=np.float32)
    assert overwritten.tobytes() == (-vectors[599]).tobytes() and again[0]["metadata"] == {"n": -1}
    assert requests["PutVectors"] == 3 and requests["GetVectors"] == 2


def test_service_errors_are_named_and_final(moto: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(moto, monkeypatch)

    async def missing() -> None:
        client = VectorsClient(settings)
        try:
            await client.get_index("no-such-bucket", "idx")
        finally:
            await client.close()

    with pytest.raises(S3Error) as caught:
        asyncio.run(missing())
    assert caught.value.status == 404 and caught.value.code == "NotFoundException"
    assert not caught.value.retryable and not caught.value.throttled
    assert str(caught.value).startswith("GetIndex: NotFoundException (404)")
