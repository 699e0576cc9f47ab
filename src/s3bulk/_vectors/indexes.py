"""The indexes a load writes to: each index's shape (read with GetIndex, so rows are checked
against it before anything is sent), and which index a key goes to when several share a load."""

from __future__ import annotations

import collections
import re
import zlib
from dataclasses import dataclass
from pathlib import PurePosixPath

from s3bulk._config import AwsSettings
from s3bulk._errors import S3Error, UsageError
from s3bulk._stores.retry import Meter
from s3bulk._stores.vectors import VectorsClient


@dataclass(frozen=True)
class IndexShape:
    """What the rows must fit: the index's own settings, read with GetIndex before the load."""

    dimension: int
    metric: str
    non_filterable: frozenset[str]


INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # the service's rule for index names


def index_for_file(path: str) -> str:
    """The index a file loads into with --index-per-file: its name without the suffix
    (`films-2024.parquet` → `films-2024`), which must be a name S3 Vectors takes."""
    stem = PurePosixPath(path.replace("\\", "/")).name.split(".")[0]
    if not INDEX_NAME.fullmatch(stem):
        raise UsageError(
            f"{path}: --index-per-file names its index {stem!r}, which S3 Vectors refuses (3-63 "
            "lowercase letters, digits, hyphens and dots, a letter or digit at each end): rename the "
            "file, or load it with --index NAME"
        )
    return stem


def index_of(key: str, indexes: tuple[str, ...]) -> str:
    """The index a key belongs to: stable across runs, machines and Python versions (crc32)."""
    if len(indexes) == 1:
        return indexes[0]
    return indexes[zlib.crc32(key.encode()) % len(indexes)]


async def index_shapes(
    settings: AwsSettings,
    bucket: str,
    indexes: tuple[str, ...],
    requests: collections.Counter[str] | None = None,
) -> dict[str, IndexShape]:
    client = VectorsClient(
        settings, max_connections=4, meter=Meter(requests) if requests is not None else None
    )
    try:
        shapes = {}
        for index in indexes:
            shape = await find_index(client, bucket, index)
            if shape is None:
                raise UsageError(
                    f"index {index!r} not found in vector bucket {bucket!r}: create it with "
                    f"s3bulk vectors create-index --bucket {bucket} --index {index} --dimension N"
                )
            shapes[index] = shape
        return shapes
    finally:
        await client.close()


async def find_index(client: VectorsClient, bucket: str, index: str) -> IndexShape | None:
    """The index's shape (GetIndex), or None when there is no such index."""
    try:
        found = await client.get_index(bucket, index)
    except S3Error as error:
        if error.status == 404 or error.code in ("NotFoundException", "ResourceNotFoundException"):
            return None
        raise
    config = found.get("metadataConfiguration") or {}
    return IndexShape(
        int(found["dimension"]),
        str(found.get("distanceMetric", "cosine")),
        frozenset(config.get("nonFilterableMetadataKeys") or ()),
    )
