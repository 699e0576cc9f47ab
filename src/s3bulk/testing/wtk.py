"""WTK-like HDF5 files for tests and benchmarks: what `gather` is built for, at any size.

NREL's WIND Toolkit stores one year per file as 2-D datasets (time x location), uint16 with a
`scale_factor` attribute (true value = stored / scale_factor), gzip + shuffle, chunked. The values
here are wind-like so they compress like the real thing: per location a mean speed and a diurnal
cycle, plus noise that is smooth in time (AR(1)) and shared by neighbouring locations.

Chunks are written time block by time block across all locations, as a model run appends them,
so the chunks one location needs lie far apart in the file and a reader cannot get them all in
one readahead.

    python -m s3bulk.testing.wtk OUT_DIR --files 8 --times 8760 --locations 100000
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SCALE_FACTOR = 100.0


@dataclass(frozen=True)
class WtkSpec:
    times: int = 8760
    locations: int = 100_000
    chunks: tuple[int, int] = (2190, 1000)
    dataset: str = "windspeed_100m"
    dtype: str = "uint16"
    compression: str | None = "gzip"  # None, or one of COMPRESSIONS
    shuffle: bool = True
    fletcher32: bool = False
    seed: int = 0
    libver: str = "earliest"  # "latest": the newest format's chunk indexes (a fixed array here)


COMPRESSIONS = ("gzip", "lzf", "szip", "blosc-zstd", "zstd", "lz4", "bitshuffle-lz4")


def compression_options(name: str | None) -> dict[str, object]:
    """h5py's create_dataset options for a compression of COMPRESSIONS (hdf5plugin's filters)."""
    if name in (None, "gzip", "lzf"):
        return {"compression": name}
    if name == "szip":
        return {"compression": "szip", "compression_opts": ("nn", 32)}
    import hdf5plugin

    plugins: dict[str, Callable[[], Any]] = {
        "blosc-zstd": lambda: hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE),
        "zstd": lambda: hdf5plugin.Zstd(clevel=3),
        "lz4": hdf5plugin.LZ4,
        "bitshuffle-lz4": lambda: hdf5plugin.Bitshuffle(cname="lz4"),
    }
    if name not in plugins:
        raise ValueError(f"unknown compression {name!r}: use one of {', '.join(COMPRESSIONS)}")
    return dict(plugins[name]())


def windspeed(spec: WtkSpec, file_number: int, times: slice, locations: slice) -> np.ndarray:
    """The block [times, locations] of one file's wind speed in m/s, computed independently per
    block (the AR(1) noise restarts each time block from a stationary state) so any chunk can be
    written on its own and the generator never holds more than one chunk row."""
    rng = np.random.default_rng([spec.seed, file_number, times.start, locations.start])
    columns = np.arange(locations.start, locations.stop)
    site = np.random.default_rng([spec.seed, 99]).random(spec.locations, dtype=np.float32)[columns]
    mean = 4.0 + 6.0 * site
    phase = 2 * np.pi * site
    angle = (2 * np.pi * np.arange(times.start, times.stop) / 24.0).astype(np.float32)
    # 1.5 sin(angle + phase), as two outer products: no per-element sine
    diurnal = np.outer(np.sin(angle), 1.5 * np.cos(phase)) + np.outer(np.cos(angle), 1.5 * np.sin(phase))
    groups = (columns - locations.start) // 50  # neighbouring locations share weather
    shared = np.empty((angle.size, int(groups.max()) + 1), dtype=np.float32)
    shared[0] = rng.normal(0.0, 2.0, shared.shape[1])
    shocks = rng.normal(0.0, 2.0 * np.sqrt(1 - 0.97**2), shared.shape).astype(np.float32)
    for step in range(1, shared.shape[0]):
        shared[step] = 0.97 * shared[step - 1] + shocks[step]
    values = rng.standard_normal((angle.size, columns.size), dtype=np.float32)
    values *= 0.2
    values += diurnal
    values += shared[:, groups]
    values += mean
    return np.clip(values, 0.0, 60.0, out=values)


def write_file(path: str | os.PathLike[str], spec: WtkSpec, file_number: int = 0) -> Path:
    """One WTK-like file; its time axis is `spec.times` long."""
    import h5py

    path = Path(path)
    with h5py.File(path, "w", libver=spec.libver) as handle:
        dataset = handle.create_dataset(
            spec.dataset,
            shape=(spec.times, spec.locations),
            dtype=spec.dtype,
            chunks=spec.chunks,
            shuffle=spec.shuffle and spec.compression not in ("blosc-zstd", "bitshuffle-lz4"),
            fletcher32=spec.fletcher32,
            **compression_options(spec.compression),
        )
        dataset.attrs["scale_factor"] = SCALE_FACTOR
        dataset.attrs["units"] = "m s-1"
        handle.create_dataset("time_index", data=np.arange(spec.times, dtype="int64") * 3600)
        rows, cols = spec.chunks
        for start in range(0, spec.times, rows):
            block = slice(start, min(start + rows, spec.times))
            for first in range(0, spec.locations, cols):
                columns = slice(first, min(first + cols, spec.locations))
                values = windspeed(spec, file_number, block, columns) * SCALE_FACTOR
                dataset[block, columns] = values.astype(spec.dtype)
    return path


def write_files(
    directory: str | os.PathLike[str], count: int, spec: WtkSpec, processes: int = 0
) -> list[Path]:
    """`count` files named wtk_2007.h5, wtk_2008.h5, ...; written in parallel processes."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"wtk_{2007 + number}.h5" for number in range(count)]
    workers = processes or min(count, os.cpu_count() or 1)
    if workers <= 1:
        return [write_file(path, spec, number) for number, path in enumerate(paths)]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(write_file, paths, [spec] * count, range(count)))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out_dir")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--times", type=int, default=8760)
    parser.add_argument("--locations", type=int, default=100_000)
    parser.add_argument("--chunks", default="2190x1000", help="chunk shape, TIMESxLOCATIONS")
    parser.add_argument("--compression", default="gzip", choices=[*COMPRESSIONS, "none"])
    parser.add_argument("--no-shuffle", action="store_true")
    parser.add_argument("--libver", default="earliest", choices=["earliest", "latest"])
    options = parser.parse_args(argv)
    rows, cols = (int(part) for part in options.chunks.lower().split("x"))
    spec = WtkSpec(
        times=options.times,
        locations=options.locations,
        chunks=(rows, cols),
        compression=None if options.compression == "none" else options.compression,
        shuffle=not options.no_shuffle,
        libver=options.libver,
    )
    for path in write_files(options.out_dir, options.files, spec):
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
