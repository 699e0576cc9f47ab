"""engine="s3bulk" against MinIO: what xarray opens equals what h5netcdf opens from the same files
(coordinates, attributes, CF decoding, values), every variable lazy, each read a gather."""

from __future__ import annotations

from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import Endpoint, new_bucket

import s3bulk
import s3bulk.xarray
from s3bulk._arrays.reader import shared_reader
from s3bulk.testing.wtk import WtkSpec, write_file

DATASET = "windspeed_100m"


def _netcdf(path: Path, year: int) -> Path:
    """A NetCDF-4 file as xarray writes one: a CF time axis, packed values (scale_factor,
    add_offset, _FillValue), a coordinate, chunked and compressed data variables."""
    rng = np.random.default_rng(year)
    times = pd.date_range(f"{year}-01-01", periods=240, freq="h")
    temperature = 280 + np.cumsum(rng.normal(size=(240, 12, 9)), axis=0) * 0.1
    temperature[5, 3, 4] = np.nan
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), temperature, {"units": "K", "long_name": "2 m temperature"}),
            "station": (("lat",), np.arange(12, dtype="i4")),
        },
        coords={"time": times, "lat": np.linspace(30, 41, 12), "lon": np.linspace(-100, -92, 9)},
        attrs={"title": f"reanalysis {year}", "Conventions": "CF-1.8"},
    )
    encoding = {
        "t2m": {
            "zlib": True,
            "complevel": 4,
            "shuffle": True,
            "chunksizes": (24, 5, 9),
            "dtype": "i2",
            "scale_factor": 0.01,
            "add_offset": 280.0,
            "_FillValue": -32767,
        },
        "time": {"units": "hours since 2000-01-01", "dtype": "i8"},
    }
    ds.to_netcdf(path, engine="h5netcdf", encoding=encoding)
    return path


@pytest.fixture(scope="module")
def netcdf_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    directory = tmp_path_factory.mktemp("nc")
    return [_netcdf(directory / f"era_{year}.nc", year) for year in (2020, 2021, 2022)]


def _upload(endpoint: Endpoint, bucket: str, prefix: str, paths: list[Path]) -> list[str]:
    client = endpoint.client()
    for path in paths:
        client.upload_file(str(path), bucket, f"{prefix}{path.name}")
    return [f"s3://{bucket}/{prefix}{path.name}" for path in paths]


def test_xarray_finds_the_engine() -> None:
    assert "s3bulk" in xr.backends.list_engines()


def test_open_dataset_equals_h5netcdf(
    aws_env: dict[str, str], minio: Endpoint, netcdf_files: list[Path]
) -> None:
    urls = _upload(minio, new_bucket(minio, "xr"), "nc/", netcdf_files)
    ours = xr.open_dataset(urls[0], engine="s3bulk")
    theirs = xr.open_dataset(netcdf_files[0], engine="h5netcdf")
    assert not ours.t2m.variable._in_memory  # not read yet
    assert ours.identical(theirs)  # loads both: coordinates, attributes, decoded values
    for selection in (
        {"time": 17},
        {"time": slice(3, 200, 7), "lon": 4},
        {"lat": slice(2, 9), "lon": [1, 5]},
    ):
        assert ours.t2m.isel(selection).identical(theirs.t2m.isel(selection)), selection
    assert ours.t2m.encoding["scale_factor"] == 0.01
    assert ours.t2m.encoding["preferred_chunks"] == {"time": 240, "lat": 5, "lon": 9}
    chunked = xr.open_dataset(urls[1], engine="s3bulk", chunks={"time": 48})
    assert chunked.t2m.chunks is not None
    want = xr.open_dataset(netcdf_files[1], engine="h5netcdf", chunks={"time": 48}).t2m.mean("time").compute()
    assert chunked.t2m.mean("time").compute().identical(want)


def test_open_mfdataset_of_a_glob_equals_h5netcdf(
    aws_env: dict[str, str], minio: Endpoint, netcdf_files: list[Path]
) -> None:
    bucket = new_bucket(minio, "xrmf")
    _upload(minio, bucket, "nc/", netcdf_files)
    xr.backends.plugins.list_engines.cache_clear()
    ours = s3bulk.xarray.open_mfdataset(f"s3://{bucket}/nc/era_*.nc", combine="by_coords")
    # no other backend loaded to find ours (kerchunk's and h5coro's imports: 2.5 s of 2.8 s)
    assert xr.backends.plugins.list_engines.cache_info().misses == 0
    theirs = xr.open_mfdataset(netcdf_files, engine="h5netcdf", combine="by_coords")
    assert ours.sizes["time"] == 720
    point = {"lat": 3, "lon": 4}
    assert ours.t2m.isel(point).compute().identical(theirs.t2m.isel(point).compute())
    assert ours.compute().identical(theirs.compute())


def test_wtk_files_each_filter_and_layout_through_xarray(
    aws_env: dict[str, str], minio: Endpoint, tmp_path: Path
) -> None:
    """HDF5 files without NetCDF's dimensions (WTK's): phony dimensions as h5netcdf names them, one
    location over all files; gzip, LZF, Blosc-Zstd and SZIP variants, and the newest format."""
    bucket = new_bucket(minio, "xrwtk")
    variants = ["gzip", "lzf", "blosc-zstd", "szip"]
    paths = []
    for number, compression in enumerate(variants):
        libver = "latest" if number % 2 else "earliest"
        spec = WtkSpec(times=200, locations=120, chunks=(30, 25), compression=compression, libver=libver)
        paths.append(write_file(tmp_path / f"wtk_{2007 + number}.h5", spec, number))
    urls = _upload(minio, bucket, "wtk/", paths)
    reader = shared_reader()
    before = dict(reader.requests)
    ours = s3bulk.xarray.open_mfdataset(f"s3://{bucket}/wtk/*.h5", combine="nested", concat_dim="phony_dim_0")
    theirs = xr.open_mfdataset(
        paths, engine="h5netcdf", combine="nested", concat_dim="phony_dim_0", phony_dims="access"
    )
    column = ours[DATASET][:, 77].compute()
    assert column.identical(theirs[DATASET][:, 77].compute())
    with h5py.File(paths[2]) as handle:  # Blosc: h5py reads it with hdf5plugin's filter
        assert hdf5plugin and np.array_equal(
            column.values[400:600], handle[DATASET][:, 77] * 100.0
        )  # CF: stored x scale_factor
    used = {kind: reader.requests.get(kind, 0) - before.get(kind, 0) for kind in reader.requests}
    assert used.get("GET (h5py)", 0) == 0, used  # every filter decoded by s3bulk
    # dask's tasks and the read-ahead of siblings fetch each range once: what gather fetches
    gathered = s3bulk.gather_to_file(urls, DATASET, ":,77", str(tmp_path / "g.npy"))
    assert used["GET"] == gathered.requests["GET"], (used, gathered.requests)
    assert np.array_equal(np.load(tmp_path / "g.npy"), column.values / 100.0)  # CF: x scale_factor
