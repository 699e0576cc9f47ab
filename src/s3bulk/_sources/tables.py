"""Listings and plans as tables (issue 67): `ls -r --output listing.parquet` (or `.csv`,
`.arrow`), `s3bulk.ls_table`, `du --output`, `check --output` and `sync --dry-run --output
plan.parquet`, so that what a job over billions of keys will do can be read by DuckDB or pandas
before it runs.

Rows are gathered into row groups of `ROW_GROUP` and written as each fills, so the file grows
as pages arrive and memory holds one group, not the listing. The file is written as
`NAME.partial` and renamed to NAME only once it is whole: a listing that failed half-way leaves
no file that looks like a complete one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from s3bulk._errors import UsageError, require_extra
from s3bulk._stores.s3xml import ObjectInfo, VersionInfo

if TYPE_CHECKING:
    import pyarrow as pa

ROW_GROUP = 65_536  # rows per row group (Parquet) or record batch (Arrow IPC, CSV)
FORMATS = {".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}


def table_format(path: str, flag: str = "--output") -> str:
    """parquet, csv or arrow, by the name's suffix; one line naming the choices else."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise UsageError(
            f"{flag} {path}: name it .parquet, .csv or .arrow (the format is read from the name)"
        )
    require_extra("parquet", f"{flag} {path}")
    return FORMATS[suffix]


def listing_schema(versions: bool = False) -> pa.Schema:
    """A listing's columns: what ListObjectsV2 says of each object, LastModified as a timestamp;
    with `versions`, ListObjectVersions' version id, latest flag and delete markers too."""
    import pyarrow as pa

    fields = [
        ("key", pa.string()),
        ("size", pa.int64()),
        ("last_modified", pa.timestamp("us", tz="UTC")),
        ("etag", pa.string()),
        ("storage_class", pa.string()),
        ("checksum_algorithm", pa.string()),
        ("checksum_type", pa.string()),
    ]
    if versions:
        fields += [("version_id", pa.string()), ("is_latest", pa.bool_()), ("delete_marker", pa.bool_())]
    return pa.schema(fields)


def plan_schema() -> pa.Schema:
    """A dry run's plan: one row per object, what would be done to it (the verb: copy, upload,
    download, rm; delete: sync --delete's; skip) and where, with the reason of a skip."""
    import pyarrow as pa

    return pa.schema(
        [
            ("action", pa.string()),
            ("source", pa.string()),
            ("destination", pa.string()),
            ("size", pa.int64()),
            ("skipped", pa.string()),
        ]
    )


def timestamps(texts: Sequence[str]) -> pa.Array:
    """ISO 8601 times as the service sent them, as UTC timestamps (microseconds), parsed by Arrow
    at once; an entry that is no time is null (`listing_problem` says so where it matters)."""
    import pyarrow as pa

    raw = pa.array(texts, pa.string())
    try:
        return raw.cast(pa.timestamp("ns", tz="UTC")).cast(pa.timestamp("us", tz="UTC"), safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([_one_time(text) for text in texts], pa.timestamp("us", tz="UTC"))


def _one_time(text: str) -> Any:
    import pyarrow as pa

    try:
        return (
            pa.scalar(text).cast(pa.timestamp("ns", tz="UTC")).cast(pa.timestamp("us", tz="UTC"), safe=False)
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def listing_batch(objects: Sequence[ObjectInfo]) -> pa.RecordBatch:
    """One page of a listing as a record batch of `listing_schema()`."""
    import pyarrow as pa

    return pa.record_batch(
        [
            pa.array([info.key for info in objects], pa.string()),
            pa.array([info.size for info in objects], pa.int64()),
            timestamps([info.modified for info in objects]),
            pa.array([info.etag for info in objects], pa.string()),
            pa.array([info.storage_class or None for info in objects], pa.string()),
            pa.array([info.checksum_algorithm or None for info in objects], pa.string()),
            pa.array([info.checksum_type or None for info in objects], pa.string()),
        ],
        schema=listing_schema(),
    )


def versions_batch(versions: Sequence[VersionInfo]) -> pa.RecordBatch:
    """One page of ListObjectVersions as a record batch of `listing_schema(versions=True)`."""
    import pyarrow as pa

    markers = [version.delete_marker for version in versions]
    return pa.record_batch(
        [
            pa.array([version.key for version in versions], pa.string()),
            pa.array(
                [None if marker else version.size for version, marker in zip(versions, markers, strict=True)],
                pa.int64(),
            ),
            timestamps([version.modified for version in versions]),
            pa.array([version.etag or None for version in versions], pa.string()),
            pa.nulls(len(versions), pa.string()),
            pa.nulls(len(versions), pa.string()),
            pa.nulls(len(versions), pa.string()),
            pa.array([version.version_id for version in versions], pa.string()),
            pa.array([version.is_latest for version in versions], pa.bool_()),
            pa.array(markers, pa.bool_()),
        ],
        schema=listing_schema(versions=True),
    )


def records_batch(records: Iterable[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Records (dicts) as a batch of `schema`: a column a record lacks is null."""
    import pyarrow as pa

    rows = list(records)
    return pa.record_batch(
        [pa.array([row.get(name) for row in rows], schema.field(name).type) for name in schema.names],
        schema=schema,
    )


class TableWriter:
    """Batches of one schema into a .parquet, .csv or .arrow file, a row group at a time, written
    as `PATH.partial` and renamed to PATH by `close()` (`close(completed=False)` removes it)."""

    def __init__(self, path: str, schema: pa.Schema, row_group: int = ROW_GROUP) -> None:
        self.path = path
        self.kind = table_format(path)
        self.schema = schema
        self.row_group = row_group
        self.rows = 0
        self._partial = f"{path}.partial"
        self._waiting: list[pa.RecordBatch] = []
        self._waiting_rows = 0
        self._writer: Any = self._open()

    def _open(self) -> Any:
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            raise UsageError(f"--output {self.path}: no such directory {directory}")
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            return pq.ParquetWriter(self._partial, self.schema, compression="zstd")
        if self.kind == "csv":
            import pyarrow.csv as pcsv

            return pcsv.CSVWriter(self._partial, self.schema)
        import pyarrow as pa

        return pa.ipc.new_file(self._partial, self.schema)

    def write(self, batch: pa.RecordBatch) -> None:
        """Take a batch; a row group is written once `row_group` rows wait."""
        if not batch.num_rows:
            return
        self._waiting.append(batch)
        self._waiting_rows += batch.num_rows
        self.rows += batch.num_rows
        if self._waiting_rows >= self.row_group:
            self._flush()

    def _flush(self) -> None:
        if not self._waiting:
            return
        import pyarrow as pa

        table = pa.Table.from_batches(self._waiting, self.schema).combine_chunks()
        self._waiting, self._waiting_rows = [], 0
        if self.kind == "parquet":
            self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        else:
            self._writer.write_table(table)

    def close(self, completed: bool = True) -> None:
        """Write what waits and put the file in its place; or, not `completed`, remove it."""
        if self._writer is None:
            return
        try:
            if completed:
                self._flush()
            self._writer.close()
        finally:
            self._writer = None
            if completed:
                os.replace(self._partial, self.path)
            elif os.path.exists(self._partial):
                os.unlink(self._partial)

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        self.close(completed=kind is None)
