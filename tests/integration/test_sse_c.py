"""SSE-C (customer-provided keys) against MinIO over TLS, checked with boto3 as a second client:
uploads single-part and multipart, downloads, server-side copies (single and in parts, between
different keys and to and from plain objects), cat and pipe, head; the journal never holds the
key and a resume must be given it again; bad keys are one line, exit 2, nothing sent."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, new_bucket, run_cli

MiB = 1024 * 1024
INSECURE = ["--no-verify-ssl"]  # the test server's certificate is made up
SMALL = ["--multipart-threshold", "5MiB", "--part-size", "5MiB", "--copy-multipart-threshold", "5MiB"]


@pytest.fixture
def keys(tmp_path: Path) -> tuple[bytes, bytes, Path, Path]:
    first, second = bytes(range(32)), bytes(range(100, 132))
    (tmp_path / "k1").write_bytes(first)
    (tmp_path / "k2").write_bytes(second)
    return first, second, tmp_path / "k1", tmp_path / "k2"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "small.txt").write_bytes(b"small object\n")
    (root / "big.bin").write_bytes(bytes(range(256)) * (24 * 1024 + 7))  # ~6 MiB: multipart
    return root


def stored(endpoint: Endpoint, bucket: str, key: str, customer_key: bytes | None) -> tuple[dict, bytes]:
    """HEAD and body as a second client reads them, with the key (or without)."""
    client = endpoint.client()
    extra = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": customer_key} if customer_key else {}
    head = client.head_object(Bucket=bucket, Key=key, **extra)
    return head, client.get_object(Bucket=bucket, Key=key, **extra)["Body"].read()


def test_uploads_and_downloads_with_a_key(
    minio_tls: Endpoint, tree: Path, keys: tuple, tmp_path: Path
) -> None:
    first, _, k1, _ = keys
    bucket = new_bucket(minio_tls)
    up = run_cli(
        minio_tls.env,
        "cp",
        *INSECURE,
        *SMALL,
        f"{tree}/",
        f"s3://{bucket}/t/",
        "--sse-c-key",
        f"fileb://{k1}",
    )
    assert up.returncode == 0, up.stderr
    md5 = base64.b64encode(hashlib.md5(first).digest()).decode()
    for name in ("small.txt", "big.bin"):
        head, body = stored(minio_tls, bucket, f"t/{name}", first)
        assert head["SSECustomerAlgorithm"] == "AES256" and head["SSECustomerKeyMD5"] == md5
        assert body == (tree / name).read_bytes()
    assert "-" in stored(minio_tls, bucket, "t/big.bin", first)[0]["ETag"]  # it went in parts
    with pytest.raises(Exception, match="400"):
        stored(minio_tls, bucket, "t/small.txt", None)  # without the key, nobody reads it

    down = run_cli(
        minio_tls.env,
        "cp",
        *INSECURE,
        f"s3://{bucket}/t/",
        f"{tmp_path}/out/",
        "--sse-c-key",
        f"fileb://{k1}",
    )
    assert down.returncode == 0, down.stderr
    for name in ("small.txt", "big.bin"):
        assert (tmp_path / "out" / name).read_bytes() == (tree / name).read_bytes()

    keyless = run_cli(minio_tls.env, "cp", *INSECURE, f"s3://{bucket}/t/", f"{tmp_path}/none/")
    assert keyless.returncode == 1
    assert "an SSE-C object is read with its key (--sse-c-key)" in keyless.stderr
    assert not (tmp_path / "none" / "small.txt").exists()


@pytest.mark.parametrize("threshold", ["5GiB", "5MiB"], ids=["CopyObject", "UploadPartCopy"])
def test_copies_between_keys_and_plain_objects(
    minio_tls: Endpoint, tree: Path, keys: tuple, threshold: str
) -> None:
    first, second, k1, k2 = keys
    bucket = new_bucket(minio_tls)
    copy = [*INSECURE, "--copy-multipart-threshold", threshold]
    up = run_cli(
        minio_tls.env, "cp", *INSECURE, f"{tree}/", f"s3://{bucket}/a/", "--sse-c-key", f"fileb://{k1}"
    )
    assert up.returncode == 0, up.stderr
    steps = [  # (source, destination, flags, the destination's key)
        ("a", "b", ["--sse-c-copy-source-key", f"fileb://{k1}", "--sse-c-key", f"fileb://{k2}"], second),
        ("b", "plain", ["--sse-c-copy-source-key", f"fileb://{k2}"], None),
        ("plain", "c", ["--sse-c-key", f"base64:{base64.b64encode(first).decode()}"], first),
    ]
    for source, destination, flags, key in steps:
        done = run_cli(
            minio_tls.env, "cp", *copy, f"s3://{bucket}/{source}/", f"s3://{bucket}/{destination}/", *flags
        )
        assert done.returncode == 0, (source, destination, done.stderr)
        for name in ("small.txt", "big.bin"):
            head, body = stored(minio_tls, bucket, f"{destination}/{name}", key)
            assert body == (tree / name).read_bytes(), (destination, name)
            assert head.get("SSECustomerAlgorithm") == ("AES256" if key else None)
            assert head["ContentType"] == (
                "text/plain" if name == "small.txt" else "application/octet-stream"
            )


def test_cat_pipe_and_head_with_a_key(minio_tls: Endpoint, tree: Path, keys: tuple) -> None:
    first, _, k1, _ = keys
    bucket = new_bucket(minio_tls)
    body = (tree / "big.bin").read_bytes()
    key = ["--sse-c-key", f"fileb://{k1}"]
    piped = subprocess.run(
        [*S3BULK, "pipe", *INSECURE, "--part-size", "5MiB", f"s3://{bucket}/piped", *key],
        input=body,
        env=minio_tls.env,
        capture_output=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    assert stored(minio_tls, bucket, "piped", first)[1] == body
    cat = subprocess.run(
        [*S3BULK, "cat", *INSECURE, "--part-size", "1MiB", f"s3://{bucket}/piped", *key],
        env=minio_tls.env,
        capture_output=True,
        timeout=120,
    )
    assert cat.returncode == 0 and cat.stdout == body, cat.stderr
    head = run_cli(minio_tls.env, "head", *INSECURE, "--json", f"s3://{bucket}/piped", *key)
    assert '"sse_customer_algorithm":"AES256"' in head.stdout, head.stderr
    keyless = run_cli(minio_tls.env, "cat", *INSECURE, f"s3://{bucket}/piped")
    assert keyless.returncode == 1 and "read it with its key (--sse-c-key)" in keyless.stderr


def test_the_journal_keeps_no_key_and_a_rerun_must_be_given_it(
    minio_tls: Endpoint, tree: Path, keys: tuple, tmp_path: Path, job_journals: Path
) -> None:
    first, _, k1, k2 = keys
    bucket = new_bucket(minio_tls)
    client = minio_tls.client()
    client.put_object(
        Bucket=bucket, Key="d/a", Body=b"a", SSECustomerAlgorithm="AES256", SSECustomerKey=first
    )
    client.put_object(Bucket=bucket, Key="d/b", Body=b"b")  # not SSE-C: reading it with a key fails
    key = ["--sse-c-key", f"fileb://{k1}"]
    first_run = run_cli(minio_tls.env, "cp", *INSECURE, f"s3://{bucket}/d/", f"{tmp_path}/out/", *key)
    assert first_run.returncode == 1 and "the object is not SSE-C: drop --sse-c-key" in first_run.stderr
    job = next(line for line in first_run.stderr.splitlines() if "--retry-failed" in line).split()[-1]
    secrets = (first, base64.b64encode(first))
    for path in job_journals.rglob("*"):
        if path.is_file():
            assert not any(secret in path.read_bytes() for secret in secrets), path

    rerun = [*INSECURE, "--retry-failed", job]
    keyless = run_cli(minio_tls.env, "cp", *rerun)
    assert keyless.returncode == 2
    assert keyless.stderr.strip().endswith("journals do not keep: give --sse-c-key again"), keyless.stderr
    wrong = run_cli(minio_tls.env, "cp", *rerun, "--sse-c-key", f"fileb://{k2}")
    assert wrong.returncode == 2 and "not the SSE-C key this job started with" in wrong.stderr
    client.put_object(
        Bucket=bucket, Key="d/b", Body=b"b", SSECustomerAlgorithm="AES256", SSECustomerKey=first
    )
    right = run_cli(minio_tls.env, "cp", *rerun, *key)
    assert right.returncode == 0, right.stderr
    assert (tmp_path / "out" / "b").read_bytes() == b"b"


def test_the_python_api_takes_a_key(
    minio_tls: Endpoint, keys: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    import s3bulk

    first, second, _, _ = keys
    bucket = new_bucket(minio_tls)
    for name, value in minio_tls.server.client_env().items():
        monkeypatch.setenv(name, value)
    settings = s3bulk.AwsSettings.from_env(verify_ssl=False, sse_c=first)
    assert "sse_c=CustomerKey(md5=" in repr(settings) and repr(first) not in repr(settings)
    s3bulk.put(f"s3://{bucket}/x", b"hello", settings=settings)
    assert s3bulk.get(f"s3://{bucket}/x", settings=settings) == b"hello"
    assert s3bulk.get(f"s3://{bucket}/x", range=(1, 3), settings=settings) == b"el"
    with s3bulk.open(f"s3://{bucket}/w", "wb", settings=settings) as writer:
        for _ in range(3):
            writer.write(b"z" * (3 * MiB))
    assert stored(minio_tls, bucket, "w", first)[1] == b"z" * (9 * MiB)
    wrong = s3bulk.AwsSettings.from_env(verify_ssl=False, sse_c=second)
    with pytest.raises(s3bulk.S3Error, match="403"):
        s3bulk.get(f"s3://{bucket}/x", settings=wrong)
    with pytest.raises(s3bulk.UsageError, match="32 bytes"):
        s3bulk.AwsSettings.from_env(sse_c=b"short")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sse-c-key", "short"], "--sse-c-key: an SSE-C key is 32 bytes, this is 5"),
        (["--sse-c-key", "fileb:///nonexistent/key"], "--sse-c-key: cannot read /nonexistent/key"),
        (["--sse-c-key", "base64:!!"], "--sse-c-key: base64:… is not valid base64"),
        (["--sse-c", "AES128", "--sse-c-key", "k" * 32], "--sse-c 'AES128': SSE-C has one algorithm, AES256"),
        (["--sse-c", "AES256"], "--sse-c needs its key: add --sse-c-key"),
        (
            ["--sse-c-copy-source-key", "k" * 31],
            "--sse-c-copy-source-key: an SSE-C key is 32 bytes, this is 31",
        ),
    ],
)
def test_bad_keys_are_one_line_and_nothing_is_sent(
    minio_tls: Endpoint, tree: Path, flags: list[str], message: str
) -> None:
    bucket = new_bucket(minio_tls)
    done = run_cli(minio_tls.env, "cp", *INSECURE, f"{tree}/", f"s3://{bucket}/x/", *flags)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if not line.startswith("warning: TLS")]
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert minio_tls.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_sync_checksum_and_check_tell_an_unchanged_encrypted_tree_by_its_checksums(
    minio_tls: Endpoint, tree: Path, keys: tuple, tmp_path: Path
) -> None:
    """An SSE-C object's ETag is no MD5, so it cannot prove a file equal: the CRC64NVME the
    service keeps (s3bulk's uploads send one) can. A second sync --checksum of an unchanged tree
    sends nothing, both ways, check agrees, and a changed file is still sent."""
    _, _, k1, _ = keys
    bucket = new_bucket(minio_tls)
    key = ["--sse-c-key", f"fileb://{k1}"]

    def sync(source: str, destination: str) -> tuple[int, int]:
        """(objects sent, objects found unchanged) of one sync --checksum."""
        done = run_cli(
            minio_tls.env, "sync", "--json", "--checksum", *INSECURE, *SMALL[:4], *key, source, destination
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.splitlines()[-1])["summary"]
        return summary["objects_done"], summary["objects_unchanged"]

    up, down = (f"{tree}/", f"s3://{bucket}/t/"), (f"s3://{bucket}/t/", f"{tmp_path / 'down'}/")
    assert [sync(*up), sync(*up)] == [(2, 0), (0, 2)]
    assert [sync(*down), sync(*down)] == [(2, 0), (0, 2)]
    checked = run_cli(minio_tls.env, "check", *INSECURE, *key, *up)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    (tree / "small.txt").write_bytes(b"small object, changed\n")
    assert sync(*up) == (1, 1)


def test_a_download_is_checked_by_a_composite_checksum(
    minio_tls: Endpoint, tree: Path, keys: tuple, tmp_path: Path
) -> None:
    """An SSE-C object's ETag is no MD5, and a SHA-256 sent with each part is kept per part
    (COMPOSITE, "…-2"): such a download is checked by its parts' SHA-256s, their sizes as the
    service tells them, rather than landing unverified."""
    first, _, k1, _ = keys
    bucket = new_bucket(minio_tls)
    key = ["--sse-c-key", f"fileb://{k1}"]
    options = [*INSECURE, *SMALL[:4], *key]
    up = run_cli(
        minio_tls.env, "cp", *options, "--checksum-algorithm", "SHA256", f"{tree}/", f"s3://{bucket}/t/"
    )
    assert up.returncode == 0, up.stderr
    extra = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": first, "ChecksumMode": "ENABLED"}
    head = minio_tls.client().head_object(Bucket=bucket, Key="t/big.bin", **extra)  # type: ignore[attr-defined]
    assert head["ChecksumType"] == "COMPOSITE" and head["ChecksumSHA256"].endswith("-2")
    down = run_cli(minio_tls.env, "cp", "--json", *options, f"s3://{bucket}/t/", f"{tmp_path}/out/")
    assert down.returncode == 0, down.stdout + down.stderr
    summary = json.loads(down.stdout.splitlines()[-1])["summary"]
    assert (summary["objects_done"], summary["objects_unverified"]) == (2, 0), summary
    for name in ("small.txt", "big.bin"):
        assert (tmp_path / "out" / name).read_bytes() == (tree / name).read_bytes()
