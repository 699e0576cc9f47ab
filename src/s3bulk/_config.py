"""AWS settings from the standard environment and profiles, through botocore's credential chain.

Settings travel to worker processes; credentials never do: each process resolves them itself from
the same environment (env vars, profiles, SSO, IMDS), so no credential crosses a pipe or a journal.
An SSE-C key is the one secret settings carry (to the job's own workers, in memory): it is not in
the environment to be found again, and the journal keeps only its MD5, so a resume must be given it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from s3bulk._errors import UsageError, register_secret

if TYPE_CHECKING:
    from botocore.credentials import ReadOnlyCredentials


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str, option: str) -> int:
    """A size as people write it: 8MiB, 64MB, 1.5G, 1048576 (no unit: bytes; k/M/G/T: powers
    of 1000, Ki/Mi/Gi/Ti: of 1024), for the CLI and the API alike."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"{option}: cannot read size {text!r}: use e.g. 8MiB, 64MB or 1048576")
    number, unit, binary = match.groups()
    base = 1024 if binary or unit == "" else 1000
    return int(float(number) * base ** _POWERS[unit.lower()])


def size_text(size: int) -> str:
    """A size as `parse_size` reads it back, in the largest binary unit that divides it: 8MiB."""
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if size and size % 1024**power == 0:
            return f"{size // 1024**power}{unit}"
    return str(size)


def parse_switch(text: str, option: str) -> bool | None:
    """auto -> None (decide from the situation), on -> True, off -> False."""
    value = text.strip().lower()
    if value in ("auto", "on", "off"):
        return {"auto": None, "on": True, "off": False}[value]
    raise UsageError(f"{option}: expected auto, on or off, not {text!r}")


def version_line() -> str:
    """The package's version and its native part's (native/Cargo.toml is where both are written;
    two that differ are a broken install)."""
    import s3bulk_native

    __version__ = importlib.metadata.version("s3bulk")
    native = s3bulk_native.__version__
    mismatch = "" if native == __version__ else " (they differ: reinstall s3bulk)"
    return f"s3bulk {__version__} (native part {native}){mismatch}"


class _Frozen(NamedTuple):
    """botocore's ReadOnlyCredentials, field for field (its signers read just these)."""

    access_key: str
    secret_key: str
    token: str | None


def _env_endpoint(env: Any, service: str) -> str | None:
    return env.get(f"AWS_ENDPOINT_URL_{service}") or env.get("AWS_ENDPOINT_URL") or None


def _ignore_configured(value: Any) -> bool:
    return str(value or "").strip().lower() == "true"


def _check_endpoint(url: str | None) -> str | None:
    if url and not url.startswith(("http://", "https://")):
        raise UsageError(f"endpoint URL {url!r} must start with http:// or https://")
    if url and "@" in url.partition("://")[2].split("/", 1)[0]:  # never echoed: it holds a secret
        raise UsageError(
            "the endpoint URL holds a user and password (user:pass@host): S3 takes no such thing, and "
            "s3bulk would keep it in its journal; give the host alone, and credentials as AWS_* or a profile"
        )
    return url


def _profile_error(profile: str | None, exc: Exception) -> UsageError:
    """One line for a profile that cannot be used: the usual cause is a name that is not there."""
    name = profile if profile is not None else os.environ.get("AWS_PROFILE")
    if type(exc).__name__ == "ProfileNotFound":
        return UsageError(
            f"AWS profile {name!r} not found in the AWS config or credentials file: "
            "check the name (aws configure list-profiles) or drop --profile / AWS_PROFILE"
        )
    return UsageError(f"cannot load AWS profile {name!r}: {exc}")


@dataclass(frozen=True)
class CustomerKey:
    """An SSE-C key: 256 bits the service encrypts an object with and does not keep, so every
    read of that object must send it again. Never printed: repr and errors show its MD5 only."""

    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        register_secret(self.base64)

    @classmethod
    def parse(cls, text: str, flag: str = "--sse-c-key") -> CustomerKey:
        """The key as aws-cli takes it: 32 characters, `fileb://PATH` (32 bytes), or
        `base64:…` (s3bulk's own form, for keys that are not text)."""
        if text.startswith("fileb://"):
            path = os.path.expanduser(text[len("fileb://") :])
            try:
                with open(path, "rb") as handle:
                    key = handle.read(33)
            except OSError as exc:
                raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from None
        elif text.startswith("base64:"):
            try:
                key = base64.b64decode(text[len("base64:") :], validate=True)
            except ValueError:
                raise UsageError(f"{flag}: base64:… is not valid base64") from None
        else:
            key = text.encode()
        if len(key) != 32:
            raise UsageError(
                f"{flag}: an SSE-C key is 32 bytes, this is {len(key)}{'+' if len(key) > 32 else ''}: "
                "give 32 characters, fileb://FILE or base64:KEY"
            )
        return cls(key)

    @property
    def base64(self) -> str:
        return base64.b64encode(self.key).decode()

    @property
    def md5(self) -> str:
        """What S3 checks the key against, and all a journal keeps of it."""
        return base64.b64encode(hashlib.md5(self.key, usedforsecurity=False).digest()).decode()

    def headers(self, prefix: str = "x-amz-server-side-encryption-customer-") -> dict[str, str]:
        """The request headers that carry it (a copy's source: the x-amz-copy-source- prefix)."""
        return {f"{prefix}algorithm": "AES256", f"{prefix}key": self.base64, f"{prefix}key-md5": self.md5}

    def __repr__(self) -> str:
        return f"CustomerKey(md5={self.md5!r})"


class CustomerKeys(NamedTuple):
    """A job's SSE-C keys: what it writes and reads with, and (copies) what its source needs."""

    key: CustomerKey | None = None
    source: CustomerKey | None = None

    @classmethod
    def parse(cls, key: str | bytes | None, source: str | bytes | None = None) -> CustomerKeys:
        return cls(customer_key(key, "--sse-c-key"), customer_key(source, "--sse-c-copy-source-key"))


NO_KEYS = CustomerKeys()


def customer_key(value: CustomerKey | str | bytes | None, flag: str = "--sse-c-key") -> CustomerKey | None:
    """A key as the API and the CLI take it: 32 raw bytes, or text as `CustomerKey.parse` reads it."""
    if value is None or isinstance(value, CustomerKey):
        return value
    if isinstance(value, bytes):
        if len(value) != 32:
            raise UsageError(f"{flag}: an SSE-C key is 32 bytes, this is {len(value)}")
        return CustomerKey(value)
    return CustomerKey.parse(value, flag)


class _EnvCredentials:
    """Keys from the environment, which never refresh. botocore's own Credentials class would
    do the same, but importing botocore.credentials costs ~0.2 s of every command's start-up."""

    def __init__(self, frozen: _Frozen) -> None:
        self._frozen = frozen

    def get_frozen_credentials(self) -> _Frozen:
        return self._frozen


def cores() -> int:
    """The cores this process may run on (its affinity, which containers and taskset narrow)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


DEFAULT_READ_TIMEOUT = 60.0


def read_timeout_seconds() -> float:
    """How long a connection may deliver nothing before the request counts as stalled and is
    retried: without it, a connection silently dropped by a middlebox holds its item until the
    600 s request timeout. S3BULK_READ_TIMEOUT (seconds) overrides the 60 s default, as the AWS
    CLI's --cli-read-timeout does; every process reads it from the environment it inherits."""
    text = os.environ.get("S3BULK_READ_TIMEOUT", "")
    if not text:
        return DEFAULT_READ_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise UsageError(f"S3BULK_READ_TIMEOUT={text!r} is not a positive number of seconds: e.g. 60")
    return seconds


DEFAULT_MAX_ATTEMPTS = 6

# What an upload sends to have its bytes checked by the service (`_stores/checksums.py`)
CHECKSUM_ALGORITHMS = ("CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1", "MD5", "none")
DEFAULT_CHECKSUM_ALGORITHM = "CRC64NVME"  # what S3 and the AWS SDKs use since December 2024
# botocore's two checksum settings (request_checksum_calculation, response_checksum_validation):
# when_supported, the default, checks every body it can; when_required only where the operation
# demands it, for stores that refuse x-amz-checksum-* or UNSIGNED-PAYLOAD (B2, OVH, Hetzner ...)
CHECKSUM_WHEN = ("when_supported", "when_required")


class UploadChecks(NamedTuple):
    """What uploads send for the service to check (`AwsSettings.checksum_algorithm` and
    `unsigned_payload`), as a command's options give it."""

    algorithm: str | None = None
    unsigned_payload: bool | None = None


DEFAULT_CHECKS = UploadChecks()


def parse_checksum_algorithm(value: str | None, option: str = "--checksum-algorithm") -> str | None:
    """One of CHECKSUM_ALGORITHMS as written there, whatever its case (None: the default)."""
    if value is None:
        return None
    found = next((name for name in CHECKSUM_ALGORITHMS if name.lower() == value.strip().lower()), None)
    if found is None:
        raise UsageError(f"{option} {value!r}: one of {', '.join(CHECKSUM_ALGORITHMS[:-1])} or none")
    return found


@dataclass(frozen=True)
class AwsSettings:
    profile: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    verify_ssl: bool = True
    anonymous: bool = False
    vectors_endpoint_url: str | None = None  # S3 Vectors (the S3 endpoint serves s3:// sources)
    sse_c: CustomerKey | None = None  # objects written and read with this SSE-C key
    sse_c_source: CustomerKey | None = None  # a server-side copy's source, read with this one
    # where a copy's source is, when it is not where the destination is (another endpoint,
    # account or region): cp, mv and sync read with these and write with the rest
    source: AwsSettings | None = field(default=None, compare=False)
    request_payer: bool = False  # requester-pays buckets: this account pays for what it asks
    # what uploads send for the service to check (CHECKSUM_ALGORITHMS); None: CRC64NVME, and a
    # server-side copy keeps its source's
    checksum_algorithm: str | None = None
    # an upload's body unsigned (UNSIGNED-PAYLOAD), checked by its checksum: None decides by
    # the endpoint, unsigned over HTTPS, signed over HTTP, where TLS does not stop tampering
    unsigned_payload: bool | None = None
    # S3 Express session authentication (CreateSession): None for the buckets named as directory
    # buckets are (NAME--AZID--x-s3), True for every bucket, False for none (a server that holds
    # such a name as a general purpose bucket)
    express_sessions: bool | None = None
    # bucket -> the region the service said it is in (a job's workers inherit what was learned)
    bucket_regions: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # keys given in code (fsspec's key=, secret=, token=, as s3fs takes them): used in this
    # process only, never pickled (`__getstate__`: () there, "withheld", so that a process that
    # gets these settings fails rather than signs with whatever its environment holds)
    given_keys: tuple[str, str, str | None] | tuple[()] | None = field(
        default=None, compare=False, repr=False
    )

    @classmethod
    def from_env(
        cls,
        *,
        profile: str | None = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        verify_ssl: bool = True,
        anonymous: bool = False,
        vectors_endpoint_url: str | None = None,
        sse_c: CustomerKey | str | bytes | None = None,
        sse_c_source: CustomerKey | str | bytes | None = None,
        source: AwsSettings | None = None,
        request_payer: bool = False,
        checksum_algorithm: str | None = None,
        unsigned_payload: bool | None = None,
    ) -> AwsSettings:
        """Settings as the AWS SDKs resolve them (and the SSE-C keys a job uses: 32 bytes, or
        32 characters, "fileb://PATH", "base64:…"), and what uploads send for the service to
        check their bytes by (`checksum_algorithm`, CRC64NVME by default; `unsigned_payload`).
        Endpoints: the explicit one, then the service's
        own variable (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_S3VECTORS), then AWS_ENDPOINT_URL;
        without any, the profile's `services` section and its `endpoint_url` (`resolved_endpoint`)."""
        env = os.environ
        ignore = _ignore_configured(env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"))
        endpoint = endpoint_url or (None if ignore else _env_endpoint(env, "S3"))
        vectors = vectors_endpoint_url or (None if ignore else _env_endpoint(env, "S3VECTORS"))
        read_timeout_seconds()  # a bad value is a usage error now, not in a worker later
        for url in (endpoint, vectors):
            _check_endpoint(url)
        return cls(
            vectors_endpoint_url=vectors.rstrip("/") if vectors else None,
            profile=profile or os.environ.get("AWS_PROFILE") or None,
            region=region,
            endpoint_url=endpoint.rstrip("/") if endpoint else None,
            verify_ssl=verify_ssl,
            anonymous=anonymous,
            sse_c=customer_key(sse_c, "sse_c"),
            sse_c_source=customer_key(sse_c_source, "sse_c_source"),
            source=source,
            request_payer=request_payer,
            checksum_algorithm=parse_checksum_algorithm(checksum_algorithm, "checksum_algorithm"),
            unsigned_payload=unsigned_payload,
        )

    @property
    def upload_checksum(self) -> str:
        """What an upload sends: CHECKSUM_ALGORITHMS' name; when none was chosen, the default's,
        or "none" where `request_checksum_calculation` is when_required (the payload is then
        signed: its SHA-256 is what the service checks)."""
        if self.checksum_algorithm:
            return self.checksum_algorithm
        return "none" if self.checksums_when_required else DEFAULT_CHECKSUM_ALGORITHM

    def payload_unsigned(self, url: str) -> bool:
        """Whether a body sent to `url` with its checksum goes unsigned: chosen, or over HTTPS
        (never by default where checksums are sent only when required, as botocore does)."""
        chosen = self.unsigned_payload
        if chosen is not None:
            return chosen
        return url.startswith("https://") and not self.checksums_when_required

    @cached_property
    def checksums_when_required(self) -> bool:
        """Whether uploads send checksums only when asked (`request_checksum_calculation =
        when_required` in the profile, or AWS_REQUEST_CHECKSUM_CALCULATION), as botocore reads it."""
        return self._checksum_setting("request_checksum_calculation") == "when_required"

    @cached_property
    def asks_checksums(self) -> bool:
        """Whether downloads ask for the object's checksum (`x-amz-checksum-mode: ENABLED`), to check
        their bytes by it: not where `response_checksum_validation = when_required` (profile, or
        AWS_RESPONSE_CHECKSUM_VALIDATION); they are checked by the ETag's MD5 then."""
        return self._checksum_setting("response_checksum_validation") != "when_required"

    def _checksum_setting(self, name: str) -> str:
        """One of CHECKSUM_WHEN, from the environment (AWS_<NAME>), then the profile, as botocore
        reads it; a value it is not is one line now, naming where it came from."""
        variable = f"AWS_{name.upper()}"
        text = os.environ.get(variable)
        where = variable
        if not text:
            text, where = str(self._scoped_config.get(name) or ""), f"{name} in the AWS config file"
        value = text.strip().lower() or CHECKSUM_WHEN[0]
        if value not in CHECKSUM_WHEN:
            raise UsageError(f"{where} = {text!r}: use when_supported or when_required")
        return value

    def region_of(self, bucket: str) -> str:
        return self.bucket_regions.get(bucket) or self.resolved_region

    def endpoint_of(self, bucket: str) -> str:
        """The endpoint for `bucket`: AWS's own for the region it is in, when no endpoint was set."""
        endpoint = self.resolved_endpoint
        region = self.bucket_regions.get(bucket)
        if region and endpoint == f"https://s3.{self.resolved_region}.amazonaws.com":
            return f"https://s3.{region}.amazonaws.com"
        return endpoint

    @property
    def reading(self) -> AwsSettings:
        """The settings a copy's source is read with."""
        return self.source or self

    @property
    def relays(self) -> bool:
        """Whether a copy's source is somewhere a server-side copy cannot read from (another
        endpoint, or other credentials): its bytes must pass through us."""
        source = self.source
        if source is None:
            return False
        if (source.profile, source.anonymous) != (self.profile, self.anonymous):
            return True
        endpoints = (source.resolved_endpoint, self.resolved_endpoint)
        aws = all(endpoint.endswith(".amazonaws.com") for endpoint in endpoints)
        return not aws and endpoints[0] != endpoints[1]  # AWS copies across regions itself

    def check_profile(self) -> None:
        """Fail now, with one line, if the named profile does not exist (or its files cannot be
        read), or the CA bundle is no file: not later, in a worker, as a traceback."""
        if self.profile:
            self._scoped_config  # noqa: B018 -- reading it is the check
        self.tls_bundle(self.resolved_endpoint)
        self.checksums_when_required, self.asks_checksums  # noqa: B018 -- a bad value is one line now
        if self.source is not None:
            self.source.check_profile()

    @cached_property
    def _session(self) -> Any:
        import botocore.session  # ~0.3 s of imports: only paid when profiles or config files matter

        try:
            session = botocore.session.Session(profile=self.profile)
            session.get_scoped_config()  # an unknown profile raises here, not deep in a request
        except Exception as exc:  # botocore raises ProfileNotFound and friends
            raise _profile_error(self.profile, exc) from None
        return session

    @cached_property
    def _env_only(self) -> bool:
        """True when the environment alone settles credentials and region. botocore's chain
        would pick the same values (environment variables come first in it), so the session,
        and its import time, can be skipped."""
        env = os.environ
        has_keys = bool(env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
        has_region = bool(self.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"))
        return has_keys and has_region and not self.profile

    @cached_property
    def _full_config(self) -> dict[str, Any]:
        """The shared config file as botocore reads it (profiles, `services` sections). Read with
        botocore's own loader, which costs ~20 ms where a session costs ~300 ms."""
        if not self._env_only:
            return dict(self._session.full_config)
        from botocore.configloader import load_config

        path = os.path.expanduser(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")
        if not os.path.isfile(path):
            return {}
        try:
            return dict(load_config(path))
        except Exception as exc:
            raise UsageError(f"cannot read the AWS config file {path}: {exc}") from None

    @cached_property
    def _scoped_config(self) -> dict[str, Any]:
        """The profile's own section of the config file."""
        if not self._env_only:
            return dict(self._session.get_scoped_config())
        profiles = self._full_config.get("profiles", {})
        return dict(profiles.get("default", {}))

    def _configured_endpoint(self, service: str) -> str | None:
        """The endpoint the config file gives `service` ("s3", "s3vectors"), in botocore's order
        (botocore.configprovider.ConfiguredEndpointProvider): the profile's `services` section
        first, then the profile's own `endpoint_url`; none if endpoints from files are ignored."""
        scoped = self._scoped_config
        if _ignore_configured(scoped.get("ignore_configured_endpoint_urls")):
            return None
        section_name = scoped.get("services")
        if section_name:
            section = self._full_config.get("services", {}).get(section_name)
            if not section:
                raise UsageError(
                    f"profile {self.profile or 'default'!r} names services section {section_name!r}, "
                    "which the AWS config file does not have: add [services "
                    f"{section_name}] or remove the profile's 'services' line"
                )
            url = (section.get(service) or {}).get("endpoint_url")
            if url:
                return _check_endpoint(str(url))
        url = scoped.get("endpoint_url")
        return _check_endpoint(str(url)) if url else None

    @cached_property
    def ca_bundle(self) -> str | None:
        """The certificates TLS trusts in place of the platform's, as botocore resolves them:
        AWS_CA_BUNDLE, then the profile's `ca_bundle` (None: the platform's, and SSL_CERT_FILE).
        Every client takes it (`_stores/objects.client_options`, `_stores/http`); a path that
        is no file is one line now, not a TLS failure per request later."""
        path = os.environ.get("AWS_CA_BUNDLE") or str(self._scoped_config.get("ca_bundle") or "")
        if not path:
            return None
        path = os.path.expanduser(path)
        if not os.path.isfile(path):
            raise UsageError(
                f"CA bundle {path!r} (AWS_CA_BUNDLE, or the profile's ca_bundle) is not a file: "
                "give a PEM file of the certificates to trust"
            )
        return path

    def tls_bundle(self, url: str) -> str | None:
        """The CA bundle a client of `url` verifies with: `ca_bundle` over HTTPS; none with
        --no-verify-ssl, nor over plain HTTP, where the config file is not read for it (~20 ms
        of every command that the environment settles, on MinIO and the like)."""
        return self.ca_bundle if self.verify_ssl and url.startswith("https://") else None

    @cached_property
    def max_attempts(self) -> int:
        """Attempts per request, as the AWS CLI and SDKs read them: AWS_MAX_ATTEMPTS, then the
        profile's `max_attempts`, else 6 (a job's own `max_attempts` comes before these)."""
        text = os.environ.get("AWS_MAX_ATTEMPTS") or str(self._scoped_config.get("max_attempts") or "")
        if not text:
            return DEFAULT_MAX_ATTEMPTS
        try:
            attempts = int(text)
        except ValueError:
            attempts = 0
        if attempts < 1:
            raise UsageError(
                f"max_attempts {text!r} (AWS_MAX_ATTEMPTS or the profile): give a whole number, 1 or more"
            )
        return attempts

    @cached_property
    def resolved_region(self) -> str:
        env_region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if self.region or self._env_only:
            return self.region or env_region or "us-east-1"
        region = self._session.get_config_variable("region")
        return region or "us-east-1"

    @cached_property
    def resolved_endpoint(self) -> str:
        if self.endpoint_url:
            return self.endpoint_url
        configured = self._configured_endpoint("s3")
        if configured:
            return configured.rstrip("/")
        return f"https://s3.{self.resolved_region}.amazonaws.com"

    @cached_property
    def resolved_vectors_endpoint(self) -> str:
        if self.vectors_endpoint_url:
            return self.vectors_endpoint_url
        configured = self._configured_endpoint("s3vectors")
        if configured:
            return configured.rstrip("/")
        return f"https://s3vectors.{self.resolved_region}.api.aws"

    @cached_property
    def path_style(self) -> bool:
        """The profile's `s3 = addressing_style` (path, virtual) decides; by default (auto) custom
        endpoints (MinIO, on-premise) get path-style URLs and AWS gets virtual hosts."""
        style = (self._scoped_config.get("s3") or {}).get("addressing_style")
        if style in ("path", "virtual"):
            return bool(style == "path")
        if style not in (None, "auto"):
            raise UsageError(
                f"addressing_style = {style!r} in the AWS config file: use path, virtual or auto"
            )
        return not self.resolved_endpoint.endswith(".amazonaws.com")

    @cached_property
    def _credentials(self) -> Any:
        if self.given_keys == ():
            raise UsageError(
                "credentials given in code (key=, secret=) stay in the process they were given to: "
                "run this in that process, or give them as AWS_* variables or a profile"
            )
        if self.given_keys is not None:
            return _EnvCredentials(_Frozen(*self.given_keys))
        if self._env_only:
            env = os.environ
            return _EnvCredentials(
                _Frozen(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env.get("AWS_SESSION_TOKEN"))
            )
        try:
            credentials = self._session.get_credentials()
        except Exception as exc:
            raise UsageError(f"cannot load AWS credentials: {exc}") from None
        if credentials is None:
            raise UsageError(
                "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or AWS_PROFILE, or pass --no-sign-request for public buckets"
            )
        return credentials

    def credentials(self) -> ReadOnlyCredentials | None:
        """Current credentials (refreshed by botocore when they expire); None when anonymous."""
        if self.anonymous:
            return None
        frozen = self._credentials.get_frozen_credentials()
        register_secret(frozen.secret_key)
        register_secret(frozen.token)
        return frozen

    def credential_expiry(self) -> datetime | None:
        expiry = getattr(self._credentials, "_expiry_time", None)
        if isinstance(expiry, datetime):
            return expiry.astimezone(UTC)
        return None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle only the plain settings: sessions and credentials are rebuilt per process."""
        state = {name: getattr(self, name) for name in self.__dataclass_fields__}
        state["given_keys"] = None if self.given_keys is None else ()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("given_keys", None)
        for name, value in state.items():
            object.__setattr__(self, name, value)
