"""gather (`s3bulk gather`): one selection of HDF5 datasets across files, as one array. numpy is
imported where used: its BLAS starts threads on import, and a driver with threads cannot fork its
workers."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from s3bulk._api.base import Location, Progress, run_spec, sync_twin
from s3bulk._commands.base import locations
from s3bulk._commands.gather import ENGINE as GATHER
from s3bulk._commands.gather import GatherSpec
from s3bulk._config import AwsSettings
from s3bulk._errors import require_extra
from s3bulk._report import Report

if TYPE_CHECKING:
    import numpy as np


async def gather_to_file_async(
    sources: Location | Iterable[Location],
    dataset: str,
    selection: str = GatherSpec.selection,
    output: Location = GatherSpec.output,
    *,
    combine: str = GatherSpec.combine,
    axis: int = 0,
    scale: bool = False,
    cache: bool = True,
    cache_dir: Location | None = None,
    engine: str = GATHER.engine,
    workers: int | None = None,
    concurrency: int = GATHER.concurrency,
    max_in_flight_bytes: int = GATHER.max_in_flight_bytes,
    max_attempts: int | None = GATHER.max_attempts,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Gather `selection` of `dataset` from HDF5 files (URLs, `s3://bucket/wtk/*.h5` globs,
    prefixes or local paths) into `output` (.npy, .csv or .parquet), via a temp file and a rename.

    Files are joined along `axis` of each file's part (`combine="concat"`), or stacked on a new
    first axis (`"stack"`). `scale=True` divides by each file's `scale_factor` attribute. Chunk
    indexes are cached under `cache_dir` (default: ~/.cache/s3bulk/h5index) by URL and ETag."""
    started = time.perf_counter()
    report = await run_spec(
        GatherSpec,
        GATHER,
        {
            "sources": locations(sources, "sources"),
            "dataset": dataset,
            "selection": selection,
            "output": output,
            "combine": combine,
            "axis": axis,
            "scale": scale,
            "cache": cache,
            "cache_dir": cache_dir,
            "engine": engine,
            "workers": workers,
            "concurrency": concurrency,
            "max_in_flight_bytes": max_in_flight_bytes,
            "max_attempts": max_attempts,
            "settings": settings,
            "on_progress": on_progress,
            "journal": False,
        },
    )
    report.wall_seconds = time.perf_counter() - started
    return report


gather_to_file = sync_twin(gather_to_file_async)


async def gather_async(
    sources: Location | Iterable[Location],
    dataset: str,
    selection: str = GatherSpec.selection,
    *,
    combine: str = GatherSpec.combine,
    axis: int = 0,
    scale: bool = False,
    cache: bool = True,
    cache_dir: Location | None = None,
    engine: str = GATHER.engine,
    workers: int | None = None,
    concurrency: int = GATHER.concurrency,
    max_in_flight_bytes: int = GATHER.max_in_flight_bytes,
    max_attempts: int | None = GATHER.max_attempts,
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> np.ndarray:
    """`selection` of `dataset` across HDF5 files as one numpy array (options as in
    `gather_to_file_async`), e.g. `gather("s3://bucket/wtk/*.h5", "windspeed_100m", ":,1234")`."""
    require_extra("arrays", "s3bulk.gather")  # before numpy, which the extra brings
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="s3bulk-gather-") as directory:
        output = os.path.join(directory, "result.npy")
        await gather_to_file_async(
            sources,
            dataset,
            selection,
            output,
            combine=combine,
            axis=axis,
            scale=scale,
            cache=cache,
            cache_dir=cache_dir,
            engine=engine,
            workers=workers,
            concurrency=concurrency,
            max_in_flight_bytes=max_in_flight_bytes,
            max_attempts=max_attempts,
            settings=settings,
            on_progress=on_progress,
        )
        result: np.ndarray = np.load(output)
        return result


gather = sync_twin(gather_async)
