"""The compatibility matrix (issue 23): the same end-to-end checks against every real S3 server the
project builds (MinIO, Versity's gateway), each started on a loopback port by its own fixture.

Each test is one row of docs/compatibility.md and asserts what a user relies on (objects, bytes,
ETags, attributes by HEAD, exit codes), on every server the same way; where a server differs
from S3, the test says how and the document says so. `make test-servers` runs this file (MinIO
included, so the table's every cell comes from one run); `make test` leaves it out: the rest of
the suite covers MinIO already.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    S3BULK,
    Endpoint,
    bucket_problems,
    held_at,
    make_tree,
    new_bucket,
    run_cli,
    tree_problems,
)

from s3bulk.testing import GarageServer, MinioServer, VersityServer
from s3bulk.testing.throttle import S3ThrottlingProxy

pytestmark = pytest.mark.servers

SERVERS = {"minio": MinioServer, "versitygw": VersityServer, "garage": GarageServer}
MiB = 1024 * 1024
ODD_NAMES = ["a b.txt", "ünïcødé.txt", "plus+sign", "per%cent", "eq=x&y", "tilde~", "quote'd", "semi;colon"]


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    with SERVERS[request.param]() as running:
        yield Endpoint(running)


def tree() -> dict[str, bytes]:
    files = {f"d{n % 4}/f{n:03d}.bin": os.urandom(n * 37 % 4000 + 1) for n in range(60)}
    files |= {f"odd/{name}": name.encode() * 3 for name in ODD_NAMES}
    files["doc.json"] = b'{"a": 1}'
    files["big.bin"] = os.urandom(20 * MiB)
    return files


def listed(server: Endpoint, bucket: str, prefix: str = "") -> list[str]:
    pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_upload_and_download_a_tree(server: Endpoint, tmp_path: Path) -> None:
    """Single-part and multipart uploads (odd names included), Content-Type from the name, the
    multipart ETag's form, and downloads checked against the ETags."""
    bucket = new_bucket(server)
    files = tree()
    make_tree(tmp_path / "up", files)
    parts = ["--multipart-threshold", "8MiB", "--part-size", "5MiB"]
    up = run_cli(server.env, "cp", str(tmp_path / "up") + "/", f"s3://{bucket}/t/", *parts)
    assert up.returncode == 0, up.stderr
    assert bucket_problems(server, bucket, "t/", files) == []
    client = server.client()
    assert client.head_object(Bucket=bucket, Key="t/big.bin")["ETag"].strip('"').endswith("-4")
    assert client.head_object(Bucket=bucket, Key="t/doc.json")["ContentType"] == "application/json"
    down = run_cli(server.env, "cp", f"s3://{bucket}/t/", str(tmp_path / "down") + "/", "--json")
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout.splitlines()[-1])["summary"]["objects_done"] == len(files)
    assert tree_problems(tmp_path / "down", files) == []


def test_server_side_copy_keeps_the_attributes(server: Endpoint) -> None:
    """CopyObject and, above the threshold, UploadPartCopy: body, Content-Type, Cache-Control and
    user metadata all arrive."""
    bucket = new_bucket(server)
    client = server.client()
    bodies = {"src/small.txt": b"small body", "src/large.bin": os.urandom(12 * MiB)}
    for key, body in bodies.items():
        client.put_object(
            Bucket=bucket,
            Key=key,
            Body=body,
            ContentType="text/x-s3bulk",
            CacheControl="max-age=60",
            Metadata={"origin": "matrix"},
        )
    copied = run_cli(
        server.env,
        "cp",
        f"s3://{bucket}/src/",
        f"s3://{bucket}/dst/",
        "--copy-multipart-threshold",
        "8MiB",
        "--part-size",
        "5MiB",
    )
    assert copied.returncode == 0, copied.stderr
    for key, body in bodies.items():
        target = key.replace("src/", "dst/")
        head = client.head_object(Bucket=bucket, Key=target)
        assert (head["ContentType"], head.get("CacheControl"), head["Metadata"]) == (
            "text/x-s3bulk",
            "max-age=60",
            {"origin": "matrix"},
        ), target
        stored = client.get_object(Bucket=bucket, Key=target)["Body"].read()
        assert hashlib.sha256(stored).digest() == hashlib.sha256(body).digest(), target


def test_sync_rounds_and_check(server: Endpoint, tmp_path: Path) -> None:
    """A second sync sends nothing, a changed file is sent alone, --delete removes exactly the
    extra object, and `check` then finds both sides the same."""
    bucket = new_bucket(server)
    files = {f"s/{n:03d}.txt": f"file {n}\n".encode() * (n + 1) for n in range(40)}
    root = make_tree(tmp_path / "src", files)
    target = f"s3://{bucket}/sync/"

    def sync(*extra: str) -> dict[str, int]:
        done = run_cli(server.env, "sync", str(root) + "/", target, "--json", *extra)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])["summary"]

    assert sync()["objects_done"] == 40
    again = sync()
    assert (again["objects_done"], again["objects_unchanged"]) == (0, 40)
    (root / "s/007.txt").write_bytes(b"changed, and longer than before\n")
    (root / "s/011.txt").unlink()
    assert sync()["objects_done"] == 1
    assert sync("--delete")["objects_deleted"] == 1
    assert sorted(listed(server, bucket, "sync/")) == sorted(
        f"sync/{key}" for key in files if key != "s/011.txt"
    )
    check = run_cli(server.env, "check", str(root) + "/", target)
    assert check.returncode == 0, check.stdout + check.stderr


def test_remove_and_move(server: Endpoint) -> None:
    """mv copies then deletes each object; rm of a prefix deletes in DeleteObjects batches."""
    bucket = new_bucket(server)
    client = server.client()
    for n in range(1500):  # two DeleteObjects batches
        client.put_object(Bucket=bucket, Key=f"a/{n // 1000}/{n:04d}", Body=b"%d" % n)
    moved = run_cli(server.env, "mv", f"s3://{bucket}/a/0/", f"s3://{bucket}/b/")
    assert moved.returncode == 0, moved.stderr
    assert listed(server, bucket, "a/0/") == [] and len(listed(server, bucket, "b/")) == 1000
    assert len(listed(server, bucket, "a/1/")) == 500
    assert client.get_object(Bucket=bucket, Key="b/0123")["Body"].read() == b"123"
    removed = run_cli(server.env, "rm", f"s3://{bucket}/", "--json")
    assert removed.returncode == 0, removed.stderr
    assert listed(server, bucket) == []


def test_a_killed_upload_resumes(server: Endpoint, tmp_path: Path) -> None:
    """SIGKILL of the job and its workers mid-way, then --resume: every object present, once."""
    bucket = new_bucket(server)
    files = {f"r/{n:04d}.bin": os.urandom(n % 900 + 1) for n in range(400)}
    root = make_tree(tmp_path / "src", files)
    state = tmp_path / "jobs"
    with S3ThrottlingProxy(server.server.endpoint) as proxy:  # the journal keeps its endpoint
        env = server.env | {"AWS_ENDPOINT_URL": proxy.endpoint, "S3BULK_STATE_DIR": str(state)}
        command = [*S3BULK, "cp", str(root) + "/", f"s3://{bucket}/", "--concurrency", "8"]
        with held_at(proxy, 150, command, env, tmp_path / "job.log") as job:
            job.kill_group()
            job.wait()
        journal = next(state.glob("*.db"))
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
            done_before = db.execute("SELECT count(*) FROM items WHERE state = 'done'").fetchone()[0]
        resumed = run_cli(env, "cp", "--resume", journal.stem, "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout.splitlines()[-1])["summary"]
    assert summary["objects_done"] + summary.get("objects_skipped", 0) == len(files) - done_before, summary
    assert bucket_problems(server, bucket, "", files) == []


def test_listing_order_delimiters_and_key_ranges(server: Endpoint) -> None:
    """`ls -r` prints every key in key order, sequentially and in parallel key ranges alike; a
    listing by delimiter shows the common prefixes."""
    bucket = new_bucket(server)
    client = server.client()
    keys = sorted({f"{a}/{b:02d}/k{c}" for a in "abcde" for b in range(12) for c in range(9)})
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    for ranges in ("off", "on"):
        printed = run_cli(server.env, "ls", "-r", f"s3://{bucket}/", "--list-ranges", ranges, "--json")
        assert printed.returncode == 0, printed.stderr
        assert [json.loads(line)["key"] for line in printed.stdout.splitlines()] == keys, ranges
    top = run_cli(server.env, "ls", f"s3://{bucket}/")
    assert top.returncode == 0, top.stderr
    assert [line.split()[-1] for line in top.stdout.splitlines()] == ["a/", "b/", "c/", "d/", "e/"]


# Keys XML 1.0 cannot carry as they are (a control character), and one holding U+FFFD, which Go's
# XML writer puts in their place; beside them, keys whose URL decoding would change them.
XML_CANNOT_CARRY = [
    "p/x\x01y",
    "p/cr\rlf\nt\tab",
    "p/fffd\ufffd",
    "p/a+b",
    "p/c%41d",
    "p/sp ace",
    "p/amp&lt<>",
]


def test_keys_xml_cannot_carry_are_listed_as_they_are_or_the_listing_stops(
    server: Endpoint, request: pytest.FixtureRequest
) -> None:
    """Listings are asked for as plain XML, and URL-encoded where a page holds what plain XML
    cannot say exactly. MinIO and Garage encode then, and every key is listed as stored, by key
    ranges and by delimiter; versitygw ignores encoding-type=url and writes U+FFFD for such a
    character, so its listing stops in one line rather than name a key that is not there."""
    bucket = new_bucket(server)
    client = server.client()
    for key in XML_CANNOT_CARRY:
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    for flags in (["-r", "--json"], ["--json"]):
        printed = run_cli(server.env, "ls", *flags, f"s3://{bucket}/p/")
        if request.node.callspec.params["server"] == "versitygw":
            assert printed.returncode == 1, printed.stdout
            assert "did not URL-encode them when asked" in printed.stderr, printed.stderr
            continue
        assert printed.returncode == 0, printed.stderr
        assert sorted(json.loads(line)["key"] for line in printed.stdout.splitlines()) == sorted(
            XML_CANNOT_CARRY
        )


# What each server does with a key that a file system cannot hold as it is (a PUT by boto3):
# MinIO refuses it, Versity's gateway stores it under a normalised name, Garage keeps it.
STORED_AS = {
    "minio": {"a//b": None, "x/./y": None},
    "versitygw": {"a//b": "a/b", "x/./y": "x/y"},
    "garage": {"a//b": "a//b", "x/./y": "x/./y"},
}


def _letters(key: str) -> str:
    return key.replace("/", "").replace(".", "")


def test_directory_markers_and_keys_a_file_system_cannot_hold(
    server: Endpoint, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """An empty 'dir/' marker beside 'dir/file' copies server-side (Versity's gateway refuses a
    CopyObject of a marker: s3bulk writes it anew) and downloads as a directory; a key with an
    empty or '.' segment, where the server keeps one, is refused by name on download, never
    written somewhere else."""
    name = request.node.callspec.params["server"]
    bucket, copy = new_bucket(server), new_bucket(server)
    # after a PUT of a key ending in '/', some servers leave bytes on the connection that make the
    # next request on it wait for boto3's read timeout: that PUT gets a client of its own
    server.client().put_object(Bucket=bucket, Key="dir/", Body=b"", ContentType="application/x-directory")
    client = server.client()
    client.put_object(Bucket=bucket, Key="dir/file", Body=b"in the directory")
    stored = {}
    for key, expected in STORED_AS[name].items():
        try:
            client.put_object(Bucket=bucket, Key=key, Body=key.encode())
        except client.exceptions.ClientError:
            stored[key] = None
        else:
            found = listed(server, bucket)
            stored[key] = next((k for k in found if _letters(k) == _letters(key)), f"none of {found}")
        assert stored[key] == expected, (name, key, stored[key])
    synced = run_cli(server.env, "sync", f"s3://{bucket}/", f"s3://{copy}/")
    assert synced.returncode == 0, synced.stderr
    assert sorted(listed(server, copy)) == sorted(listed(server, bucket))
    assert client.head_object(Bucket=copy, Key="dir/")["ContentType"] == "application/x-directory"
    down = run_cli(server.env, "cp", f"s3://{bucket}/", str(tmp_path / "down") + "/")
    odd = [key for key, where in stored.items() if where == key]  # kept as named: refused locally
    assert down.returncode == (1 if odd else 0), down.stderr
    assert all(f"s3://{bucket}/{key}: refused key" in down.stderr for key in odd), down.stderr
    assert (tmp_path / "down" / "dir" / "file").read_bytes() == b"in the directory"
    landed = sorted(
        path.relative_to(tmp_path / "down").as_posix()
        for path in (tmp_path / "down").rglob("*")
        if path.is_file()
    )
    normalised = sorted(where for where in stored.values() if where is not None and where not in odd)
    assert landed == sorted(["dir/file", *normalised])


@pytest.mark.parametrize("payload", ["--signed-payload", "--unsigned-payload"])
def test_uploads_carry_the_checksum_the_server_keeps(server: Endpoint, tmp_path: Path, payload: str) -> None:
    """Every algorithm of --checksum-algorithm, whole and in parts (a CRC's full-object, a SHA's
    per part), signed and unsigned over HTTP: what HEAD shows in checksum mode is the value of
    the file's bytes (docs/compatibility.md, "Checksums")."""
    from test_checksums import composite, expected

    bucket = new_bucket(server)
    small, large = os.urandom(100_000), os.urandom(11 * MiB)
    make_tree(tmp_path, {"small": small, "large": large})
    client = server.client()
    for algorithm in ("CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1"):
        options = ["--multipart-threshold", "8MiB", "--part-size", "5MiB", "--checksum-algorithm", algorithm]
        up = run_cli(server.env, "cp", "-r", payload, *options, f"{tmp_path}/", f"s3://{bucket}/{algorithm}/")
        assert up.returncode == 0, up.stderr
        for name, data in (("small", small), ("large", large)):
            head = client.head_object(Bucket=bucket, Key=f"{algorithm}/{name}", ChecksumMode="ENABLED")
            crc = algorithm.startswith("CRC") or name == "small"
            value = expected(algorithm, data) if crc else composite(algorithm, data, 5 * MiB)
            assert head.get(f"Checksum{algorithm}") == value, (algorithm, name)
            assert head.get("ChecksumType") == ("FULL_OBJECT" if crc else "COMPOSITE")


def test_open_writes_carry_the_checksum_the_server_keeps(
    server: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`s3bulk.open(url, "wb")` (the signed client, as `pipe`) sends the settings' checksum, whole and in
    parts: the default CRC64NVME full-object, SHA256 per part; what HEAD shows in checksum mode
    is the value of the bytes written."""
    from test_checksums import composite, expected

    import s3bulk

    for name, value in server.server.client_env().items():
        monkeypatch.setenv(name, value)
    bucket = new_bucket(server)
    client = server.client()
    small, large = os.urandom(100_000), os.urandom(11 * MiB)
    for algorithm in ("CRC64NVME", "SHA256"):
        settings = s3bulk.AwsSettings.from_env(checksum_algorithm=algorithm)
        for name, data in (("small", small), ("large", large)):
            key = f"{algorithm}/{name}"
            with s3bulk.open(f"s3://{bucket}/{key}", "wb", buffer_size=5 * MiB, settings=settings) as out:
                out.write(data)
            head = client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
            whole = algorithm == "CRC64NVME" or name == "small"
            value = expected(algorithm, data) if whole else composite(algorithm, data, 5 * MiB)
            assert head.get(f"Checksum{algorithm}") == value, (algorithm, name, head)
            assert head.get("ChecksumType") == ("FULL_OBJECT" if whole else "COMPOSITE")


def test_downloads_are_checked_by_the_checksum_the_server_keeps(server: Endpoint, tmp_path: Path) -> None:
    """Objects boto3 wrote with its default checksum (CRC32, one PUT) and in parts with a
    full-object CRC64NVME download verified, whole (the GET carries the checksum) and in ranges
    (their CRCs combined): no object is counted unverified, and the bytes are the objects'."""
    import base64

    import s3bulk_native

    bucket = new_bucket(server)
    client = server.client()
    small, parts = os.urandom(300_000), [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(1234)]
    client.put_object(Bucket=bucket, Key="d/default", Body=small)  # boto3's default: a CRC32
    upload = client.create_multipart_upload(
        Bucket=bucket, Key="d/parts", ChecksumAlgorithm="CRC64NVME", ChecksumType="FULL_OBJECT"
    )
    done = []
    for number, part in enumerate(parts, 1):
        answer = client.upload_part(
            Bucket=bucket, Key="d/parts", UploadId=upload["UploadId"], PartNumber=number, Body=part,
            ChecksumAlgorithm="CRC64NVME",
        )  # fmt: skip
        done.append(
            {"PartNumber": number, "ETag": answer["ETag"], "ChecksumCRC64NVME": answer["ChecksumCRC64NVME"]}
        )
    whole = base64.b64encode(s3bulk_native.checksum("CRC64NVME", b"".join(parts))).decode()
    client.complete_multipart_upload(
        Bucket=bucket, Key="d/parts", UploadId=upload["UploadId"], MultipartUpload={"Parts": done},
        ChecksumCRC64NVME=whole, ChecksumType="FULL_OBJECT",
    )  # fmt: skip
    for options in ([], ["--multipart-threshold", "8MiB", "--part-size", "5MiB"]):  # whole, then ranges
        target = tmp_path / f"down{len(options)}"
        down = run_cli(server.env, "cp", "--json", *options, f"s3://{bucket}/d/", f"{target}/")
        assert down.returncode == 0, down.stderr
        summary = json.loads(down.stdout.splitlines()[-1])["summary"]
        assert (summary["objects_done"], summary["objects_unverified"]) == (2, 0), summary
        assert (target / "default").read_bytes() == small
        assert (target / "parts").read_bytes() == b"".join(parts)


# Which conditions each server takes (issue 62): a condition no version meets is refused (412)
# where it is looked at. S3 takes every one; where a server ignores one, s3bulk does not rely on it.
TAKES = {
    "minio": {
        "GET": True,
        "CopyObject": True,
        "UploadPartCopy": True,
        "DeleteObject": False,
        "DeleteObjects": False,
    },
    "versitygw": {
        "GET": True,
        "CopyObject": True,
        "UploadPartCopy": True,
        "DeleteObject": True,
        "DeleteObjects": False,
    },
    "garage": {
        "GET": True,
        "CopyObject": True,
        "UploadPartCopy": True,
        "DeleteObject": False,
        "DeleteObjects": False,
    },
}


def test_the_conditions_each_server_takes(server: Endpoint, request: pytest.FixtureRequest) -> None:
    """If-Match on a ranged GET, x-amz-copy-source-if-match on CopyObject and UploadPartCopy,
    If-Match on DeleteObject and <ETag> in DeleteObjects, each with an ETag no version has: taken
    means refused with 412 and nothing done. docs/compatibility.md's table is this one."""
    import botocore

    bucket, client = new_bucket(server), server.client()
    never = '"0123456789abcdef0123456789abcdef"'
    client.put_object(Bucket=bucket, Key="a", Body=b"a" * (6 * MiB))
    source = {"Bucket": bucket, "Key": "a"}
    upload = client.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
    tries = {
        "GET": lambda: client.get_object(Bucket=bucket, Key="a", Range="bytes=0-9", IfMatch=never),
        "CopyObject": lambda: client.copy_object(
            Bucket=bucket, Key="c", CopySource=source, CopySourceIfMatch=never
        ),
        "UploadPartCopy": lambda: client.upload_part_copy(
            Bucket=bucket, Key="m", UploadId=upload, PartNumber=1, CopySource=source, CopySourceIfMatch=never
        ),
        "DeleteObject": lambda: client.delete_object(Bucket=bucket, Key="a", IfMatch=never),
    }
    taken = {}
    for name, attempt in tries.items():
        client.put_object(Bucket=bucket, Key="a", Body=b"a" * (6 * MiB))
        try:
            attempt()
            taken[name] = False
        except botocore.exceptions.ClientError as error:
            assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 412, (name, error)
            taken[name] = True
    client.abort_multipart_upload(Bucket=bucket, Key="m", UploadId=upload)
    client.put_object(Bucket=bucket, Key="a", Body=b"a")
    answer = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a", "ETag": never}]})
    taken["DeleteObjects"] = bool(answer.get("Errors"))
    assert taken == TAKES[request.node.callspec.params["server"]]
    assert "c" not in listed(server, bucket)  # a refused copy made nothing


def test_a_writer_racing_a_copy_in_parts_or_a_move_loses_nothing(server: Endpoint) -> None:
    """Another writer overwrites a source between two UploadPartCopy of its copy (the copy begins
    again: the destination is the new version whole), and another source between its copy and
    its delete by mv (kept, the item fails by name): on every server, whichever conditions it
    takes (`TAKES`)."""
    from s3bulk.testing.hostile import HostileS3, Meanwhile

    bucket, client = new_bucket(server), server.client()
    old, new = b"1" * (12 * MiB), b"2" * (12 * MiB)
    for key in ("big", "small"):
        client.put_object(Bucket=bucket, Key=key, Body=old)
    parts = ["--copy-multipart-threshold", "5MiB", "--part-size", "5MiB"]
    with HostileS3(server.server.endpoint) as hostile:
        env = server.env | {"AWS_ENDPOINT_URL": hostile.endpoint}
        overwrite = Meanwhile(lambda: client.put_object(Bucket=bucket, Key="big", Body=new))
        hostile.misbehave(overwrite, operation="UploadPartCopy", bucket=bucket, after=1, times=1)
        copied = run_cli(env, "cp", *parts, f"s3://{bucket}/big", f"s3://{bucket}/big-copy")
        assert copied.returncode == 0, copied.stdout + copied.stderr
        after = Meanwhile(lambda: client.put_object(Bucket=bucket, Key="small", Body=new), after=True)
        hostile.misbehave(after, operation="CopyObject", bucket=bucket, times=1)
        moved = run_cli(env, "mv", f"s3://{bucket}/small", f"s3://{bucket}/small-moved")
    assert moved.returncode == 1 and "changed after it was copied" in moved.stdout + moved.stderr
    body = {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in listed(server, bucket)}
    assert body == {"big": new, "big-copy": new, "small": new, "small-moved": old}


# What each server does with a condition on a write (PutObject, CompleteMultipartUpload,
# CopyObject), asked with boto3, and what s3bulk's probe (`Storage.write_conditions`) finds of it:
# "412" refused (the condition honoured), "writes" ignored. docs/compatibility.md's table is this one.
WRITES = {
    "minio": {
        "PutObject If-None-Match": "412",
        "PutObject If-Match": "412",
        "Complete If-None-Match": "412",
        "Complete If-Match": "412",
        "CopyObject If-None-Match": "writes",
    },
    "versitygw": {
        "PutObject If-None-Match": "412",
        "PutObject If-Match": "412",
        "Complete If-None-Match": "412",
        "Complete If-Match": "412",
        "CopyObject If-None-Match": "writes",
    },
    "garage": {
        "PutObject If-None-Match": "writes",
        "PutObject If-Match": "writes",
        "Complete If-None-Match": "writes",
        "Complete If-Match": "writes",
        "CopyObject If-None-Match": "writes",
    },
}


def test_the_write_conditions_each_server_honours(server: Endpoint, request: pytest.FixtureRequest) -> None:
    """If-None-Match: * and If-Match of an ETag no version has, on PutObject, CompleteMultipartUpload
    and CopyObject onto an existing key; s3bulk's probe finds the same, and `cp -n` onto a prefix
    holding half the files writes the other half and leaves the half there as it was."""
    import asyncio

    import botocore

    from s3bulk._config import AwsSettings
    from s3bulk._stores.storage import Storage

    name = request.node.callspec.params["server"]
    bucket, client = new_bucket(server), server.client()
    never = '"' + "0" * 32 + '"'
    found = {}

    def attempt(what: str, write: object) -> None:
        client.put_object(Bucket=bucket, Key="a", Body=b"before")
        try:
            write()  # type: ignore[operator]
            found[what] = "writes"
        except botocore.exceptions.ClientError as error:
            assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 412, (what, error)
            found[what] = "412"
            assert client.get_object(Bucket=bucket, Key="a")["Body"].read() == b"before"

    def complete(**condition: str) -> object:
        upload = client.create_multipart_upload(Bucket=bucket, Key="a")["UploadId"]
        part = client.upload_part(Bucket=bucket, Key="a", UploadId=upload, PartNumber=1, Body=b"parts")
        try:
            return client.complete_multipart_upload(
                Bucket=bucket,
                Key="a",
                UploadId=upload,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
                **condition,
            )
        finally:
            with contextlib.suppress(botocore.exceptions.ClientError):
                client.abort_multipart_upload(Bucket=bucket, Key="a", UploadId=upload)

    client.put_object(Bucket=bucket, Key="other", Body=b"other")
    attempt(
        "PutObject If-None-Match",
        lambda: client.put_object(Bucket=bucket, Key="a", Body=b"x", IfNoneMatch="*"),
    )
    attempt("PutObject If-Match", lambda: client.put_object(Bucket=bucket, Key="a", Body=b"x", IfMatch=never))
    attempt("Complete If-None-Match", lambda: complete(IfNoneMatch="*"))
    attempt("Complete If-Match", lambda: complete(IfMatch=never))
    attempt(
        "CopyObject If-None-Match",
        lambda: client.copy_object(
            Bucket=bucket, Key="a", CopySource={"Bucket": bucket, "Key": "other"}, IfNoneMatch="*"
        ),
    )
    assert found == WRITES[name]

    async def probed() -> tuple[bool, bool, bool]:
        storage = Storage(AwsSettings(endpoint_url=server.server.endpoint, region="us-east-1"))
        try:
            conditions = await storage.write_conditions(bucket, "p/")
        finally:
            await storage.close()
        return conditions.none_match, conditions.match, conditions.copy

    env_keys = server.server.client_env()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env_keys.items():
            patch.setenv(key, value)
        probe = asyncio.run(probed())
    table = WRITES[name]
    assert probe == (
        table["PutObject If-None-Match"] == "412",
        table["PutObject If-Match"] == "412",
        table["CopyObject If-None-Match"] == "412",
    )


def test_cp_n_leaves_what_is_there_whatever_the_server_honours(server: Endpoint, tmp_path: Path) -> None:
    """`cp -n` of 20 files onto a prefix holding 10 of them (other bytes): the 10 there stay as
    they were, the 10 missing are written, on a server that takes If-None-Match (one PUT each) and
    on one that ignores it (a HEAD first)."""
    bucket, client = new_bucket(server), server.client()
    files = {f"f{n:02d}": f"new {n}".encode() for n in range(20)}
    make_tree(tmp_path / "src", files)
    for n in range(0, 20, 2):
        client.put_object(Bucket=bucket, Key=f"p/f{n:02d}", Body=b"there")
    done = run_cli(server.env, "cp", "-n", f"{tmp_path / 'src'}/", f"s3://{bucket}/p/")
    assert done.returncode == 0, done.stderr
    stored = {
        key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in listed(server, bucket, "p/")
    }
    assert stored == {
        f"p/{name}": (b"there" if int(name[1:]) % 2 == 0 else body) for name, body in files.items()
    }


def test_checksum_settings_when_required_send_none_and_still_move_every_byte(
    server: Endpoint, tmp_path: Path
) -> None:
    """botocore's `when_required` (AWS_REQUEST_CHECKSUM_CALCULATION, AWS_RESPONSE_CHECKSUM_VALIDATION):
    uploads whole and in parts, downloads and sync carry no checksum header and every byte arrives."""
    bucket = new_bucket(server)
    files = {"small": os.urandom(50_000), "large": os.urandom(11 * MiB)}
    make_tree(tmp_path / "src", files)
    env = server.env | {
        "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
    }
    parts = ["--multipart-threshold", "8MiB", "--part-size", "5MiB"]
    up = run_cli(env, "cp", "-r", *parts, f"{tmp_path / 'src'}/", f"s3://{bucket}/p/")
    assert up.returncode == 0, up.stderr
    assert bucket_problems(server, bucket, "p/", files) == []
    down = run_cli(env, "sync", f"s3://{bucket}/p/", f"{tmp_path / 'down'}/")
    assert down.returncode == 0, down.stderr
    assert tree_problems(tmp_path / "down", files) == []
    again = run_cli(env, "sync", "--json", f"{tmp_path / 'src'}/", f"s3://{bucket}/p/")
    assert again.returncode == 0 and json.loads(again.stdout.splitlines()[-1])["summary"]["objects_done"] == 0


def test_a_directory_bucket_through_the_express_stand_in(server: Endpoint, tmp_path: Path) -> None:
    """The S3 Express stand-in (listings in no order, no StartAfter, sessions required) in front
    of each server: sync --delete up and back down, a re-run that does nothing, every request in
    a session (none refused)."""
    from s3bulk.testing.express import ExpressStandIn

    running = server.server
    directory = f"x{os.getpid()}--use1-az4--x-s3"
    made = run_cli(server.env, "mb", f"s3://{directory}")  # boto3 would sign it for S3 Express
    assert made.returncode == 0, made.stderr
    files = {f"k{n:03d}": f"object {n}".encode() for n in range(120)}
    make_tree(tmp_path / "src", files)
    with ExpressStandIn(
        running.endpoint, (running.access_key, running.secret_key), seed=5, sessions=True
    ) as express:
        env = server.env | {"AWS_ENDPOINT_URL": express.endpoint}
        up = run_cli(env, "sync", "--delete", f"{tmp_path / 'src'}/", f"s3://{directory}/d/")
        assert up.returncode == 0, up.stderr
        (tmp_path / "src" / "k000").unlink()
        del files["k000"]
        again = run_cli(env, "sync", "--delete", "--json", f"{tmp_path / 'src'}/", f"s3://{directory}/d/")
        assert again.returncode == 0, again.stderr
        summary = json.loads(again.stdout.splitlines()[-1])["summary"]
        assert (summary["objects_done"], summary["objects_deleted"]) == (1, 1), (
            summary
        )  # the delete is an item
        down = run_cli(env, "sync", "--delete", f"s3://{directory}/d/", f"{tmp_path / 'down'}/")
        assert down.returncode == 0, down.stderr
        assert express.refused == {}
        assert express.tokens  # sessions were asked for
    assert tree_problems(tmp_path / "down", files) == []  # what went up came back, k000 deleted
