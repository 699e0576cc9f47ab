"""Parse the few S3 XML answers the signed client needs (ListObjectsV2, errors, multipart)."""

from __future__ import annotations

import functools
import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple
from urllib.parse import unquote_plus

import s3bulk_native
from s3bulk._errors import ItemError, S3Error
from s3bulk._stores.archives import RestoreState
from s3bulk._text import printable

# Characters XML 1.0 cannot carry at all, escaped or not: keys holding them cannot be named in a
# DeleteObjects body and are deleted one request each.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


class ObjectInfo(NamedTuple):
    """One listed object: what a listing already tells, so no HEAD is needed later."""

    key: str
    size: int
    modified: str  # LastModified, ISO 8601 as the service sent it (parsed only when needed)
    etag: str
    storage_class: str = ""  # as listed ("" when the service left it out)
    checksum_algorithm: str = ""  # the full-object checksum it keeps, when listed (S3, versitygw)
    checksum_type: str = ""  # FULL_OBJECT or COMPOSITE, when listed (S3)
    # an archived object's restore, when asked for (`ls --json`) and under way or done (S3 lists
    # no RestoreStatus for an object never restored, or whose restored copy expired)
    restore: RestoreState | None = None

    @property
    def last_modified(self) -> datetime:
        """LastModified as an aware datetime (UTC)."""
        second, fraction, zone = split_iso(self.modified)
        return datetime.fromtimestamp(_epoch_of_second(second + zone) + fraction, tz=UTC)

    def to_json(self) -> dict[str, str | int | bool]:
        """As `ls --json` prints it (a restore's state in `head`'s words)."""
        shown: dict[str, str | int | bool] = {
            "key": self.key,
            "size": self.size,
            "last_modified": self.modified,
            "etag": self.etag,
            "storage_class": self.storage_class,
        }
        if self.restore is not None:
            shown["restore_ongoing"] = self.restore.ongoing
            if self.restore.ready_until:
                shown["restore_ready_until"] = self.restore.ready_until
        return shown


# The largest object S3 stores (50 TB since December 2025; 5 TiB before): a listing that says
# more, or less than nothing, is wrong, and planning memory or ranges by it is not safe.
MAX_OBJECT_SIZE = 50 * 1024**4


def listing_problem(info: ObjectInfo) -> str:
    """Why a listed object cannot be taken as listed ("" when it can): a size no object can
    have, or a LastModified that is no time. One such entry fails itself, not its page."""
    if not 0 <= info.size <= MAX_OBJECT_SIZE:
        return f"listed at {info.size:,} bytes, which no S3 object can hold (at most 50 TB): not taken"
    try:
        epoch_seconds(info.modified)
    except ValueError:
        return f"listed with LastModified {info.modified!r}, which is no time: not taken"
    return ""


# What `s3bulk_native.list_page_columns` gives: keys, sizes, LastModified texts, ETags, storage
# classes, checksum algorithms and types, EncodingType=url, IsTruncated, the token.
_Columns = tuple[
    list[str], list[int], list[str], list[str], list[str], list[str], list[str], bool, bool, str | None
]


class ListPage(NamedTuple):
    objects: list[ObjectInfo]
    common_prefixes: list[str]
    is_truncated: bool
    next_token: str | None


class Repeats:
    """Whether a listing's continuation tokens (or markers) come round again, in constant memory
    (Brent's cycle detection: each token is compared with one saved at power-of-two steps, so a
    cycle of any length is seen within about twice its length). A service that gives a token it
    gave before would be listed forever: the same keys printed, downloaded, counted again."""

    __slots__ = ("_power", "_saved", "_steps")

    def __init__(self) -> None:
        self._saved: object = None
        self._power = 1
        self._steps = 0

    def seen(self, token: object) -> bool:
        if token == self._saved:
            return True
        self._steps += 1
        if self._steps == self._power:
            self._saved, self._power, self._steps = token, self._power * 2, 0
        return False


# Pages in a row that may bring nothing, each saying more follows, before a listing is taken to
# go nowhere. Not 1: S3 answers a page with no key and IsTruncated where a Prefix and a Delimiter
# fold what it read into prefixes it gave already, and where a versioned bucket's delete markers
# hide what it read (each page reads a bounded number of entries). A thousand such pages are a
# million entries or more passed over; a page costs ~1 ms on loopback, so a service that sends
# empty pages forever is stopped within seconds.
PAGES_WITHOUT_PROGRESS = 1000


class Advance:
    """Whether a listing's pages bring anything new, however fresh their tokens: a page seen
    before (its `mark`: first entry, last entry, size; `Repeats`) or `PAGES_WITHOUT_PROGRESS`
    truncated pages in a row with nothing raise (`stalled`)."""

    __slots__ = ("idle", "pages", "what")

    def __init__(self, what: str) -> None:
        self.what = what
        self.idle = 0  # truncated pages in a row that brought nothing
        self.pages = Repeats()

    def page(self, mark: tuple[object, ...] | None, truncated: bool) -> None:
        """One page: `mark` names what it brought (None: nothing)."""
        if mark is not None:
            self.idle = 0
            if self.pages.seen(mark):
                raise stalled(
                    self.what, "the service listed the same page again under a new continuation token"
                )
            return
        if not truncated:
            return
        self.idle += 1
        if self.idle >= PAGES_WITHOUT_PROGRESS:
            raise stalled(
                self.what,
                f"{self.idle:,} pages in a row brought nothing, each saying more follows (IsTruncated) "
                "under a new continuation token",
            )


def stalled(what: str, why: str) -> ItemError:
    """A listing whose pages bring nothing new: not retryable (the service answered, and would
    again), and what is listed on would be the same entries, or none, forever."""
    return ItemError(
        f"{what}: {why}: the listing does not advance; stopping rather than listing forever", retryable=False
    )


def repeated(what: str) -> ItemError:
    """The error of a listing whose token came round again: not retryable, since the service
    answered, and listing on would never end."""
    return ItemError(
        f"{what}: the service gave a continuation token it had given before; "
        "stopping rather than listing the same keys forever",
        retryable=False,
    )


# A listing entry in the element order S3 documents (the checksum fields are optional). A page whose
# every <Contents> matches is read with one regular expression, ~5x faster than building its tree;
# anything else (another order, whitespace, CDATA) goes through ElementTree.
_CONTENTS = re.compile(
    rb"<Contents><Key>([^<]*)</Key><LastModified>([^<]*)</LastModified><ETag>([^<]*)</ETag>"
    rb"((?:<Checksum\w+>[^<]*</Checksum\w+>)*)<Size>(\d+)</Size>(?:<StorageClass>([^<]*)</StorageClass>)?"
)


# The name of a document's root element, past an XML declaration and comments.
_ROOT = re.compile(rb"\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*<(?:[\w.-]+:)?([\w.-]+)", re.DOTALL)


def root_name(body: bytes) -> str:
    """The root element's name ("ListBucketResult", "Error"), or "" when the body is no XML."""
    found = _ROOT.match(body)
    return found.group(1).decode() if found else ""


def expect(body: bytes, root: str, what: str) -> None:
    """Raise unless `body` is the answer `root` names. S3 answers some requests 200 OK and an
    <Error> (CopyObject, UploadPartCopy and CompleteMultipartUpload document it), and so do a
    service that fails mid-listing and the proxies in between; others send a page of HTML. Taken
    as an answer, such a body was an empty listing page (so a listing ended early, and sync
    --delete deleted what it had not seen) or a copy that was never made (and mv deleted its
    source). An <Error> raises its S3Error (retryable as its code says), anything else a
    retryable ItemError."""
    found = root_name(body)
    if found == root:
        return
    if found == "Error":
        code, message = parse_error(body)
        status = 500 if not code or code in S3Error.RETRYABLE_CODES else 400
        raise S3Error(status, code, f"{message} (in a 200 OK answer)".lstrip(), what)
    seen = printable(body[:80].decode(errors="replace")).strip() or "an empty body"
    raise ItemError(f"{what}: the service answered 200 OK with {seen!r}, not a {root}", retryable=True)


def _ns(root: ET.Element) -> str:
    return root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""


class NeedsEncoding(Exception):
    """A page asked for as plain XML that cannot be read exactly: a key XML 1.0 cannot carry
    (sent as a character reference XML forbids, or raw, where a parser would fail or turn a
    carriage return into a line feed), or U+FFFD, which Go's XML writer puts in the place of such
    a character. Asked for again URL-encoded (`S3Client.list_objects_v2`)."""


def misencoded(what: str, why: str) -> ItemError:
    """A listing whose keys may have been read as other keys: not retryable (the service would
    answer the same), and job-wide, since nothing may rest on its listings."""
    error = ItemError(f"{what}: {why}; stopping rather than act on keys it may have misread", retryable=False)
    error.job_wide = True
    return error


def parse_list_objects_v2(body: bytes, *, url_asked: bool = False, what: str = "list") -> ListPage:
    """Parse a ListObjectsV2 page, asked for as plain XML or (`url_asked`) with encoding-type=url.

    Keys are data: a page is read only where it reads one way. An EncodingType=url that was not
    asked for makes every key holding a '%' or a '+' read two ways (`c%41d` or `cAd`), so such a
    page raises (`misencoded`); one that was asked for is believed only of keys a URL encoder
    could have written. A plain page that cannot be read exactly raises NeedsEncoding."""
    try:
        return _parse_regular_page(body, url_asked, what) or _parse_page_tree(body, url_asked, what)
    except NeedsEncoding:
        if not url_asked:
            raise
        raise misencoded(
            what, "the service sent keys XML cannot carry, and did not URL-encode them when asked"
        ) from None


def _parse_regular_page(body: bytes, url_asked: bool = False, what: str = "list") -> ListPage | None:
    """The page read by `_CONTENTS`, or None when any entry is not in the regular form: by the
    native reader where it can (`list_page_columns`, ~1/20 of the time), else as below."""
    if native_columns is not None and b"<RestoreStatus>" not in body:  # restores: read by the tree
        columns = native_columns(body)
        if columns is not None:
            return _page_of_columns(columns, url_asked, what)
    return _parse_regular_page_python(body, url_asked, what)


# The native reader of regular pages (`s3bulk_native.list_page_columns`); None reads every page
# in Python (the benchmarks compare the two, and tests hold them equal).
native_columns: Callable[[bytes], _Columns | None] | None = s3bulk_native.list_page_columns


def _page_of_columns(columns: _Columns, url_asked: bool, what: str) -> ListPage:
    """A page from the native reader's columns: its keys read as `_Decoding` says, as the
    Python path reads them."""
    keys, sizes, modified, etags, classes, algorithms, types, said_url, truncated, token = columns
    objects: list[ObjectInfo] = []
    if keys:
        decoded = _Decoding(said_url, url_asked, what).keys(keys)
        objects = list(
            map(
                _NEW_OBJECT,
                zip(
                    decoded,
                    sizes,
                    modified,
                    etags,
                    classes,
                    algorithms,
                    types,
                    [None] * len(keys),
                    strict=True,
                ),
            )
        )
    return ListPage(objects, [], truncated, token)


def _parse_regular_page_python(body: bytes, url_asked: bool = False, what: str = "list") -> ListPage | None:
    """`_parse_regular_page`, read in Python."""
    entries = _CONTENTS.findall(body)
    if (
        len(entries) != body.count(b"<Contents>")
        or b"<CommonPrefixes>" in body
        or b"<![CDATA[" in body
        or b"<RestoreStatus>" in body  # asked for by `ls --json`: read by the tree
    ):
        return None
    head = body[: body.find(b"<Contents>")] if entries else body
    tail = body[body.rfind(b"</Contents>") :] if entries else b""
    fields = dict(re.findall(rb"<(EncodingType|IsTruncated|NextContinuationToken)>([^<]*)</", head + tail))
    decoding = _Decoding(fields.get(b"EncodingType", b"").lower() == b"url", url_asked, what)
    objects = _objects(entries, decoding) if entries else []
    token = fields.get(b"NextContinuationToken")
    truncated = fields.get(b"IsTruncated", b"false").lower() == b"true"
    return ListPage(objects, [], truncated, _xml_unescaped(token) if token is not None else None)


_NEW_OBJECT = functools.partial(tuple.__new__, ObjectInfo)


def _objects(entries: list[tuple[bytes, ...]], decoding: _Decoding) -> list[ObjectInfo]:
    """The page's entries as ObjectInfo, each field read for the whole page at once: a page of
    keys joined and decoded in one call costs a tenth of decoding 1,000 keys one by one (when
    every URL-encoded key went through `unquote_plus`, that was 16% of a listing's CPU). Fields
    that need more than that take the per-entry path."""
    keys, modified, etags, checksums, sizes, classes = zip(*entries, strict=True)
    return list(
        map(
            _NEW_OBJECT,
            zip(
                decoding.keys(_xml_texts(keys)),
                map(int, sizes),
                _lines(modified),
                _etags(etags),
                _lines(classes),
                map(_algorithm, checksums),
                map(_checksum_type, checksums),
                [None] * len(keys),  # no restore listed (a page with one is read by the tree)
                strict=True,
            ),
        )
    )


_ALGORITHM = re.compile(rb"<ChecksumAlgorithm>([^<]*)</ChecksumAlgorithm>")


def _algorithm(checksums: bytes) -> str:
    """The algorithm an entry's checksum elements name ("" for none: most entries, on MinIO)."""
    found = _ALGORITHM.search(checksums) if checksums else None
    return found.group(1).decode() if found else ""


_TYPE = re.compile(rb"<ChecksumType>([^<]*)</ChecksumType>")


def _checksum_type(checksums: bytes) -> str:
    """FULL_OBJECT or COMPOSITE, where the entry's checksum elements say ("" for none)."""
    found = _TYPE.search(checksums) if checksums else None
    return found.group(1).decode() if found else ""


def _joined(fields: tuple[bytes, ...]) -> bytes | None:
    """The fields joined by newlines, or None if one holds a newline itself (XML may carry it
    raw; URL encoding never does)."""
    joined = b"\n".join(fields)
    return joined if joined.count(b"\n") == len(fields) - 1 else None


def _lines(fields: tuple[bytes, ...]) -> list[str]:
    """Plain-text fields (times, storage classes), decoded at once."""
    joined = _joined(fields)
    if joined is None or b"&" in joined:
        return [_xml_unescaped(field) for field in fields]
    return joined.decode().split("\n")


def _xml_texts(fields: tuple[bytes, ...]) -> list[str]:
    """Keys as the XML text says them, exactly: decoded at once where none holds a reference."""
    joined = _joined(fields)
    try:
        if joined is not None and b"&" not in joined:
            return joined.decode().split("\n")
        return [_xml_text(field) for field in fields]
    except UnicodeDecodeError:
        raise NeedsEncoding from None


# XML's five entities and its character references, each read as the one character it names
# (html.unescape reads &#128; as the euro sign, as HTML does, and &#1; as nothing)
_REFERENCE = re.compile(r"&(?:#(\d+)|#x([0-9A-Fa-f]+)|(amp|lt|gt|quot|apos));")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


def _referenced(found: re.Match[str]) -> str:
    decimal, hexadecimal, name = found.groups()
    if name:
        return _ENTITIES[name]
    code = int(decimal) if decimal else int(hexadecimal, 16)
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise NeedsEncoding
    return chr(code)


def _xml_text(raw: bytes) -> str:
    text = raw.decode()
    if "&" not in text:
        return text
    if "&" in _REFERENCE.sub("", text):  # an '&' that begins no reference: no XML
        raise NeedsEncoding
    return _REFERENCE.sub(_referenced, text)


# What no URL encoder leaves as it is: a character outside printable ASCII (a space, a
# control character, any non-ASCII), or a '%' that does not begin an escape.
_NOT_ENCODED = re.compile(r"[^!-~]|%(?![0-9A-Fa-f]{2})")
_REPLACED = "\ufffd"  # what Go's encoding/xml writes for a character XML cannot carry


class _Decoding:
    """How one page's keys (and prefixes) are read, from what was asked and what it says."""

    __slots__ = ("asked", "said", "what")

    def __init__(self, said: bool, asked: bool, what: str) -> None:
        self.said, self.asked, self.what = said, asked, what

    def keys(self, texts: list[str]) -> list[str]:
        """The keys the XML texts name (texts as `_xml_text` reads them)."""
        if not texts:
            return texts
        joined = "\n".join(texts)
        if self.said and self.asked:
            return self._url_decoded(texts, joined)
        if self.said and ("%" in joined or "+" in joined):
            key = next(text for text in texts if "%" in text or "+" in text)
            raise misencoded(
                self.what,
                "the service says its keys are URL-encoded (EncodingType=url), which s3bulk did not "
                f"ask for, so {_shown(key)} reads two ways",
            )
        if _REPLACED in joined:
            raise NeedsEncoding
        return texts

    def _url_decoded(self, texts: list[str], joined: str) -> list[str]:
        bad = _NOT_ENCODED.search(joined.replace("\n", "%0A"))
        if bad is not None:
            key = next(text for text in texts if _NOT_ENCODED.search(text))
            raise misencoded(
                self.what,
                f"the service says its keys are URL-encoded (EncodingType=url) and sends {_shown(key)}, "
                "which no URL encoder writes",
            )
        joined = joined.replace("%2F", "/")
        if "%" not in joined and "+" not in joined:
            return joined.split("\n")
        try:
            return [unquote_plus(text, errors="strict") for text in texts]
        except UnicodeDecodeError:
            raise misencoded(self.what, "the service URL-encoded a key that is no UTF-8") from None


def _shown(key: str) -> str:
    return repr(printable(key))


def _etags(etags: tuple[bytes, ...]) -> list[str]:
    joined = _joined(etags)
    if joined is not None:
        joined = joined.replace(b"&#34;", b"").replace(b"&quot;", b"").replace(b'"', b"")
        if b"&" not in joined:
            return joined.decode().split("\n")
    return [_etag(etag) for etag in etags]


def _etag(raw: bytes) -> str:
    """An ETag without its quotes, which servers send as &quot; or &#34; (or plain)."""
    return _xml_unescaped(raw.replace(b"&#34;", b"").replace(b"&quot;", b"")).strip('"')


def _xml_unescaped(raw: bytes) -> str:
    text = raw.decode()
    return html.unescape(text) if "&" in text else text


def _parse_page_tree(body: bytes, url_asked: bool = False, what: str = "list") -> ListPage:
    if not url_asked and b"\r" in body:  # a parser reads a raw carriage return as a line feed
        raise NeedsEncoding
    try:
        root = ET.fromstring(body)
    except ET.ParseError:  # a character XML cannot carry, sent as it is or as a reference
        if url_asked:
            raise
        raise NeedsEncoding from None
    ns = _ns(root)
    decoding = _Decoding((root.findtext(f"{ns}EncodingType") or "").lower() == "url", url_asked, what)
    contents = list(root.iter(f"{ns}Contents"))
    keys = decoding.keys([entry.findtext(f"{ns}Key") or "" for entry in contents])
    objects = [
        ObjectInfo(
            key,
            int(entry.findtext(f"{ns}Size") or 0),
            entry.findtext(f"{ns}LastModified") or "",
            (entry.findtext(f"{ns}ETag") or "").strip('"'),
            entry.findtext(f"{ns}StorageClass") or "",
            entry.findtext(f"{ns}ChecksumAlgorithm") or "",
            entry.findtext(f"{ns}ChecksumType") or "",
            _restore_status(entry.find(f"{ns}RestoreStatus"), ns),
        )
        for key, entry in zip(keys, contents, strict=True)
    ]
    prefixes = decoding.keys(
        [element.findtext(f"{ns}Prefix") or "" for element in root.iter(f"{ns}CommonPrefixes")]
    )
    truncated = (root.findtext(f"{ns}IsTruncated") or "false").lower() == "true"
    token = root.findtext(f"{ns}NextContinuationToken")
    return ListPage(objects, prefixes, truncated, token)


def _restore_status(status: ET.Element | None, ns: str) -> RestoreState | None:
    """<RestoreStatus><IsRestoreInProgress>true</...> (or false, and <RestoreExpiryDate>) as a
    RestoreState; None where the entry has none (never restored, or a service that ignores
    `x-amz-optional-object-attributes`)."""
    if status is None:
        return None
    ongoing = (status.findtext(f"{ns}IsRestoreInProgress") or "").strip().lower() == "true"
    return RestoreState(ongoing, "" if ongoing else (status.findtext(f"{ns}RestoreExpiryDate") or "").strip())


def epoch_seconds(last_modified: str) -> float:
    """Seconds since the epoch from a listing's ISO 8601 time ('' when unknown gives 0). A key's
    time is asked twice in a row (`listing_problem`, then its plan): the last answer is kept."""
    global _last_epoch
    last = _last_epoch
    if last[0] == last_modified:
        return last[1]
    if not last_modified:
        return 0.0
    moment = last_modified
    if len(moment) == 24 and moment[19] == "." and moment[23] == "Z":  # what S3 and MinIO send
        found = _epoch_of_second(moment[:19] + "Z") + float(moment[19:23])
    else:
        second, fraction, zone = split_iso(moment)
        found = _epoch_of_second(second + zone) + fraction
    _last_epoch = (last_modified, found)  # one tuple: a thread reads a pair that belongs together
    return found


_last_epoch: tuple[str, float] = ("", 0.0)


def split_iso(moment: str) -> tuple[str, float, str]:
    """('2026-11-23T22:31:04', 0.907, 'Z') from '2026-11-23T22:31:04.907Z': objects written
    together share their second, so the second is what gets parsed (and cached)."""
    second, dot, rest = moment[:19], moment[19:20], moment[19:]
    if len(moment) == 24 and dot == "." and moment[23] == "Z":  # what S3 and MinIO send
        return second, float(moment[19:23]), "Z"
    if dot != ".":
        return second, 0.0, rest
    end = 1
    while end < len(rest) and rest[end].isdigit():
        end += 1
    return second, float(rest[:end]) if end > 1 else 0.0, rest[end:]


@functools.lru_cache(maxsize=4096)
def _epoch_of_second(moment: str) -> float:
    return datetime.fromisoformat(moment.replace("Z", "+00:00").replace("z", "+00:00")).timestamp()


def parse_error(body: bytes) -> tuple[str, str]:
    """(code, message) of an S3 <Error> document; empty strings when the body is not one."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return "", ""
    if not root.tag.endswith("Error"):
        return "", ""
    ns = _ns(root)
    return root.findtext(f"{ns}Code") or "", root.findtext(f"{ns}Message") or ""


_REGION = re.compile(rb"<Region>([A-Za-z0-9-]+)</Region>")


def find_region(body: bytes) -> str:
    """The region an error answer says the bucket is in (AuthorizationHeaderMalformed and the
    like carry <Region>)."""
    found = _REGION.search(body or b"")
    return found.group(1).decode() if found else ""


def find_text(body: bytes, tag: str) -> str:
    """The text of the first element named `tag` (namespace-agnostic)."""
    root = ET.fromstring(body)
    ns = _ns(root)
    if root.tag == f"{ns}{tag}":
        return root.text or ""
    return root.findtext(f".//{ns}{tag}") or ""


def complete_multipart_body(etags: list[str], element: str = "", checksums: list[str] | None = None) -> bytes:
    """The parts, by ETag, and with `element` (ChecksumCRC64NVME, ...) each one's checksum."""
    values = checksums if element and checksums else [""] * len(etags)
    parts = "".join(
        f"<Part><PartNumber>{number}</PartNumber><ETag>{etag}</ETag>"
        + (f"<{element}>{value}</{element}>" if value else "")
        + "</Part>"
        for number, (etag, value) in enumerate(zip(etags, values, strict=True), start=1)
    )
    return f'<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{parts}</CompleteMultipartUpload>'.encode()


def xml_safe(key: str) -> bool:
    return _NOT_XML.search(key) is None


def delete_objects_body(entries: list[tuple[str, str]], etags: dict[str, str] | None = None) -> bytes:
    """A quiet DeleteObjects request of (key, version id; "" for the current object), a key in
    `etags` deleted only while it has that ETag (a service that takes the condition): the answer
    lists only the entries that failed."""
    etags = etags or {}
    objects = "".join(
        f"<Object><Key>{_as_xml(key)}</Key>"
        + (f"<VersionId>{_as_xml(version)}</VersionId>" if version else "")
        + (f"<ETag>{_as_xml(etags[key])}</ETag>" if key in etags else "")
        + "</Object>"
        for key, version in entries
    )
    return f'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>{objects}</Delete>'.encode()


def _as_xml(text: str) -> str:
    """`text` as XML character data that reads back as itself: a carriage return as a character
    reference, since an XML parser reads a raw one (or CR LF) as a line feed, and a DeleteObjects
    of the key `a\rb` deleted `a\nb`."""
    return html.escape(text, quote=False).replace("\r", "&#13;")


def parse_delete_errors(body: bytes) -> list[tuple[tuple[str, str], str, str]]:
    """((key, version id), code, message) for each entry a DeleteObjects answer reports as not
    deleted."""
    if not body.strip():
        return []
    root = ET.fromstring(body)
    ns = _ns(root)
    return [
        (
            (error.findtext(f"{ns}Key") or "", error.findtext(f"{ns}VersionId") or ""),
            error.findtext(f"{ns}Code") or "",
            error.findtext(f"{ns}Message") or "",
        )
        for error in root.iter(f"{ns}Error")
    ]


class UploadInfo(NamedTuple):
    """A multipart upload that was started and neither completed nor aborted: its parts are
    stored (and billed) until one of those happens."""

    key: str
    upload_id: str
    initiated: str  # ISO 8601 as the service sent it
    storage_class: str = ""

    def to_json(self) -> dict[str, str]:
        return self._asdict()


class UploadsPage(NamedTuple):
    uploads: list[UploadInfo]
    next_markers: tuple[str, str] | None  # (key-marker, upload-id-marker) of the next page


def _no_way_on(what: str) -> ItemError:
    return ItemError(
        f"{what}: the service said the listing goes on (IsTruncated) and gave no marker to go on from",
        retryable=True,
    )


def _url_key_reader(root: ET.Element, ns: str, what: str) -> Callable[[str], str]:
    """How the keys of a listing asked for with encoding-type=url read: URL-decoded where it
    says they are encoded (and they look it, `_Decoding`), as they are where it does not."""
    if (root.findtext(f"{ns}EncodingType") or "").lower() != "url":
        return str
    decoding = _Decoding(True, True, what)
    return lambda text: decoding.keys([text])[0]


def parse_multipart_uploads(body: bytes, what: str = "list multipart uploads") -> UploadsPage:
    """A ListMultipartUploads answer (asked with encoding-type=url, so keys are decoded here)."""
    root = ET.fromstring(body)
    ns = _ns(root)
    key_of = _url_key_reader(root, ns, what)

    uploads = [
        UploadInfo(
            key_of(upload.findtext(f"{ns}Key") or ""),
            upload.findtext(f"{ns}UploadId") or "",
            upload.findtext(f"{ns}Initiated") or "",
            upload.findtext(f"{ns}StorageClass") or "",
        )
        for upload in root.iter(f"{ns}Upload")
    ]
    truncated = (root.findtext(f"{ns}IsTruncated") or "").lower() == "true"
    markers = (
        key_of(root.findtext(f"{ns}NextKeyMarker") or ""),
        root.findtext(f"{ns}NextUploadIdMarker") or "",
    )
    if truncated and not any(markers):
        raise _no_way_on(what)
    return UploadsPage(uploads, markers if truncated else None)


def parse_parts(body: bytes) -> tuple[list[tuple[int, str, int]], str]:
    """A ListParts answer: (number, ETag, size) of each part, and the marker of the next page
    ("" when this is the last)."""
    root = ET.fromstring(body)
    ns = _ns(root)
    parts = [
        (
            int(part.findtext(f"{ns}PartNumber") or 0),
            part.findtext(f"{ns}ETag") or "",
            int(part.findtext(f"{ns}Size") or 0),
        )
        for part in root.iter(f"{ns}Part")
    ]
    truncated = (root.findtext(f"{ns}IsTruncated") or "").lower() == "true"
    marker = root.findtext(f"{ns}NextPartNumberMarker") or ""
    if truncated and not marker:
        raise _no_way_on("list the parts of an upload")
    return parts, marker if truncated else ""


class VersionInfo(NamedTuple):
    """One version of a key in a versioned bucket, or a delete marker (no size, no ETag)."""

    key: str
    version_id: str
    is_latest: bool
    modified: str  # ISO 8601 as the service sent it
    size: int = 0
    etag: str = ""
    delete_marker: bool = False

    def to_json(self) -> dict[str, object]:
        """As `ls --all-versions --json` prints it, in `ls --json`'s words (last_modified)."""
        found: dict[str, object] = self._asdict()
        found["last_modified"] = found.pop("modified")
        return found


class VersionsPage(NamedTuple):
    versions: list[VersionInfo]
    next_markers: tuple[str, str] | None  # (key-marker, version-id-marker) of the next page


def parse_versions(body: bytes, what: str = "list versions") -> VersionsPage:
    """A ListObjectVersions answer, versions and delete markers in the service's (key) order."""
    root = ET.fromstring(body)
    ns = _ns(root)
    key_of = _url_key_reader(root, ns, what)
    found = []
    for element in root:
        kind = element.tag[len(ns) :]
        if kind not in ("Version", "DeleteMarker"):
            continue
        key = element.findtext(f"{ns}Key") or ""
        found.append(
            VersionInfo(
                key_of(key),
                element.findtext(f"{ns}VersionId") or "",
                (element.findtext(f"{ns}IsLatest") or "").lower() == "true",
                element.findtext(f"{ns}LastModified") or "",
                int(element.findtext(f"{ns}Size") or 0),
                _etag((element.findtext(f"{ns}ETag") or "").encode()),
                kind == "DeleteMarker",
            )
        )
    truncated = (root.findtext(f"{ns}IsTruncated") or "").lower() == "true"
    key_marker = root.findtext(f"{ns}NextKeyMarker") or ""
    markers = (
        key_of(key_marker),
        root.findtext(f"{ns}NextVersionIdMarker") or "",
    )
    if truncated and not any(markers):
        raise _no_way_on(what)
    return VersionsPage(found, markers if truncated else None)


class BucketInfo(NamedTuple):
    name: str
    created: str  # ISO 8601 as the service sent it


def parse_buckets(body: bytes) -> list[BucketInfo]:
    """The buckets of a ListBuckets answer."""
    root = ET.fromstring(body)
    ns = _ns(root)
    return [
        BucketInfo(bucket.findtext(f"{ns}Name") or "", bucket.findtext(f"{ns}CreationDate") or "")
        for bucket in root.iter(f"{ns}Bucket")
    ]


def create_bucket_body(region: str) -> bytes:
    """CreateBucket's body: us-east-1 takes none, every other region names itself."""
    if region in ("", "us-east-1"):
        return b""
    constraint = f"<LocationConstraint>{html.escape(region, quote=False)}</LocationConstraint>"
    return (
        '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{constraint}</CreateBucketConfiguration>"
    ).encode()


def parse_tags(body: bytes) -> dict[str, str]:
    """The tag set of a GetObjectTagging answer."""
    root = ET.fromstring(body)
    ns = _ns(root)
    return {tag.findtext(f"{ns}Key") or "": tag.findtext(f"{ns}Value") or "" for tag in root.iter(f"{ns}Tag")}
