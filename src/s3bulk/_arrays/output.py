"""Where a gathered array lands: .npy, .csv or .parquet, always via a temp file and a rename, so
a failed or interrupted gather never leaves a half-written output behind."""

from __future__ import annotations

import os

import numpy as np

from s3bulk._errors import UsageError

FORMATS = (".npy", ".csv", ".parquet")


def output_format(path: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise UsageError(f"cannot write {path}: name the output .npy, .csv or .parquet")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"cannot write {path}: directory {directory} does not exist")
    return suffix


def check_tabular(suffix: str, shape: tuple[int, ...]) -> None:
    if suffix != ".npy" and len(shape) > 2:
        raise UsageError(f"the result is {len(shape)}-D {shape}: {suffix} holds 1-D or 2-D data; write .npy")


def publish(npy_path: str, target: str, labels: list[str]) -> None:
    """Turn the finished .npy into `target` (same directory, so the rename is atomic)."""
    suffix = output_format(target)
    if suffix == ".npy":
        os.replace(npy_path, target)
        return
    values = np.load(npy_path, mmap_mode="r")
    table = values.reshape(-1, 1) if values.ndim <= 1 else values
    partial = f"{npy_path}.{suffix.lstrip('.')}"
    try:
        import pyarrow as pa

        columns = {label: np.ascontiguousarray(table[:, number]) for number, label in enumerate(labels)}
        if suffix == ".csv":  # pyarrow writes the shortest text that reads back to the same value
            import pyarrow.csv

            pyarrow.csv.write_csv(pa.table(columns), partial)
        else:
            import pyarrow.parquet

            pyarrow.parquet.write_table(pa.table(columns), partial)
        os.replace(partial, target)
    finally:
        del values
        for leftover in (partial, npy_path):
            if os.path.exists(leftover):
                os.unlink(leftover)
