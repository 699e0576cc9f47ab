"""Which HDF5 objects a gather reads: URLs, `s3://bucket/wtk/*.h5` globs, prefixes, local paths.

Listing gives each object's size and ETag in the same response, so the index cache can be
checked without a HEAD per file. Files are read in URL order, which is the order they are
concatenated in (name files by year and the years come out in order).
"""

from __future__ import annotations

import collections
import fnmatch
import glob
import os
from dataclasses import dataclass
from typing import Any

import obstore

from s3bulk._config import AwsSettings
from s3bulk._errors import UsageError
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
    from s3bulk._stores.objects import store_for

    return store_for(root, settings, max_connections=max_connections)


def find_files(sources: list[str], settings: AwsSettings) -> tuple[list[FileRef], dict[str, int]]:
    """Every file the arguments name, and the requests finding them took, by kind (LIST, HEAD)."""
    found: dict[str, FileRef] = {}
    requests: collections.Counter[str] = collections.Counter()
    for source in sources:
        refs = _s3_files(source, settings, requests) if source.startswith("s3://") else _local_files(source)
        if not refs:
            raise UsageError(f"{source} matches no files: check the path or the glob")
        found.update((ref.url, ref) for ref in refs)
    return [found[url] for url in sorted(found)], dict(requests)


def _s3_files(source: str, settings: AwsSettings, requests: collections.Counter[str]) -> list[FileRef]:
    location = parse_s3(source)
    root = f"s3://{location.bucket}"
    store = open_store(root, settings, max_connections=8)
    pattern = location.key
    wildcard = min((pattern.find(char) for char in GLOB_CHARS if char in pattern), default=-1)
    if wildcard < 0 and not location.is_prefix:
        requests["HEAD"] += 1
        try:
            head = obstore.head(store, pattern)
        except FileNotFoundError:
            raise UsageError(f"{source} does not exist: check the URL") from None
        return [FileRef(source, root, pattern, int(head["size"]), head.get("e_tag") or "")]
    prefix = pattern[:wildcard] if wildcard >= 0 else pattern
    refs: list[FileRef] = []
    pages = 0
    for page in obstore.list(store, prefix or None, chunk_size=1000):
        pages += 1
        for entry in page:
            key = entry["path"]
            if wildcard >= 0 and not fnmatch.fnmatchcase(key, pattern):
                continue
            url = f"{root}/{key}"
            refs.append(FileRef(url, root, key, int(entry["size"]), entry.get("e_tag") or ""))
    requests["LIST"] += max(pages, 1)  # an empty listing is still one request
    return refs


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
