"""An external sort: records in any order in, the same records in key order out, in memory
bounded whatever their count (issue 66).

sync and check walk two listings side by side in key order; an S3 Express directory bucket (and
any store that does the same) lists its keys in no order. Its listing is read whole into sorted
runs of at most `run_size` records each, spilled to files of their own (pickled, one record after
another), then merged back a record at a time with `heapq.merge`: memory holds one run being
filled, or one record per run while merging. Nothing comes out before the last record has gone
in, so a listing that fails mid-way gives nothing to merge, let alone to delete by.
"""

from __future__ import annotations

import heapq
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Generic, TypeVar

T = TypeVar("T")
RUN_SIZE = 100_000  # records per sorted run in memory (a listing's entry: ~0.5 KB)


class ExternalSort(Generic[T]):
    """`add` records, then iterate `sorted()` once: every record, in `key` order (equal keys in
    the order they came). Runs are spilled under `directory` (a temporary one by default, removed
    by `close` or when the iteration ends)."""

    def __init__(
        self, key: Callable[[T], str], *, run_size: int = RUN_SIZE, directory: str | None = None
    ) -> None:
        self.key = key
        self.run_size = max(1, run_size)
        self._directory = directory
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        self._buffer: list[T] = []
        self._runs: list[str] = []
        self.count = 0

    @property
    def runs(self) -> int:
        """Runs spilled to disk so far."""
        return len(self._runs)

    def add(self, records: Iterable[T]) -> None:
        for record in records:
            self._buffer.append(record)
            self.count += 1
            if len(self._buffer) >= self.run_size:
                self._spill()

    def _spill(self) -> None:
        self._buffer.sort(key=self.key)
        if self._temporary is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="s3bulk-sort-", dir=self._directory)
        path = os.path.join(self._temporary.name, f"run{len(self._runs):06d}")
        with open(path, "wb") as file:
            pickler = pickle.Pickler(file, protocol=pickle.HIGHEST_PROTOCOL)
            for record in self._buffer:
                pickler.dump(record)
                pickler.clear_memo()  # else the pickler keeps every record it wrote
        self._runs.append(path)
        self._buffer = []

    def sorted(self) -> Iterator[T]:
        """Every record added, in key order: from memory when they fit in one run, else the runs
        merged from their files, one record of each in memory."""
        try:
            if not self._runs:
                self._buffer.sort(key=self.key)
                yield from self._buffer
                return
            if self._buffer:
                self._spill()
            files = [open(path, "rb") for path in self._runs]  # noqa: SIM115 -- closed below
            try:
                yield from heapq.merge(*(_records(file) for file in files), key=self.key)
            finally:
                for file in files:
                    file.close()
        finally:
            self.close()

    def close(self) -> None:
        self._buffer = []
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None


def _records(file: IO[bytes]) -> Iterator[T]:
    unpickler = pickle.Unpickler(file)
    while True:
        try:
            yield unpickler.load()
        except EOFError:
            return
