"""The native part of s3bulk: PutVectors bodies written, and downloads hashed, without the GIL."""

from collections.abc import Sequence
from typing import Any

def put_vectors_body(
    head: bytes, before: Sequence[bytes], rows: Any, after: Sequence[bytes], tail: bytes
) -> bytearray:
    """`head`, the entries joined by commas, `tail`; entry i is `before[i]`, row i of `rows` (a
    C-contiguous (n, dimension) float32 array) as a JSON array, `after[i]`. ValueError for a row
    holding NaN or infinity."""

def md5_many(buffers: Sequence[Any]) -> list[bytes]:
    """The MD5 digest (16 raw bytes) of each buffer (any C-contiguous buffer of bytes), in order,
    hashed side by side in SIMD lanes with the GIL released."""

def md5_file_parts(path: str, part_size: int) -> list[bytes]:
    """The MD5 digest of each `part_size` part of the file at `path` (the last one shorter; one
    digest for a file no larger than a part, an empty file's included), parts hashed side by side
    with the GIL released. OSError when the file cannot be read."""
