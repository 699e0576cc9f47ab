"""`engine="s3bulk"`: HDF5 and NetCDF-4 objects on S3 opened by xarray, read by s3bulk's gather.

    ds = xr.open_dataset("s3://bucket/wtk/wtk_2012.h5", engine="s3bulk")
    ds = s3bulk.xarray.open_mfdataset("s3://bucket/wtk/*.h5", concat_dim="phony_dim_0", combine="nested")

The metadata (dimensions, coordinates, attributes, CF decoding) is h5netcdf's, read through
xarray's own h5netcdf store from the file's first block; so a dataset opened here equals one
opened with `engine="h5netcdf"`. Each chunked numeric variable is lazy, and every indexing request
(and each dask chunk) is a gather: the chunk index read in waves (with the other files' that one
`open_mfdataset` opened), the chunks' ranges merged and fetched side by side, decoded in threads
outside the GIL, on one engine per process (`_arrays/reader.py`). A dask chunk is a whole file's
variable unless asked otherwise (the HDF5 chunk shape is not offered as dask's preferred chunks:
one gather of many chunks is what reads fast, not a task per chunk).

xarray does not expand a glob in an s3:// URL for engines other than zarr, so `open_mfdataset`
here lists the files with s3bulk's listing and hands xarray the list.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.h5netcdf_ import H5NetCDFStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing
from xarray.core.variable import Variable

from s3bulk._arrays.files import GLOB_CHARS
from s3bulk._arrays.reader import SharedReader, shared_reader
from s3bulk._config import AwsSettings

SUFFIXES = (".h5", ".hdf5", ".he5", ".nc", ".nc4", ".netcdf")


class GatheredArray(BackendArray):
    """One chunked variable of one file: an indexing request is a gather of it."""

    def __init__(
        self,
        reader: SharedReader,
        url: str,
        dataset: str,
        shape: tuple[int, ...],
        dtype: np.dtype,
        siblings: Sequence[str],
    ) -> None:
        self.reader = reader
        self.url = url
        self.dataset = dataset
        self.shape = shape
        self.dtype = dtype
        self.siblings = tuple(siblings)

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._read)

    def _read(self, key: tuple[int | slice, ...]) -> np.ndarray:
        return self.reader.run(self.reader.read(self.url, self.dataset, key, self.siblings))


class GatheredStore(H5NetCDFStore):
    """xarray's h5netcdf store, its chunked numeric variables gathered."""

    def __init__(
        self, *args: Any, url: str, reader: SharedReader, siblings: Sequence[str], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._s3bulk = (url, reader, tuple(siblings))

    def open_store_variable(self, name: str, var: Any) -> Variable:
        variable = super().open_store_variable(name, var)
        h5 = var._h5ds
        if not h5.chunks or h5.dtype.kind not in "biuf" or h5.dtype.names:
            return variable  # strings, compounds, contiguous or compact data: through h5py as before
        url, reader, siblings = self._s3bulk
        array = GatheredArray(reader, url, h5.name, tuple(h5.shape), h5.dtype, siblings)
        encoding = dict(variable.encoding)
        encoding["preferred_chunks"] = dict(
            zip(variable.dims, dask_chunks(h5.shape, h5.chunks, h5.dtype.itemsize), strict=True)
        )
        return Variable(variable.dims, indexing.LazilyIndexedArray(array), variable.attrs, encoding)


DASK_CHUNK_BYTES = 256 * 1024**2


def dask_chunks(shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The dask chunk offered for a variable: HDF5's chunk, its first axis (a file's time, which
    files are joined along) taken whole while it stays under DASK_CHUNK_BYTES. dask reads a whole
    chunk of its own before it selects (a location of a whole-file chunk read the whole file),
    and runs one task per chunk, a few at a time: so one task, one gather of a column of chunks."""
    whole = (shape[0], *chunks[1:]) if shape else ()
    return whole if math.prod(whole) * itemsize <= DASK_CHUNK_BYTES else tuple(chunks)


class S3BulkBackend(BackendEntrypoint):
    description = "HDF5 and NetCDF-4 on S3, read by s3bulk's gather (concurrent range reads)"
    url = "https://github.com/s3bulk/s3bulk"
    open_dataset_parameters = (
        "filename_or_obj",
        "drop_variables",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "use_cftime",
        "decode_timedelta",
        "group",
        "phony_dims",
        "siblings",
        "settings",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        return (
            isinstance(filename_or_obj, str)
            and filename_or_obj.startswith("s3://")
            and (filename_or_obj.lower().endswith(SUFFIXES))
        )

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        phony_dims: str | None = "access",
        siblings: Sequence[str] = (),
        settings: AwsSettings | None = None,
    ) -> Any:
        """Open one HDF5/NetCDF-4 object (`s3://bucket/key` or a local path); `siblings`: the
        other files opened with it, whose chunk indexes are read in the same waves."""
        import h5netcdf

        url = os.fspath(filename_or_obj)
        if not url.startswith("s3://"):
            url = os.path.abspath(os.path.expanduser(url))
        reader = shared_reader(settings)
        reader.run(reader.open_heads([url]))
        (ref,) = reader.run(reader.locate([url]))
        handle = reader.handle(ref)
        h5file = h5netcdf.File(handle, "r", phony_dims=phony_dims, decode_vlen_strings=True)
        store = GatheredStore(
            h5file, group=group, url=url, reader=reader, siblings=[s for s in siblings if s != url]
        )
        return StoreBackendEntrypoint().open_dataset(
            store,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )


def expand(paths: str | Sequence[str], settings: AwsSettings | None = None) -> list[str]:
    """URLs and globs (`s3://bucket/wtk/*.h5`, listed by s3bulk) -> the files they name, sorted."""
    from s3bulk._arrays.files import find_files

    reader = shared_reader(settings)
    urls: list[str] = []
    for path in [paths] if isinstance(paths, str) else paths:
        if any(char in path for char in GLOB_CHARS) or path.endswith("/"):
            refs, requests = reader.run(find_files([path], reader.settings))
            reader.refs.update((ref.url, ref) for ref in refs)
            reader._count(requests)
            urls.extend(ref.url for ref in refs)
        else:
            urls.append(path)
    return urls


def open_mfdataset(paths: str | Sequence[str], *, settings: AwsSettings | None = None, **kwargs: Any) -> Any:
    """`xarray.open_mfdataset` with engine="s3bulk": globs listed by s3bulk, every file's first
    block read in one wave, and each file told its siblings (chunk indexes read together).
    `engine=s3bulk.xarray.S3BulkBackend` in xarray's own calls opens as fast as this does."""
    import xarray as xr

    urls = expand(paths, settings)
    reader = shared_reader(settings)
    reader.run(reader.open_heads(urls))
    backend_kwargs = {"siblings": tuple(urls), "settings": settings, **kwargs.pop("backend_kwargs", {})}
    # the class, not its name: xarray finds a name that is not one of its own engines by loading
    # every installed backend's entry point (kerchunk's imports zarr, h5coro's boto3): 2.5 s of
    # 2.8 s of opening 8 files, measured (bench/RESULTS.md, issue 68)
    return xr.open_mfdataset(urls, engine=S3BulkBackend, backend_kwargs=backend_kwargs, **kwargs)
