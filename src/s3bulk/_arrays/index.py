"""The chunk index of one HDF5 dataset: where each needed chunk lies, and how to decode it.

h5py reads the metadata (through a BlockFile, so a few large ranged GETs) and answers, per chunk,
its byte offset, stored size and filter mask (`get_chunk_info_by_coord`). Everything else a
reader needs (shape, dtype, chunk shape, filter pipeline, fill value, `scale_factor`) goes in
the same record, which is cached on disk under the object's URL and ETag: a second read of the
same chunks makes no metadata request at all, and a changed object gets a new index.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from s3bulk._errors import UsageError

INDEX_VERSION = 1
CHUNKED, CONTIGUOUS, COMPACT, VIRTUAL = "chunked", "contiguous", "compact", "virtual"

ChunkInfo = tuple[int, int, int] | None  # (byte offset, stored size, filter mask); None: never written


@dataclass
class DatasetIndex:
    url: str
    etag: str
    dataset: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype string, byte order included ('<u2', '>f4')
    layout: str
    chunks: tuple[int, ...] = ()
    filters: list[tuple[int, int, tuple[int, ...], str]] = field(
        default_factory=list
    )  # (id, flags, values, name)
    fill_value: Any = 0
    scale_factor: float | None = None
    chunk_info: dict[tuple[int, ...], ChunkInfo] = field(default_factory=dict)
    metadata_requests: int = 0  # what building (or topping up) this index cost
    metadata_bytes: int = 0
    serial_requests: int = 0  # of them, made by h5py's lookups, one after another

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "version": INDEX_VERSION,
                "url": self.url,
                "etag": self.etag,
                "dataset": self.dataset,
                "shape": self.shape,
                "dtype": self.dtype,
                "layout": self.layout,
                "chunks": self.chunks,
                "filters": self.filters,
                "fill_value": self.fill_value,
                "scale_factor": self.scale_factor,
                "chunk_info": [[list(coord), info] for coord, info in self.chunk_info.items()],
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> DatasetIndex | None:
        record = orjson.loads(data)
        if record.get("version") != INDEX_VERSION:
            return None
        return cls(
            url=record["url"],
            etag=record["etag"],
            dataset=record["dataset"],
            shape=tuple(record["shape"]),
            dtype=record["dtype"],
            layout=record["layout"],
            chunks=tuple(record["chunks"]),
            filters=[(f[0], f[1], tuple(f[2]), f[3]) for f in record["filters"]],
            fill_value=record["fill_value"],
            scale_factor=record["scale_factor"],
            chunk_info={tuple(coord): tuple(info) if info else None for coord, info in record["chunk_info"]},
        )

    def missing(self, coords: Iterable[tuple[int, ...]]) -> list[tuple[int, ...]]:
        return [coord for coord in coords if coord not in self.chunk_info]


def open_dataset(handle: Any, dataset: str, where: str) -> Any:
    """The h5py dataset `dataset` of an open file, or a usage error naming what is there."""
    import h5py

    node = handle.get(dataset)
    if isinstance(node, h5py.Dataset):
        return node
    names: list[str] = []
    handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
    shown = ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")
    what = "is a group" if node is not None else "does not exist"
    raise UsageError(f"dataset {dataset!r} {what} in {where}: its datasets are {shown or 'none'}")


def describe_dataset(node: Any, url: str, etag: str, dataset: str) -> DatasetIndex:
    """Shape, type, layout, filters and fill value of an h5py dataset."""
    import h5py

    plist = node.id.get_create_plist()
    layout = {
        h5py.h5d.CHUNKED: CHUNKED,
        h5py.h5d.CONTIGUOUS: CONTIGUOUS,
        h5py.h5d.COMPACT: COMPACT,
    }.get(plist.get_layout(), VIRTUAL)
    filters = []
    if layout == CHUNKED:
        for number in range(plist.get_nfilters()):
            filter_id, flags, values, name = plist.get_filter(number)
            filters.append(
                (int(filter_id), int(flags), tuple(int(v) for v in values), name.decode(errors="replace"))
            )
    fill = np.zeros(1, dtype=node.dtype) if node.dtype.kind in "biuf" else None
    if fill is not None:
        plist.get_fill_value(fill)
    scale = node.attrs.get("scale_factor")
    return DatasetIndex(
        url=url,
        etag=etag,
        dataset=dataset,
        shape=tuple(int(n) for n in node.shape),
        dtype=node.dtype.str if node.dtype.kind in "biuf" else repr(node.dtype),
        layout=layout,
        chunks=tuple(int(n) for n in node.chunks) if node.chunks else (),
        filters=filters,
        fill_value=fill[0].item() if fill is not None else None,
        scale_factor=float(np.asarray(scale).ravel()[0]) if scale is not None else None,
    )


def look_up_chunks(node: Any, index: DatasetIndex, coords: Iterable[tuple[int, ...]]) -> None:
    """Add these chunks' locations to the index (each lookup walks the chunk B-tree)."""
    for coord in coords:
        info = node.id.get_chunk_info_by_coord(coord)
        if info.byte_offset is None:
            index.chunk_info[coord] = None  # never written: reads as the fill value
        else:
            index.chunk_info[coord] = (int(info.byte_offset), int(info.size), int(info.filter_mask))


class IndexCache:
    """Indexes on local disk, one JSON file per (URL, ETag, dataset); written via temp + rename."""

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self.directory = Path(directory) if directory else None

    @staticmethod
    def default_directory() -> Path:
        root = os.environ.get("S3BULK_CACHE_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "s3bulk"
        )
        return Path(root) / "h5index"

    def _path(self, url: str, etag: str, dataset: str) -> Path | None:
        if self.directory is None or not etag:
            return None
        digest = hashlib.sha256(f"{url}\n{etag}\n{dataset}".encode()).hexdigest()[:40]
        return self.directory / f"{digest}.json"

    def load(self, url: str, etag: str, dataset: str) -> DatasetIndex | None:
        path = self._path(url, etag, dataset)
        if path is None or not path.exists():
            return None
        try:
            index = DatasetIndex.from_json(path.read_bytes())
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is rebuilt, not trusted
        if index is None or (index.url, index.etag, index.dataset) != (url, etag, dataset):
            return None
        return index

    def save(self, index: DatasetIndex) -> None:
        path = self._path(index.url, index.etag, index.dataset)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(index.to_json())
        os.replace(partial, path)
