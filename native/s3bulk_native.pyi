"""The native part of s3bulk: PutVectors bodies written without the GIL."""

from collections.abc import Sequence
from typing import Any

def put_vectors_body(
    head: bytes, before: Sequence[bytes], rows: Any, after: Sequence[bytes], tail: bytes
) -> bytearray:
    """`head`, the entries joined by commas, `tail`; entry i is `before[i]`, row i of `rows` (a
    C-contiguous (n, dimension) float32 array) as a JSON array, `after[i]`. ValueError for a row
    holding NaN or infinity."""
