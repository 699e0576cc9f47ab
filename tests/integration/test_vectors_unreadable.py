"""A vectors source file that cannot be read (issue 62, item 7): `vectors sync --delete` of a
directory holding one says so in one line naming the file, and deletes nothing (its rows would
have been taken as gone); against the S3 Vectors stand-in."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import S3BULK, run_cli, without_root

from s3bulk.testing.vectorstandin import VectorsStandInServer

DIMENSION = 4


def _parquet(path: Path, keys: list[str]) -> None:
    vectors = np.ones(len(keys) * DIMENSION, dtype=np.float32)
    pq.write_table(
        pa.table({"key": keys, "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors), DIMENSION)}),
        path,
    )


def _corrupt_pages(path: Path) -> None:
    """Bytes of its pages overwritten, its footer whole: it opens, and its rows cannot be read."""
    data = bytearray(path.read_bytes())
    data[8:40] = b"\xff" * 32
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["unreadable", "corrupt"])
def test_vectors_sync_of_a_file_it_cannot_read_is_one_line_and_deletes_nothing(
    standin: VectorsStandInServer, tmp_path: Path, damage: str
) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env |= standin.client_env()
    bucket, index = f"vb-{damage}", "docs"
    assert run_cli(env, "vectors", "create-bucket", bucket).returncode == 0
    made = run_cli(
        env, "vectors", "create-index", "--bucket", bucket, "--index", index, "--dimension", str(DIMENSION)
    )
    assert made.returncode == 0, made.stderr
    source = tmp_path / "source"
    source.mkdir()
    _parquet(source / "a.parquet", ["a1", "a2"])
    _parquet(source / "b.parquet", ["b1", "b2"])
    sync = ["vectors", "sync", str(source), "--bucket", bucket, "--index", index, "--delete"]
    assert run_cli(env, *sync).returncode == 0
    broken = source / "b.parquet"
    if damage == "unreadable":
        broken.chmod(0)
    else:
        _corrupt_pages(broken)
    try:
        result = subprocess.run(
            without_root([*S3BULK, *sync]), env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        broken.chmod(0o644)
    assert result.returncode in (1, 2), result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(broken) in lines[0], result.stderr
    counted = run_cli(env, "vectors", "count", "--bucket", bucket, "--index", index)
    assert counted.stdout.split() == [f"{bucket}/{index}", "4"], counted.stdout + counted.stderr
