"""Single objects and buckets against MinIO: `cat` and `pipe` of 300 MiB through pipes with
bounded memory, presigned URLs used by plain urllib, `ls` of buckets, `mb`, `rb --force` of a
bucket of 2,500 objects, the Python API's single-object verbs, and bad input for each."""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.request
from datetime import UTC
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, make_tree, new_bucket, run_cli

import s3bulk
from s3bulk._benchmark.measure import measure

MiB = 1024 * 1024
BIG = 300 * MiB
# 300 MiB written to stdout in 1 MiB blocks that differ (so a misplaced part changes the hash)
WRITER = (
    "import sys\n"
    "out = sys.stdout.buffer\n"
    "block = bytes(range(256)) * 4096\n"
    "for n in range(300):\n"
    "    out.write(n.to_bytes(4, 'big') + block[4:])\n"
)


def expected_digest() -> str:
    block = bytes(range(256)) * 4096
    digest = hashlib.sha256()
    for n in range(300):
        digest.update(n.to_bytes(4, "big") + block[4:])
    return digest.hexdigest()


def shell(*words: str) -> str:
    return " ".join(f"'{word}'" for word in words)


def test_pipe_then_cat_300_mib_through_pipes_with_bounded_memory(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    url = f"s3://{bucket}/stream.bin"
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    upload = measure(
        ["sh", "-c", f"{shell(sys.executable, str(writer))} | {shell(*S3BULK, 'pipe', url)}"],
        minio.env,
        "s3bulk pipe",
        "stdin",
    )
    assert upload.returncode == 0
    assert upload.peak_rss_mib < 200, upload.peak_rss_mib  # 4 parts of 8 MiB in flight (~135 here)
    stored = minio.client().head_object(Bucket=bucket, Key="stream.bin")
    assert stored["ContentLength"] == BIG and stored["ETag"].endswith('-38"')  # 38 parts of 8 MiB

    download = measure(
        ["sh", "-c", f"{shell(*S3BULK, 'cat', url)} | sha256sum"],
        minio.env,
        "s3bulk cat",
        "cat",
        keep_stdout=True,
    )
    assert download.returncode == 0
    assert download.stdout.split()[0] == expected_digest()
    assert download.peak_rss_mib < 240, download.peak_rss_mib  # 8 ranges of 8 MiB in flight (~180 here)

    same = measure(  # `cp s3://b/k -` is `cat`
        ["sh", "-c", f"{shell(*S3BULK, 'cp', url, '-')} | sha256sum"], minio.env, "cp", "-", keep_stdout=True
    )
    assert same.returncode == 0 and same.stdout.split()[0] == expected_digest()


def test_cat_into_head_stops_quietly(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"z" * (40 * MiB))
    done = measure(
        ["sh", "-c", f"{shell(*S3BULK, 'cat', f's3://{bucket}/k')} | head -c 5"],
        minio.env,
        "cat",
        "head",
        keep_stdout=True,
    )
    assert done.returncode == 0 and done.stdout == "zzzzz"


def test_cp_dash_uploads_stdin_with_attributes(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    source = tmp_path / "small.txt"
    source.write_bytes(b"hello\n")
    with source.open("rb") as stdin:
        import subprocess

        done = subprocess.run(
            [
                *S3BULK,
                "cp",
                "-",
                f"s3://{bucket}/hello.txt",
                "--content-type",
                "text/plain",
                "--metadata",
                "a=b",
            ],
            env=minio.env,
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    stored = minio.client().get_object(Bucket=bucket, Key="hello.txt")
    assert stored["Body"].read() == b"hello\n"
    assert stored["ContentType"] == "text/plain" and stored["Metadata"] == {"a": "b"}


def test_presigned_get_and_put_work_with_plain_urllib(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="dir/a b.txt", Body=b"secret")
    got = run_cli(minio.env, "presign", f"s3://{bucket}/dir/a b.txt", "--expires-in", "300")
    assert got.returncode == 0, got.stderr
    with urllib.request.urlopen(got.stdout.strip()) as reply:
        assert reply.read() == b"secret"

    put = run_cli(minio.env, "presign", f"s3://{bucket}/up.txt", "--put")
    request = urllib.request.Request(put.stdout.strip(), data=b"from urllib", method="PUT")
    with urllib.request.urlopen(request) as reply:
        assert reply.status == 200
    assert minio.client().get_object(Bucket=bucket, Key="up.txt")["Body"].read() == b"from urllib"


def test_ls_lists_buckets_mb_makes_and_rb_force_empties_2500_objects(minio: Endpoint, tmp_path: Path) -> None:
    made = run_cli(minio.env, "mb", "s3://made-by-mb")
    assert made.returncode == 0, made.stderr
    listed = run_cli(minio.env, "ls")
    assert listed.returncode == 0 and any(line.endswith(" made-by-mb") for line in listed.stdout.splitlines())

    client = minio.client()
    tree = make_tree(tmp_path / "k", {f"{n:05d}": b"x" for n in range(2500)})
    assert run_cli(minio.env, "cp", f"{tree}/", "s3://made-by-mb/k/").returncode == 0
    refused = run_cli(minio.env, "rb", "s3://made-by-mb")
    assert refused.returncode == 2 and "rb --force" in refused.stderr
    assert client.list_objects_v2(Bucket="made-by-mb")["KeyCount"] > 0  # nothing deleted
    removed = run_cli(minio.env, "rb", "--force", "s3://made-by-mb")
    assert removed.returncode == 0, removed.stderr
    names = [bucket["Name"] for bucket in client.list_buckets()["Buckets"]]
    assert "made-by-mb" not in names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cat", "s3://bucket/prefix/"], "name one object"),
        (["presign", "s3://bucket/k", "--expires-in", "0"], "--expires-in 0: SigV4 allows 1 to 604800"),
        (["mb", "s3://bucket/key"], "name a bucket"),
        (["cp", "-", "local.txt"], "'-' streams one object"),
        (["pipe", "s3://bucket/k", "--storage-class", "COLD"], "--storage-class 'COLD'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(minio: Endpoint, args: list[str], message: str) -> None:
    done = run_cli(minio.env, *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_python_api_single_objects_and_buckets(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path
) -> None:
    bucket = s3bulk.make_bucket("s3://api-objects")
    assert bucket == "api-objects" and "api-objects" in [b.name for b in s3bulk.list_buckets()]
    assert s3bulk.put("s3://api-objects/a.bin", b"abc") == 3
    assert s3bulk.get("s3://api-objects/a.bin") == b"abc"
    chunks = (bytes([n]) * MiB for n in range(12))  # 12 MiB from an iterator: multipart
    assert s3bulk.put("s3://api-objects/gen.bin", chunks) == 12 * MiB
    target = tmp_path / "gen.bin"
    assert s3bulk.get_to_file("s3://api-objects/gen.bin", target) == 12 * MiB
    assert target.read_bytes() == b"".join(bytes([n]) * MiB for n in range(12))
    source = tmp_path / "file.txt"
    source.write_text("from a file")
    s3bulk.put("s3://api-objects/file.txt", source, attributes=s3bulk.Attributes(cache_control="no-store"))
    assert minio.client().head_object(Bucket="api-objects", Key="file.txt")["CacheControl"] == "no-store"
    with urllib.request.urlopen(s3bulk.presign("s3://api-objects/file.txt", expires_in=60)) as reply:
        assert reply.read() == b"from a file"
    with pytest.raises(s3bulk.UsageError, match="not empty"):
        s3bulk.remove_bucket("s3://api-objects")
    with pytest.raises(s3bulk.UsageError, match=r"no such file 'hello'.*pass bytes"):
        s3bulk.put("s3://api-objects/text.txt", "hello")  # a str is a path, as everywhere in the API
    assert s3bulk.remove_bucket("s3://api-objects", force=True) == "api-objects"


def test_du_counts_in_total_by_storage_class_and_by_depth(minio: Endpoint) -> None:
    import json

    bucket = new_bucket(minio)
    client = minio.client()
    for key, size in (("p/a/1", 10), ("p/a/2", 20), ("p/top", 5)):
        client.put_object(Bucket=bucket, Key=key, Body=b"x" * size)
    client.put_object(Bucket=bucket, Key="p/b/c/3", Body=b"x" * 30, StorageClass="REDUCED_REDUNDANCY")
    total = run_cli(minio.env, "du", "--json", f"s3://{bucket}/p/")
    assert [json.loads(line) for line in total.stdout.splitlines()] == [
        {"url": f"s3://{bucket}/p/", "objects": 4, "bytes": 65}
    ]
    classes = run_cli(minio.env, "du", "--json", "--group", "storage-class", f"s3://{bucket}/p/")
    assert {
        row["group"]: (row["objects"], row["bytes"]) for row in map(json.loads, classes.stdout.splitlines())
    } == {
        "REDUCED_REDUNDANCY": (1, 30),
        "STANDARD": (3, 35),
    }
    levels = run_cli(minio.env, "du", "--depth", "1", f"s3://{bucket}/p/")
    assert levels.returncode == 0, levels.stderr
    assert [line.split() for line in levels.stdout.splitlines()] == [
        ["30", "2", "objects", f"s3://{bucket}/p/a/"],
        ["30", "1", "object", f"s3://{bucket}/p/b/"],
        ["5", "1", "object", f"s3://{bucket}/p/top"],
    ]
    human = run_cli(minio.env, "du", "-H", f"s3://{bucket}/p/")
    assert human.stdout.split()[:2] == ["65", "B"]


def test_cli_conventions_recursive_logging_and_stats_without_a_terminal(
    minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    tree = tmp_path / "tree"
    tree.mkdir()
    for n in range(1500):
        (tree / f"f{n:04d}").write_bytes(b"x")
    env = minio.env | {"S3BULK_STATS_INTERVAL": "0.2"}
    log = tmp_path / "s3bulk.log"
    # -r by habit from aws s3: the directory's contents, as with a trailing '/'
    done = run_cli(
        env, "cp", "-r", str(tree), f"s3://{bucket}/t", "--log-level", "info", "--log-file", str(log)
    )
    assert done.returncode == 0, done.stderr
    pages = minio.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="t/")
    assert sum(page["KeyCount"] for page in pages) == 1500
    stats = [line for line in done.stderr.splitlines() if line.startswith("upload: ") and "obj/s" in line]
    assert stats, done.stderr  # stderr is a pipe here: periodic stats lines, not a live display
    quiet = run_cli(env, "rm", "-r", f"s3://{bucket}/t", "--no-progress")
    assert quiet.returncode == 0 and "obj/s" not in quiet.stderr, quiet.stderr
    assert minio.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0

    missing = run_cli(env, "ls", "s3://no-such-bucket-here/", "--log-level", "info", "--log-file", str(log))
    assert missing.returncode != 0
    assert "gave up after 1 attempt(s): list s3://no-such-bucket-here/: NoSuchBucket" in log.read_text()
    assert minio.server.secret_key not in log.read_text()
    bad = run_cli(env, "ls", "--log-level", "loud")
    assert (
        bad.returncode == 2
        and bad.stderr == "error: --log-level 'loud': use one of debug, info, warning, error\n"
    )


def test_python_api_ranges_head_and_a_listing_of_datetimes(minio: Endpoint, aws_env: dict[str, str]) -> None:
    from datetime import datetime, timedelta

    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="d/a.txt", Body=b"0123456789", ContentType="text/plain")
    minio.client().put_object(Bucket=bucket, Key="d/b.txt", Body=b"x")
    assert s3bulk.get(f"s3://{bucket}/d/a.txt", range=(2, 5)) == b"234"
    assert s3bulk.get(f"s3://{bucket}/d/a.txt", range=(8, 100)) == b"89"  # what there is
    found = s3bulk.head(f"s3://{bucket}/d/a.txt")
    assert found["size"] == 10 and found["content_type"] == "text/plain"
    listing = s3bulk.ls(f"s3://{bucket}/d/")
    assert len(listing) == 2 and [info.key for info in listing] == ["d/a.txt", "d/b.txt"]
    moment = next(iter(listing)).last_modified
    assert isinstance(moment, datetime) and abs(moment - datetime.now(UTC)) < timedelta(minutes=5)
    with pytest.raises(s3bulk.UsageError, match="give 0 <= start <= end"):
        s3bulk.get(f"s3://{bucket}/d/a.txt", range=(5, 2))


def test_open_writes_in_parts_and_reads_with_seek(minio: Endpoint, aws_env: dict[str, str]) -> None:
    bucket = new_bucket(minio)
    url = f"s3://{bucket}/f/data.bin"
    blocks = [bytes([n]) * MiB for n in range(20)]
    attributes = s3bulk.Attributes(content_type="application/x-blocks", metadata={"n": "20"}, tags={"t": "1"})
    with s3bulk.open(url, "wb", attributes=attributes, buffer_size=5 * MiB) as out:
        for block in blocks:
            out.write(block)
        out.flush()  # sends nothing short: parts go as they fill, the object on close
        assert out.writable() and not out.closed and out.tell() == 20 * MiB  # what pyarrow checks
    assert out.closed
    stored = minio.client().head_object(Bucket=bucket, Key="f/data.bin")
    assert stored["ContentLength"] == 20 * MiB and "-" in stored["ETag"]  # uploaded in parts
    assert stored["ContentType"] == "application/x-blocks" and stored["Metadata"] == {"n": "20"}
    with s3bulk.open(url) as reader:
        reader.seek(3 * MiB + 10)
        assert reader.read(4) == b"\x03" * 4
        assert reader.tell() == 3 * MiB + 14
        reader.seek(0)
        assert hashlib.sha256(reader.read()).digest() == hashlib.sha256(b"".join(blocks)).digest()

    with pytest.raises(RuntimeError), s3bulk.open(f"s3://{bucket}/f/broken.bin", "wb") as out:
        out.write(b"x" * (6 * MiB))
        raise RuntimeError("the producer failed")
    assert minio.client().list_objects_v2(Bucket=bucket, Prefix="f/broken")["KeyCount"] == 0
    with pytest.raises(s3bulk.UsageError, match="use 'rb' or 'wb'"):
        s3bulk.open(url, "r+")

    # what put sets, open sets too, in one request or in parts
    every = s3bulk.Attributes(
        storage_class="REDUCED_REDUNDANCY", sse="AES256", acl="private", expires="2030-01-02T03:04:05Z"
    )
    for name, size in (("one.bin", 1000), ("parts.bin", 11 * MiB)):
        with s3bulk.open(f"s3://{bucket}/f/{name}", "wb", attributes=every, buffer_size=5 * MiB) as out:
            out.write(b"e" * size)
        stored = minio.client().head_object(Bucket=bucket, Key=f"f/{name}")
        assert stored["ContentLength"] == size and stored["StorageClass"] == "REDUCED_REDUNDANCY"
        assert stored["ServerSideEncryption"] == "AES256"
        assert stored["ResponseMetadata"]["HTTPHeaders"]["expires"] == "Wed, 02 Jan 2030 03:04:05 GMT"


def test_open_writes_a_large_object_in_bounded_memory(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path
) -> None:
    """open(url, "wb") hands what is written to pipe's upload through a queue of two chunks, and
    the upload holds a few parts in flight: 300 MiB written a MiB at a time grows the process by
    its parts (8 MiB each; 15 MiB measured), not by what was written."""
    from conftest import run_script

    bucket = new_bucket(minio)
    done = run_script(
        dict(os.environ),
        tmp_path,
        f"""
        import hashlib, resource, s3bulk
        url = "s3://{bucket}/big.bin"
        with s3bulk.open(url + ".warm", "wb") as out:  # the client, its loop and its pools
            out.write(b"w" * 1000)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        block, digest = bytes(range(256)) * 4096, hashlib.sha256()
        with s3bulk.open(url, "wb", buffer_size=8 * 1024 * 1024) as out:
            for _ in range(300):
                out.write(block)
                digest.update(block)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(grown // 1024, digest.hexdigest())
        """,
    )
    assert done.returncode == 0, done.stderr
    grown, digest = done.stdout.split()
    assert int(grown) < 80, f"{grown} MiB more for 300 MiB written"  # 5 parts of 8 MiB at most
    stored = minio.client().get_object(Bucket=bucket, Key="big.bin")["Body"].read()
    assert len(stored) == 300 * MiB and hashlib.sha256(stored).hexdigest() == digest


def test_open_streams_sequential_reads_seeks_anywhere_and_refuses_a_replaced_object(
    minio: Endpoint, aws_env: dict[str, str]
) -> None:
    bucket = new_bucket(minio)
    body = os.urandom(21 * MiB + 123)
    client = minio.client()
    client.put_object(Bucket=bucket, Key="big", Body=body)
    url = f"s3://{bucket}/big"
    with s3bulk.open(url, buffer_size=2 * MiB) as reader:
        pieces = []
        while piece := reader.read(700_001):  # not a multiple of anything: crosses every boundary
            pieces.append(piece)
        assert b"".join(pieces) == body
        for start, length in [(0, 10), (len(body) - 5, 100), (5 * MiB - 3, 3 * MiB), (17, 0), (2 * MiB, 1)]:
            reader.seek(start)
            assert reader.read(length) == body[start : start + length], (start, length)
        reader.seek(-7, os.SEEK_END)
        assert reader.read() == body[-7:]
        reader.seek(1)
        assert reader.readline() == body[1 : body.index(b"\n", 1) + 1]
    with s3bulk.open(url, buffer_size=MiB) as reader:
        assert reader.read(100) == body[:100]
        client.put_object(Bucket=bucket, Key="big", Body=b"replaced")  # another writer, midway
        with pytest.raises(OSError, match=rf"changed since it was opened.*s3://{bucket}/big"):
            reader.seek(10 * MiB)  # a read somewhere new asks for the ETag it opened
            reader.read(10)


def test_ctrl_c_during_pipe_aborts_its_multipart_upload(minio: Endpoint) -> None:
    import os
    import signal
    import subprocess
    import time

    bucket = new_bucket(minio)
    client = minio.client()
    producer = subprocess.Popen(  # a slow stream: 1 MiB every 20 ms, for 8 s
        [sys.executable, "-c", "import os,sys,time\nfor _ in range(400):\n"
         "    sys.stdout.buffer.write(os.urandom(1 << 20)); sys.stdout.flush(); time.sleep(0.02)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    job = subprocess.Popen(
        [*S3BULK, "pipe", f"s3://{bucket}/stream.bin"],
        stdin=producer.stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=minio.env,
        start_new_session=True,
    )
    started = time.monotonic()
    while not client.list_multipart_uploads(Bucket=bucket).get("Uploads"):  # parts are going up
        assert job.poll() is None and time.monotonic() - started < 60
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    _, err = job.communicate(timeout=60)
    producer.kill()
    assert job.returncode == 130 and err == "interrupted\n", err
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
