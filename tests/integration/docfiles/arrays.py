"""What docs/arrays.md's examples read: two HDF5 files with group/data here, and a NetCDF-4 file
era_2021.nc (the WIND-Toolkit-like files come from `python -m s3bulk.testing.wtk`)."""

import h5py
import numpy as np
import xarray as xr

for name in ("a.h5", "b.h5"):
    with h5py.File(name, "w") as f:
        f.create_dataset("group/data", data=np.arange(100).reshape(10, 10), chunks=(5, 5))
xr.Dataset({"t2m": (("time", "lat"), np.zeros((4, 3), "float32"))}).to_netcdf(
    "era_2021.nc", engine="h5netcdf"
)
