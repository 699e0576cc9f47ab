"""obstore stores configured from AWS settings, plus the checks that decide which keys it can carry.

obstore (Rust, async, releases the GIL) moves object bytes. Credentials come from botocore's
chain through a provider callback, so profiles, SSO and instance roles work and refresh. obstore's
own retries are off: the engine retries whole items with jitter and counts every retry.
"""

from __future__ import annotations

import io
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from s3bulk._config import AwsSettings, read_timeout_seconds
from s3bulk._lazy import lazy_module

if TYPE_CHECKING:
    import obstore
    from obstore.store import S3Store
else:
    obstore = lazy_module("obstore")


class BotocoreCredentials:
    """obstore credential provider backed by botocore (refreshable credentials included)."""

    def __init__(self, settings: AwsSettings) -> None:
        self.settings = settings

    def __call__(self) -> dict[str, Any]:
        credentials = self.settings.credentials()
        assert credentials is not None
        expiry: datetime | None = self.settings.credential_expiry()
        return {
            "access_key_id": credentials.access_key,
            "secret_access_key": credentials.secret_key,
            "token": credentials.token,
            "expires_at": expiry,
        }


# The checksums obstore's store sends with what it writes: object_store knows these two.
# CRC64NVME goes full-object, parts included; SHA-256 per part (composite). With another
# algorithm chosen, its writes carry none; nor with SSE-C: its CompleteMultipartUpload goes
# without the key, which MinIO then refuses ("must provide an appropriate secret key") where the
# parts carried checksums.
STORE_CHECKSUMS = {"CRC64NVME": "crc64nvme", "SHA256": "sha256"}


def s3_store(settings: AwsSettings, bucket: str, *, max_connections: int = 64) -> S3Store:
    """An obstore S3Store. Retries are the engine's (counted, and throttling slows the job), so
    the store makes none. Multipart uploads do not go through it (stores/multipart.py: their
    upload ids must be known, and each part is retried alone by the engine's policy)."""
    from obstore.store import S3Store

    config, client_options = store_options(settings, bucket, max_connections=max_connections)
    return S3Store(
        bucket,
        config=config,  # type: ignore[arg-type]
        client_options=client_options,  # type: ignore[arg-type]
        retry_config={"max_retries": 0, "retry_timeout": timedelta(minutes=2)},
        credential_provider=None if settings.anonymous else BotocoreCredentials(settings),  # type: ignore[arg-type]
    )


def store_options(
    settings: AwsSettings, bucket: str, *, max_connections: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, client options) of obstore's S3Store for `bucket`."""
    endpoint = settings.endpoint_of(bucket)
    config: dict[str, Any] = {
        "region": settings.region_of(bucket),
        "endpoint": endpoint,
        "virtual_hosted_style_request": not settings.path_style and "." not in bucket,
    }
    if settings.anonymous:
        config["skip_signature"] = True
    if settings.request_payer:
        config["request_payer"] = True
    if settings.sse_c:  # obstore sends it on every GET, HEAD and PUT of this store
        config["server_side_encryption"] = "sse-c"
        config["sse_customer_key_base64"] = settings.sse_c.base64
    if settings.upload_checksum in STORE_CHECKSUMS and not settings.sse_c:  # its writes carry it
        config["checksum_algorithm"] = STORE_CHECKSUMS[settings.upload_checksum]
    options = client_options(
        settings, max_connections, allow_http=endpoint.startswith("http://"), endpoint=endpoint
    )
    bundle = options.pop("ca_bundle", None)
    if bundle:  # obstore takes the certificates themselves, trusted beside the platform's
        options["root_certificate"] = Path(bundle).read_bytes()
    return config, options


def client_options(
    settings: AwsSettings, max_connections: int, *, allow_http: bool, endpoint: str | None = None
) -> dict[str, Any]:
    """object_store's HTTP client options: obstore's stores, the batch GETs and the signed
    client's native requests (`stores.native_http`) are configured by this one function. With a
    CA bundle for `endpoint` (the settings' own by default; `AwsSettings.tls_bundle`),
    `ca_bundle` names it: the native part trusts its certificates in the platform's place, as
    botocore does (`store_options` hands them to obstore, which trusts them beside the
    platform's)."""
    options = {
        "allow_http": allow_http,
        "allow_invalid_certificates": not settings.verify_ssl,
        "pool_max_idle_per_host": str(max_connections),
        "connect_timeout": "15s",
        "timeout": "600s",
        "read_timeout": f"{max(1, round(read_timeout_seconds() * 1000))}ms",
    }
    bundle = settings.tls_bundle(endpoint or settings.resolved_endpoint)
    if bundle:
        options["ca_bundle"] = bundle
    return options


def as_text(options: dict[str, Any]) -> dict[str, str]:
    """obstore's options as object_store reads them: text, booleans as "true"/"false"."""
    return {
        name: str(value).lower() if isinstance(value, bool) else str(value) for name, value in options.items()
    }


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def obstore_can_address(key: str) -> bool:
    """obstore's path model refuses empty and '.'/'..' segments and control characters, and drops
    a trailing '/'; such keys (legal in S3) go through the signed client instead of being refused
    or silently changed."""
    if not key or key.startswith("/") or key.endswith("/") or _CONTROL.search(key):
        return False
    return all(part not in ("", ".", "..") for part in key.split("/"))


def store_for(root: str, settings: AwsSettings, *, max_connections: int = 64) -> Any:
    """obstore's store for a root: "s3://bucket", or a local directory (LocalStore)."""
    if root.startswith("s3://"):
        return s3_store(settings, root[len("s3://") :], max_connections=max_connections)
    from obstore.store import LocalStore

    return LocalStore(root)


class ObjectFile(io.RawIOBase):
    """obstore's buffered reader (ranged GETs) as a standard raw file: `with`, `readinto`, and so
    usable by io.BufferedReader, io.TextIOWrapper, pyarrow, numpy, h5py and line iteration."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self.size: int = reader.size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = memoryview(self._reader.read(len(view)))
        view[: len(data)] = data
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        """Straight from obstore's buffer: RawIOBase's own read would copy through readinto."""
        return bytes(self._reader.read() if size is None or size < 0 else self._reader.read(size))

    def readall(self) -> bytes:
        return self.read()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
        super().close()
