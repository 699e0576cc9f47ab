"""What a hostile server and a hostile machine do to s3bulk (issue 46): nothing is deleted that a
complete, checked listing, walk or copy did not earn; nothing is stored torn; nothing leaks.

The server is `s3bulk.testing.hostile.HostileS3` in front of the session's MinIO (the `hostile`
fixture): MinIO's answers, broken per request the ways real services and proxies break them.
"""

from __future__ import annotations

import os
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
    make_tree,
    run_cli,
    tree_digests,
    without_root,
)

import s3bulk
from s3bulk.testing.hostile import (
    ErrorIn200,
    FlipByte,
    NotXml,
    Recorder,
    Redirect,
    RepeatToken,
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
    """`count` objects under p/ (two listing pages) and the same files in tmp_path/d."""
    tree = make_tree(tmp_path / "d", {f"k{i:05d}": b"%d" % i for i in range(count)})
    assert run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/p/").returncode == 0
    return tree_digests(tree)


@pytest.mark.parametrize(
    "fault", [ErrorIn200(), NotXml(), TruncatedWithoutToken()], ids=["error-in-200", "not-xml", "no-token"]
)
def test_sync_delete_after_a_listing_that_broke_on_page_two_deletes_nothing(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, fault: object
) -> None:
    files = _listed_tree(minio, bucket, tmp_path)
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
    for places in ("s3://{bucket}/p/ {tree}/", "s3://{bucket}/p/ s3://{bucket}/copy/"):
        source, destination = places.format(bucket=bucket, tree=tmp_path / "d").split()
        result = run_cli(hostile.env | FEW_ATTEMPTS, "sync", "--delete", source, destination)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output
        assert "list s3://" in output, output
    assert tree_digests(tmp_path / "d") == files | {"only-local": tree_digests(tmp_path / "d")["only-local"]}
    assert len(bucket_digests(minio, bucket, "p/")) == 1100


def test_a_listing_page_answered_200_with_an_error_is_retried_not_taken_as_the_end(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    _listed_tree(minio, bucket, tmp_path)
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
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, command: str
) -> None:
    _listed_tree(minio, bucket, tmp_path)
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
    up = ["cp", "--part-size", "5MiB", "--multipart-threshold", "5MiB", str(tmp_path / "obj"), f"s3://{bucket}/obj"]
    assert run_cli(minio.env, *up).returncode == 0
    clean = subprocess.run([*S3BULK, "cat", f"s3://{bucket}/obj"], env=hostile.env, capture_output=True)
    assert clean.returncode == 0 and clean.stdout == body
    hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket, times=1)
    flipped = subprocess.run([*S3BULK, "cat", f"s3://{bucket}/obj"], env=hostile.env, capture_output=True)
    assert flipped.returncode == 1, flipped.stderr
    assert b"the bytes received do not match its ETag" in flipped.stderr
    hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket, times=1)
    os.environ["AWS_ENDPOINT_URL"] = hostile.server.endpoint  # aws_env restores it
    with pytest.raises(s3bulk.S3BulkError, match="do not match its ETag"):
        s3bulk.get(f"s3://{bucket}/obj")
