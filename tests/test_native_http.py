"""The signed client's requests go through the native part (object_store's HTTP client and
signer) where they reach the service as written, through aiohttp where they would not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli

from s3bulk._stores.native_http import sendable


@pytest.mark.parametrize(
    ("url", "native"),
    [
        ("http://h/b?list-type=2&prefix=a%2F..%2F", True),  # a dot segment in the query is a value
        ("http://h/b/a.b/..c/x..", True),
        ("http://h/b/p/../escape.txt", False),
        ("http://h/b/p/./x", False),
        ("http://h/b/p/%2E%2e/x", False),  # the URL parser resolves escaped dots too
        ("http://h/b/p/..", False),
        ("http://h/b/p/.?uploads", False),
    ],
)
def test_a_url_with_a_dot_segment_is_not_sent_natively(url: str, native: bool) -> None:
    assert sendable(url) is native


def in_a_new_interpreter(
    endpoint: Endpoint, code: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`code` (given `args` as sys.argv[1:]) run by an interpreter of its own: what a command
    imports shows in that interpreter's `sys.modules`."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=endpoint.env, capture_output=True, text=True, cwd=cwd
    )


def test_ls_loads_neither_aiohttp_nor_botocores_signer_nor_other_commands(minio: Endpoint) -> None:
    """What keeps `ls` of one key at 0.15 s: the native requests, and only ls's own module."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="k.txt", Body=b"abc")  # type: ignore[attr-defined]
    heavy = ("aiohttp", "botocore.auth", "s3bulk._commands", "s3bulk._api")
    code = (
        "import sys; from s3bulk._cli import run; code = run(['ls', sys.argv[1]]); "
        f"print(code, sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    done = in_a_new_interpreter(minio, code, f"s3://{bucket}/k.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(" 3 k.txt")
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_download_loads_its_own_command_and_no_other(minio: Endpoint, tmp_path: Path) -> None:
    """Nothing is imported that the job does not use: `cp` loads the copy command and its API
    module (and the batched deleter `mv` shares with `rm`), not sync's, gather's or map's, nor
    the other verbs (each command ~1-3 ms of imports and dataclasses; 20 ms of a `cp` in all)."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="k.txt", Body=b"abc")  # type: ignore[attr-defined]
    code = (
        "import sys; from s3bulk._cli import run; code = run(['cp', sys.argv[1], sys.argv[2]]); "
        "print(code, sorted(m for m in sys.modules if m.startswith(('s3bulk._commands', 's3bulk._api'))))"
    )
    done = in_a_new_interpreter(minio, code, f"s3://{bucket}/k.txt", f"{tmp_path}/")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.txt").read_bytes() == b"abc"
    own = [
        "_api",
        "_api.base",
        "_api.copy",
        "_commands",
        "_commands.base",
        "_commands.copy",
        "_commands.remove",
    ]
    assert done.stdout.splitlines()[-1] == f"0 {[f's3bulk.{name}' for name in own]}"


def test_a_download_and_a_listing_leave_obstore_unloaded(minio: Endpoint, tmp_path) -> None:
    """obstore is ~6 MiB of a download's peak RSS (3 x 100 MiB: 53 -> 49 MiB) that the native
    GETs and listings never call: it is loaded on first use (`s3bulk._lazy`)."""
    bucket = new_bucket(minio)
    for key in ("d/a.bin", "d/b.bin"):
        minio.client().put_object(Bucket=bucket, Key=key, Body=key.encode() * 1000)  # type: ignore[attr-defined]
    code = (
        "import sys; from s3bulk._cli import run; "
        "codes = [run(['ls', '-r', sys.argv[1]]), run(['cp', sys.argv[1], sys.argv[2]])]; "
        "print(codes, 'obstore._obstore' in sys.modules)"
    )
    done = in_a_new_interpreter(minio, code, f"s3://{bucket}/d/", f"{tmp_path}/out/", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[0, 0] False", done.stdout
    assert (tmp_path / "out" / "b.bin").read_bytes() == b"d/b.bin" * 1000


def test_keys_with_dot_segments_keep_their_names_through_aiohttp(moto: Endpoint) -> None:
    """moto stores such keys (MinIO refuses them). Sent natively, "q/../x" would be resolved to
    "x": another object. Server-side copies name them in their URL path."""
    client = moto.client()
    client.create_bucket(Bucket="dots")  # type: ignore[attr-defined]
    keys = {"p/../up.txt": b"up", "p/./here.txt": b"here", "p/plain.txt": b"plain"}
    for key, body in keys.items():
        client.put_object(Bucket="dots", Key=key, Body=body)  # type: ignore[attr-defined]
    done = run_cli(moto.env, "cp", "s3://dots/p/", "s3://dots/q/")
    assert done.returncode == 0, done.stderr
    copied = {
        entry["Key"]: client.get_object(Bucket="dots", Key=entry["Key"])["Body"].read()  # type: ignore[attr-defined]
        for entry in client.list_objects_v2(Bucket="dots", Prefix="q")["Contents"]  # type: ignore[attr-defined]
    }
    assert copied == {"q" + key[1:]: body for key, body in keys.items()}


def test_an_endpoint_nobody_answers_stops_ls_once_with_one_line() -> None:
    """No connection at all: the native client says so, and the job stops with one line."""
    env = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_REGION": "us-east-1"}
    env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # discard: nothing listens
    done = run_cli(env, "ls", "s3://nobody-home/k")
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "127.0.0.1:9" in done.stderr or "reach" in done.stderr, done.stderr


def test_a_large_upload_under_a_dot_segment_key_reads_its_parts_for_aiohttp(moto: Endpoint, tmp_path) -> None:
    """Its parts cannot be read from the file as they are sent by the native part (which would
    name another key): aiohttp sends each, read first, with its Content-MD5; the object is the
    file, under the key as named."""
    client = moto.client()
    client.create_bucket(Bucket="dotparts")  # type: ignore[attr-defined]
    data = bytes(range(256)) * (13 * 4096)  # 13 MiB
    (tmp_path / "big.bin").write_bytes(data)
    large = ["--multipart-threshold", "6MiB", "--part-size", "5MiB"]
    done = run_cli(moto.env, "cp", *large, str(tmp_path / "big.bin"), "s3://dotparts/p/./big.bin")
    assert done.returncode == 0, done.stderr
    stored = client.get_object(Bucket="dotparts", Key="p/./big.bin")  # type: ignore[attr-defined]
    assert stored["ETag"].endswith('-3"') and stored["Body"].read() == data
