"""_sources/tables.py: a listing's pages as typed rows, written a row group at a time, and a
file that is whole or absent."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3bulk._errors import UsageError
from s3bulk._sources.tables import TableWriter, listing_batch, listing_schema, table_format, timestamps
from s3bulk._stores.s3xml import ObjectInfo


def _page(start: int, count: int) -> list[ObjectInfo]:
    return [
        ObjectInfo(
            f"k/{n:06d}", n, "2026-11-28T18:35:12.123Z", f"etag{n}", "STANDARD", "CRC64NVME", "FULL_OBJECT"
        )
        for n in range(start, start + count)
    ]


def test_times_of_every_precision_s3_servers_send_become_utc_timestamps() -> None:
    found = timestamps(["2026-11-28T18:35:12.123Z", "2026-11-28T18:35:12Z", "2026-11-28T18:35:12.123456789Z"])
    assert found.type == pa.timestamp("us", tz="UTC")
    assert found.to_pylist()[1] == datetime.datetime(2026, 11, 28, 18, 35, 12, tzinfo=datetime.UTC)
    assert found.to_pylist()[2].microsecond == 123456


def test_a_time_that_is_no_time_is_null_not_the_whole_page_lost() -> None:
    assert timestamps(["2026-11-28T18:35:12Z", "yesterday"]).to_pylist()[1] is None


def test_rows_are_written_in_row_groups_as_they_fill(tmp_path: Path) -> None:
    target = tmp_path / "l.parquet"
    with TableWriter(str(target), listing_schema(), row_group=2500) as table:
        for start in range(0, 10_000, 1000):
            table.write(listing_batch(_page(start, 1000)))
            if start == 2000:  # 3,000 rows in: a row group is in the file already
                assert Path(f"{target}.partial").stat().st_size > 0
    assert not Path(f"{target}.partial").exists()
    meta = pq.ParquetFile(target).metadata
    assert meta.num_rows == 10_000
    assert meta.num_row_groups == 4  # three full groups and the rest
    read = pq.read_table(target)
    assert read.column("key").to_pylist()[-1] == "k/009999"
    assert read.column("checksum_type").to_pylist()[0] == "FULL_OBJECT"


def test_a_table_not_completed_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "l.arrow"
    with pytest.raises(RuntimeError), TableWriter(str(target), listing_schema()) as table:
        table.write(listing_batch(_page(0, 10)))
        raise RuntimeError("the listing failed")
    assert list(tmp_path.iterdir()) == []


def test_the_format_is_read_from_the_name_or_refused_in_one_line() -> None:
    assert table_format("x.PARQUET") == "parquet"
    assert table_format("x.csv") == "csv"
    with pytest.raises(UsageError, match=r"name it \.parquet, \.csv or \.arrow"):
        table_format("x.json")
