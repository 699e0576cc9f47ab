"""Checks a batch must pass before anything is sent, each failing row named with its reason.

The service would refuse the whole request for one bad row (or, worse, orjson would write NaN as
`null`), so rows are checked here and bad ones go to the rejects list instead: the limits are
those documented for S3 Vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

MAX_KEY_LENGTH = 1024
MAX_METADATA_BYTES = 40 * 1024
MAX_FILTERABLE_METADATA_BYTES = 2 * 1024
MAX_METADATA_KEYS = 50


def check_rows(
    keys: Sequence[str],
    vectors: np.ndarray,
    metadata: Sequence[dict[str, Any] | None] | None,
    *,
    dimension: int,
    metric: str,
    non_filterable: frozenset[str] = frozenset(),
) -> dict[int, str]:
    """{row number within the batch: reason} for every row that must not be sent."""
    problems: dict[int, str] = {}
    if vectors.ndim != 2 or vectors.shape[1] != dimension:
        width = vectors.shape[1] if vectors.ndim == 2 else "?"
        return {row: f"dimension {width} does not match the index's {dimension}" for row in range(len(keys))}
    finite: np.ndarray = np.isfinite(vectors).all(axis=1)
    zero = np.asarray(~vectors.any(axis=1)) if metric == "cosine" else np.zeros(len(keys), dtype=bool)
    seen: dict[str, int] = {}
    for row, key in enumerate(keys):
        reason = ""
        if not 1 <= len(key) <= MAX_KEY_LENGTH:
            reason = f"key length {len(key)} is outside 1-{MAX_KEY_LENGTH}"
        elif key in seen:
            reason = f"duplicate key {key!r} in the same batch (row {seen[key]} has it too)"
        elif not finite[row]:
            reason = "vector has NaN or infinite values"
        elif zero[row]:
            reason = "all-zero vector: a cosine index cannot store it"
        elif metadata is not None and metadata[row]:
            reason = metadata_problem(metadata[row] or {}, non_filterable)
        if reason:
            problems[row] = reason
        seen.setdefault(key, row)
    return problems


def metadata_problem(metadata: dict[str, Any], non_filterable: frozenset[str]) -> str:
    if len(metadata) > MAX_METADATA_KEYS:
        return f"metadata has {len(metadata)} keys (at most {MAX_METADATA_KEYS})"
    size = len(orjson.dumps(metadata))
    if size > MAX_METADATA_BYTES:
        return f"metadata is {size:,} bytes (at most {MAX_METADATA_BYTES:,})"
    filterable = {name: value for name, value in metadata.items() if name not in non_filterable}
    filterable_size = len(orjson.dumps(filterable))
    if filterable_size > MAX_FILTERABLE_METADATA_BYTES:
        return (
            f"filterable metadata is {filterable_size:,} bytes (at most {MAX_FILTERABLE_METADATA_BYTES:,}); "
            "declare big keys non-filterable when creating the index"
        )
    return ""
