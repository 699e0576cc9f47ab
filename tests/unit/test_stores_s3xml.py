"""How listing pages' keys are read (`_stores/s3xml.py`): one way, whatever a service says of its
encoding. Pages are asked for as plain XML, and URL-encoded only where the plain page cannot be
read exactly; a page that says its keys are URL-encoded is believed only where that reads one way.
And the XML bodies s3bulk sends name each key exactly: read back by an XML parser, as a server
reads them, they give the keys they were made of."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from urllib.parse import quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s3bulk_native
from s3bulk._errors import ItemError
from s3bulk._stores import s3xml


def _xml_text(key: str) -> str:
    """A key as MinIO writes it into plain XML: the five entities, and a character reference for
    every character below a space (XML 1.0 forbids most of them, MinIO sends them anyway)."""
    escaped = key.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
    return "".join(f"&#x{ord(char):X};" if ord(char) < 0x20 else char for char in escaped)


def _page(
    keys: list[str], *, encoded: bool = False, said: bool | None = None, prefixes: tuple[str, ...] = ()
) -> bytes:
    """A ListObjectsV2 page: keys as plain XML text, or URL-encoded; `said`: whether it says
    EncodingType=url (by default, when encoded)."""
    write = quote_plus if encoded else _xml_text
    entries = "".join(
        f"<Contents><Key>{write(key)}</Key><LastModified>2026-11-23T22:31:04.907Z</LastModified>"
        f"<ETag>&#34;{i:032x}&#34;</ETag><Size>{i}</Size><StorageClass>STANDARD</StorageClass></Contents>"
        for i, key in enumerate(keys)
    )
    entries += "".join(
        f"<CommonPrefixes><Prefix>{write(prefix)}</Prefix></CommonPrefixes>" for prefix in prefixes
    )
    encoding = "<EncodingType>url</EncodingType>" if (encoded if said is None else said) else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>b</Name><Prefix></Prefix><KeyCount>{len(keys)}</KeyCount><MaxKeys>1000</MaxKeys>"
        f"<IsTruncated>false</IsTruncated>{entries}{encoding}</ListBucketResult>"
    ).encode()


def _keys(body: bytes, url_asked: bool = False) -> list[str]:
    page = s3xml.parse_list_objects_v2(body, url_asked=url_asked, what="list s3://b/")
    return [info.key for info in page.objects] + page.common_prefixes


_ANY_KEY = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_ANY_KEY, max_size=12, unique=True), delimited=st.booleans())
def test_a_plain_page_reads_every_key_exactly_or_asks_for_encoding(keys: list[str], delimited: bool) -> None:
    """Control characters as MinIO refers to them are read as themselves; what plain XML cannot
    say exactly (U+FFFD, which Go's XML writer puts in the place of what XML cannot carry; a
    reference ElementTree refuses) is asked for again, URL-encoded, and read from that."""
    prefixes = ("folder/",) if delimited else ()
    body = _page(keys, prefixes=prefixes)
    try:
        assert _keys(body) == keys + list(prefixes)
    except s3xml.NeedsEncoding:
        assert any("\ufffd" in key for key in keys) or (
            delimited and any(ord(c) < 0x20 for k in keys for c in k)
        )
        assert _keys(_page(keys, encoded=True, prefixes=prefixes), url_asked=True) == keys + list(prefixes)


def test_control_characters_and_entities_read_as_themselves() -> None:
    keys = ["p/x\x01y", "p/cr\rlf\nt\tab", "p/amp&lt<>", "p/quote'\"", "p/\u00e9t\u00e9 \u20ac\x80"]
    assert _keys(_page(keys)) == keys


@pytest.mark.parametrize(
    "raw", [b"p/\xef\xbf\xbd", b"p/&#xD800;", b"p/&#x110000;", b"p/&nbsp;", b"p/a&b", b"p/\xff"]
)
def test_a_plain_key_that_cannot_be_read_exactly_asks_for_encoding(raw: bytes) -> None:
    body = _page(["p/placeholder"]).replace(b"p/placeholder", raw)
    with pytest.raises(s3xml.NeedsEncoding):
        _keys(body)


@pytest.mark.parametrize("key", ["p/a+b", "p/c%41d", "p/100%"])
def test_keys_said_to_be_url_encoded_unasked_that_read_two_ways_stop_the_listing(key: str) -> None:
    """`a+b` is "a b" URL-decoded: which one the service holds, nothing on the page says."""
    with pytest.raises(ItemError, match="did not ask for") as raised:
        _keys(_page(["p/plain", key], said=True))
    assert raised.value.job_wide and not raised.value.retryable


def test_keys_said_to_be_url_encoded_unasked_that_read_one_way_are_read() -> None:
    keys = ["p/plain", "p/\u00e9t\u00e9", "p/sp ace"]
    assert _keys(_page(keys, said=True)) == keys


@pytest.mark.parametrize("key", ["p/sp ace", "p/\u00e9t\u00e9", "p/100%", "p/x\x01y", "p/\ufffd"])
def test_keys_said_to_be_url_encoded_that_no_encoder_writes_stop_the_listing(key: str) -> None:
    with pytest.raises(ItemError, match="which no URL encoder writes") as raised:
        _keys(_page(["p/a%2Bb", key], said=True), url_asked=True)
    assert raised.value.job_wide


def test_url_encoded_keys_asked_for_are_decoded() -> None:
    keys = ["p/a+b", "p/c%41d", "p/sp ace", "p/x\x01y", "p/\ufffd", "p/\u00e9"]
    assert _keys(_page(keys, encoded=True), url_asked=True) == keys


def test_a_page_asked_for_url_encoded_that_still_cannot_be_read_stops_the_listing() -> None:
    """The service ignored encoding-type=url, and its plain page could not be read exactly."""
    with pytest.raises(ItemError, match="did not URL-encode them when asked"):
        _keys(_page(["p/\ufffd"]), url_asked=True)


def test_versions_said_to_be_url_encoded_that_no_encoder_writes_stop_the_listing() -> None:
    body = (
        b'<ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><EncodingType>url</EncodingType>'
        b"<IsTruncated>false</IsTruncated><Version><Key>p/sp ace</Key><VersionId>v1</VersionId>"
        b"<IsLatest>true</IsLatest><LastModified>2026-11-23T22:31:04.907Z</LastModified><Size>1</Size>"
        b"</Version></ListVersionsResult>"
    )
    with pytest.raises(ItemError, match="which no URL encoder writes"):
        s3xml.parse_versions(body)
    assert s3xml.parse_versions(body.replace(b"sp ace", b"sp+ace")).versions[0].key == "p/sp ace"


@pytest.mark.parametrize("same", [True, False], ids=["same-page", "empty-pages"])
def test_a_versions_listing_that_does_not_advance_stops(same: bool) -> None:
    """ListObjectVersions (and ListMultipartUploads) go on from markers: fresh markers with the
    same versions again, or with none, forever, stop as a ListObjectsV2 listing does."""
    import asyncio
    import itertools

    from s3bulk._config import AwsSettings
    from s3bulk._stores.storage import Storage

    version = s3xml.VersionInfo("p/k", "v1", True, "2026-11-23T22:31:04.907Z", 1, "e")
    fresh = itertools.count()

    async def listing(markers: tuple[str, str] | None) -> s3xml.VersionsPage:
        return s3xml.VersionsPage([version] if same or markers is None else [], ("p/k", f"v{next(fresh)}"))

    async def pages() -> int:
        storage = Storage(AwsSettings(endpoint_url="http://127.0.0.1:1", region="us-east-1"))
        count = 0
        async for _ in storage._marker_pages(listing, "list the versions in s3://b/p/"):
            count += 1
            assert count <= 2 * s3xml.PAGES_WITHOUT_PROGRESS, "listed forever"
        return count

    with pytest.raises(ItemError, match=r"list the versions in s3://b/p/: .*the listing does not advance"):
        asyncio.run(pages())


def test_a_delete_objects_body_reads_back_as_the_keys_it_names() -> None:
    """A raw carriage return is read as a line feed by every XML parser (end-of-line
    normalization), so `a\\rb` named `a\\nb`: a DeleteObjects deleted another object."""
    keys = ["a\rb", "a\r\nb", "a\nb", "tab\there", "<&>'\"", "line\u2028sep\x85", "trailing\r"]
    assert all(s3xml.xml_safe(key) for key in keys)
    body = s3xml.delete_objects_body([(key, "") for key in keys] + [("versioned\r", "v\r1")])
    root = ET.fromstring(body)
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    objects = root.iter(f"{ns}Object")
    named = [(each.findtext(f"{ns}Key"), each.findtext(f"{ns}VersionId")) for each in objects]
    assert named == [(key, None) for key in keys] + [("versioned\r", "v\r1")]


def test_restore_status_listed_when_asked_is_read_per_entry() -> None:
    """A page asked with `x-amz-optional-object-attributes: RestoreStatus`, as S3 documents it:
    a restore under way, a restored copy ready until its expiry, and an archived object never
    restored (no RestoreStatus at all)."""
    entries = "".join(
        f"<Contents><Key>{key}</Key><LastModified>2026-11-23T22:31:04.907Z</LastModified>"
        f"<ETag>&quot;{n:032x}&quot;</ETag><Size>{n}</Size><StorageClass>GLACIER</StorageClass>{status}</Contents>"
        for n, (key, status) in enumerate(
            [
                ("cold", ""),
                ("thawing", "<RestoreStatus><IsRestoreInProgress>true</IsRestoreInProgress></RestoreStatus>"),
                (
                    "thawed",
                    "<RestoreStatus><IsRestoreInProgress>false</IsRestoreInProgress>"
                    "<RestoreExpiryDate>2026-12-01T00:00:00.000Z</RestoreExpiryDate></RestoreStatus>",
                ),
            ]
        )
    )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>b</Name><IsTruncated>false</IsTruncated>{entries}</ListBucketResult>"
    ).encode()
    shown = {info.key: info.to_json() for info in s3xml.parse_list_objects_v2(body).objects}
    assert "restore_ongoing" not in shown["cold"]
    assert shown["thawing"]["restore_ongoing"] is True and "restore_ready_until" not in shown["thawing"]
    assert shown["thawed"]["restore_ongoing"] is False
    assert shown["thawed"]["restore_ready_until"] == "2026-12-01T00:00:00.000Z"
    assert shown["thawed"]["etag"] == f"{2:032x}" and shown["thawed"]["size"] == 2


# ---- the native page reader (s3bulk_native.list_page_columns) against the Python one -------------

_RAW_KEY = st.one_of(
    _ANY_KEY.map(_xml_text),  # as MinIO writes keys
    _ANY_KEY,  # as they are: raw newlines, '<' (another form), '&' (no reference), CR
    st.binary(min_size=1, max_size=12).map(lambda raw: raw.decode("latin-1")),  # bytes no UTF-8
    st.sampled_from(["a%41b", "a+b", "\ufffd", "z", "\U0001f600", "\uff61", "a\nb", "&#1;", "&#xD800;"]),
)
_CHECKSUMS = st.lists(
    st.sampled_from(
        [
            "<ChecksumAlgorithm>CRC64NVME</ChecksumAlgorithm>",
            "<ChecksumAlgorithm>CRC32</ChecksumAlgorithm>",
            "<ChecksumType>FULL_OBJECT</ChecksumType>",
            "<ChecksumType>COMPOSITE</ChecksumType>",
            "<ChecksumCRC32>AAAA</ChecksumCRC32>",
            "<ChecksumAlgorithm>A&amp;B</ChecksumAlgorithm>",
            "<Checksum>x</Checksum>",
        ]
    ),
    max_size=3,
).map("".join)
_ETAG = st.sampled_from(
    ["&#34;{}&#34;", "&quot;{}&quot;", '"{}"', "{}", '"{}-3"', "&amp;{}", 'a"{}"b', "{}\n"]
)
_SIZE = st.one_of(
    st.integers(0, 10**6), st.just(2**64), st.just(2**63), st.sampled_from(["007", "", "-1", "1e3"])
)


# keys as S3 writes them into a page most of the time: any text but what XML must escape
_CLEAN_KEY = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="<&\n\r"), min_size=1, max_size=20
)


@st.composite
def _entry(draw: st.DrawFn, clean: bool) -> str:
    """A `<Contents>`; `clean`: in S3's form, every field plain (read natively), else anything."""
    if clean:
        key = draw(st.one_of(_CLEAN_KEY, st.sampled_from(["a%41b", "a+b", "\ufffd", "\uff61", "z"])))
        modified = draw(st.sampled_from(["2026-11-23T22:31:04.907Z", "2026-11-23T22:31:04Z", ""]))
        etag = draw(st.sampled_from(["&#34;{}&#34;", "&quot;{}&quot;", '"{}"', '"{}-3"', 'a"{}"b']))
        etag = etag.format(f"{draw(st.integers(0, 255)):032x}")
        size = draw(st.one_of(st.integers(0, 2**64 - 1), st.just("007")))
        storage = draw(st.sampled_from(["<StorageClass>STANDARD</StorageClass>", ""]))
        checksums = draw(_CHECKSUMS.filter(lambda text: "&" not in text and "<Checksum>" not in text))
        return (
            f"<Contents><Key>{key}</Key><LastModified>{modified}</LastModified><ETag>{etag}</ETag>"
            f"{checksums}<Size>{size}</Size>{storage}</Contents>"
        )
    key = draw(_RAW_KEY)
    modified = draw(
        st.sampled_from(["2026-11-23T22:31:04.907Z", "2026-11-23T22:31:04Z", "", "no&amp;time", "a\nb"])
    )
    etag = draw(_ETAG).format(f"{draw(st.integers(0, 255)):032x}")
    size = draw(_SIZE)
    storage = draw(
        st.sampled_from(["<StorageClass>STANDARD</StorageClass>", "", "<StorageClass>GLACIER</StorageClass>"])
    )
    checksums = draw(_CHECKSUMS)
    order = draw(st.sampled_from(["s3", "s3", "s3", "size-first", "spaced"]))
    if order == "size-first":
        return (
            f"<Contents><Size>{size}</Size><Key>{key}</Key><LastModified>{modified}</LastModified>"
            f"<ETag>{etag}</ETag></Contents>"
        )
    gap = "\n  " if order == "spaced" else ""
    return (
        f"<Contents>{gap}<Key>{key}</Key><LastModified>{modified}</LastModified><ETag>{etag}</ETag>"
        f"{checksums}<Size>{size}</Size>{storage}</Contents>"
    )


@st.composite
def _any_page(draw: st.DrawFn) -> bytes:
    clean = draw(st.sampled_from([True, True, True, False]))
    entries = draw(st.lists(_entry(clean), max_size=6))
    head = draw(st.sampled_from(["<IsTruncated>true</IsTruncated>", "<IsTruncated>FALSE</IsTruncated>", ""]))
    tokens = ["", "<NextContinuationToken>t/1==</NextContinuationToken>"]
    if not clean:  # a token to unescape, one to decode
        tokens += [
            "<NextContinuationToken>a&amp;b</NextContinuationToken>",
            "<NextContinuationToken>\u00e9</NextContinuationToken>",
        ]
    token = draw(st.sampled_from(tokens))
    encoding = draw(
        st.sampled_from(["", "", "<EncodingType>url</EncodingType>", "<EncodingType>URL</EncodingType>"])
    )
    extras = ["", "<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes>", "<![CDATA[x]]>"]
    extra = draw(st.sampled_from(extras[:1] if clean else extras))
    tail_first = draw(st.booleans())
    fields = head + (token + encoding if tail_first else "")
    after = "" if tail_first else token + encoding
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>b</Name><Prefix></Prefix>{fields}{''.join(entries)}{extra}{after}</ListBucketResult>"
    )
    return (
        body.encode("utf-8", "surrogatepass")
        if not draw(st.booleans())
        else body.encode("latin-1", "replace")
    )


def _outcome(body: bytes, url_asked: bool, native: bool) -> object:
    """What `_parse_regular_page` makes of a page, by either reader: the page, None, or the error."""
    saved = s3xml.native_columns
    s3xml.native_columns = s3xml.native_columns if native else None
    try:
        return s3xml._parse_regular_page(body, url_asked, "list s3://b/")
    except Exception as exc:  # the same error, by type and text
        return (type(exc).__name__, str(exc))
    finally:
        s3xml.native_columns = saved


# `make test` tries S3BULK_PAGE_EXAMPLES pages (300 by default: ~3 s of CPU where 1,500 took 16 s,
# a third of the unit tier's), `make reliability` 1,500 (scripts/reliability.py)
PAGE_EXAMPLES = int(os.environ.get("S3BULK_PAGE_EXAMPLES", "300"))


@settings(max_examples=PAGE_EXAMPLES, deadline=None)
@given(body=_any_page(), url_asked=st.booleans())
def test_the_native_page_reader_reads_every_page_as_the_python_one(body: bytes, url_asked: bool) -> None:
    """Keys are data: a page reads the same whichever reader reads it (regular pages, pages in
    another form, fields holding references, newlines, bytes that are no UTF-8, odd ETags and
    sizes, tokens, what the page says of its encoding)."""
    assert _outcome(body, url_asked, native=True) == _outcome(body, url_asked, native=False)


def test_the_native_page_reader_takes_a_regular_page() -> None:
    """An S3 page in the form S3 writes is read natively (not left to Python), and as Python reads it."""
    body = _page(["a", "b/\u00e9", "c+d", "\U0001f600"])
    assert s3bulk_native.list_page_columns(body) is not None
    assert _outcome(body, False, native=True) == _outcome(body, False, native=False)
