"""An S3 Express One Zone stand-in, for tests: directory buckets in front of a real server's
objects (MinIO's), with what sets them apart from general purpose buckets where a client can
go wrong, and which no local server has:

- listings in no key order: each listing is the prefix's keys shuffled (a seed of its own per
  listing), served a page at a time under the stand-in's own continuation tokens, so the order is
  random within each page and across pages (aws s3 sync's merge broke on exactly this);
- no StartAfter (400 InvalidArgument), and a Delimiter only "/" with a Prefix ending in it;
- directory-bucket names (`NAME--AZID--x-s3`, `is_directory_bucket`): a bucket named otherwise
  is refused (400 InvalidBucketName), CreateBucket too;
- CreateSession (`GET /BUCKET?session`): a session's credentials and token, which expire after
  `session_seconds`; with `sessions` on, every object and listing request must carry a session
  token (x-amz-s3session-token) that has not expired (else 400 ExpiredToken, 403 AccessDenied
  without one).

    with MinioServer() as minio, ExpressStandIn(
        minio.endpoint, (minio.access_key, minio.secret_key)
    ) as express:
        minio's client makes bucket "photos--use1-az4--x-s3"; a client pointed at
        express.endpoint (MinIO's credentials) lists it in no order

Objects, uploads, copies and deletes are MinIO's own, passed on with their Host header unchanged
(the client signs for the stand-in's address, as for `hostile.HostileS3`), so the bytes, ETags and
errors are a real server's. What only AWS can confirm (signing with service s3express, the
session's own key id and secret, the directory bucket's zonal endpoint, its ListObjectsV2 limits
on multipart uploads and versions) is not checked here: docs/compatibility.md says so.
"""

from __future__ import annotations

import itertools
import random
import re
import secrets
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, unquote
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import yarl
from aiohttp import web

from s3bulk.testing.hostile import HostileS3, _bucket_and_key, _error_xml, operation_of

_DIRECTORY_BUCKET = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?--[a-z0-9-]+--x-s3$")
_SESSION_HEADER = "x-amz-s3session-token"
_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
_NS = "{" + _XMLNS + "}"


@dataclass
class _Listing:
    """One listing's entries (boto3's dicts), shuffled, and its common prefixes."""

    entries: list[dict[str, Any]]
    prefixes: list[str]
    created: float = field(default_factory=time.monotonic)


class ExpressStandIn(HostileS3):
    """The stand-in, a proxy in front of `upstream` (MinIO, whose key id and secret are
    `credentials`: its own listings of the upstream are signed with them). `misbehave` adds
    faults as for `HostileS3`; `log` records what it was asked, `refused` what it refused."""

    def __init__(
        self,
        upstream: str,
        credentials: tuple[str, str],
        *,
        seed: int = 0,
        sessions: bool = False,
        session_seconds: float = 300.0,
    ) -> None:
        super().__init__(upstream)
        self.credentials = credentials
        self.random = random.Random(seed)
        self.sessions = sessions
        self.session_seconds = session_seconds
        self.tokens: dict[str, float] = {}  # session token -> when it expires (time.monotonic)
        self.refused: dict[str, int] = {}  # error code -> requests refused with it
        # listings asked for optional attributes (x-amz-optional-object-attributes: RestoreStatus),
        # which directory buckets do not support: counted, and answered without them
        self.asked_attributes = 0
        self._listings: dict[str, _Listing] = {}
        self._numbers = itertools.count(1)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        bucket, key = _bucket_and_key(request.path)
        if not bucket:
            return await super()._handle(request)
        if not _DIRECTORY_BUCKET.match(bucket):
            return self._refuse(
                400, "InvalidBucketName", f"{bucket} is not a directory bucket name (NAME--AZID--x-s3)"
            )
        if request.method == "GET" and not key and "session" in request.query:
            return self._create_session()
        operation = operation_of(request.method, bucket, key, request.query, request.headers)
        if self.sessions and operation not in ("CreateBucket", "DeleteBucket", "HeadBucket"):
            refused = self._session_refused(request)
            if refused is not None:
                return refused
        if operation == "ListObjectsV2":
            await self._gate()
            self.asked_attributes += "x-amz-optional-object-attributes" in request.headers
            return await self._list(request, bucket)
        return await super()._handle(request)

    def expire_sessions(self) -> None:
        """Every session given so far expires now (as one would at its Expiration)."""
        for token in self.tokens:
            self.tokens[token] = 0.0

    def _refuse(self, status: int, code: str, message: str) -> web.Response:
        self.refused[code] = self.refused.get(code, 0) + 1
        return web.Response(status=status, body=_error_xml(code, message), content_type="application/xml")

    def _create_session(self) -> web.Response:
        """A session's credentials (the upstream's own key: it checks the signatures) and a
        token of the stand-in's that expires."""
        token = secrets.token_urlsafe(24)
        self.tokens[token] = time.monotonic() + self.session_seconds
        expires = formatdate(time.time() + self.session_seconds, usegmt=True)
        key_id, secret = self.credentials
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<CreateSessionResult xmlns="{_XMLNS}"><Credentials>'
            f"<SessionToken>{token}</SessionToken><SecretAccessKey>{escape(secret)}</SecretAccessKey>"
            f"<AccessKeyId>{escape(key_id)}</AccessKeyId><Expiration>{expires}</Expiration>"
            "</Credentials></CreateSessionResult>"
        ).encode()
        return web.Response(status=200, body=body, content_type="application/xml")

    def _session_refused(self, request: web.Request) -> web.Response | None:
        token = request.headers.get(_SESSION_HEADER, "")
        if not token:
            return self._refuse(
                403, "AccessDenied", "directory buckets take a session's credentials (CreateSession)"
            )
        expires = self.tokens.get(token)
        if expires is None or expires <= time.monotonic():
            return self._refuse(400, "ExpiredToken", "The provided token has expired.")
        return None

    async def _list(self, request: web.Request, bucket: str) -> web.StreamResponse:
        query = request.query
        if query.get("start-after"):
            return self._refuse(400, "InvalidArgument", "StartAfter is not supported for directory buckets")
        prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
        if delimiter and (delimiter != "/" or (prefix and not prefix.endswith("/"))):
            return self._refuse(
                400,
                "InvalidArgument",
                "directory buckets take only the delimiter / with a prefix ending in it",
            )
        token = query.get("continuation-token", "")
        if token:
            name, _, offset_text = token.rpartition(".")
            known = self._listings.get(name)
            if known is None or not offset_text.isdigit():
                return self._refuse(400, "InvalidArgument", "The continuation token provided is incorrect")
            listing, offset = known, int(offset_text)
        else:
            listed = await self._listing(bucket, prefix, delimiter)
            if isinstance(listed, web.Response):
                return listed
            name, offset, listing = f"l{next(self._numbers)}", 0, listed
            self._listings[name] = listing
        size = max(1, min(1000, int(query.get("max-keys") or 1000)))
        page = listing.entries[offset : offset + size]
        following = offset + size if offset + size < len(listing.entries) else None
        prefixes = listing.prefixes if offset == 0 else []
        token_out = f"{name}.{following}" if following is not None else ""
        return web.Response(
            status=200,
            body=_page(bucket, prefix, delimiter, page, prefixes, token_out),
            content_type="application/xml",
        )

    async def _listing(self, bucket: str, prefix: str, delimiter: str) -> _Listing | web.Response:
        """The prefix's entries as the upstream lists them (every page), shuffled."""
        entries: list[dict[str, Any]] = []
        prefixes: list[str] = []
        token = ""
        while True:
            query = {"list-type": "2", "prefix": prefix, "encoding-type": "url"}
            if delimiter:
                query["delimiter"] = delimiter
            if token:
                query["continuation-token"] = token
            status, body = await self._upstream_get(bucket, query)
            if status != 200:
                return web.Response(status=status, body=body, content_type="application/xml")
            root = ElementTree.fromstring(body)
            for contents in root.iter(f"{_NS}Contents"):
                entries.append(
                    {
                        name: unquote(contents.findtext(f"{_NS}{name}") or "")
                        if name == "Key"
                        else contents.findtext(f"{_NS}{name}") or ""
                        for name in ("Key", "LastModified", "ETag", "Size")
                    }
                )
            for common in root.iter(f"{_NS}CommonPrefixes"):
                prefixes.append(unquote(common.findtext(f"{_NS}Prefix") or ""))
            token = root.findtext(f"{_NS}NextContinuationToken") or ""
            if root.findtext(f"{_NS}IsTruncated") != "true" or not token:
                break
        self.random.shuffle(entries)
        return _Listing(entries, prefixes)

    async def _upstream_get(self, bucket: str, query: dict[str, str]) -> tuple[int, bytes]:
        """A listing page asked of the upstream, signed by the stand-in (SigV4 for s3, as the
        upstream checks it)."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        url = f"{self.upstream}/{bucket}?" + "&".join(
            f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted(query.items())
        )
        request = AWSRequest(method="GET", url=url)
        S3SigV4Auth(Credentials(*self.credentials), "s3", "us-east-1").add_auth(request)
        headers = dict(request.headers.items()) | {"Accept-Encoding": "identity"}
        async with self._session.get(yarl.URL(url, encoded=True), headers=headers) as reply:
            return reply.status, await reply.read()


def _xml_key(key: str) -> str:
    return escape(key).replace("\r", "&#13;")


def _page(
    bucket: str, prefix: str, delimiter: str, entries: list[dict[str, Any]], prefixes: list[str], token: str
) -> bytes:
    """One ListObjectsV2 page, as S3 Express writes it."""
    parts = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{_XMLNS}">',
        f"<Name>{escape(bucket)}</Name><Prefix>{_xml_key(prefix)}</Prefix>",
        f"<KeyCount>{len(entries) + len(prefixes)}</KeyCount><MaxKeys>1000</MaxKeys>",
        f"<Delimiter>{escape(delimiter)}</Delimiter>" if delimiter else "",
        f"<IsTruncated>{'true' if token else 'false'}</IsTruncated>",
        f"<NextContinuationToken>{token}</NextContinuationToken>" if token else "",
    ]
    for entry in entries:
        parts.append(
            f"<Contents><Key>{_xml_key(entry['Key'])}</Key><LastModified>{entry['LastModified']}</LastModified>"
            f"<ETag>{escape(entry['ETag'])}</ETag><Size>{entry['Size']}</Size>"
            "<StorageClass>EXPRESS_ONEZONE</StorageClass></Contents>"
        )
    parts.extend(f"<CommonPrefixes><Prefix>{_xml_key(each)}</Prefix></CommonPrefixes>" for each in prefixes)
    parts.append("</ListBucketResult>")
    return "".join(parts).encode()
