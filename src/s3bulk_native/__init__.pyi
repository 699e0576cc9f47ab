"""The native part of s3bulk: PutVectors bodies written, and downloads hashed, without the GIL."""

from collections.abc import Sequence
from typing import Any

__version__: str  # native/Cargo.toml's, the package's

def put_vectors_body(
    head: bytes,
    before: Sequence[bytes],
    rows: Any,
    metadata: Sequence[bytes | None],
    hashed: bytes,
    tail: bytes,
) -> bytearray:
    """`head`, the entries joined by commas, `tail`; entry i is `before[i]`, row i of `rows` (a
    C-contiguous (n, dimension) float32 array) as a JSON array, "}", then `metadata[i]` (the
    JSON text of an object with keys, or None) as its metadata, with the row's content hash
    added under "s3bulk_hash" where `hashed[i]` is 1 (`hashed` empty: in no row), and "}".
    ValueError for a row holding NaN or infinity, or metadata that is not an object's text."""

def content_hashes(rows: Any, metadata: Sequence[bytes | None]) -> list[str]:
    """The content hash of each row of `rows` (a C-contiguous (n, dimension) float32 array) and
    its metadata's canonical text (or None), as `put_vectors_body` writes it: CRC64NVME of the
    row's float32 bytes then the text, as 16 hex digits. Computed with the GIL released."""

def list_vectors_page(
    reply: bytes, dimension: int
) -> tuple[list[str], bytes | None, list[str | None], str | None]:
    """One ListVectors answer's JSON as (keys, the vectors' float32 bytes row after row, or None
    for a page without data, each vector's metadata as JSON text or None, the token that goes on
    or None), read with the GIL released. ValueError for an answer that is not a page, or a
    vector of another dimension."""

def list_page_columns(
    body: bytes,
) -> (
    tuple[list[str], list[int], list[str], list[str], list[str], list[str], list[str], bool, bool, str | None]
    | None
):
    """A ListObjectsV2 page in the regular form (`s3xml._CONTENTS` for every entry) as columns:
    keys, sizes, LastModified texts, ETags without quotes, storage classes, checksum algorithms,
    checksum types, then whether it says EncodingType=url, IsTruncated, and its token; None where
    any field needs more than its bytes (a reference, a newline, no UTF-8, a size past 64 bits)
    or an entry is in another form: the Python parser reads those pages."""

def md5_many(buffers: Sequence[Any]) -> list[bytes]:
    """The MD5 digest (16 raw bytes) of each buffer (any C-contiguous buffer of bytes), in order,
    hashed side by side in SIMD lanes with the GIL released."""

def checksum(algorithm: str, data: Any) -> bytes:
    """The checksum `algorithm` (CRC64NVME, CRC32C, CRC32, SHA256, SHA1, in any case) of `data`
    (any C-contiguous buffer of bytes) as S3 keeps it (a CRC's bytes big-endian), computed with
    the GIL released. ValueError for another algorithm."""

def checksum_file(algorithm: str, path: str) -> bytes:
    """`checksum` of the file at `path`, read a MiB at a time with the GIL released. OSError
    when it cannot be read."""

def checksum_file_parts(algorithm: str, path: str, sizes: list[int]) -> list[bytes]:
    """`checksum` of each part of the file at `path`, the parts of `sizes` one after the other
    from its start (a composite checksum, "…-N", is the checksum of these). OSError when it
    cannot be read or is shorter than the parts."""

def crc_combine(algorithm: str, first: bytes, second: bytes, second_length: int) -> bytes:
    """The CRC of two byte strings one after the other, from each one's CRC and the second's
    length (a multipart object's full-object checksum from its parts'). ValueError for a SHA,
    which does not combine, or a value of the wrong width."""

def md5_file_parts(path: str, part_size: int) -> list[bytes]:
    """The MD5 digest of each `part_size` part of the file at `path` (the last one shorter; one
    digest for a file no larger than a part, an empty file's included), parts hashed side by side
    with the GIL released. OSError when the file cannot be read."""

class Written:
    """A GET whose body was written into its file (`Gets.take`): the bytes written, their MD5
    when asked for, the checksum computed of them and whether it is the one the answer carried
    (`checked`: None when none came), and whether the file landed."""

    ticket: int
    written: int
    md5: bytes | None
    algorithm: str | None
    checksum: bytes | None
    checked: bool | None
    landed: bool

class DiskFailed:
    """A GET whose local file failed (`Gets.take`): its errno and message."""

    ticket: int
    errno: int
    message: str

class Refused:
    """A GET the service answered with an error (`Gets.take`)."""

    ticket: int
    status: int
    headers: list[tuple[str, str]]
    body: bytes

class Unanswered:
    """A request that got no answer, or a body cut short (`Gets.take`, `Http.take`): whether no
    connection was made at all, and the client's words."""

    ticket: int
    unreachable: bool
    message: str

class Reply:
    """An answer (`Http.take`): status, headers with names in lower case, body, and the checksum
    a file's range was sent with as (header, value), or None."""

    ticket: int
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    checksum: tuple[str, str] | None

class Gets:
    """GETs of objects into files, handed over in batches to a runtime thread of their own,
    signed and sent as `Http`'s requests are."""

    def __init__(
        self,
        client_options: dict[str, str],
        credentials: tuple[str, str, str | None] | None,
        headers: list[tuple[str, str]],
    ) -> None:
        """`headers`: what every GET carries besides (the SSE-C key, requester pays). ValueError
        for an option object_store does not take."""

    def fileno(self) -> int:
        """The socket to watch: readable when outcomes wait (read it empty, then `take`)."""

    def submit(self, jobs: Sequence[tuple[int, Any]]) -> None:
        """Start GETs: (ticket, job) each, the job with the attributes of `gets.GetJob`: url,
        region (signed for it; unsigned without credentials), start, end, hashed, folder, path,
        mtime, hash, check, compute, landing. `path` and `landing.target` are names in the open
        directory `folder` (a descriptor, duplicated as the job is taken; None: paths), never
        followed where they are links. With start None, the object's bytes, up to `end` of them,
        into a new file at `path` with the time `mtime` (0: left alone), asked for in checksum
        mode when `check` and checked by the full-object checksum the answer carries; where none
        came, their MD5 when `hash`; then moved to `landing.target` (landing: target, replace,
        size, md5 or None) when `size` bytes came, matching that checksum, or that MD5: rename()
        when `replace`, else link() + unlink(). With a start, the bytes [start, end) written at
        that offset into the existing file at `path`, their checksum `compute` (an algorithm)
        found; hashed as they are written when `hashed` (`hash_parts`) and no checksum checks
        them."""

    def hash_parts(self, path: str, size: int, part_size: int, folder: int | None = None) -> int:
        """The file at `path` (in the open directory `folder`, if given; `size` bytes) is to be
        hashed in parts of `part_size` as the ranges given the id returned write into it.
        OSError when it cannot be opened."""

    def part_digests(self, hashed: int) -> list[bytes] | None:
        """The MD5 of each part of the file `hashed`, waiting until every part is hashed (call
        it once every byte was written); None when it cannot tell. The file is forgotten."""

    def forget_parts(self, hashed: int) -> None:
        """The file `hashed` will not be asked for."""

    def take(self) -> list[Written | DiskFailed | Refused | Unanswered]:
        """Outcomes finished since the last call, one for each GET."""

    def cancel(self, ticket: int) -> None:
        """The caller of `ticket` has gone: once this returns, its file is either written (and
        landed, if it was right) or never will be. Its outcome still comes."""

    def set_credentials(
        self, key_id: str, secret_key: str, token: str | None, session: tuple[str, str] | None = None
    ) -> None:
        """Credentials for the requests from now on; `session`: a directory bucket's session (the
        service to sign for, its x-amz-s3session-token), whose key id and secret these are."""

    def close(self) -> None:
        """Stop: GETs not finished are dropped; once this returns no file is written any more."""

class Http:
    """Signed requests (object_store's HTTP client and SigV4 signer), sent by a runtime thread
    of their own and handed back in batches."""

    def __init__(self, client_options: dict[str, str]) -> None:
        """ValueError for an option object_store does not take."""

    def fileno(self) -> int:
        """The socket to watch: readable when answers wait (read it empty, then `take`)."""

    def submit(self, requests: Sequence[tuple[int, Any]]) -> None:
        """Send requests: (ticket, request) each, the request with the attributes of
        `native_http.Request` (method, url, headers, body, signing): a body as bytes, held, not
        copied, until its request is done, or a `FileRange` read as it is sent; signed first
        when `signing` (`native_http.Signing`) is given."""

    def take(self) -> list[Reply | Unanswered]:
        """Answers finished since the last call, one for each request."""

    def close(self) -> None:
        """Stop: requests not answered are dropped."""
