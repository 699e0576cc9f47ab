"""What an S3 ETag proves about bytes. A single-part object's ETag is the MD5 of its bytes; a
multipart object's is the MD5 of its parts' MD5s, then '-N' (N parts), so checking one needs the
part size it was uploaded with: tried here in turn (the caller's, the common 8/16/5/50/64 MiB,
and size/N rounded up to 1 MiB) among those that give N parts; when none is right, the service
says what the parts were (`etag_matches_layout`). An ETag that is no MD5 at all (SSE-KMS,
SSE-C objects) proves nothing: `None`, "cannot tell", as opposed to False, "these are not the bytes".
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable

from s3bulk_native import md5_file_parts, md5_many

MiB = 1024 * 1024
_HEX = frozenset("0123456789abcdef")


def _parsed(etag: str) -> tuple[str, int] | None:
    """(MD5 hex, parts: 0 for a single-part ETag) or None when the ETag is not of that form."""
    digest, dash, parts = etag.strip('"').lower().partition("-")
    if len(digest) != 32 or not _HEX.issuperset(digest) or (dash and not parts.isdigit()):
        return None
    return digest, int(parts) if dash else 0


def single_part_md5(etag: str) -> bytes | None:
    """The MD5 a single-part ETag names (raw), None for any other ETag."""
    parsed = _parsed(etag)
    return bytes.fromhex(parsed[0]) if parsed and not parsed[1] else None


def md5_parts(etag: str) -> int | None:
    """How many parts an MD5 ETag was made of (0: a single-part object), None for any other ETag."""
    parsed = _parsed(etag)
    return parsed[1] if parsed else None


def completed_etag(etags: list[str]) -> str | None:
    """The ETag S3 gives the object these parts (their ETags, in order) complete; None when a
    part's ETag is no MD5 (SSE-KMS, say), so the object's cannot be foretold."""
    digests = [single_part_md5(etag) for etag in etags]
    if any(digest is None for digest in digests):
        return None
    return f"{_md5_of_parts([d for d in digests if d])}-{len(etags)}"


def _md5_of_parts(digests: list[bytes]) -> str:
    """The MD5 of the parts' MD5s: the hex digest a multipart ETag carries before its count."""
    return hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest()


def _part_sizes(size: int, parts: int, part_size: int) -> Iterable[int]:
    """The part sizes that could give `size` bytes in `parts` parts, likeliest first: the job's
    own, the common tools' defaults (aws and boto3 8 MiB, mc 16, rclone 5, s5cmd 50), then the
    size over the parts rounded up to a MiB before 64 MiB (s5cmd's 50 MiB parts of a 1 GiB file
    are 21, as 49 MiB parts would be: each wrong guess hashes the whole file again)."""
    tried = set()
    common = (part_size, 8 * MiB, 16 * MiB, 5 * MiB, 50 * MiB)
    for candidate in (*common, math.ceil(size / parts / MiB) * MiB, 64 * MiB):
        if candidate > 0 and candidate not in tried and math.ceil(size / candidate) == parts:
            tried.add(candidate)
            yield candidate


def _matches(
    etag: str, size: int, part_size: int, digests: Callable[[int], tuple[str, list[bytes]]]
) -> bool | None:
    parsed = _parsed(etag)
    if parsed is None:
        return None
    digest, parts = parsed
    if not parts:
        return digests(size or 1)[0] == digest
    for candidate in _part_sizes(size, parts, part_size):
        if _md5_of_parts(digests(candidate)[1]) == digest:
            return True
    return False


def etag_matches_layout(path: str, etag: str, sizes: list[int]) -> bool | None:
    """Whether the file holds the bytes a multipart `etag` describes, given the sizes of its parts
    as the service tells them (None: the ETag cannot tell, or names another number of parts)."""
    parsed = _parsed(etag)
    if parsed is None or parsed[1] != len(sizes) or not sizes:
        return None
    if os.path.getsize(path) != sum(sizes):
        return False
    if all(size == sizes[0] for size in sizes[:-1]) and sizes[-1] <= sizes[0]:
        return _md5_of_parts(md5_file_parts(path, sizes[0])) == parsed[0]
    digests = []  # uneven parts (a rare layout): one MD5 after another
    with open(path, "rb") as handle:
        for size in sizes:
            digest = hashlib.md5(usedforsecurity=False)
            while size and (block := handle.read(min(size, MiB))):
                digest.update(block)
                size -= len(block)
            digests.append(digest.digest())
    return _md5_of_parts(digests) == parsed[0]


def etag_matches_bytes(data: bytes | memoryview, etag: str, part_size: int = 8 * MiB) -> bool | None:
    """Whether `data` are the bytes `etag` describes (None: the ETag cannot tell)."""
    view = memoryview(data)

    def digests(piece: int) -> tuple[str, list[bytes]]:
        if piece >= len(view):  # one part: the whole, hashed once
            whole = hashlib.md5(view, usedforsecurity=False).digest()
            return whole.hex(), [whole]
        # The parts side by side in SIMD lanes (digests.py): 8 parts in about the time of one.
        return "", md5_many([view[start : start + piece] for start in range(0, len(view), piece)])

    return _matches(etag, len(view), part_size, digests)


def likeliest_part_size(etag: str, size: int, part_size: int) -> int | None:
    """The part size to hash a file of `size` bytes by first, to check it against `etag`: its
    size under a single-part ETag, the likeliest that gives its parts under a multipart one;
    None when the ETag is no MD5, or no part size gives its parts."""
    parsed = _parsed(etag)
    if parsed is None:
        return None
    if not parsed[1]:
        return max(size, 1)
    return next(iter(_part_sizes(size, parsed[1], part_size)), None)


def etag_matches_file(
    path: str, etag: str, size: int, part_size: int = 8 * MiB, known: tuple[int, list[bytes]] | None = None
) -> bool | None:
    """Whether the file holds the bytes `etag` describes (None: the ETag cannot tell); `known`:
    (part size, the MD5 of each such part) found already, as the file was written."""

    def digests(piece: int) -> tuple[str, list[bytes]]:
        if known is not None and piece == known[0]:
            return (known[1][0].hex() if len(known[1]) == 1 else ""), known[1]
        return _md5_file(path, piece)

    return _matches(etag, size, part_size, digests)


def _md5_file(path: str, part_size: int) -> tuple[str, list[bytes]]:
    """The whole file's MD5 (hex; "" when the file is larger than `part_size`) and the MD5 of
    each `part_size` part (raw digests): parts hashed side by side (native md5_file_parts), a
    1 GiB file of 8 MiB parts in a sixth of the time of one MD5 after another."""
    parts = md5_file_parts(path, part_size)
    return (parts[0].hex() if len(parts) == 1 else ""), parts


class StreamCheck:
    """An object's bytes hashed as they pass, in order, as its ETag was made (a stream cannot be
    read again): whole under a single-part ETag, part by part under a multipart one whose parts
    are `part_size` bytes (the last one fewer)."""

    what = "its ETag"

    def __init__(self, etag: str, part_size: int | None = None) -> None:
        parsed = _parsed(etag)
        assert parsed is not None, "an ETag that is an MD5"
        self._expected, self._parts = parsed
        self._part_size = part_size if self._parts else None
        self._digests: list[bytes] = []
        self._current = hashlib.md5(usedforsecurity=False)
        self._filled = 0  # bytes of the current part hashed so far

    def update(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        size = self._part_size
        while size is not None and self._filled + len(view) >= size:
            taken = size - self._filled
            self._current.update(view[:taken])
            self._digests.append(self._current.digest())
            self._current, self._filled, view = hashlib.md5(usedforsecurity=False), 0, view[taken:]
        self._current.update(view)
        self._filled += len(view)

    def matches(self) -> bool:
        if self._part_size is None:
            return self._current.hexdigest() == self._expected
        digests = self._digests + ([self._current.digest()] if self._filled else [])
        return len(digests) == self._parts and _md5_of_parts(digests) == self._expected
