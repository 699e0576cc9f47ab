"""Where things are: `s3://bucket/key` URLs and local paths, and how source keys map to
destination keys and files.

A trailing ``/`` means a prefix (a "directory"); without it an S3 URL names one object. Mapping a
key to a local file is where hostile keys are stopped: nothing may land outside the destination.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from s3bulk._errors import UsageError

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_CONTROL = re.compile("[\x01-\x1f\x7f]")


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str = ""

    @property
    def is_prefix(self) -> bool:
        return self.key == "" or self.key.endswith("/")

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True)
class LocalLocation:
    path: Path
    trailing_slash: bool = False

    @property
    def is_prefix(self) -> bool:
        return self.trailing_slash or self.path.is_dir()

    @property
    def url(self) -> str:
        return str(self.path) + ("/" if self.trailing_slash else "")

    def __str__(self) -> str:
        return self.url


Location = S3Location | LocalLocation


def parse_location(text: str) -> Location:
    """Parse a command-line location; raise UsageError with the fix for anything malformed."""
    if not text or not text.strip():
        raise UsageError("empty location: give an s3://bucket/prefix URL or a local path")
    if "\x00" in text:
        raise UsageError(f"location {text!r} contains a NUL byte")
    scheme_match = _SCHEME.match(text)
    if scheme_match:
        scheme = scheme_match.group(1).lower()
        if scheme != "s3":
            raise UsageError(
                f"unsupported URL scheme '{scheme}://' in {text!r}: use s3://bucket/key or a local path"
            )
        rest = text[scheme_match.end() :]
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise UsageError(f"missing bucket name in {text!r}: use s3://bucket/prefix/")
        if not _BUCKET.match(bucket) or ".." in bucket:
            raise UsageError(
                f"invalid bucket name {bucket!r} in {text!r}: 3-63 lowercase letters, digits, '.', '-'"
            )
        return S3Location(bucket, key)
    if text.lower().startswith("s3:"):
        raise UsageError(f"malformed S3 URL {text!r}: use s3://bucket/prefix/")
    # os.path.expanduser, like a shell, leaves "~nosuchuser" as it is (Path.expanduser raises)
    return LocalLocation(Path(os.path.expanduser(text)), trailing_slash=text.endswith(("/", os.sep)))


def parse_s3(text: str) -> S3Location:
    location = parse_location(text)
    if not isinstance(location, S3Location):
        raise UsageError(f"{text!r} is not an S3 URL: use s3://bucket/prefix/")
    return location


def check_key(relative_key: str, control_chars: bool = False) -> None:
    """ValueError when the key cannot name a local file below a destination.

    Refused: absolute keys, ``..`` and ``.`` segments, empty segments (``a//b`` would silently merge
    with ``a/b``), NUL bytes and other control characters (a file named with ESC sequences rewrites
    the terminal of whoever lists the directory), and segments too long for a file name.
    """
    if not relative_key:
        raise ValueError("empty key")
    if "\x00" in relative_key:
        raise ValueError("key contains a NUL byte")
    control = None if control_chars else _CONTROL.search(relative_key)
    if control:
        raise ValueError(
            f"key has a control character ({control.group()!r}), unsafe in a file name and on a terminal "
            "(--allow-control-chars writes it under that name)"
        )
    if relative_key.startswith("/"):
        raise ValueError("key is an absolute path")
    for part in relative_key.split("/"):
        if part == "..":
            raise ValueError("key has a '..' segment that would escape the destination")
        if part in ("", "."):
            raise ValueError("key has an empty or '.' path segment")
        if len(part) > 63 and len(part.encode()) > 255:
            raise ValueError("key has a path segment longer than 255 bytes")


def local_target(root: Path, relative_key: str) -> Path:
    """Join a key under a destination directory, refusing anything that would land outside it."""
    return Path(local_target_path(str(root), relative_key))


def local_target_path(root: str, relative_key: str, control_chars: bool = False) -> str:
    """`local_target` as a string: the per-object step of every download, so no pathlib on it.
    A symlinked directory below the root that points outside it is refused. Each directory is
    resolved once per job (a cache): a download never follows a link in its file's own name
    (landing replaces the name), so directories are what could lead outside. `control_chars`:
    a name holding ESC or another control character (one s3bulk or another tool uploaded) lands
    as it is, what the user asked for with --allow-control-chars."""
    check_key(relative_key, control_chars)
    directory = relative_key.rpartition("/")[0]
    if directory and not _inside(root, directory):
        raise ValueError("key resolves outside the destination directory")
    return os.path.join(root, relative_key)


@functools.lru_cache(maxsize=4096)
def _inside(root: str, directory: str) -> bool:
    return Path(root, directory).resolve().is_relative_to(_resolved(root))


@functools.lru_cache(maxsize=16)
def _resolved(root: str) -> Path:
    """A destination root resolves the same for the whole job: resolve it once, not per object."""
    return Path(root).resolve()


def relative_key(key: str, prefix: str) -> str:
    """The part of `key` below the listed prefix (prefixes that end mid-name keep the rest)."""
    if prefix and not prefix.endswith("/"):
        prefix = prefix[: prefix.rfind("/") + 1]
    return key[len(prefix) :]


def basename(key: str) -> str:
    return key.rstrip("/").rsplit("/", 1)[-1]


# An S3 Express One Zone directory bucket: NAME--AZID--x-s3 (mybucket--use1-az4--x-s3)
_DIRECTORY_BUCKET = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?--[a-z0-9-]+--x-s3$")


def is_directory_bucket(bucket: str) -> bool:
    """Whether `bucket` is named as an S3 Express directory bucket is: its listings come in no
    key order and take no StartAfter, and its requests are signed with a session's credentials
    (CreateSession)."""
    return bool(_DIRECTORY_BUCKET.match(bucket))
