"""The Python API as a REPL user calls it: plain strings, `pathlib.Path`, tuples, one glob where a
list is expected. A string must never be iterated character by character (issue 17, item 2:
`remove(..., include="*.json")` once selected every object), and every public function has a
real, typed signature."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import Endpoint, make_tree, new_bucket
from test_vectors_load import embeddings, new_index

import s3bulk


def test_a_string_is_one_glob_and_other_types_are_refused(minio: Endpoint, aws_env: dict[str, str]) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for key in ("p/a.json", "p/b.json", "p/c.log", "p/d.txt"):
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    only_json = s3bulk.remove(f"s3://{bucket}/p/", include="*.json", dry_run=True)
    no_logs = s3bulk.remove(f"s3://{bucket}/p/", exclude="*.log", dry_run=True)
    a_tuple = s3bulk.remove(f"s3://{bucket}/p/", include=("*.json", "*.txt"), dry_run=True)
    assert (only_json.objects_done, no_logs.objects_done, a_tuple.objects_done) == (2, 3, 3)
    for bad in (5, b"*.json", [b"*.json"], ["*.json", None]):
        with pytest.raises(TypeError, match="include"):
            s3bulk.remove(f"s3://{bucket}/p/", include=bad, dry_run=True)  # type: ignore[arg-type]
    assert len(client.list_objects_v2(Bucket=bucket)["Contents"]) == 4


def test_paths_and_the_working_directory(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = new_bucket(minio)
    make_tree(tmp_path / "site", {"index.html": b"<html>", "a.txt": b"a", "skip.log": b"l"})
    up = s3bulk.copy(tmp_path / "site", f"s3://{bucket}/", exclude="*.log")  # a Path: copied with its name
    assert up.ok and up.objects_done == 2, up.failures
    head = minio.client().head_object(Bucket=bucket, Key="site/index.html")
    assert head["ContentType"] == "text/html"
    monkeypatch.chdir(tmp_path)
    down = s3bulk.copy(f"s3://{bucket}/site/index.html", "index.html")
    assert down.ok, down.failures
    assert (tmp_path / "index.html").read_bytes() == b"<html>"
    synced = s3bulk.sync(Path("site"), f"s3://{bucket}/mirror/", include="*.txt")
    moved = s3bulk.move(f"s3://{bucket}/mirror/", Path("moved"))
    assert (synced.objects_done, moved.objects_done, moved.objects_deleted) == (1, 1, 1)
    assert (tmp_path / "moved" / "a.txt").read_bytes() == b"a"
    listing = s3bulk.ls(f"s3://{bucket}/")
    assert [info.key for info in listing.objects] == ["site/a.txt", "site/index.html"]
    assert {job.command for job in s3bulk.list_jobs()} == {"cp", "sync", "mv"}


def test_resume_and_retry_failed_take_plain_arguments(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    make_tree(tmp_path / "d", {"a.txt": b"a", "b.txt": b"b"})
    first = s3bulk.copy(f"{tmp_path}/d/", f"s3://{bucket}/d/")
    again = s3bulk.resume(first.job_id, engine="async")
    retried = s3bulk.retry_failed(first.job_id, workers=1)
    assert (again.objects_already_done, retried.objects_done) == (2, 0)
    assert again.engine == "async" and retried.workers == 1


def test_vectors_with_plain_arguments_and_unnamed_columns(
    moto: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in moto.server.client_env().items():
        monkeypatch.setenv(name, value)
    vectors = embeddings(120, 8)
    source = tmp_path / "docs.parquet"
    pq.write_table(
        pa.table(
            {
                "id": [f"doc-{n}" for n in range(120)],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 8),
                "title": [f"t{n}" for n in range(120)],
            }
        ),
        source,
    )
    bucket, index = new_index(moto, 8)
    loaded = s3bulk.put_vectors(source, bucket, index, metadata_columns="title")
    assert loaded.ok and loaded.vectors_done == 120, loaded.failures
    assert "columns: vectors from column 'embedding', keys from column 'id'" in loaded.notes[0]
    checked = s3bulk.verify_vectors(str(source), bucket, (index,), metadata_columns=["title"], sample=None)
    assert checked.ok and checked.matched == 120
    assert s3bulk.count_vectors(bucket, index, segments=1) == {index: 120}  # moto has no segments


def test_gather_with_plain_arguments(tmp_path: Path) -> None:
    path = tmp_path / "wind.h5"
    values = np.arange(60, dtype=np.int32).reshape(20, 3)
    with h5py.File(path, "w") as handle:
        handle.create_dataset("speed", data=values, chunks=(5, 3), compression="gzip")
    assert (s3bulk.gather(path, "speed", ":,1") == values[:, 1]).all()
    report = s3bulk.gather_to_file([path], "speed", "2:4", tmp_path / "out.npy")
    assert report.ok and (np.load(tmp_path / "out.npy") == values[2:4]).all()
