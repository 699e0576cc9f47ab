"""Listings and plans as tables (issue 67): `ls -r --output x.parquet|.csv|.arrow`,
`s3bulk.ls_table`, `du --output`, `check --output`, `sync --dry-run --output plan.parquet`, each
read back by DuckDB as written."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from conftest import Endpoint, new_bucket, run_cli

KEYS = [f"data/{n:03d}.bin" for n in range(40)] + ['data/odd name,"quoted"\n.txt', "data/deep/x/y.txt"]


@pytest.fixture(scope="module")
def listed(minio: Endpoint) -> str:
    bucket = new_bucket(minio, "tables")
    client = minio.client()
    for n, key in enumerate(KEYS):
        client.put_object(Bucket=bucket, Key=key, Body=b"x" * n)
    return bucket


def _json_listing(env: dict[str, str], url: str) -> list[dict[str, object]]:
    done = run_cli(env, "ls", "-r", "--json", url)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".arrow"])
def test_ls_output_writes_every_object_as_ls_json_lists_it(
    minio: Endpoint, listed: str, tmp_path: Path, suffix: str
) -> None:
    url = f"s3://{listed}/data/"
    target = tmp_path / f"listing{suffix}"
    done = run_cli(minio.env, "ls", "-r", "--output", str(target), url)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert not Path(f"{target}.partial").exists()
    if suffix == ".parquet":
        table = pq.read_table(target)
    elif suffix == ".csv":
        table = pcsv.read_csv(target, parse_options=pcsv.ParseOptions(newlines_in_values=True))
    else:
        table = pa.ipc.open_file(target).read_all()
    expected = _json_listing(minio.env, url)
    assert table.column("key").to_pylist() == [row["key"] for row in expected] == sorted(KEYS)
    assert table.column("size").to_pylist() == [row["size"] for row in expected]
    assert table.column("etag").to_pylist() == [row["etag"] for row in expected]
    modified = table.column("last_modified").to_pylist()
    assert all(moment.tzinfo is not None for moment in modified)
    assert [moment.isoformat()[:19] for moment in modified] == [
        str(row["last_modified"])[:19] for row in expected
    ]


def test_duckdb_reads_the_parquet_listing_as_written(minio: Endpoint, listed: str, tmp_path: Path) -> None:
    target = tmp_path / "listing.parquet"
    assert run_cli(minio.env, "ls", "-r", "--output", str(target), f"s3://{listed}/").returncode == 0
    count, total, kind = duckdb.sql(
        f"SELECT count(*), sum(size), typeof(any_value(last_modified)) FROM '{target}'"
    ).fetchall()[0]
    assert (count, total) == (len(KEYS), sum(range(len(KEYS))))
    assert kind == "TIMESTAMP WITH TIME ZONE"
    (newest,) = duckdb.sql(f"SELECT key FROM '{target}' WHERE key LIKE '%quoted%'").fetchall()[0]
    assert newest == KEYS[40]


def test_ls_table_is_a_record_batch_reader_of_the_listing(aws_env: dict[str, str], listed: str) -> None:
    import s3bulk

    reader = s3bulk.ls_table(f"s3://{listed}/data/deep/")
    assert isinstance(reader, pa.RecordBatchReader)
    table = reader.read_all()
    assert table.column("key").to_pylist() == ["data/deep/x/y.txt"]
    assert table.schema.field("last_modified").type == pa.timestamp("us", tz="UTC")
    every = s3bulk.ls_table(f"s3://{listed}/")
    (count,) = duckdb.from_arrow(every).aggregate("count(*)").fetchall()[0]
    assert count == len(KEYS)


def test_ls_output_without_recursive_is_refused_and_writes_nothing(
    minio: Endpoint, listed: str, tmp_path: Path
) -> None:
    target = tmp_path / "listing.parquet"
    done = run_cli(minio.env, "ls", "--output", str(target), f"s3://{listed}/")
    assert done.returncode == 2, done.stderr
    assert "add -r" in done.stderr
    assert not target.exists()
    done = run_cli(minio.env, "ls", "-r", "--output", str(tmp_path / "listing.txt"), f"s3://{listed}/")
    assert done.returncode == 2
    assert ".parquet, .csv or .arrow" in done.stderr


def test_a_listing_that_fails_leaves_no_table(minio: Endpoint, tmp_path: Path) -> None:
    target = tmp_path / "listing.parquet"
    done = run_cli(minio.env, "ls", "-r", "--output", str(target), "s3://no-such-bucket-k67/")
    assert done.returncode != 0
    assert not target.exists()
    assert not Path(f"{target}.partial").exists()


def test_sync_dry_run_output_is_the_plan_duckdb_reads(minio: Endpoint, listed: str, tmp_path: Path) -> None:
    destination = new_bucket(minio, "plan")
    client = minio.client()
    client.put_object(Bucket=destination, Key="data/000.bin", Body=b"")  # the same: not in the plan
    client.put_object(Bucket=destination, Key="data/stale.bin", Body=b"old")  # extra: deleted
    plan = tmp_path / "plan.parquet"
    done = run_cli(
        minio.env,
        "sync",
        "--dry-run",
        "--delete",
        "--size-only",
        "--output",
        str(plan),
        f"s3://{listed}/data/",
        f"s3://{destination}/data/",
    )
    assert done.returncode == 0, done.stderr
    rows = duckdb.sql(
        f"SELECT action, count(*), sum(size) FROM '{plan}' GROUP BY action ORDER BY action"
    ).fetchall()
    assert rows == [("cp", len(KEYS) - 1, sum(range(1, len(KEYS)))), ("delete", 1, 3)]
    (stale,) = duckdb.sql(f"SELECT source FROM '{plan}' WHERE action = 'delete'").fetchall()[0]
    assert stale == f"s3://{destination}/data/stale.bin"
    listed_after = client.list_objects_v2(Bucket=destination)["KeyCount"]
    assert listed_after == 2  # a dry run: nothing copied, nothing deleted


def test_plan_output_needs_dry_run(minio: Endpoint, listed: str, tmp_path: Path) -> None:
    done = run_cli(
        minio.env, "cp", "--output", str(tmp_path / "p.parquet"), f"s3://{listed}/data/", str(tmp_path)
    )
    assert done.returncode == 2
    assert "add --dry-run" in done.stderr


def test_du_and_check_output_tables(minio: Endpoint, listed: str, tmp_path: Path) -> None:
    table = tmp_path / "du.csv"
    done = run_cli(minio.env, "du", "--depth", "1", "--output", str(table), f"s3://{listed}/data/")
    assert done.returncode == 0, done.stderr
    rows = duckdb.sql(f"SELECT url, objects FROM '{table}' ORDER BY url").fetchall()
    assert (f"s3://{listed}/data/deep/", 1) in rows
    assert sum(count for _, count in rows) == len(KEYS)
    destination = new_bucket(minio, "checked")
    minio.client().put_object(Bucket=destination, Key="data/000.bin", Body=b"")
    found = tmp_path / "check.parquet"
    done = run_cli(
        minio.env, "check", "--output", str(found), f"s3://{listed}/data/", f"s3://{destination}/data/"
    )
    assert done.returncode == 1, done.stderr
    counts = dict(duckdb.sql(f"SELECT status, count(*) FROM '{found}' GROUP BY status").fetchall())
    assert counts == {"missing": len(KEYS) - 1}
