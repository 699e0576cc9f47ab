"""The checksums S3 keeps with an object: what an upload sends, in which header, and how the
checksums of a multipart upload's parts make the whole object's.

Since December 2024 S3 stores a full-object CRC64NVME with every new object, and the AWS SDKs send
one with every upload: the service refuses a body that does not match it, and a reader can check
the same value later, whatever the part size was. s3bulk sends one too, CRC64NVME unless told
otherwise (`AwsSettings.checksum_algorithm`), computed by the native part (crc-fast, ~18 GB/s
per core here; `native/src/checksums.rs`). A CRC's value does not depend on how an object was
cut, so a multipart upload's parts' CRCs combine into the one the service checks at completion
(`FULL_OBJECT`); a SHA's do not, and a multipart upload with SHA-256 or SHA-1 keeps one per part
(`COMPOSITE`, the value `<SHA of the parts' SHAs>-N`).
"""

from __future__ import annotations

import asyncio
import base64
from functools import reduce

import s3bulk_native

# the algorithms whose value an upload sends as x-amz-checksum-*; MD5 goes as Content-MD5
SENT = ("CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1")
_CRCS = frozenset({"CRC64NVME", "CRC32C", "CRC32"})
# hashing a body this large beside the event loop, not on it (a SHA costs ~0.6 ms per MiB)
_IN_THREAD = 256 * 1024


def header(algorithm: str) -> str:
    """The header a request carries the value in (x-amz-checksum-crc64nvme, ...)."""
    return f"x-amz-checksum-{algorithm.lower()}"


def element(algorithm: str) -> str:
    """The XML element a part's value goes in (ChecksumCRC64NVME, ...)."""
    return f"Checksum{algorithm}"


def multipart_type(algorithm: str) -> str:
    """How a multipart upload keeps it: one value for the whole object (a CRC's), else one per
    part."""
    return "FULL_OBJECT" if algorithm in _CRCS else "COMPOSITE"


def of_bytes(algorithm: str, body: bytes | bytearray | memoryview) -> str:
    """The value of `body`, as a request sends it (base64)."""
    return base64.b64encode(s3bulk_native.checksum(algorithm, body)).decode()


async def of_body(algorithm: str, body: bytes | bytearray | memoryview) -> str:
    """`of_bytes`, a large body's SHA computed by a thread, beside the event loop."""
    if algorithm not in _CRCS and len(body) > _IN_THREAD:
        return await asyncio.to_thread(of_bytes, algorithm, body)
    return of_bytes(algorithm, body)


def full_object(headers: dict[str, str]) -> tuple[str, str] | None:
    """(algorithm, value) of the full-object checksum in `headers` (a HEAD's or a GET's in
    checksum mode, names in lower case); None when there is none (no checksum, or a SHA of
    parts, `COMPOSITE`, whose value is no SHA of the object's bytes)."""
    if headers.get("x-amz-checksum-type", "FULL_OBJECT") != "FULL_OBJECT":
        return None
    for algorithm in SENT:
        value = headers.get(header(algorithm), "")
        if value:
            return None if "-" in value else (algorithm, value)
    return None


def composite(headers: dict[str, str]) -> tuple[str, str, int] | None:
    """(algorithm, value, number of parts) of a checksum kept per part in `headers` (`COMPOSITE`,
    the value "<checksum of the parts' checksums>-N"); None when there is none."""
    for algorithm in SENT:
        value, _, parts = headers.get(header(algorithm), "").partition("-")
        if value and parts.isdigit():
            return algorithm, f"{value}-{parts}", int(parts)
    return None


def file_matches_parts(path: str, algorithm: str, value: str, sizes: list[int]) -> bool:
    """Whether the file, cut into parts of `sizes`, has the composite checksum `value`."""
    parts = s3bulk_native.checksum_file_parts(algorithm, path, sizes)
    whole = base64.b64encode(s3bulk_native.checksum(algorithm, b"".join(parts))).decode()
    return f"{whole}-{len(sizes)}" == value


def is_crc(algorithm: str) -> bool:
    """Whether values of `algorithm` combine (`whole_object`)."""
    return algorithm in _CRCS


def file_matches(path: str, headers: dict[str, str]) -> bool | None:
    """Whether the file holds the bytes the full-object checksum in `headers` describes
    (`full_object`); None when there is none."""
    found = full_object(headers)
    if found is None:
        return None
    algorithm, expected = found
    return base64.b64encode(s3bulk_native.checksum_file(algorithm, path)).decode() == expected


def whole_object(algorithm: str, parts: list[tuple[str, int]]) -> str | None:
    """The full-object value of parts (value, length) one after the other: None for a SHA,
    whose values do not combine."""
    if algorithm not in _CRCS or not parts:
        return None

    def joined(first: bytes, part: tuple[str, int]) -> bytes:
        value, length = part
        return s3bulk_native.crc_combine(algorithm, first, base64.b64decode(value), length)

    start = base64.b64decode(parts[0][0])
    return base64.b64encode(reduce(joined, parts[1:], start)).decode()
