"""What a hostile server and a hostile machine do to s3bulk (issue 46): nothing is deleted that a
complete, checked listing, walk or copy did not earn; nothing is stored torn; nothing leaks.

The server is `s3bulk.testing.hostile.HostileS3` in front of the session's MinIO (the `hostile`
fixture): MinIO's answers, broken per request the ways real services and proxies break them.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

import boto3
import pytest
from conftest import (
    S3BULK,
    Endpoint,
    Hostile,
    bucket_digests,
    bucket_keys,
    make_tree,
    new_bucket,
    peak_group_rss,
    run_cli,
    tree_digests,
    without_root,
)

import s3bulk
from s3bulk._engine.strategies import FILES_PER_REQUEST, RESERVED_FILES
from s3bulk.testing.hostile import (
    CutBody,
    ErrorIn200,
    FlipByte,
    Listed,
    NotXml,
    Recorder,
    Redirect,
    RepeatToken,
    SlowBody,
    Status,
    TruncatedWithoutToken,
    continued,
)


def run_as_user(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user without root's override of file permissions."""
    return subprocess.run(
        without_root([*S3BULK, *args]),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


FEW_ATTEMPTS = {"AWS_MAX_ATTEMPTS": "2"}  # a fault that lasts fails the job in seconds, not a minute
LOCKED = {f"locked/f{i}.txt": b"locked %d" % i for i in range(10)}


@pytest.fixture
def locked_tree(tmp_path: Path) -> Path:
    """A tree with a directory nobody but root may read (its files put there before)."""
    tree = make_tree(tmp_path / "src", {"keep.txt": b"keep", "locked-x.txt": b"beside it", **LOCKED})
    yield tree
    (tree / "locked").chmod(0o755)


# ---- 1: a directory that cannot be read ---------------------------------------------------------
def test_sync_delete_keeps_what_lies_under_a_directory_it_cannot_read(
    minio: Endpoint, bucket: str, locked_tree: Path
) -> None:
    assert run_cli(minio.env, "cp", f"{locked_tree}/", f"s3://{bucket}/p/").returncode == 0
    (locked_tree / "locked").chmod(0)
    for dry_run in (["--dry-run"], []):
        result = run_as_user(minio.env, "sync", "--delete", *dry_run, f"{locked_tree}/", f"s3://{bucket}/p/")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert "cannot read directory: Permission denied; nothing under it is deleted" in output
        assert "0 deleted" in output or "deleted" not in output.split("cannot read")[0], output
    assert sorted(bucket_digests(minio, bucket, "p/")) == sorted(["keep.txt", "locked-x.txt", *LOCKED])


def test_sync_delete_of_named_files_keeps_what_lies_under_a_directory_it_cannot_read(
    minio: Endpoint, bucket: str, locked_tree: Path, tmp_path: Path
) -> None:
    """--files-from keeps only the names it lists, on both sides; the entry saying a directory
    could not be read is no such name, and it was dropped: what the manifest named under it then
    looked extra, and sync --delete deleted it (issue 62)."""
    assert run_cli(minio.env, "cp", f"{locked_tree}/", f"s3://{bucket}/p/").returncode == 0
    names = tmp_path / "names.txt"
    names.write_text("keep.txt\nlocked/f1.txt\nlocked/f2.txt\n")
    (locked_tree / "locked").chmod(0)
    result = run_as_user(
        minio.env, "sync", "--delete", "--files-from", str(names), f"{locked_tree}/", f"s3://{bucket}/p/"
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "cannot read directory: Permission denied; nothing under it is deleted" in output
    assert sorted(bucket_digests(minio, bucket, "p/")) == sorted(["keep.txt", "locked-x.txt", *LOCKED])


def test_cp_of_a_tree_with_a_directory_it_cannot_read_fails_and_names_it(
    minio: Endpoint, bucket: str, locked_tree: Path
) -> None:
    (locked_tree / "locked").chmod(0)
    result = run_as_user(minio.env, "cp", f"{locked_tree}/", f"s3://{bucket}/p/")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"{locked_tree}/locked" in output and "cannot read directory: Permission denied" in output
    assert sorted(bucket_digests(minio, bucket, "p/")) == ["keep.txt", "locked-x.txt"]

    (locked_tree / "locked").chmod(0o755)  # the user fixes it: the same command copies the rest
    again = run_as_user(minio.env, "cp", f"{locked_tree}/", f"s3://{bucket}/p/")
    assert again.returncode == 0, again.stderr
    assert len(bucket_digests(minio, bucket, "p/")) == 12


def test_a_source_root_it_cannot_read_is_one_line_and_nothing_is_deleted(
    minio: Endpoint, bucket: str, locked_tree: Path
) -> None:
    assert run_cli(minio.env, "cp", f"{locked_tree}/", f"s3://{bucket}/p/").returncode == 0
    locked_tree.chmod(0)
    try:
        result = run_as_user(minio.env, "sync", "--delete", f"{locked_tree}/", f"s3://{bucket}/p/")
    finally:
        locked_tree.chmod(0o755)
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(f"cannot read directory: Permission denied: {locked_tree}")
    )
    assert len(bucket_digests(minio, bucket, "p/")) == 12


# ---- 2 and 8: a listing that breaks, ends without a way on, or loops ------------------------------
def _listed_tree(minio: Endpoint, bucket: str, tmp_path: Path, count: int = 1100) -> dict[str, str]:
    """`count` objects under p/ (two listing pages) and the same files in tmp_path/d (test_fsspec's)."""
    tree = make_tree(tmp_path / "d", {f"k{i:05d}": b"%d" % i for i in range(count)})
    assert run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/p/").returncode == 0
    return tree_digests(tree)


@pytest.fixture(scope="module")
def listed(minio: Endpoint, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A bucket holding 1,100 objects under p/ (two listing pages), and the same files on disk,
    made once for the tests of this section: each reads p/ and writes elsewhere (its own
    destination, its own directory), and the ones that might delete check that p/ is whole."""
    tree = make_tree(tmp_path_factory.mktemp("listed") / "d", {f"k{i:05d}": b"%d" % i for i in range(1100)})
    bucket = new_bucket(minio, "listed")
    assert run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/p/").returncode == 0
    return bucket, tree


@pytest.mark.parametrize(
    "fault", [ErrorIn200(), NotXml(), TruncatedWithoutToken()], ids=["error-in-200", "not-xml", "no-token"]
)
def test_sync_delete_after_a_listing_that_broke_on_page_two_deletes_nothing(
    hostile: Hostile, minio: Endpoint, listed: tuple[str, Path], tmp_path: Path, fault: object
) -> None:
    bucket = listed[0]
    shutil.copytree(listed[1], tmp_path / "d")
    files = tree_digests(tmp_path / "d")
    (tmp_path / "d" / "only-local").write_bytes(b"not in the bucket")
    if isinstance(fault, TruncatedWithoutToken):  # the first page says more follows, and no token
        hostile.misbehave(
            fault,
            operation="ListObjectsV2",
            bucket=bucket,
            when=lambda ex: "max-keys" not in ex.request.query,
        )
    else:
        hostile.misbehave(fault, operation="ListObjectsV2", bucket=bucket, when=continued)
    for places in ("s3://{bucket}/p/ {tree}/", "s3://{bucket}/p/ s3://{bucket}/copy-{fault}/"):
        source, destination = places.format(
            bucket=bucket, tree=tmp_path / "d", fault=type(fault).__name__
        ).split()
        result = run_cli(hostile.env | FEW_ATTEMPTS, "sync", "--delete", source, destination)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output
        assert "list s3://" in output, output
    assert tree_digests(tmp_path / "d") == files | {"only-local": tree_digests(tmp_path / "d")["only-local"]}
    assert bucket_keys(minio, bucket, "p/") == sorted(files)  # every key listed and no other: none deleted


def test_a_listing_page_answered_200_with_an_error_is_retried_not_taken_as_the_end(
    hostile: Hostile, listed: tuple[str, Path]
) -> None:
    bucket = listed[0]
    rule = hostile.misbehave(ErrorIn200(), operation="ListObjectsV2", bucket=bucket, when=continued, times=2)
    result = run_cli(hostile.env, "ls", "-r", "--summarize", f"s3://{bucket}/p/")
    assert result.returncode == 0, result.stderr
    assert "Total Objects: 1,100" in result.stdout or "1100" in result.stdout.replace(",", ""), result.stdout
    assert rule.applied == 2


def test_ls_of_a_listing_whose_first_page_is_an_error_fails(hostile: Hostile, bucket: str) -> None:
    hostile.misbehave(ErrorIn200("AccessDenied", "Access Denied."), operation="ListObjectsV2", bucket=bucket)
    result = run_cli(hostile.env, "ls", "-r", f"s3://{bucket}/")
    assert result.returncode == 1 and result.stdout == ""
    assert "AccessDenied" in result.stderr and "200 OK" in result.stderr


@pytest.mark.parametrize("command", ["ls -r", "cp", "du"])
def test_a_continuation_token_that_comes_round_again_stops_the_listing(
    hostile: Hostile, listed: tuple[str, Path], tmp_path: Path, command: str
) -> None:
    bucket = listed[0]
    hostile.misbehave(RepeatToken(), operation="ListObjectsV2", bucket=bucket, when=continued)
    verb, *flags = command.split()
    target = [str(tmp_path / "down") + "/"] if verb == "cp" else []
    result = run_cli(hostile.env, verb, *flags, f"s3://{bucket}/p/", *target, timeout=60)
    assert result.returncode == 1, result.stdout[-500:] + result.stderr
    assert "continuation token it had given before" in result.stderr
    assert hostile.server.log.count("ListObjectsV2") < 10


# ---- 3: a copy answered 200 OK with an error ----------------------------------------------------
@pytest.mark.parametrize("verb", ["mv", "cp", "sync"])
def test_a_copy_answered_200_with_an_error_is_a_failure_and_mv_keeps_its_source(
    hostile: Hostile, minio: Endpoint, bucket: str, verb: str
) -> None:
    client = minio.client()
    for name in ("x", "y", "z"):
        client.put_object(Bucket=bucket, Key=f"a/{name}", Body=name.encode() * 100)
    hostile.misbehave(ErrorIn200("AccessDenied", "Access Denied."), operation="CopyObject", bucket=bucket)
    result = run_cli(hostile.env | FEW_ATTEMPTS, verb, f"s3://{bucket}/a/", f"s3://{bucket}/b/")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "AccessDenied" in output and "in a 200 OK answer" in output, output
    assert sorted(bucket_digests(minio, bucket)) == ["a/x", "a/y", "a/z"]


@pytest.mark.parametrize("operation", ["UploadPartCopy", "CompleteMultipartUpload"])
def test_mv_in_parts_keeps_its_source_when_a_step_answered_200_with_an_error(
    hostile: Hostile, minio: Endpoint, bucket: str, operation: str
) -> None:
    body = bytes(range(256)) * (6 * 4096)  # 6 MiB: two parts of 5 MiB and 1 MiB
    minio.client().put_object(Bucket=bucket, Key="big", Body=body)
    hostile.misbehave(ErrorIn200(), operation=operation, bucket=bucket)
    result = run_cli(
        hostile.env | FEW_ATTEMPTS,
        "mv",
        "--copy-multipart-threshold",
        "5MiB",
        "--part-size",
        "5MiB",
        f"s3://{bucket}/big",
        f"s3://{bucket}/moved",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert list(bucket_digests(minio, bucket)) == ["big"]
    assert minio.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# ---- 4: rm of a key with glob characters -------------------------------------------------------
def test_rm_of_a_key_that_exists_deletes_that_key_and_a_glob_that_matches_nothing_fails(
    minio: Endpoint, bucket: str
) -> None:
    client = minio.client()
    for key in ("odd/q?mark.txt", "odd/qXmark.txt", "odd/a[1].txt", "odd/a1.txt"):
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    for target in ("odd/q?mark.txt", "odd/a[1].txt"):
        result = run_cli(minio.env, "rm", f"s3://{bucket}/{target}")
        assert result.returncode == 0, result.stderr
    assert sorted(bucket_digests(minio, bucket)) == ["odd/a1.txt", "odd/qXmark.txt"]
    nothing = run_cli(minio.env, "rm", f"s3://{bucket}/odd/*.gz")
    assert nothing.returncode == 1 and "no object matches this pattern" in nothing.stdout + nothing.stderr
    glob = run_cli(minio.env, "rm", f"s3://{bucket}/odd/q?mark.txt")  # names no key now: a pattern
    assert glob.returncode == 0, glob.stderr
    assert sorted(bucket_digests(minio, bucket)) == ["odd/a1.txt"]


# ---- 7: a redirect to another host ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "operation"),
    [
        ("ls -r s3://{bucket}/", "ListObjectsV2"),
        ("cp s3://{bucket}/k {tmp}/k", "GetObject"),
        ("cp {tmp}/up s3://{bucket}/up", "PutObject"),
        ("head s3://{bucket}/k", "HeadObject"),
        ("cat s3://{bucket}/k", "GetObject"),
    ],
    ids=["ls", "download", "upload", "head", "cat"],
)
def test_a_redirect_to_another_host_is_not_followed_and_no_credential_goes_there(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, command: str, operation: str
) -> None:
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"object")
    (tmp_path / "up").write_bytes(b"file")
    env = hostile.env | FEW_ATTEMPTS | session_credentials(minio)
    with Recorder() as elsewhere:
        hostile.misbehave(Redirect(elsewhere.endpoint), operation=operation, bucket=bucket)
        result = run_cli(env, *command.format(bucket=bucket, tmp=tmp_path).split())
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert elsewhere.received == [], elsewhere.credentials_seen()
    assert "s3bulk follows no redirect" in output, output
    assert operation == "GetObject" or f"a redirect to {elsewhere.endpoint}" in output, output
    assert env["AWS_SESSION_TOKEN"] not in output


def session_credentials(minio: Endpoint) -> dict[str, str]:
    """Temporary credentials with a session token (MinIO's STS), as the AWS_* variables."""
    settings = minio.server.client_env()
    sts = boto3.client(
        "sts",
        endpoint_url=settings["AWS_ENDPOINT_URL"],
        aws_access_key_id=settings["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=settings["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    found = sts.assume_role(RoleArn="arn:aws:iam::000000000000:role/s3bulk", RoleSessionName="hostile")
    credentials = found["Credentials"]
    return {
        "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
        "AWS_SESSION_TOKEN": credentials["SessionToken"],
    }


# ---- 5: a file that changes while it is uploaded -----------------------------------------------
@pytest.mark.parametrize("change", ["rewritten", "appended", "replaced"])
def test_a_file_that_changes_during_its_multipart_upload_is_not_stored_torn(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, change: str
) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"o" * (20 * 1024**2))  # four parts of 5 MiB
    command = [*S3BULK, "cp", "--part-size", "5MiB", "--multipart-threshold", "5MiB"]
    hostile.server.hold_after(3)  # the preflight listing, the upload's start, its first part
    with subprocess.Popen(
        [*command, str(path), f"s3://{bucket}/big.bin"],
        env=hostile.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as job:
        while hostile.server.held == 0:
            assert job.poll() is None, job.stdout.read() if job.stdout else ""
            time.sleep(0.02)
        if change == "rewritten":
            with open(path, "r+b") as handle:
                handle.write(b"n" * (20 * 1024**2))
        elif change == "appended":
            with open(path, "ab") as handle:
                handle.write(b"more")
        else:  # an editor's save: a new file renamed over it
            (tmp_path / "new").write_bytes(b"n" * (20 * 1024**2))
            os.replace(tmp_path / "new", path)
        hostile.server.release()
        output = job.communicate(timeout=120)[0]
    assert job.returncode == 1, output
    assert f"{path} changed while it was being uploaded: nothing was stored" in output
    assert bucket_digests(minio, bucket) == {}
    assert minio.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# ---- 6: a single-object read checks what it read -----------------------------------------------
@pytest.mark.parametrize("size", [100_000, 12 * 1024**2], ids=["single-part", "multipart"])
def test_cat_and_get_fail_a_body_of_the_right_size_and_wrong_bytes(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, aws_env: dict, size: int
) -> None:
    body = os.urandom(size)
    (tmp_path / "obj").write_bytes(body)
    up = [
        "cp",
        "--part-size",
        "5MiB",
        "--multipart-threshold",
        "5MiB",
        str(tmp_path / "obj"),
        f"s3://{bucket}/obj",
    ]
    assert run_cli(minio.env, *up).returncode == 0
    clean = subprocess.run([*S3BULK, "cat", f"s3://{bucket}/obj"], env=hostile.env, capture_output=True)
    assert clean.returncode == 0 and clean.stdout == body
    hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket, times=1)
    flipped = subprocess.run([*S3BULK, "cat", f"s3://{bucket}/obj"], env=hostile.env, capture_output=True)
    assert flipped.returncode == 1, flipped.stderr
    assert b"the bytes received do not match its CRC64NVME" in flipped.stderr  # what s3bulk sent
    hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket, times=1)
    os.environ["AWS_ENDPOINT_URL"] = hostile.server.endpoint  # aws_env restores it
    with pytest.raises(s3bulk.S3BulkError, match="do not match its CRC64NVME"):
        s3bulk.get(f"s3://{bucket}/obj")


READERS = ["cat", "get", "get_to_file", "open", "fs.open", "fs.cat_file"]


def read_by(reader: str, url: str, hostile: Hostile, tmp_path: Path) -> bytes:
    """The object's bytes as each read entry point gives them (through the hostile server);
    raises what it raises (`cat`: an S3BulkError with its output)."""
    if reader == "cat":
        done = subprocess.run([*S3BULK, "cat", url], env=hostile.env | FEW_ATTEMPTS, capture_output=True)
        if done.returncode:
            raise s3bulk.S3BulkError(done.stderr.decode())
        return done.stdout
    if reader == "get":
        return s3bulk.get(url)
    if reader == "get_to_file":
        s3bulk.get_to_file(url, tmp_path / "got")
        return (tmp_path / "got").read_bytes()
    if reader == "open":
        with s3bulk.open(url) as file:
            return file.read()
    from s3bulk.fsspec import S3BulkFileSystem

    fs = S3BulkFileSystem(endpoint_url=hostile.server.endpoint, skip_instance_cache=True)
    path = url[len("s3://") :]
    if reader == "fs.open":
        with fs.open(path) as file:
            return file.read()
    return fs.cat_file(path)


@pytest.fixture
def through_hostile(hostile: Hostile, aws_env: dict, monkeypatch: pytest.MonkeyPatch) -> Hostile:
    """The in-process API pointed at the hostile server (aws_env restores the variables)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", hostile.server.endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    return hostile


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("kind", "size"),
    [("sse-kms", 100_000), ("sse-kms", 12 * 1024**2), ("plain", 100_000)],
    ids=["kms-crc64nvme", "kms-crc64nvme-multipart", "plain-md5"],
)
def test_every_read_entry_point_fails_bytes_that_contradict_the_object(
    through_hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, reader: str, kind: str, size: int
) -> None:
    """What cp checks (the full-object checksum the object keeps, else its MD5 ETag), every
    reader checks: an SSE-KMS object's ETag is no MD5, only its CRC64NVME can tell."""
    from s3bulk.testing.servers import KMS_KEY_ID

    body = os.urandom(size)
    (tmp_path / "obj").write_bytes(body)
    kms = ["--sse", "aws:kms", "--sse-kms-key-id", KMS_KEY_ID] if kind == "sse-kms" else []
    parts = ["--part-size", "5MiB", "--multipart-threshold", "5MiB"]
    assert run_cli(minio.env, "cp", *kms, *parts, str(tmp_path / "obj"), f"s3://{bucket}/obj").returncode == 0
    url = f"s3://{bucket}/obj"
    assert read_by(reader, url, through_hostile, tmp_path) == body
    (tmp_path / "got").unlink(missing_ok=True)
    through_hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket)
    with pytest.raises((s3bulk.S3BulkError, OSError), match="do not match") as raised:
        read_by(reader, url, through_hostile, tmp_path)
    assert "\n" not in str(raised.value).strip(), raised.value
    assert not (tmp_path / "got").exists()


@pytest.mark.parametrize("reader", ["open", "fs.open"])
def test_the_object_reader_follows_no_redirect_and_sends_no_credential_elsewhere(
    through_hostile: Hostile,
    minio: Endpoint,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reader: str,
) -> None:
    minio.client().put_object(Bucket=bucket, Key="obj", Body=b"object" * 1000)
    for name, value in session_credentials(minio).items():
        monkeypatch.setenv(name, value)
    with Recorder() as elsewhere:
        for operation in ("HeadObject", "GetObject"):
            through_hostile.misbehave(Redirect(elsewhere.endpoint), operation=operation, bucket=bucket)
        with pytest.raises((s3bulk.S3BulkError, OSError), match="follows no redirect"):
            read_by(reader, f"s3://{bucket}/obj", through_hostile, tmp_path)
    assert elsewhere.received == [], elsewhere.credentials_seen()


def test_a_download_nothing_could_check_is_said_to_be_not_verified(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """p/b is an SSE-KMS object (its ETag is no MD5) written without a checksum (boto3 told
    to send none): nothing can check its bytes."""
    from test_concurrent_writer import plain_client

    from s3bulk.testing.servers import KMS_KEY_ID

    client = plain_client(minio)
    client.put_object(Bucket=bucket, Key="p/a", Body=b"a" * 1000)
    client.put_object(
        Bucket=bucket, Key="p/b", Body=b"b" * 1000, ServerSideEncryption="aws:kms", SSEKMSKeyId=KMS_KEY_ID
    )
    result = run_cli(hostile.env, "cp", "--json", f"s3://{bucket}/p/", f"{tmp_path}/")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[-1]["summary"]["objects_unverified"] == 1
    assert {record["source"]: record.get("verified", True) for record in records[:-1]} == {
        f"s3://{bucket}/p/a": True,
        f"s3://{bucket}/p/b": False,
    }
    plain = run_cli(hostile.env, "cp", f"s3://{bucket}/p/", f"{tmp_path}/again/")
    assert "1 not verified (no MD5 ETag, no checksum)" in plain.stdout, plain.stdout


# ---- 9, 10, 15: listed sizes and times that cannot be --------------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("Size", -5, "which no S3 object can hold"),
        ("Size", 10**15, "which no S3 object can hold"),
        ("LastModified", "yesterday-ish", "which is no time"),
    ],
    ids=["negative", "a-petabyte", "no-time"],
)
def test_a_listed_entry_that_cannot_be_fails_alone(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, field: str, value: object, reason: str
) -> None:
    client = minio.client()
    for name in ("a", "b", "c"):
        client.put_object(Bucket=bucket, Key=f"p/{name}", Body=name.encode() * 100)
    hostile.misbehave(Listed(field, value, key="p/b"), operation="ListObjectsV2", bucket=bucket)
    result = run_cli(hostile.env, "cp", f"s3://{bucket}/p/", f"{tmp_path}/", timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"s3://{bucket}/p/b" in output and reason in output, output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "c"]
    (tmp_path / "b").write_bytes(b"local b, not in the listing as it is")
    sync = run_cli(hostile.env, "sync", "--delete", f"s3://{bucket}/p/", f"{tmp_path}/", timeout=60)
    assert sync.returncode == 1, sync.stdout + sync.stderr
    assert (tmp_path / "b").read_bytes() == b"local b, not in the listing as it is"


def test_a_size_listed_at_5_tib_is_fetched_in_ranges_made_as_they_go(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    minio.client().put_object(Bucket=bucket, Key="big", Body=b"small, in truth")
    hostile.misbehave(Listed("Size", 5 * 1024**4), operation="ListObjectsV2", bucket=bucket)
    code, peak, output = peak_group_rss(hostile.env, ["cp", f"s3://{bucket}/", f"{tmp_path}/d/"])
    assert code == 1, output
    assert "InvalidRange" in output, output
    assert peak < 150 * 1024**2, f"{peak / 1024**2:.0f} MiB"
    assert list((tmp_path / "d").iterdir()) == []  # nothing half-written


# ---- 11: a large download on a link that drops ---------------------------------------------------
def test_a_large_download_through_a_link_that_drops_retries_the_range_that_failed(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    body = os.urandom(30 * 1024**2)
    minio.client().put_object(Bucket=bucket, Key="big", Body=body)
    third = "bytes=10485760-"  # the third range's first attempt: its link drops after 1 MiB
    cut = hostile.misbehave(
        CutBody(after=1024**2),
        operation="GetObject",
        bucket=bucket,
        times=1,
        when=lambda exchange: exchange.request.headers.get("Range", "").startswith(third),
    )
    sizes = ["--part-size", "5MiB", "--multipart-threshold", "5MiB"]
    result = run_cli(hostile.env | FEW_ATTEMPTS, "cp", *sizes, f"s3://{bucket}/big", str(tmp_path / "big"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "big").read_bytes() == body
    assert cut.applied == 1
    assert hostile.server.log.count("GetObject") == 7  # that range once more, not the whole again


# ---- 12: a low limit on open files ---------------------------------------------------------------
def test_a_low_open_file_limit_lowers_the_requests_in_flight_and_fails_nothing(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    files = {f"f{i:04d}": b"%d" % i for i in range(2000)}
    tree = make_tree(tmp_path / "up", files)

    def at_most_256_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    for source, destination in (
        (f"{tree}/", f"s3://{bucket}/p/"),
        (f"s3://{bucket}/p/", f"{tmp_path}/down/"),
    ):
        result = subprocess.run(
            [*S3BULK, "cp", "--concurrency", "1000", source, destination],
            env=minio.env,
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=at_most_256_files,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        most = (256 - RESERVED_FILES) // FILES_PER_REQUEST  # what the process holds besides, counted
        assert (
            f"1,000 requests in flight per worker lowered to {most}: this process may open 256 files"
            in result.stdout
        )
    assert tree_digests(tmp_path / "down") == tree_digests(tree)


# ---- 13, 14: the journal -----------------------------------------------------------------------
def _job_ids(state: Path) -> list[str]:
    return sorted(path.name.removesuffix(".db") for path in state.glob("*.db"))


def test_two_runs_of_one_journal_at_once_the_second_is_refused(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, job_journals: Path
) -> None:
    tree = make_tree(tmp_path / "src", {f"f{i}": b"%d" % i for i in range(50)})
    hostile.server.hold_after(10)
    with subprocess.Popen(
        [*S3BULK, "cp", f"{tree}/", f"s3://{bucket}/p/"], env=hostile.env, stdout=subprocess.DEVNULL
    ) as first:
        try:
            while hostile.server.held == 0:
                time.sleep(0.02)
            (job,) = _job_ids(job_journals)
            second = run_cli(hostile.env, "cp", "--resume", job)
            assert second.returncode == 2, second.stdout + second.stderr
            assert second.stderr.strip() == (
                f"error: job {job} is running in another process (pid {first.pid}): "
                "let it end, or stop it, then resume it"
            )
        finally:
            hostile.server.release()
        assert first.wait(60) == 0
    assert len(bucket_digests(minio, bucket, "p/")) == 50


def test_a_journal_left_without_its_job_is_one_line(minio: Endpoint, job_journals: Path) -> None:
    (job_journals / "20261127-000000-abcdef.db").write_bytes(b"")  # killed as it was being made
    result = run_cli(minio.env, "cp", "--resume", "20261127-000000-abcdef")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: job 20261127-000000-abcdef's journal holds no job (its first run was stopped as it "
        "began, before anything was done): start the job again"
    ]


def test_a_state_directory_that_cannot_be_written_or_is_anyones_is_one_line(
    minio: Endpoint, bucket: str, tmp_path: Path, job_journals: Path
) -> None:
    tree = make_tree(tmp_path / "src", {"a": b"a"})
    job_journals.chmod(0o500)
    try:
        result = run_as_user(minio.env, "cp", f"{tree}/", f"s3://{bucket}/p/")
    finally:
        job_journals.chmod(0o700)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: cannot write the job's journal in {job_journals}: Permission denied; free space or "
        "fix its permissions, or set S3BULK_STATE_DIR to a directory you can write"
    ]
    job_journals.chmod(0o777)
    try:
        shared = run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/p/")
    finally:
        job_journals.chmod(0o700)
    assert shared.returncode == 2
    assert "is writable by others (mode 777): anyone could change the journals in it" in shared.stderr
    assert bucket_digests(minio, bucket) == {}


def test_a_full_disk_under_the_journal_stops_the_job_in_one_line_and_resume_finishes_it(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    tree = make_tree(tmp_path / "src", {f"file-with-a-long-name-{i:05d}": b"x" for i in range(1500)})
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k,mode=700", "tmpfs", str(state)], check=True)
    try:
        env = minio.env | {"S3BULK_STATE_DIR": str(state)}
        stopped = run_cli(env, "cp", f"{tree}/", f"s3://{bucket}/p/")
        assert stopped.returncode == 1, stopped.stdout + stopped.stderr
        assert "Traceback" not in stopped.stderr
        (job,) = _job_ids(state)
        assert (
            f"error: stopped: the journal cannot be written (database or disk is full): {state}/{job}.db"
            in (stopped.stderr)
        )
        assert f"then: s3bulk cp --resume {job}" in stopped.stderr
        subprocess.run(["mount", "-o", "remount,size=8m", str(state)], check=True)
        resumed = run_cli(env, "cp", "--resume", job)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)
    assert bucket_keys(minio, bucket, "p/") == sorted(path.name for path in tree.iterdir())


# ---- 15: smaller things -------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["cat", "cp"])
def test_a_body_that_trickles_is_cut_and_asked_for_again(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, command: str
) -> None:
    body = os.urandom(100_000)
    minio.client().put_object(Bucket=bucket, Key="k", Body=body)
    trickle = SlowBody(bytes_per_second=10)
    slow = hostile.misbehave(trickle, operation="GetObject", bucket=bucket, times=1)
    env = hostile.env | {"S3BULK_READ_TIMEOUT": "2"}  # the window a body's pace is judged over
    target = [str(tmp_path / "k")] if command == "cp" else []
    result = subprocess.run(
        [*S3BULK, command, f"s3://{bucket}/k", *target], env=env, capture_output=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert (result.stdout if command == "cat" else (tmp_path / "k").read_bytes()) == body
    # cut within a few windows of 2 s (~20-40 bytes at 10 bytes/s), not after a default timeout of
    # a minute or the trickle's 10,000 s: counted by the server, so a slow start of the process on
    # a loaded machine (20 s seen) does not count (it made a wall-clock bound of 15 s flaky)
    assert slow.applied == 1 and 0 < trickle.sent < 150, trickle.sent


def test_a_destination_that_refuses_every_write_is_one_line(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    client = minio.client()
    for index in range(200):
        client.put_object(Bucket=bucket, Key=f"p/{index:03d}", Body=b"x")
    target = tmp_path / "read-only"
    target.mkdir()
    target.chmod(0o555)
    try:
        result = run_as_user(minio.env, "cp", f"s3://{bucket}/p/", f"{target}/")
    finally:
        target.chmod(0o755)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "Permission denied" in line]
    assert lines == [f"error: stopped: cannot write in {target}: Permission denied"], result.stderr
    assert list(target.iterdir()) == []


def test_an_endpoint_with_a_password_in_it_is_refused_and_never_printed(minio: Endpoint, bucket: str) -> None:
    url = minio.server.endpoint.replace("http://", "http://someone:hunter2-secret@")
    result = run_cli(minio.env | {"AWS_ENDPOINT_URL": url}, "ls", f"s3://{bucket}/")
    assert result.returncode == 2
    assert "holds a user and password" in result.stderr and "hunter2" not in result.stdout + result.stderr


def test_debug_logging_names_each_request_and_never_a_credential(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"x" * 20_000)
    log = tmp_path / "log"
    result = run_cli(
        minio.env,
        "cp",
        "--log-level",
        "debug",
        "--log-file",
        str(log),
        f"s3://{bucket}/k",
        str(tmp_path / "k"),
    )
    assert result.returncode == 0, result.stderr
    text = log.read_text()
    assert f"GET s3://{bucket}/k bytes 0-20000: 20000 bytes" in text, text
    assert "GET http" in text  # the listing, by the signed client
    assert minio.env["AWS_SECRET_ACCESS_KEY"] not in text and "Authorization" not in text


def test_uploads_that_all_fail_hold_no_more_memory_than_ones_that_succeed(
    hostile: Hostile, bucket: str, tmp_path: Path
) -> None:
    """A failed request's exception held its body through a reference cycle (its traceback held
    the retrying frame, which held the exception) until the collector ran: 1,700 failed 1 MiB
    uploads peaked at 785 MB."""
    tree = make_tree(tmp_path / "src", {f"f{i:03d}": os.urandom(1024**2) for i in range(400)})
    hostile.misbehave(Status(500), operation="PutObject", bucket=bucket)
    code, peak, output = peak_group_rss(
        hostile.env | {"AWS_MAX_ATTEMPTS": "1"}, ["cp", f"{tree}/", f"s3://{bucket}/p/"]
    )
    assert code == 1 and output.count("failed: ") == 400, output[-500:]
    assert peak < 150 * 1024**2, f"{peak / 1024**2:.0f} MiB"


def test_a_server_out_of_space_stops_the_job_in_one_line(
    hostile: Hostile, bucket: str, tmp_path: Path
) -> None:
    tree = make_tree(tmp_path / "src", {f"f{i:03d}": b"x" for i in range(300)})
    hostile.misbehave(Status(507, "XMinioStorageFull"), operation="PutObject", bucket=bucket)
    result = run_cli(hostile.env, "cp", f"{tree}/", f"s3://{bucket}/p/", timeout=60)
    assert result.returncode == 1
    assert "the server has no space left: free some, then resume the job" in result.stderr
    assert hostile.server.log.count("PutObject") < 100  # stopped, not 300 x 6 attempts


@pytest.mark.parametrize(
    ("command", "operation", "request_line"),
    [
        ("cp {tmp}/f s3://{bucket}/up", "PutObject", "(PUT)"),
        ("ls -r s3://{bucket}/", "ListObjectsV2", "(GET ?list-type ?prefix)"),
        (
            "cp --copy-multipart-threshold 5MiB --part-size 5MiB s3://{bucket}/big s3://{bucket}/copy",
            "UploadPartCopy",
            "(PUT ?partNumber ?uploadId with x-amz-copy-source)",
        ),
    ],
    ids=["upload", "list", "part-copy"],
)
def test_a_request_the_service_does_not_implement_fails_at_once_in_one_line(
    hostile: Hostile,
    minio: Endpoint,
    bucket: str,
    tmp_path: Path,
    command: str,
    operation: str,
    request_line: str,
) -> None:
    """501 NotImplemented: each attempt is refused alike, so none is retried (6 were), and the
    line names the request the service does not take."""
    (tmp_path / "f").write_bytes(b"file")
    minio.client().put_object(Bucket=bucket, Key="big", Body=b"b" * (6 * 1024**2))
    hostile.misbehave(Status(501, "NotImplemented"), operation=operation, bucket=bucket)
    result = run_cli(hostile.env, *command.format(tmp=tmp_path, bucket=bucket).split(), timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    sent = 2 if operation == "UploadPartCopy" else 1  # the two parts go side by side, once each
    assert hostile.server.log.count(operation) == sent
    said = next(line for line in result.stderr.splitlines() if line.startswith("error: "))
    assert "NotImplemented (501)" in said and request_line in said, result.stderr
    assert "the service does not implement this request" in said


def _read_elsewhere(path: str, url: str, tmp_path: Path) -> object:
    """What each path that once went through obstore's HTTP client reads of `url` (an object,
    or for a listing its prefix), as a user's call reaches it."""
    from s3bulk._arrays.files import open_store
    from s3bulk._config import AwsSettings
    from s3bulk._sources.embeddings import EmbeddingSpec, find_files, open_file
    from s3bulk._stores.blockfile import BlockFile

    settings = AwsSettings.from_env()
    if path == "embeddings file":
        with open_file(url, settings) as handle:
            return handle.read()
    if path == "embeddings prefix":
        return list(find_files(EmbeddingSpec((url.rpartition("/")[0] + "/",), settings=settings)))
    if path == "gather's metadata":
        bucket, _, key = url.removeprefix("s3://").partition("/")
        return BlockFile(open_store(f"s3://{bucket}", settings), key, 6000).read(100)
    return s3bulk.doctor(url.rpartition("/")[0] + "/", settings=settings, max_concurrency=4)


def _write_elsewhere(path: str, url: str) -> object:
    """What each writer that once went through obstore's HTTP client writes at `url`: open's
    writer (one PUT, or parts), the ray engine's journal (its spec, its import, a worker's part)."""
    from s3bulk._config import AwsSettings
    from s3bulk._journal.store import PartWriter, StoreJournal
    from s3bulk._stores.retry import Retrier, RetryPolicy

    if path.startswith("open wb"):
        size = 6 * 1024**2 if path == "open wb in parts" else 1000
        with s3bulk.open(url, "wb", buffer_size=5 * 1024**2) as out:
            out.write(b"w" * size)
        return None
    journal = StoreJournal(url.rpartition("/")[0] + "/job/", AwsSettings.from_env())
    if path == "ray journal's spec":
        return journal.write_spec("job-62", "cp", {"source": "here/"})
    if path == "ray journal's import":
        return journal.import_into()
    parts = PartWriter(journal, 1, 0, Retrier(RetryPolicy(max_attempts=1)))

    async def written() -> None:
        parts.rows.append(b'{"id": "a", "state": "done", "size": 1}')
        await parts.close()

    asyncio.run(written())  # a part that cannot be written costs a repeat, not the job: no error
    raise s3bulk.UsageError("the part went unwritten (it follows no redirect)")


@pytest.mark.parametrize(
    "path",
    [
        "embeddings file",
        "embeddings prefix",
        "gather's metadata",
        "doctor",
        "open wb",
        "open wb in parts",
        "ray journal's spec",
        "ray journal's import",
        "ray journal's part",
    ],
)
def test_the_paths_once_on_obstore_follow_no_redirect_and_send_no_credential_elsewhere(
    through_hostile: Hostile,
    minio: Endpoint,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    """vectors put's source files (and the prefix listing that finds them), gather's and the
    xarray backend's metadata reads, doctor's probes, `s3bulk.open(url, "wb")`'s writer and the
    ray engine's journal in the object store went through obstore's HTTP client, which follows a
    307 to another host and sends the session token there. Each goes through the signed client
    now: refused in one line, and nothing reaches the other host."""
    minio.client().put_object(Bucket=bucket, Key="p/docs.parquet", Body=b"PAR1" * 1500)
    minio.client().put_object(Bucket=bucket, Key="p/job/job.json", Body=b'{"id": "job-62"}')
    for name, value in session_credentials(minio).items():
        monkeypatch.setenv(name, value)
    with Recorder() as elsewhere:
        listing = () if path == "doctor" else ("ListObjectsV2",)  # doctor's GETs come after it
        writes = ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")
        for operation in ("HeadObject", "GetObject", "PutObject", *listing, *writes):
            through_hostile.misbehave(Redirect(elsewhere.endpoint), operation=operation, bucket=bucket)
        with pytest.raises(Exception, match="follows no redirect"):
            if path.startswith(("open wb", "ray journal")):
                _write_elsewhere(path, f"s3://{bucket}/p/docs.parquet")
            else:
                _read_elsewhere(path, f"s3://{bucket}/p/docs.parquet", tmp_path)
    assert elsewhere.received == [], elsewhere.credentials_seen()
    if path.startswith("open wb"):
        assert minio.client().head_object(Bucket=bucket, Key="p/docs.parquet")["ContentLength"] == 6000
