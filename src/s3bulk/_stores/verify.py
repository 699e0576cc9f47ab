"""What every read of an object checks, whichever entry point reads it (`cat`, `s3bulk.get`,
`s3bulk.open`, fsspec's `cat_file` and `open`), as `cp`'s downloads check (issue 62, item 4): the
full-object checksum the object keeps (CRC64NVME, CRC32C, CRC32, SHA-256, SHA-1: asked for in
checksum mode) first, whatever its ETag is; else its ETag, where that is an MD5 (not an SSE-KMS or
SSE-C object's); else nothing can tell, and the read is not verified. A stream cannot be read
again, so its bytes are hashed as they pass, in order (`StreamChecksum`, `etags.StreamCheck`).
"""

from __future__ import annotations

import base64
import hashlib

import s3bulk_native
from s3bulk._stores import checksums
from s3bulk._stores.etags import StreamCheck, etag_matches_bytes, md5_parts


class StreamChecksum:
    """The full-object checksum of bytes passing in order: a CRC of each piece combined with
    the ones before (`crc_combine`), a SHA one `update` after another."""

    def __init__(self, algorithm: str, expected: str) -> None:
        self.algorithm, self.expected = algorithm, expected
        self.what = f"its {algorithm}"
        self._crc: bytes | None = None
        self._sha = None if checksums.is_crc(algorithm) else hashlib.new(algorithm.lower())

    def update(self, data: bytes | memoryview) -> None:
        if self._sha is not None:
            self._sha.update(data)
            return
        value = s3bulk_native.checksum(self.algorithm, data)
        self._crc = (
            value
            if self._crc is None
            else s3bulk_native.crc_combine(self.algorithm, self._crc, value, len(data))
        )

    def matches(self) -> bool:
        if self._sha is not None:
            value = self._sha.digest()
        else:
            value = self._crc if self._crc is not None else s3bulk_native.checksum(self.algorithm, b"")
        return base64.b64encode(value).decode() == self.expected


Check = StreamChecksum | StreamCheck


def encrypted(headers: dict[str, str]) -> bool:
    """Whether the object's ETag is no MD5 of its bytes, as its headers say (SSE-KMS, SSE-C)."""
    kms = headers.get("x-amz-server-side-encryption", "").startswith("aws:kms")
    return kms or bool(headers.get("x-amz-server-side-encryption-customer-algorithm"))


def stream_check(head: dict[str, str], part_size: int | None = None) -> Check | None:
    """How a stream of the object `head` describes (a HEAD's headers in checksum mode, names in
    lower case) is checked as it passes: by its full-object checksum, else by its ETag where that
    is an MD5 (a multipart one only with its `part_size`); None when nothing can tell."""
    found = checksums.full_object(head)
    if found is not None:
        return StreamChecksum(*found)
    etag = head.get("etag", "")
    count = md5_parts(etag)
    if encrypted(head) or count is None or (count and not part_size):
        return None
    return StreamCheck(etag, part_size if count else None)


def body_matches(headers: dict[str, str], body: bytes | memoryview) -> tuple[bool | None, str]:
    """Whether `body` is the object a GET's answer (in checksum mode) describes, and by what:
    (None, "") when nothing can tell (a multipart ETag whose parts no common size gives is
    "cannot tell" here, not a mismatch)."""
    found = checksums.full_object(headers)
    if found is not None:
        algorithm, expected = found
        return checksums.of_bytes(algorithm, body) == expected, f"its {algorithm}"
    etag = headers.get("etag", "")
    if encrypted(headers) or md5_parts(etag) is None:
        return None, ""
    matches = etag_matches_bytes(body, etag)
    return (None if matches is False and md5_parts(etag) else matches), "its ETag"
