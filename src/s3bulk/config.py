"""AWS settings from the standard environment and profiles, through botocore's credential chain.

Settings travel to worker processes; credentials never do: each process resolves them itself from
the same environment (env vars, profiles, SSO, IMDS), so no secret crosses a pipe or a journal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from s3bulk.errors import UsageError, register_secret

if TYPE_CHECKING:
    from botocore.credentials import ReadOnlyCredentials


class _Frozen(NamedTuple):
    """botocore's ReadOnlyCredentials, field for field (its signers read just these)."""

    access_key: str
    secret_key: str
    token: str | None


class _EnvCredentials:
    """Keys from the environment, which never refresh. botocore's own Credentials class would
    do the same, but importing botocore.credentials costs ~0.2 s of every command's start-up."""

    def __init__(self, frozen: _Frozen) -> None:
        self._frozen = frozen

    def get_frozen_credentials(self) -> _Frozen:
        return self._frozen


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


@dataclass(frozen=True)
class AwsSettings:
    profile: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    verify_ssl: bool = True
    anonymous: bool = False
    vectors_endpoint_url: str | None = None  # S3 Vectors (the S3 endpoint serves s3:// sources)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

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
    ) -> AwsSettings:
        """Endpoints as the AWS SDKs resolve them: the explicit one, then the service's own
        variable (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_S3VECTORS), then AWS_ENDPOINT_URL."""
        env = os.environ
        endpoint = endpoint_url or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
        vectors = (
            vectors_endpoint_url
            or env.get("AWS_ENDPOINT_URL_S3VECTORS")
            or env.get("AWS_ENDPOINT_URL")
            or None
        )
        read_timeout_seconds()  # a bad value is a usage error now, not in a worker later
        for url in (endpoint, vectors):
            if url and not url.startswith(("http://", "https://")):
                raise UsageError(f"endpoint URL {url!r} must start with http:// or https://")
        return cls(
            vectors_endpoint_url=vectors.rstrip("/") if vectors else None,
            profile=profile or os.environ.get("AWS_PROFILE") or None,
            region=region,
            endpoint_url=endpoint.rstrip("/") if endpoint else None,
            verify_ssl=verify_ssl,
            anonymous=anonymous,
        )

    @cached_property
    def _session(self) -> Any:
        import botocore.session  # ~0.5 s of imports: only paid when profiles or config files matter

        try:
            return botocore.session.Session(profile=self.profile)
        except Exception as exc:  # botocore raises ProfileNotFound and friends
            raise UsageError(f"cannot load AWS profile {self.profile!r}: {exc}") from None

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
        configured = None if self._env_only else self._session.get_config_variable("endpoint_url")
        if configured:
            return str(configured).rstrip("/")
        return f"https://s3.{self.resolved_region}.amazonaws.com"

    @property
    def path_style(self) -> bool:
        """Custom endpoints (MinIO, on-premise) get path-style URLs; AWS gets virtual hosts."""
        return not self.resolved_endpoint.endswith(".amazonaws.com")

    @cached_property
    def _credentials(self) -> Any:
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
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
