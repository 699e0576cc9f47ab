"""The peers of `bench_gather.py --peers`, one per process as a user runs them:

    python bench/gather_peers.py TOOL COLUMN OUT.npy URL...

Each reads `windspeed_100m[:, COLUMN]` of every file, joined along time, saves it to OUT.npy as
stored (uint16: no CF scaling, so every tool's array can be compared), and prints one JSON line
with the seconds its job took after its imports. The S3 endpoint and keys come from AWS_*.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

DATASET = "windspeed_100m"
ENDPOINT = os.environ.get("AWS_ENDPOINT_URL", "")


def xarray_h5netcdf_s3fs(column: int, urls: list[str]) -> np.ndarray:
    """What a scientist writes first: xarray over h5netcdf over s3fs file objects."""
    import hdf5plugin  # noqa: F401  (h5py reads the plugin filters)
    import s3fs
    import xarray as xr

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": ENDPOINT})
    files = [fs.open(url, "rb") for url in urls]
    ds = xr.open_mfdataset(
        files,
        engine="h5netcdf",
        combine="nested",
        concat_dim="phony_dim_0",
        phony_dims="access",
        mask_and_scale=False,
    )
    return ds[DATASET][:, column].values


def h5coro(column: int, urls: list[str]) -> np.ndarray:
    """h5coro: every file's read started at once (it reads each in its own threads), then joined."""
    from h5coro import h5coro as core
    from h5coro import s3driver

    def start(url: str) -> object:
        reader = core.H5Coro(url.removeprefix("s3://"), s3driver.S3Driver, credentials={})
        wanted = [{"dataset": f"/{DATASET}", "hyperslice": [[0, None], [column, column + 1]]}]
        return reader.readDatasets(wanted, block=False)

    promises = [start(url) for url in urls]
    return np.concatenate([np.asarray(promise[f"/{DATASET}"]).reshape(-1) for promise in promises])


def kerchunk_references(urls: list[str], out: str) -> None:
    """Build kerchunk's references of every file (the step done once), one JSON list."""
    import fsspec
    from kerchunk.hdf import SingleHdf5ToZarr

    def one(url: str) -> dict[str, object]:
        with fsspec.open(url, "rb", client_kwargs={"endpoint_url": ENDPOINT}) as handle:
            return SingleHdf5ToZarr(handle, url).translate()

    with ThreadPoolExecutor(8) as pool:
        references = list(pool.map(one, urls))
    with open(out, "w") as handle:
        json.dump(references, handle)


def kerchunk_read(column: int, references: str) -> np.ndarray:
    """kerchunk's references already built: xarray's open_mfdataset over zarr over fsspec's
    reference filesystem (asynchronous, as zarr 3 reads), a store per file."""
    import fsspec
    import xarray as xr
    import zarr

    options = {"client_kwargs": {"endpoint_url": ENDPOINT}, "asynchronous": True}
    with open(references) as handle:
        stores = [
            zarr.storage.FsspecStore(
                fsspec.filesystem(
                    "reference", fo=one, remote_protocol="s3", remote_options=options, asynchronous=True
                ),
                read_only=True,
                path="",
            )
            for one in json.load(handle)
        ]
    ds = xr.open_mfdataset(
        stores,
        engine="zarr",
        combine="nested",
        concat_dim="phony_dim_0",
        consolidated=False,
        mask_and_scale=False,
    )
    return ds[DATASET][:, column].values


def _icechunk_access() -> tuple[object, object]:
    """Icechunk's container for the bench bucket's chunks (MinIO over HTTP), and its keys."""
    import icechunk

    store = icechunk.s3_store(
        region="us-east-1", endpoint_url=ENDPOINT, allow_http=True, force_path_style=True
    )
    container = icechunk.VirtualChunkContainer("s3://bench/", store)
    keys = icechunk.s3_credentials(
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"], secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"]
    )
    return container, icechunk.containers_credentials({"s3://bench/": keys})


def virtualizarr_icechunk_build(urls: list[str], repository: str) -> None:
    """VirtualiZarr's manifests of every file, joined along time, committed to an Icechunk
    repository on local disk (the step done once; the chunks stay in the bucket)."""
    import icechunk
    import xarray as xr
    from obstore.store import S3Store
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser
    from virtualizarr.registry import ObjectStoreRegistry

    store = S3Store(
        "bench",
        endpoint=ENDPOINT,
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region="us-east-1",
        client_options={"allow_http": True},
    )
    registry = ObjectStoreRegistry({"s3://bench": store})
    with ThreadPoolExecutor(8) as pool:
        parts = list(
            pool.map(lambda url: open_virtual_dataset(url, registry=registry, parser=HDFParser()), urls)
        )
    combined = xr.concat(parts, dim="phony_dim_0", coords="minimal", compat="override")
    container, access = _icechunk_access()
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(container)
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(repository), config, authorize_virtual_chunk_access=access
    )
    session = repo.writable_session("main")
    combined.vz.to_icechunk(session.store)
    session.commit("virtual references of the bench's files")


def virtualizarr_icechunk_read(column: int, repository: str) -> np.ndarray:
    """The Icechunk repository already built: xarray over zarr over Icechunk's store."""
    import icechunk
    import xarray as xr

    _, access = _icechunk_access()
    repo = icechunk.Repository.open(
        icechunk.local_filesystem_storage(repository), authorize_virtual_chunk_access=access
    )
    ds = xr.open_zarr(repo.readonly_session("main").store, consolidated=False, mask_and_scale=False)
    return ds[DATASET][:, column].values


def s3bulk_xarray(column: int, urls: list[str]) -> np.ndarray:
    """s3bulk's xarray backend: the glob listed by s3bulk, each file a gather."""
    import s3bulk.xarray

    ds = s3bulk.xarray.open_mfdataset(urls, combine="nested", concat_dim="phony_dim_0", mask_and_scale=False)
    return ds[DATASET][:, column].values


def s3bulk_xarray_by_name(column: int, urls: list[str]) -> np.ndarray:
    """The issue's own line, `xr.open_mfdataset(urls, engine="s3bulk")`: xarray finds the engine
    by its name (loading every installed backend's entry point), and the files are not told of
    each other (no read-ahead of siblings)."""
    import xarray as xr

    ds = xr.open_mfdataset(
        urls, engine="s3bulk", combine="nested", concat_dim="phony_dim_0", mask_and_scale=False
    )
    return ds[DATASET][:, column].values


TOOLS = {
    "xarray-h5netcdf-s3fs": xarray_h5netcdf_s3fs,
    "h5coro": h5coro,
    "s3bulk-xarray": s3bulk_xarray,
    "s3bulk-xarray-by-name": s3bulk_xarray_by_name,
}


IMPORTS = {  # imported before the clock starts: what is timed is the job, as s3bulk reports its own
    "xarray-h5netcdf-s3fs": ("xarray", "h5netcdf", "s3fs", "hdf5plugin", "dask.array"),
    "h5coro": ("h5coro.h5coro", "h5coro.s3driver"),
    "kerchunk-build": ("kerchunk.hdf", "fsspec", "s3fs"),
    "kerchunk": ("xarray", "zarr", "fsspec", "s3fs", "dask.array"),
    "vz-icechunk-build": ("virtualizarr", "icechunk", "xarray", "obstore"),
    "vz-icechunk": ("icechunk", "xarray", "zarr", "dask.array"),
    "s3bulk-xarray": ("xarray", "h5netcdf", "h5py", "dask.array", "s3bulk.xarray", "s3bulk._stores.storage"),
    "s3bulk-xarray-by-name": ("xarray", "h5netcdf", "h5py", "dask.array", "s3bulk._stores.storage"),
}


def main() -> None:
    import importlib

    tool, column, out, *urls = sys.argv[1:]
    for module in IMPORTS[tool]:
        importlib.import_module(module)
    began = time.perf_counter()
    if tool == "kerchunk-build":
        kerchunk_references(urls, out)
        values = None
    elif tool == "kerchunk":
        values = kerchunk_read(int(column), urls[0])
    elif tool == "vz-icechunk-build":
        virtualizarr_icechunk_build(urls, out)
        values = None
    elif tool == "vz-icechunk":
        values = virtualizarr_icechunk_read(int(column), urls[0])
    else:
        values = TOOLS[tool](int(column), urls)
    seconds = time.perf_counter() - began
    if values is not None:
        np.save(out, np.asarray(values).reshape(-1))
    print(json.dumps({"job_seconds": seconds}), flush=True)
    os._exit(0)  # no teardown of thread pools or event loops in the measured time


if __name__ == "__main__":
    main()
