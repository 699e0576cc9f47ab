"""`s3bulk check SRC DST` (issue 21, item 5), against MinIO: names exactly what is missing at DST,
extra there, or differs (by size; by content at the same size, found from the file's MD5 against
the ETag, single-part and multipart), copies nothing, and exits 1 if anything differs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import Endpoint, new_bucket, run_cli

MiB = 1024 * 1024


def test_check_names_every_difference_and_copies_nothing(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    files = {
        "same.txt": b"same",
        "sub/big.bin": os.urandom(7 * MiB),
        "grown.txt": b"v1",
        "edited.txt": b"abcd",
    }
    for name, body in files.items():
        (tree / name).write_bytes(body)
    up = run_cli(
        minio.env,
        "cp",
        "--multipart-threshold",
        "5MiB",
        "--part-size",
        "5MiB",
        f"{tree}/",
        f"s3://{bucket}/t/",
    )
    assert up.returncode == 0, up.stderr
    same = run_cli(minio.env, "check", f"{tree}/", f"s3://{bucket}/t/")
    assert same.returncode == 0 and same.stdout == "" and "check: 4 the same" in same.stderr, same.stderr

    (tree / "grown.txt").write_bytes(b"v1 and more")  # another size
    (tree / "edited.txt").write_bytes(b"abXd")  # same size, other bytes
    (tree / "new.txt").write_bytes(b"new")  # not at the destination
    minio.client().put_object(Bucket=bucket, Key="t/only-there.txt", Body=b"x")  # extra
    big = bytearray(files["sub/big.bin"])
    big[6 * MiB] ^= 1  # inside the second part of a multipart object
    (tree / "sub" / "big.bin").write_bytes(bytes(big))
    found = run_cli(minio.env, "check", "--json", f"{tree}/", f"s3://{bucket}/t/")
    assert found.returncode == 1, found.stderr
    rows = [json.loads(line) for line in found.stdout.splitlines()]
    named = {(row["status"], Path(row["name"]).name) for row in rows if "status" in row}
    assert named == {
        ("differs", "grown.txt"),
        ("differs", "edited.txt"),
        ("differs", "big.bin"),
        ("missing", "new.txt"),
        ("extra", "only-there.txt"),
    }
    assert rows[-1]["summary"] == {"same": 1, "differs": 3, "missing": 1, "extra": 1}
    stored = minio.client().get_object(Bucket=bucket, Key="t/edited.txt")["Body"].read()
    assert stored == b"abcd"  # nothing was copied


def test_check_between_two_prefixes(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for key, body in (("a/x", b"1"), ("a/y", b"22"), ("b/x", b"1"), ("b/y", b"2!")):
        client.put_object(Bucket=bucket, Key=key, Body=body)
    found = run_cli(minio.env, "check", f"s3://{bucket}/a/", f"s3://{bucket}/b/")
    assert found.returncode == 1
    assert found.stdout == f"differs: s3://{bucket}/a/y (ETags differ)\n", found.stdout
    assert "check: 1 the same, 1 differs" in found.stderr
    client.put_object(Bucket=bucket, Key="b/y", Body=b"22")
    assert run_cli(minio.env, "check", f"s3://{bucket}/a/", f"s3://{bucket}/b/").returncode == 0


def test_check_holds_each_of_many_files_to_its_own_etag(minio: Endpoint, tmp_path: Path) -> None:
    """Files from 16 KiB under single-part ETags are hashed up to 16 at a time, in SIMD lanes
    (stores/digests.py): each must still be compared with its own object's ETag."""
    bucket = new_bucket(minio)
    tree = tmp_path / "many"
    tree.mkdir()
    for number in range(40):
        (tree / f"f{number:02d}").write_bytes(os.urandom(20_000 + 9_000 * number))
    up = run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/m/")
    assert up.returncode == 0, up.stderr
    edited = {"f03", "f17", "f38"}
    for name in edited:  # same size, one byte other
        body = bytearray((tree / name).read_bytes())
        body[len(body) // 2] ^= 1
        (tree / name).write_bytes(bytes(body))
    found = run_cli(minio.env, "check", "--json", f"{tree}/", f"s3://{bucket}/m/")
    assert found.returncode == 1, found.stderr
    rows = [json.loads(line) for line in found.stdout.splitlines()]
    assert {Path(row["name"]).name for row in rows if row.get("status") == "differs"} == edited
    assert rows[-1]["summary"] == {"same": 37, "differs": 3}


def test_a_key_no_file_may_be_named_by_is_named_not_a_traceback(minio: Endpoint, tmp_path: Path) -> None:
    """check of a download whose key holds ESC, beside a local file of that name (one made with
    --allow-control-chars): the key is refused as sync refuses it, named, exit 1; it was a
    ValueError out of the plan."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="p/ctl\x1bm", Body=b"a")
    minio.client().put_object(Bucket=bucket, Key="p/plain", Body=b"b")
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "ctl\x1bm").write_bytes(b"a")
    (tmp_path / "mirror" / "plain").write_bytes(b"b")
    checked = run_cli(minio.env, "check", f"s3://{bucket}/p/", f"{tmp_path}/mirror/")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stderr
    assert "failed: " in checked.stdout and "control character" in checked.stdout, checked.stdout
    assert "check: 1 the same" in checked.stderr, checked.stderr
