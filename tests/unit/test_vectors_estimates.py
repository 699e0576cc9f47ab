"""The bill and the time a vectors job states before it runs (issue 52, item 5)."""

from __future__ import annotations

from s3bulk._pricing import request_cost, vectors_costs
from s3bulk._vectors.limits import time_at_limits


def test_time_at_the_limits_of_one_index_and_of_eight() -> None:
    ten_million = 10_000_000
    one = time_at_limits(ten_million, ten_million // 500, 1, 2500, 1000)
    eight = time_at_limits(ten_million, ten_million // 500, 8, 2500, 1000)
    assert one.startswith("10,000,000 vectors in 20,000 requests into 1 index: at least 66.7 min")
    assert "across 8 indexes: at least 8.3 min" in eight
    # small batches: the request limit binds, not the vectors'
    assert "at least 10.0 s" in time_at_limits(10_000, 10_000, 1, 2500, 1000)
    assert time_at_limits(1, 1, 1, 2500, 1000).startswith("1 vector in 1 request into 1 index")


def test_vectors_are_priced_by_their_data_and_left_out_of_the_s3_request_cost() -> None:
    one_gb_of_vectors = 262_144 * 1024 * 4  # 262,144 vectors of 1,024 float32 values
    said = vectors_costs(one_gb_of_vectors, queries=1_000_000)
    assert said.startswith(
        "1.00 GB of vector data: PutVectors $0.20, storage $0.06/month; 1,000,000 queries $2.50"
    )
    assert "read 2026-09-20" in said
    assert request_cost({"PutVectors": 1000, "ListVectors": 1000}) == 0.0
    assert request_cost({"PUT": 1000, "GET": 1000}) == 0.005 + 0.0004


def test_recall_counts_the_exact_neighbours_the_answers_hold() -> None:
    from s3bulk._vectors.query import recall_at_k

    exact = {"q1": ["a", "b", "c", "d"], "q2": ["e", "f", "g", "h"]}
    answers = {"q1": ["a", "b", "x", "y"], "q2": ["h", "g", "f", "e"]}
    assert recall_at_k(answers, exact) == 6 / 8
    assert recall_at_k({}, exact) == 0.0 and recall_at_k(answers, {}) == 1.0


def test_distances_are_the_services_cosine_and_euclidean() -> None:
    import numpy as np

    from s3bulk._vectors.query import _distances

    queries = np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32)
    rows = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 4.0]], dtype=np.float32)
    cosine = _distances("cosine", queries, np.linalg.norm(queries, axis=1), rows)
    euclidean = _distances("euclidean", queries, np.linalg.norm(queries, axis=1), rows)
    assert np.allclose(cosine, [[0.0, 1.0, 0.4], [1.0, 0.0, 0.2]])
    assert np.allclose(euclidean, [[1.0, np.sqrt(2), np.sqrt(20)], [np.sqrt(8), 1.0, np.sqrt(13)]])
