"""Which HDF5 objects a gather reads: URLs, `s3://bucket/wtk/*.h5` globs, prefixes, local paths.

Listing gives each object's size and ETag in the same response, so the index cache can be
checked without a HEAD per file. Files are read in URL order, which is the order they are
concatenated in (name files by year and the years come out in order).

S3 is listed by s3bulk's own listing (key ranges, pages checked, keys checked to rise) under
the key's literal start, `d/lzf` for `s3://b/d/lzf*.h5`, and the glob is matched on the whole
key: a store's list takes its prefix as a directory, so `d/lzf` found nothing there.
"""

from __future__ import annotations

import collections
import fnmatch
import glob
import os
from dataclasses import dataclass
from typing import Any

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, UsageError
from s3bulk._urls import parse_s3

GLOB_CHARS = "*?["


@dataclass(frozen=True)
class FileRef:
    url: str
    root: str  # "s3://bucket" or a local directory: what a store is built on
    key: str  # the object's path within that store
    size: int
    etag: str


def open_store(root: str, settings: AwsSettings, max_connections: int = 64) -> Any:
    """What a `BlockFile` reads a file's metadata through: a bucket's objects on the signed
    client (which follows no redirect), a local directory on obstore's LocalStore."""
    if root.startswith("s3://"):
        from s3bulk._stores.blockfile import SignedRanges

        return SignedRanges(settings, root[len("s3://") :], connections=max_connections)
    from s3bulk._stores.objects import store_for

    return store_for(root, settings, max_connections=max_connections)


async def find_files(sources: list[str], settings: AwsSettings) -> tuple[list[FileRef], dict[str, int]]:
    """Every file the arguments name, and the requests finding them took, by kind (LIST)."""
    found: dict[str, FileRef] = {}
    requests: collections.Counter[str] = collections.Counter()
    for source in sources:
        refs = (
            await _s3_files(source, settings, requests)
            if source.startswith("s3://")
            else _local_files(source)
        )
        if not refs:
            raise UsageError(f"{source} matches no files: check the path or the glob")
        found.update((ref.url, ref) for ref in refs)
    return [found[url] for url in sorted(found)], dict(requests)


async def _s3_files(source: str, settings: AwsSettings, requests: collections.Counter[str]) -> list[FileRef]:
    from s3bulk._sources.listing import find_object, list_prefix
    from s3bulk._stores.storage import Storage

    location = parse_s3(source)
    root = f"s3://{location.bucket}"
    pattern = location.key
    wildcard = min((pattern.find(char) for char in GLOB_CHARS if char in pattern), default=-1)
    client = Storage(settings, connections=16)
    try:
        if wildcard < 0 and not location.is_prefix:
            try:
                info = await find_object(client, location.bucket, pattern)
            except ItemError:
                raise UsageError(f"{source} does not exist: check the URL") from None
            return [FileRef(source, root, pattern, info.size, info.etag)]
        refs = []
        async for objects in list_prefix(
            client, location.bucket, pattern[:wildcard] if wildcard >= 0 else pattern
        ):
            for info in objects:
                if wildcard < 0 or fnmatch.fnmatchcase(info.key, pattern):
                    refs.append(FileRef(f"{root}/{info.key}", root, info.key, info.size, info.etag))
        return refs
    finally:
        requests.update(client.meter.requests)
        await client.close()


def _local_files(source: str) -> list[FileRef]:
    expanded = os.path.expanduser(source)
    if any(char in expanded for char in GLOB_CHARS):
        paths = glob.glob(expanded)
    elif os.path.isdir(expanded):
        paths = [os.path.join(root, name) for root, _, names in os.walk(expanded) for name in names]
    elif os.path.isfile(expanded):
        paths = [expanded]
    else:
        raise UsageError(f"{source} does not exist: check the path")
    refs = []
    for path in sorted(os.path.abspath(each) for each in paths if os.path.isfile(each)):
        stat = os.stat(path)
        etag = f"{stat.st_ino:x}-{stat.st_mtime_ns:x}-{stat.st_size:x}"  # changes when the file does
        refs.append(FileRef(path, os.path.dirname(path), os.path.basename(path), stat.st_size, etag))
    return refs
