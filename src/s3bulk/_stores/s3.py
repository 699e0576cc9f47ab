"""s3bulk's own S3 client: the S3 REST operations over signed HTTP (`stores.http`) and the stdlib
XML parser.

It covers what obstore cannot do: listings with raw StartAfter/MaxKeys/Delimiter control (needed
to list key ranges concurrently, and for keys obstore's path model refuses such as ``a//b``),
server-side copy across buckets (CopyObject, UploadPartCopy), multipart uploads whose ids s3bulk
must know (`stores.multipart`), HEAD and tagging, and plain GET/PUT for keys obstore cannot
address. Jobs do not use it directly: the storage seam (`stores.storage`) chooses between it and
obstore, and retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import ClassVar
from urllib.parse import quote

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, S3Error, WrittenMeanwhile, changed_meanwhile
from s3bulk._stores import archives, checksums, native_http, s3xml, sessions
from s3bulk._stores.http import SignedHttp, content_md5
from s3bulk._stores.native_http import Body, FileRange
from s3bulk._stores.retry import Meter
from s3bulk._stores.s3xml import ListPage


def quote_key(key: str) -> str:
    return quote(key, safe="/~")


def quoted(etag: str) -> str:
    """An ETag as a condition names it (If-Match, x-amz-copy-source-if-match, DeleteObjects'
    <ETag>): in quotes, as the service gives it, whether or not a listing kept them."""
    return f'"{etag.strip(chr(34))}"'


def if_match_header(etag: str, header: str = "If-Match") -> dict[str, str]:
    """The header that makes a request about that version of the object only (412 otherwise);
    none without an ETag."""
    return {header: quoted(etag)} if etag else {}


COPY_SOURCE_IF_MATCH = "x-amz-copy-source-if-match"
OPTIONAL_ATTRIBUTES = "x-amz-optional-object-attributes"  # ListObjectsV2's RestoreStatus


def _query(params: dict[str, str]) -> str:
    return "&".join(
        f"{quote(name, safe='~')}={quote(value, safe='~')}" if value != "" else quote(name, safe="~")
        for name, value in sorted(params.items())
    )


class S3Client(SignedHttp):
    service: ClassVar[str] = "s3"
    native: ClassVar[bool] = True

    def __init__(
        self, settings: AwsSettings, *, max_connections: int = 64, meter: Meter | None = None
    ) -> None:
        super().__init__(settings, settings.resolved_endpoint, max_connections=max_connections, meter=meter)
        self.sessions = sessions.Sessions(self._create_session)  # directory buckets' (CreateSession)
        # listings ask for each archived object's restore state (`ls --json`): free on S3, and
        # asked only where shown; False again once a service refuses the header
        self.restore_status = False

    async def _create_session(self, bucket: str) -> sessions.Session:
        """CreateSession: the directory bucket's session credentials, asked with the caller's."""
        what = f"create a session for s3://{bucket}"
        _, _, body = await self.send(
            "SESSION",
            "GET",
            self.url(bucket) + "?session",
            what=what,
            region=self.settings.region_of(bucket),
            as_session=(self.settings.credentials(), sessions.signing_service(self.settings)),
        )
        return sessions.parse_session(body, time.time(), what)

    def url(self, bucket: str, key: str = "") -> str:
        endpoint = self.settings.endpoint_of(bucket).rstrip("/") if bucket else self.endpoint
        if self.settings.path_style or "." in bucket:
            return f"{endpoint}/{bucket}/{quote_key(key)}"
        scheme, _, host = endpoint.partition("://")
        return f"{scheme}://{bucket}.{host}/{quote_key(key)}"

    def error(self, status: int, headers: dict[str, str], payload: bytes, what: str) -> S3Error:
        code, message = s3xml.parse_error(payload)
        location = _header(headers, "location")
        if 300 <= status < 400 and location:  # never followed: the credentials would go along
            message = (
                f"{message.rstrip('.')}; a redirect to {_site(location)}, and s3bulk follows no redirect"
            )
            message = message.lstrip("; ")
        error = S3Error(status, code, message, what)
        error.region = s3xml.find_region(payload) or _header(headers, "x-amz-bucket-region")
        if code in archives.ARCHIVED_CODES:
            error.storage_class = s3xml.find_text(payload, "StorageClass")
        return error

    async def request(
        self,
        kind: str,
        method: str,
        bucket: str,
        key: str = "",
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        body: Body = b"",
        what: str = "",
        of_source: bool = False,
        sign_payload: bool = True,
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one signed request; S3 error answers raise S3Error (retryable or final).
        `of_source`: the object is a copy's source (read with the source's SSE-C key).
        `sign_payload`: False for a body that carries its checksum (`_body_checks`)."""
        added = self._added_headers(kind, method, bool(key), params or {}, of_source)
        if added:
            headers = {**(headers or {}), **added}
        query = "?" + _query(params) if params else ""

        in_session = sessions.takes_session(self.settings, bucket, key, method)

        async def sent() -> tuple[int, dict[str, str], bytes]:
            """To the bucket's endpoint and region as known now (a directory bucket's objects:
            in its session, a new one once if the service says it expired)."""
            region = self.settings.region_of(bucket) if bucket else None
            url = self.url(bucket, key) + query
            if not in_session:
                return await self.send(
                    kind,
                    method,
                    url,
                    headers=headers,
                    body=body,
                    what=what,
                    region=region,
                    sign_payload=sign_payload,
                )
            for attempt in (1, 2):
                session = await self.sessions.of(bucket)
                try:
                    return await self.send(
                        kind,
                        method,
                        url,
                        headers={**(headers or {}), **session.header},
                        body=body,
                        what=what,
                        region=region,
                        sign_payload=sign_payload,
                        as_session=(session.credentials, sessions.signing_service(self.settings)),
                    )
                except S3Error as error:
                    expired = error.code == "ExpiredToken" or (method == "HEAD" and error.status == 400)
                    if not expired or attempt == 2:
                        raise
                    self.sessions.drop(bucket, session)
            raise AssertionError("unreachable")

        try:
            try:
                return await sent()
            except S3Error as error:
                if not await self._learned_region(bucket, error):
                    raise
                return await sent()
        except S3Error as error:
            refused = refused_checks(error, self.settings, headers or {}, body, sign_payload, what)
            if refused is not None:
                raise refused from None
            if error.status == 501:  # which request it does not implement, in S3's own terms
                request = " ".join([method, *(f"?{name}" for name in sorted(params or {}))])
                copy = " with x-amz-copy-source" if "x-amz-copy-source" in (headers or {}) else ""
                raise S3Error(501, error.code, error.message, f"{what} ({request}{copy})") from None
            if error.code or method != "HEAD" or 300 <= error.status < 400:
                raise
            sent_key = any(name.endswith("customer-key") for name in headers or {})
            if error.status in (400, 404) and "versionId" in (params or {}):
                message = "no such version of it (s3bulk ls --all-versions lists them)"
                raise S3Error(error.status, "NoSuchVersion", message, what) from None
            told = (
                await self._why_refused(bucket, key, params, headers, what, of_source)
                if error.status == 403
                else None
            )
            raise told or _head_error(error.status, key, what, sent_key) from None

    async def _why_refused(
        self,
        bucket: str,
        key: str,
        params: dict[str, str] | None,
        headers: dict[str, str] | None,
        what: str,
        of_source: bool,
    ) -> S3Error | None:
        """A HEAD refused (403) has no body to say why: a wrong secret, a key id the service does
        not know, or a policy. The same request as a GET (of the object's first byte, or of an
        empty page of the bucket) says it, as a listing would (`cat` said AccessDenied where
        `ls` said SignatureDoesNotMatch). Asked only when refused; None where it tells nothing
        the HEAD's guess does not (AccessDenied: the guess, with its SSE-C hint, stands)."""
        asked = {name: value for name, value in (params or {}).items() if name == "versionId"}
        if key:
            headers = {**(headers or {}), "range": "bytes=0-0"}
        else:
            asked |= {"list-type": "2", "max-keys": "0"}
        try:
            await self.request(
                "GET", "GET", bucket, key, params=asked, headers=headers, what=what, of_source=of_source
            )
        except S3Error as error:
            return error if error.code and error.code != "AccessDenied" else None
        return None

    async def _learned_region(self, bucket: str, error: S3Error) -> bool:
        """Whether the service said the bucket is in another region than it was asked in (a
        redirect, a signature for the wrong region, a bare 301 or 400 to a HEAD), and that region
        is now known: from the answer itself, else from GetBucketLocation."""
        wrong = error.code in WRONG_REGION or (not error.code and error.status in (301, 400))
        if not bucket or not wrong:
            return False
        region = error.region or await self._ask_region(bucket)
        if not region or region == self.settings.region_of(bucket):
            return False
        self.settings.bucket_regions[bucket] = region
        return True

    async def _ask_region(self, bucket: str) -> str:
        url = self.url(bucket) + "?location"
        try:
            _, headers, body = await self.send("LIST", "GET", url, what=f"find the region of s3://{bucket}")
        except S3Error as error:
            return error.region
        found = _header(headers, "x-amz-bucket-region") or s3xml.find_text(body, "LocationConstraint")
        return found or "us-east-1"

    def object_headers(self) -> dict[str, str]:
        """What a GET of an object's bytes carries besides its own headers (the native batch GETs
        send them too, `gets.py`)."""
        return self._added_headers("GET", "GET", True, {}, False)

    def _added_headers(
        self, kind: str, method: str, of_object: bool, params: dict[str, str], of_source: bool
    ) -> dict[str, str]:
        """The headers the settings add to a request: requester pays (a requester-pays bucket
        answers 403 without it), the SSE-C keys."""
        added = {"x-amz-request-payer": "requester"} if self.settings.request_payer else {}
        if of_object and (self.settings.sse_c or self.settings.sse_c_source):
            added |= self._customer_keys(kind, method, params, of_source)
        return added

    def _customer_keys(
        self, kind: str, method: str, params: dict[str, str], of_source: bool
    ) -> dict[str, str]:
        """The SSE-C headers an object request needs: reads and writes of an object's bytes carry
        its key (GET, HEAD, PutObject, starting a multipart upload, each part, and completing an
        upload that carries a checksum, which S3 then asks for); a copy carries the new object's
        key and its source's. Tagging, deletes and listing an upload's parts do not."""
        settings, headers = self.settings, dict[str, str]()
        if "tagging" in params or method == "DELETE" or (method == "GET" and "uploadId" in params):
            return headers
        if of_source:
            return settings.sse_c_source.headers() if settings.sse_c_source else headers
        if settings.sse_c:
            headers |= settings.sse_c.headers()
        if kind == "COPY" and settings.sse_c_source:
            headers |= settings.sse_c_source.headers("x-amz-copy-source-server-side-encryption-customer-")
        return headers

    async def list_objects_v2(
        self,
        bucket: str,
        prefix: str = "",
        *,
        start_after: str | None = None,
        continuation_token: str | None = None,
        delimiter: str | None = None,
        max_keys: int = 1000,
    ) -> ListPage:
        """One page, asked for as plain XML, and again URL-encoded only where the plain page
        cannot be read exactly (a key XML cannot carry): keys are then read one way, whatever
        a service says of its encoding (`s3xml.parse_list_objects_v2`). Asked for URL-encoded
        every time, as the SDKs do, a service that said so and sent keys as they were had
        `a+b` read as "a b", and sync --delete deleted the file `a+b`."""
        params = {"list-type": "2", "prefix": prefix}
        if max_keys != 1000:
            params["max-keys"] = str(max_keys)
        if start_after:
            params["start-after"] = start_after
        if continuation_token:
            params["continuation-token"] = continuation_token
        if delimiter:
            params["delimiter"] = delimiter
        what = f"list s3://{bucket}/{prefix}"
        body = await self._listed(bucket, params, what)
        try:
            page = s3xml.parse_list_objects_v2(body, what=what)
        except s3xml.NeedsEncoding:
            params["encoding-type"] = "url"
            _, _, body = await self.request("LIST", "GET", bucket, params=params, what=what)
            s3xml.expect(body, "ListBucketResult", what)
            page = s3xml.parse_list_objects_v2(body, url_asked=True, what=what)
        if page.is_truncated and not page.next_token:  # taken as the end, the rest goes unseen
            raise ItemError(
                f"{what}: the service said the listing goes on (IsTruncated) and gave no token to go on with",
                retryable=True,
            )
        return page

    async def _listed(self, bucket: str, params: dict[str, str], what: str) -> bytes:
        """A listing page's body, with the restore states asked for where they are wanted; a
        service that refuses the request with the header (a 400 or 501) is asked again without
        it, and never again in this job: `ls` lists as it did. A directory bucket is not asked
        (S3 Express keeps no archive, and its ListObjectsV2 takes no RestoreStatus)."""
        wanted = self.restore_status and not sessions.takes_session(self.settings, bucket, "", "GET")
        try:
            _, _, body = await self.request(
                "LIST",
                "GET",
                bucket,
                params=params,
                headers={OPTIONAL_ATTRIBUTES: "RestoreStatus"} if wanted else None,
                what=what,
            )
        except S3Error as error:
            if not (wanted and _refused_attributes(error)):
                raise
            self.restore_status = False
            _, _, body = await self.request("LIST", "GET", bucket, params=params, what=what)
        s3xml.expect(body, "ListBucketResult", what)
        return body
        _, _, body = await self.request("LIST", "GET", bucket, params=params, what=what)
        s3xml.expect(body, "ListBucketResult", what)
        return body

    async def list_multipart_uploads(
        self, bucket: str, prefix: str = "", markers: tuple[str, str] | None = None
    ) -> s3xml.UploadsPage:
        params = {"uploads": "", "encoding-type": "url", "prefix": prefix}
        if markers:
            params["key-marker"], params["upload-id-marker"] = markers
        what = f"list multipart uploads in s3://{bucket}/{prefix}"
        _, _, body = await self.request("LIST", "GET", bucket, params=params, what=what)
        s3xml.expect(body, "ListMultipartUploadsResult", what)
        return s3xml.parse_multipart_uploads(body, what)

    async def list_object_versions(
        self, bucket: str, prefix: str = "", markers: tuple[str, str] | None = None
    ) -> s3xml.VersionsPage:
        params = {"versions": "", "encoding-type": "url", "prefix": prefix}
        if markers:
            params["key-marker"], params["version-id-marker"] = markers
        what = f"list the versions in s3://{bucket}/{prefix}"
        _, _, body = await self.request("LIST", "GET", bucket, params=params, what=what)
        s3xml.expect(body, "ListVersionsResult", what)
        return s3xml.parse_versions(body, what)

    async def list_buckets(self) -> list[s3xml.BucketInfo]:
        url = f"{self.endpoint}/"
        _, _, body = await self.send("LIST", "GET", url, what="list buckets")
        s3xml.expect(body, "ListAllMyBucketsResult", "list buckets")
        return s3xml.parse_buckets(body)

    async def create_bucket(self, bucket: str, region: str) -> None:
        body = s3xml.create_bucket_body(region)
        await self.request("PUT", "PUT", bucket, body=body, what=f"make bucket s3://{bucket}")

    async def put_bucket_versioning(self, bucket: str, status: str) -> None:
        """Versioning "Enabled" or "Suspended" (S3 asks for the body's Content-MD5)."""
        body = (
            '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Status>{status}</Status></VersioningConfiguration>"
        ).encode()
        headers = {"Content-Type": "application/xml", "Content-MD5": await content_md5(body)}
        what = f"set versioning of s3://{bucket}"
        await self.request(
            "PUT", "PUT", bucket, params={"versioning": ""}, headers=headers, body=body, what=what
        )

    async def get_bucket_versioning(self, bucket: str) -> str:
        """The bucket's versioning: "Enabled", "Suspended", or "" if it was never turned on."""
        what = f"get versioning of s3://{bucket}"
        _, _, reply = await self.request("GET", "GET", bucket, params={"versioning": ""}, what=what)
        s3xml.expect(reply, "VersioningConfiguration", what)
        return s3xml.find_text(reply, "Status")

    async def head_bucket(self, bucket: str) -> None:
        await self.request("HEAD", "HEAD", bucket, what=f"head bucket s3://{bucket}")

    async def delete_bucket(self, bucket: str) -> None:
        await self.request("DELETE", "DELETE", bucket, what=f"remove bucket s3://{bucket}")

    async def get_range(
        self, bucket: str, key: str, start: int, end: int, *, if_match: str = "", version_id: str = ""
    ) -> bytes:
        """Bytes [start, end) of the object (of that ETag, with `if_match`; that version)."""
        headers = {"Range": f"bytes={start}-{end - 1}", **if_match_header(if_match)}
        params = {"versionId": version_id} if version_id else None
        what = f"get s3://{bucket}/{key}"
        _, _, body = await self.request("GET", "GET", bucket, key, params=params, headers=headers, what=what)
        return body

    async def get_object(
        self, bucket: str, key: str, *, if_match: str = "", version_id: str = "", checksums: bool = False
    ) -> tuple[dict[str, str], bytes]:
        """The whole object's headers (names in lower case) and bytes; of that ETag, with
        `if_match`; that version; with `checksums`, asked for in checksum mode, so that the answer
        carries the full-object checksum the object keeps."""
        headers = if_match_header(if_match) | self._checksum_mode(checksums)
        params = {"versionId": version_id} if version_id else None
        what = f"get s3://{bucket}/{key}"
        _, answer, body = await self.request(
            "GET", "GET", bucket, key, params=params, headers=headers, what=what
        )
        return {name.lower(): value for name, value in answer.items()}, body

    def _checksum_mode(self, asked: bool) -> dict[str, str]:
        """The header that asks for the object's checksum with its answer, when `asked` and the
        settings want answers checked by it (`AwsSettings.asks_checksums`)."""
        return {"x-amz-checksum-mode": "ENABLED"} if asked and self.settings.asks_checksums else {}

    async def put_object(
        self, bucket: str, key: str, body: bytes, headers: dict[str, str] | None = None
    ) -> dict[str, str]:
        """A whole object from memory, checked by the service (`_body_checks`); with a write
        condition in `headers` (If-None-Match, If-Match), refused as `WrittenMeanwhile`. Returns
        the answer's headers (names in lower case: the new version's id, its ETag)."""
        checks, signed = await self._body_checks(self.url(bucket, key), body)
        async with _conditioned(headers):
            _, answer, _ = await self.request(
                "PUT",
                "PUT",
                bucket,
                key,
                body=body,
                headers={**(headers or {}), **checks},
                what=f"put s3://{bucket}/{key}",
                sign_payload=signed,
            )
        return {name.lower(): value for name, value in answer.items()}

    @property
    def checksum(self) -> str | None:
        """The algorithm an upload's bodies carry in x-amz-checksum-* (None: MD5 or none)."""
        algorithm = self.settings.upload_checksum
        return algorithm if algorithm in checksums.SENT else None

    def _payload_signed(self, url: str, checked: bool) -> bool:
        """Whether a body goes with its SHA-256 signed, which the service checks: always by the
        native part, but for a body that carries its checksum when unsigned payloads are chosen
        (by default over HTTPS, as the AWS SDKs do: the checksum catches a corrupted byte, TLS a
        changed one). Anonymous requests are not signed at all, and botocore's signer (a URL with
        a dot segment: `native_http.signs_as_sent`) decides by the scheme itself: False for those."""
        if self.settings.anonymous or not native_http.signs_as_sent(url):  # botocore's, then
            return False
        return not (checked and self.settings.payload_unsigned(url))

    async def _body_checks(
        self, url: str, body: bytes | bytearray | memoryview
    ) -> tuple[dict[str, str], bool]:
        """The headers that let the service check a body before it stores it (its checksum;
        Content-MD5 when chosen, or when nothing else would check it), and whether its payload
        is signed too (`_payload_signed`)."""
        algorithm = self.checksum
        checks = {checksums.header(algorithm): await checksums.of_body(algorithm, body)} if algorithm else {}
        signed = self._payload_signed(url, bool(checks))
        if self.settings.upload_checksum == "MD5" or not (checks or signed):
            checks["Content-MD5"] = await content_md5(body)
        return checks, signed

    async def delete_object(self, bucket: str, key: str, version_id: str = "", etag: str = "") -> None:
        """Delete the key (that version of it); with `etag`, only while it is that version, where
        the service takes the condition (412 otherwise; a server that ignores it deletes)."""
        params = {"versionId": version_id} if version_id else None
        what = f"delete s3://{bucket}/{key}"
        headers = if_match_header(etag)
        await self.request("DELETE", "DELETE", bucket, key, params=params, headers=headers, what=what)

    async def delete_objects(
        self, bucket: str, entries: list[tuple[str, str]], etags: dict[str, str] | None = None
    ) -> list[tuple[tuple[str, str], str, str]]:
        """Delete up to 1,000 (key, version id) in one request, a key named in `etags` only while
        it has that ETag (where the service takes the condition: PreconditionFailed otherwise);
        returns ((key, version id), code, message) of those that failed."""
        body = s3xml.delete_objects_body(entries, {key: quoted(etag) for key, etag in (etags or {}).items()})
        headers = {
            "Content-Type": "application/xml",
            "Content-MD5": await content_md5(body),
        }
        _, _, reply = await self.request(
            "DELETE",
            "POST",
            bucket,
            params={"delete": ""},
            headers=headers,
            body=body,
            what=f"delete {len(entries)} keys in s3://{bucket}",
        )
        s3xml.expect(reply, "DeleteResult", f"delete {len(entries)} keys in s3://{bucket}")
        return s3xml.parse_delete_errors(reply)

    async def copy_object(
        self,
        src_bucket: str,
        src_key: str,
        dst_bucket: str,
        dst_key: str,
        headers: dict[str, str] | None = None,
        *,
        if_match: str = "",
        source_version: str = "",
    ) -> None:
        """A server-side copy (of that version of the source, with `source_version`): with the
        source's checksum, unless one was chosen; with `if_match`, of that version of the source
        only (412 otherwise)."""
        what = f"copy s3://{src_bucket}/{src_key}"
        source = f"/{src_bucket}/{quote_key(src_key)}"
        if source_version:
            source += f"?versionId={quote(source_version, safe='')}"
        copy_source = {"x-amz-copy-source": source}
        headers = copy_source | if_match_header(if_match, COPY_SOURCE_IF_MATCH) | (headers or {})
        if self.settings.checksum_algorithm in checksums.SENT:
            headers["x-amz-checksum-algorithm"] = self.settings.checksum_algorithm
        _, _, body = await self.request("COPY", "PUT", dst_bucket, dst_key, headers=headers, what=what)
        s3xml.expect(body, "CopyObjectResult", what)  # CopyObject can fail with 200 OK and an <Error>

    async def head_object(
        self,
        bucket: str,
        key: str,
        *,
        part_number: int | None = None,
        of_source: bool = False,
        version_id: str = "",
        checksums: bool = False,
    ) -> dict[str, str]:
        """The object's headers (names in lower case): its attributes, or with `part_number`
        the size of that part of a multipart object (Content-Length)."""
        params = {"partNumber": str(part_number)} if part_number else {}
        if version_id:
            params["versionId"] = version_id
        what = f"head s3://{bucket}/{key}"
        asked = self._checksum_mode(checksums) or None
        _, headers, _ = await self.request(
            "HEAD", "HEAD", bucket, key, params=params, headers=asked, what=what, of_source=of_source
        )
        return {name.lower(): value for name, value in headers.items()}

    async def restore_object(self, bucket: str, key: str, days: int, tier: str) -> str:
        """RestoreObject: a copy of the archived object kept `days`, made at `tier`. What the
        service did: "requested" (202), "restored" (200: a copy is ready already; S3 sets its
        expiry to `days` from now) or "ongoing" (409 RestoreAlreadyInProgress)."""
        what = f"restore s3://{bucket}/{key}"
        body = archives.restore_body(days, tier)
        headers = {"Content-Type": "application/xml", "Content-MD5": await content_md5(body)}
        try:
            status, _, _ = await self.request(
                "RESTORE", "POST", bucket, key, params={"restore": ""}, headers=headers, body=body, what=what
            )
        except S3Error as error:
            if error.code == "RestoreAlreadyInProgress":
                return "ongoing"
            raise
        return "restored" if status == 200 else "requested"

    async def get_tagging(self, bucket: str, key: str) -> dict[str, str]:
        _, _, body = await self.request(
            "GET", "GET", bucket, key, params={"tagging": ""}, what=f"get tags of s3://{bucket}/{key}"
        )
        return s3xml.parse_tags(body)

    async def create_multipart_upload(
        self, bucket: str, key: str, headers: dict[str, str], checksum: str | None = None
    ) -> str:
        """A new upload's id; with `checksum`, its parts carry that algorithm's values, and a
        CRC's make one for the whole object (`checksums.multipart_type`)."""
        what = f"start multipart upload of s3://{bucket}/{key}"
        if checksum:
            headers = {
                **headers,
                "x-amz-checksum-algorithm": checksum,
                "x-amz-checksum-type": checksums.multipart_type(checksum),
            }
        _, _, body = await self.request(
            "PUT", "POST", bucket, key, params={"uploads": ""}, headers=headers, what=what
        )
        s3xml.expect(body, "InitiateMultipartUploadResult", what)
        upload_id = s3xml.find_text(body, "UploadId")
        if not upload_id:
            raise ItemError(f"{what}: the service gave no upload id", retryable=True)
        return upload_id

    async def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, body: bytes | FileRange
    ) -> tuple[str, str]:
        """Part `number`, from memory or read from a file as it is sent (`FileRange`, which the
        native part hashes as it reads it), checked by the service as `_body_checks` says;
        returns its ETag and its checksum ("" when none is sent)."""
        params = {"partNumber": str(number), "uploadId": upload_id}
        what = f"upload part {number} of s3://{bucket}/{key}"
        url, algorithm = self.url(bucket, key), self.checksum
        if isinstance(body, FileRange) and not native_http.signs_as_sent(url):  # signed in Python
            body = await asyncio.to_thread(body.read)
        if isinstance(body, FileRange):
            signed = self._payload_signed(url, algorithm is not None)
            md5 = self.settings.upload_checksum == "MD5"
            body = FileRange(body.path, body.offset, body.length, algorithm or ("MD5" if md5 else None))
            checked: dict[str, str] = {}
        else:
            checked, signed = await self._body_checks(url, body)
        _, headers, _ = await self.request(
            "PUT",
            "PUT",
            bucket,
            key,
            params=params,
            body=body,
            headers=checked,
            what=what,
            sign_payload=signed,
        )
        etag = _header(headers, "etag")
        if algorithm is None:
            return etag, ""
        name = checksums.header(algorithm)  # the value sent from memory, else as echoed (native_http)
        return etag, checked.get(name) or _header(headers, name)

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[tuple[int, str, int]]:
        """(number, ETag, size) of every part an upload holds."""
        parts: list[tuple[int, str, int]] = []
        marker = ""
        while True:
            params = {"uploadId": upload_id, **({"part-number-marker": marker} if marker else {})}
            what = f"list the parts of an upload of s3://{bucket}/{key}"
            _, _, body = await self.request("LIST", "GET", bucket, key, params=params, what=what)
            s3xml.expect(body, "ListPartsResult", what)
            page, following = s3xml.parse_parts(body)
            if following and following == marker:  # the same page again: no end to it
                raise ItemError(f"{what}: the service gave the same page marker twice", retryable=True)
            marker = following
            parts.extend(page)
            if not marker:
                return parts

    async def upload_part_copy(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        number: int,
        source: str,
        first: int,
        last: int,
        if_match: str = "",
    ) -> str:
        """Bytes first..last of `source` ("/bucket/key") as part `number`; with `if_match`, of
        that version of the source only (412 otherwise: a part of another version would tear
        the copy)."""
        headers = {"x-amz-copy-source": source, **if_match_header(if_match, COPY_SOURCE_IF_MATCH)}
        if last >= first:
            headers["x-amz-copy-source-range"] = f"bytes={first}-{last}"
        params = {"partNumber": str(number), "uploadId": upload_id}
        what = f"copy part {number} to s3://{bucket}/{key}"
        _, _, reply = await self.request(
            "COPY", "PUT", bucket, key, params=params, headers=headers, what=what
        )
        s3xml.expect(reply, "CopyPartResult", what)  # can fail with 200 OK and an <Error>
        etag = s3xml.find_text(reply, "ETag")
        if not etag:
            raise ItemError(f"{what}: the service answered with no ETag for the part", retryable=True)
        return etag

    async def complete_multipart_upload(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        etags: list[str],
        checksum: str | None = None,
        parts: list[tuple[str, int]] | None = None,
        condition: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """Complete the upload of the parts whose ETags are `etags`; an upload started with
        `checksum` lists each part's (`parts`: value, length), and for a CRC says the whole
        object's, which the service checks against what it stored; `condition`: If-None-Match
        or If-Match, what the new object may replace (412 otherwise). Returns the answer's
        headers (lower case)."""
        what = f"complete multipart upload of s3://{bucket}/{key}"
        headers: dict[str, str] = dict(condition or {})
        values = [value for value, _ in parts or []] if checksum else []
        whole = checksums.whole_object(checksum, parts or []) if checksum else None
        if checksum and whole:
            headers |= {checksums.header(checksum): whole, "x-amz-checksum-type": "FULL_OBJECT"}
        async with _conditioned(condition):
            _, answer, reply = await self.request(
                "PUT",
                "POST",
                bucket,
                key,
                params={"uploadId": upload_id},
                body=s3xml.complete_multipart_body(
                    etags, checksums.element(checksum) if checksum else "", values
                ),
                headers=headers,
                what=what,
            )
        s3xml.expect(reply, "CompleteMultipartUploadResult", what)  # can fail with 200 OK and an <Error>
        return {name.lower(): value for name, value in answer.items()}

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """Abort an upload; one that is already gone (completed, aborted) is not an error."""
        what = f"abort multipart upload of s3://{bucket}/{key}"
        try:
            await self.request("DELETE", "DELETE", bucket, key, params={"uploadId": upload_id}, what=what)
        except S3Error as error:
            if error.status != 404:
                raise


# Words of a refusal that is about the checks a request carried, not about the request itself
_CHECK_WORDS = ("checksum", "content-sha256", "contentsha256", "unsigned", "payload", "header")


def checks_sent(
    settings: AwsSettings, headers: dict[str, str], body: Body, sign_payload: bool
) -> tuple[str, str] | None:
    """(what was sent, the setting that stops it) of the integrity checks a request carried
    that a store may not take: an x-amz-checksum-* header (a file's part: the one the native
    part adds), UNSIGNED-PAYLOAD, or checksum mode on a read; None when it carried none."""
    names = [name.lower() for name in headers]
    sent = next(
        (name for name in names if name.startswith("x-amz-checksum-") and name != "x-amz-checksum-mode"), ""
    )
    if not sent and isinstance(body, FileRange) and body.checksum in checksums.SENT:
        sent = checksums.header(body.checksum)
    if sent:
        return f"the checksum header {sent}", "request_checksum_calculation"
    has_body = body.length > 0 if isinstance(body, FileRange) else len(body) > 0
    if not sign_payload and has_body and not settings.anonymous:
        return "an unsigned payload (x-amz-content-sha256: UNSIGNED-PAYLOAD)", "request_checksum_calculation"
    if "x-amz-checksum-mode" in names:
        return "checksum mode (x-amz-checksum-mode)", "response_checksum_validation"
    return None


def refused_checks(
    error: S3Error, settings: AwsSettings, headers: dict[str, str], body: Body, sign_payload: bool, what: str
) -> ItemError | None:
    """One line that says what to set, where a store refused (400, 501) a request for the
    integrity checks it carried (`checks_sent`): since AWS's change of December 2024 clients send
    them by default, and B2, OVH, Hetzner and the like answer "Unsupported header". botocore's
    settings stop them; a retry would fail alike, and so would every item: job-wide. None for
    any other error (a body that did not match its checksum is a retry, `BadDigest`)."""
    if error.status not in (400, 501) or error.retryable:
        return None
    sent = checks_sent(settings, headers, body, sign_payload)
    if sent is None:
        return None
    words = f"{error.code} {error.message}".lower()
    if not any(word in words for word in _CHECK_WORDS):
        # refused for something else, or for nothing it says (a HEAD's 400 has no body: a key the
        # store refuses, an SSE-C object read without its key, a version that is not there): its
        # own line, never advice to turn a check off
        return None
    thing, setting = sent
    variable = f"AWS_{setting.upper()}"
    said = f"{error.code or 'HTTP ' + str(error.status)} ({error.status})" + (
        f": {error.message}" if error.message else ""
    )
    fix = f"set {setting} = when_required in the profile (or {variable}=when_required)"
    if setting == "request_checksum_calculation" and settings.checksum_algorithm not in (None, "none", "MD5"):
        fix += " and drop --checksum-algorithm"
    if "unsigned" in thing and settings.unsigned_payload:
        fix = "drop --unsigned-payload"
    refused = ItemError(
        f"{what}: the store refused {thing}: {said.rstrip('.')}; it takes no such checks: {fix}",
        retryable=False,
    )
    refused.job_wide = True
    return refused


def _refused_attributes(error: S3Error) -> bool:
    """Whether a listing asked for optional attributes may have been refused for them: any 400 or
    501 that no retry changes (what a service says of a header it does not take is its own;
    asked again without it, an error that was about something else comes back as it was)."""
    return error.status in (400, 501) and not error.retryable


WRITE_CONDITIONS = ("if-none-match", "if-match")


@contextlib.asynccontextmanager
async def _conditioned(headers: dict[str, str] | None) -> AsyncIterator[None]:
    """A write under a condition (If-None-Match, If-Match) that the service refused (412): the
    destination is not what the write may replace, `WrittenMeanwhile`, told apart from a read's
    condition (a copy's source, `conditional.of_one_version`)."""
    try:
        yield
    except S3Error as error:
        if changed_meanwhile(error) and any(name.lower() in WRITE_CONDITIONS for name in headers or {}):
            raise WrittenMeanwhile(str(error)) from None
        raise


def _head_error(status: int, key: str, what: str, sent_key: bool) -> S3Error:
    """A HEAD's answer has no body to name its error: name the likely one from the status."""
    if status == 404:
        return S3Error(404, "NoSuchKey" if key else "NoSuchBucket", "", what)
    if status == 400 and key:
        message = (
            "an SSE-C key was sent, and the object may not be encrypted with one (drop --sse-c-key)"
            if sent_key
            else "the object may be encrypted with SSE-C: read it with its key (--sse-c-key)"
        )
        return S3Error(400, "", message, what)
    if status == 403:
        message = "or, for an SSE-C object, not the key it was written with" if sent_key else ""
        return S3Error(403, "AccessDenied", message, what)
    return S3Error(status, "", "", what)


WRONG_REGION = frozenset(
    {
        "AuthorizationHeaderMalformed",
        "PermanentRedirect",
        "TemporaryRedirect",
        "IllegalLocationConstraintException",
    }
)


def _site(url: str) -> str:
    """Where a URL points, without its path or query (which may name keys or carry a token)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0].rpartition('@')[2]}" if rest else "elsewhere"


def _header(headers: dict[str, str], name: str) -> str:
    return next((value for key, value in headers.items() if key.lower() == name), "")
