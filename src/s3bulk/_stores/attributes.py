"""What a write sets on its object besides its bytes, as `aws s3 cp` and s5cmd take it: the
Content-* headers, user metadata, storage class, server-side encryption, a canned ACL and tags.

One frozen value, checked when made (a bad storage class is one line before anything is sent),
turned into request headers here and nowhere else. obstore takes the Content-* headers and user
metadata; anything more (storage class, encryption, ACL, tags, Expires) goes through the signed
client, which sends every header as given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode

from s3bulk._errors import UsageError
from s3bulk._stores.archives import restore_state

STORAGE_CLASSES = (
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "GLACIER_IR",
    "OUTPOSTS",
    "SNOW",
    "EXPRESS_ONEZONE",
)
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "aws-exec-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
)
ENCRYPTIONS = ("AES256", "aws:kms", "aws:kms:dsse")
DIRECTIVES = ("COPY", "REPLACE")
# Headers the metadata directive of a copy governs: COPY keeps the source's, REPLACE sets these.
_CONTENT = (
    ("content_type", "Content-Type"),
    ("content_encoding", "Content-Encoding"),
    ("content_disposition", "Content-Disposition"),
    ("content_language", "Content-Language"),
    ("cache_control", "Cache-Control"),
    ("expires", "Expires"),
)

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Attributes:
    """What an upload or a copy sets on its object. Metadata and tags are (key, value) pairs;
    a mapping or "KEY=VALUE" strings are accepted too."""

    content_type: str | None = None
    content_encoding: str | None = None
    content_disposition: str | None = None
    content_language: str | None = None
    cache_control: str | None = None
    expires: str | None = None  # an HTTP date or ISO 8601; sent as an HTTP date
    metadata: Pairs = ()
    storage_class: str | None = None
    sse: str | None = None  # AES256 or aws:kms
    sse_kms_key_id: str | None = None
    acl: str | None = None  # a canned ACL
    tags: Pairs = ()
    metadata_directive: str | None = None  # copies: COPY or REPLACE (default: REPLACE if any is set)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _pairs(self.metadata, "--metadata"))
        object.__setattr__(self, "tags", _pairs(self.tags, "--tags"))
        if self.expires is not None:
            object.__setattr__(self, "expires", _http_date(self.expires))
        _one_of(self.storage_class, STORAGE_CLASSES, "--storage-class")
        _one_of(self.sse, ENCRYPTIONS, "--sse")
        _one_of(self.acl, CANNED_ACLS, "--acl")
        _one_of(self.metadata_directive, DIRECTIVES, "--metadata-directive")
        if self.sse_kms_key_id and not (self.sse or "").startswith("aws:kms"):
            raise UsageError("--sse-kms-key-id needs --sse aws:kms")
        for name, value in self.metadata:
            if not name.isascii() or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
                raise UsageError(
                    f"--metadata {name!r}: a metadata key is letters, digits, '-', '_' and '.' "
                    "(it travels as an HTTP header name)"
                )
            if not value.isascii() or any(ord(c) < 32 for c in value):
                raise UsageError(
                    f"--metadata {name}: the value must be printable ASCII (it travels as a header)"
                )
        if self.metadata_directive == "COPY" and self._content_headers():
            raise UsageError(
                "--metadata-directive COPY keeps the source's Content-* headers and metadata: "
                "drop it to set new ones (REPLACE is implied when any is given)"
            )

    # ---- as headers ---------------------------------------------------------------------------
    def _content_headers(self) -> dict[str, str]:
        headers = {header: getattr(self, name) for name, header in _CONTENT if getattr(self, name)}
        headers.update({f"x-amz-meta-{name}": value for name, value in self.metadata})
        return headers

    def _object_headers(self) -> dict[str, str]:
        """What applies to the new object whatever the metadata directive."""
        headers: dict[str, str] = {}
        if self.storage_class:
            headers["x-amz-storage-class"] = self.storage_class
        if self.sse:
            headers["x-amz-server-side-encryption"] = self.sse
        if self.sse_kms_key_id:
            headers["x-amz-server-side-encryption-aws-kms-key-id"] = self.sse_kms_key_id
        if self.acl:
            headers["x-amz-acl"] = self.acl
        if self.tags:
            headers["x-amz-tagging"] = urlencode(self.tags, quote_via=quote)
        return headers

    def headers(self) -> dict[str, str]:
        """The headers of a PutObject or CreateMultipartUpload that set all of these."""
        return self._content_headers() | self._object_headers()

    def copy_headers(self) -> dict[str, str]:
        """The headers of a CopyObject: REPLACE when anything the directive governs is given
        (or asked for), else the source's attributes stay; tags replace the source's."""
        headers = self._object_headers()
        content = self._content_headers()
        if content or self.metadata_directive == "REPLACE":
            headers |= {"x-amz-metadata-directive": "REPLACE"} | content
        if self.tags:
            headers["x-amz-tagging-directive"] = "REPLACE"
        return headers

    def over_source(self, source: dict[str, str]) -> dict[str, str]:
        """The headers of a new upload (a copy in parts) that copies an object whose own
        attributes are `source` (lower-case header names), as CopyObject would with these."""
        if self._content_headers() or self.metadata_directive == "REPLACE":
            source = {name: value for name, value in source.items() if not _governed(name)}
        return source | self.headers()

    @property
    def changes_copies(self) -> bool:
        """Whether a server-side copy must send anything beyond its source."""
        return bool(self.copy_headers())

    def obstore(self) -> dict[str, str] | None:
        """obstore's `attributes` for a put (user metadata by its bare name: obstore adds the
        x-amz-meta- prefix), or None when there is nothing to set."""
        attributes = {header: getattr(self, name) for name, header in _CONTENT if getattr(self, name)}
        attributes.update(self.metadata)
        return attributes or None

    def with_content_type(self, content_type: str | None) -> Attributes:
        """These attributes with a guessed Content-Type, unless one was given."""
        if self.content_type or not content_type:
            return self
        return dataclasses.replace(self, content_type=content_type)

    # ---- the journal's form -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            field.name: [list(pair) for pair in value] if isinstance(value, tuple) else value
            for field in dataclasses.fields(self)
            if (value := getattr(self, field.name)) not in (None, ())
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Attributes:
        if not data:
            return cls()
        known = {field.name for field in dataclasses.fields(cls)}
        values: dict[str, Any] = {
            name: tuple(tuple(pair) for pair in value) if isinstance(value, list) else value
            for name, value in data.items()
            if name in known
        }
        return cls(**values)


def _governed(header: str) -> bool:
    """Whether a copy's metadata directive decides this (lower-case) header."""
    return header.startswith("x-amz-meta-") or header in {name.lower() for _, name in _CONTENT}


def _one_of(value: str | None, allowed: tuple[str, ...], flag: str) -> None:
    if value is not None and value not in allowed:
        raise UsageError(f"{flag} {value!r}: use one of {', '.join(allowed)}")


def _pairs(value: Any, flag: str) -> Pairs:
    """(key, value) pairs from pairs, a mapping, or "KEY=VALUE" strings (also "a=1&b=2")."""
    if isinstance(value, Mapping):
        items: Iterable[Any] = value.items()
    elif isinstance(value, str):
        items = [value]
    else:
        items = value
    pairs: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, str):
            for part in item.split("&") if flag == "--tags" else [item]:
                name, equals, text = part.partition("=")
                if not equals or not name:
                    raise UsageError(f"{flag} {part!r}: write it as KEY=VALUE")
                pairs.append((name, text))
        else:
            name, text = item
            pairs.append((str(name), str(text)))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise UsageError(f"{flag}: each key once")
    return tuple(pairs)


def iso_time(http_date: str) -> str:
    """An HTTP date as a listing gives times: 2026-11-27T03:36:14.000Z (kept as is if it is not one)."""
    try:
        moment = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return http_date
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _http_date(text: str) -> str:
    """An HTTP date (RFC 7231) from one, or from ISO 8601 ('2030-01-01', '2030-01-01T00:00:00Z')."""
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"--expires {text!r}: give a date, e.g. 2030-01-01T00:00:00Z "
                "or 'Tue, 01 Jan 2030 00:00:00 GMT'"
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return format_datetime(moment.astimezone(UTC), usegmt=True)


NO_ATTRIBUTES = Attributes()


# ---- what a HEAD says an object has ---------------------------------------------------------------
_NAMED = {
    "etag": "etag",
    "last-modified": "last_modified",
    "content-type": "content_type",
    "content-encoding": "content_encoding",
    "content-disposition": "content_disposition",
    "content-language": "content_language",
    "cache-control": "cache_control",
    "expires": "expires",
    "x-amz-storage-class": "storage_class",
    "x-amz-server-side-encryption": "server_side_encryption",
    "x-amz-server-side-encryption-aws-kms-key-id": "sse_kms_key_id",
    "x-amz-server-side-encryption-customer-algorithm": "sse_customer_algorithm",
    "x-amz-server-side-encryption-customer-key-md5": "sse_customer_key_md5",
    "x-amz-version-id": "version_id",
    "x-amz-website-redirect-location": "website_redirect_location",
    "x-amz-tagging-count": "tag_count",
    "x-amz-object-lock-mode": "object_lock_mode",
    "x-amz-object-lock-retain-until-date": "object_lock_retain_until",
    "x-amz-restore": "restore",
}


def described(headers: dict[str, str]) -> dict[str, Any]:
    """A HEAD's headers (names in lower case) as the object's attributes: size, ETag, times,
    Content-* and Cache-Control, storage class (STANDARD when S3 leaves it out), encryption,
    checksums, and the user's metadata (`x-amz-meta-*`, under `metadata`)."""
    found: dict[str, Any] = {"size": int(headers.get("content-length") or 0)}
    found |= {name: headers[header] for header, name in _NAMED.items() if header in headers}
    # the words and formats of a listing (`ls --json`): an ETag without its quotes, ISO 8601 times
    if "etag" in found:
        found["etag"] = found["etag"].strip('"')
    if "last_modified" in found:
        found["last_modified"] = iso_time(found["last_modified"])
    found.setdefault("storage_class", "STANDARD")
    checksums = {
        header.removeprefix("x-amz-checksum-"): value
        for header, value in headers.items()
        if header.startswith("x-amz-checksum-") and header != "x-amz-checksum-type"
    }
    if checksums:
        found["checksums"] = checksums
        if "x-amz-checksum-type" in headers:  # FULL_OBJECT, or COMPOSITE: a SHA per part
            found["checksum_type"] = headers["x-amz-checksum-type"]
    metadata = {
        header.removeprefix("x-amz-meta-"): value
        for header, value in headers.items()
        if header.startswith("x-amz-meta-")
    }
    if metadata:
        found["metadata"] = metadata
    state = restore_state(headers.get("x-amz-restore", ""))
    if state is not None:  # an archived object's restore: under way, or ready until then
        found["restore_ongoing"] = state.ongoing
        if state.ready_until:
            found["restore_ready_until"] = iso_time(state.ready_until)
    return found
