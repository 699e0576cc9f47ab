"""Real clients of fsspec, end to end on `s3bulk://` URLs against MinIO (issue 51): pandas,
pyarrow datasets, xarray (h5netcdf), zarr v3 and dask, each checked by the values it reads back.
Credentials and the endpoint come from the environment, as they would for a user."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from conftest import Endpoint, new_bucket


@pytest.fixture
def bucket(minio: Endpoint, aws_env: dict[str, str]) -> str:
    return new_bucket(minio)


def test_pandas_writes_and_reads_parquet(bucket: str) -> None:
    frame = pd.DataFrame({"key": np.arange(50_000), "value": np.linspace(0, 1, 50_000)})
    frame.to_parquet(f"s3bulk://{bucket}/frames/one.parquet")
    back = pd.read_parquet(f"s3bulk://{bucket}/frames/one.parquet")
    pd.testing.assert_frame_equal(back, frame)


def test_a_pyarrow_dataset_of_200_files_through_fsspec_handler(bucket: str) -> None:
    import fsspec
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs = fsspec.filesystem("s3bulk")
    files = {}
    for part in range(200):
        sink = io.BytesIO()
        pq.write_table(pa.table({"part": [part] * 10, "x": list(range(10))}), sink)
        files[f"{bucket}/dataset/part-{part:03d}.parquet"] = sink.getvalue()
    fs.pipe(files)

    table = ds.dataset(
        f"{bucket}/dataset", filesystem=PyFileSystem(FSSpecHandler(fs)), format="parquet"
    ).to_table()
    assert table.num_rows == 2000
    assert sorted(set(table.column("part").to_pylist())) == list(range(200))
    assert sum(table.column("x").to_pylist()) == 200 * 45


def test_xarray_opens_netcdf4_files_with_h5netcdf(bucket: str, tmp_path) -> None:
    import fsspec
    import xarray as xr

    fs = fsspec.filesystem("s3bulk")
    for day in range(8):
        data = xr.Dataset(
            {"t": (("time", "x"), np.full((1, 100), float(day)))},
            coords={"time": [day], "x": np.arange(100)},
        )
        local = tmp_path / f"day{day}.nc"
        data.to_netcdf(local, engine="h5netcdf")
        fs.put(str(local), f"{bucket}/nc/day{day}.nc")

    with fs.open(f"{bucket}/nc/day3.nc") as handle, xr.open_dataset(handle, engine="h5netcdf") as one:
        assert float(one["t"].mean()) == 3.0
    handles = [fs.open(f"{bucket}/nc/day{day}.nc") for day in range(8)]
    with xr.open_mfdataset(handles, engine="h5netcdf", combine="by_coords") as many:
        assert many["t"].shape == (8, 100)
        assert [float(v) for v in many["t"].mean(dim="x").values] == [float(d) for d in range(8)]
    for handle in handles:
        handle.close()


def test_a_zarr_v3_array_through_fsspec_store(bucket: str) -> None:
    import zarr
    from zarr.storage import FsspecStore

    store = FsspecStore.from_url(f"s3bulk://{bucket}/arrays/a.zarr")
    written = zarr.create_array(store, shape=(200, 300), chunks=(50, 100), dtype="float32")
    values = np.arange(200 * 300, dtype="float32").reshape(200, 300)
    written[:] = values
    read = zarr.open_array(FsspecStore.from_url(f"s3bulk://{bucket}/arrays/a.zarr", read_only=True))
    np.testing.assert_array_equal(read[:], values)
    np.testing.assert_array_equal(read[120:130, 250:260], values[120:130, 250:260])


def test_dask_reads_1000_csv_objects(bucket: str) -> None:
    import dask.dataframe as dd
    import fsspec

    fs = fsspec.filesystem("s3bulk")
    fs.pipe({f"{bucket}/csv/{n:04d}.csv": f"n,square\n{n},{n * n}\n".encode() for n in range(1000)})
    frame = dd.read_csv(f"s3bulk://{bucket}/csv/*.csv").compute()
    assert len(frame) == 1000
    assert int(frame["square"].sum()) == sum(n * n for n in range(1000))
