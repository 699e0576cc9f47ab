"""s3bulk's Rust part (native/, pyo3), built by maturin into this package of the same wheel:
PutVectors bodies written, ListVectors pages read, and downloads hashed and landed, without the
GIL."""

from s3bulk_native.s3bulk_native import (
    DiskFailed,
    Gets,
    Http,
    Refused,
    Reply,
    Unanswered,
    Written,
    __version__,  # native/Cargo.toml's, the package's
    checksum,
    checksum_file,
    checksum_file_parts,
    content_hashes,
    crc_combine,
    list_page_columns,
    list_vectors_page,
    md5_file_parts,
    md5_many,
    put_vectors_body,
)

__all__ = [
    "DiskFailed",
    "Gets",
    "Http",
    "Refused",
    "Reply",
    "Unanswered",
    "Written",
    "__version__",
    "checksum",
    "checksum_file",
    "checksum_file_parts",
    "content_hashes",
    "crc_combine",
    "list_page_columns",
    "list_vectors_page",
    "md5_file_parts",
    "md5_many",
    "put_vectors_body",
]
