"""Reliability: the service goes away mid-job and comes back; the job waits and loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from conftest import (
    S3BULK,
    Endpoint,
    RunningJob,
    bucket_problems,
    make_tree,
    run_cli,
    sha256,
    tree_digests,
    tree_problems,
)

from s3bulk.testing import MinioServer

FILES = 1500


def _client(server: MinioServer) -> object:
    env = server.client_env()
    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


def _restart_mid_job(
    server: MinioServer, command: list[str], progress: Callable[[], bool], env: dict[str, str], log: Path
) -> dict[str, int]:
    """Run `command`; once `progress()` says it is under way, kill MinIO and bring it back 3 s
    later on the same port and data. Return the job's --json summary."""
    with RunningJob([*S3BULK, *command, "--json"], env, log) as process:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not progress():
            time.sleep(0.05)
        assert process.poll() is None, "the job ended before the server could be restarted"
        server.restart(pause=3.0)
        assert process.wait(timeout=400) == 0, process.output()
    return json.loads(log.read_text().splitlines()[-1])["summary"]


def _record_restart(
    reliability: Callable[..., None], operation: str, summary: dict[str, int], lost: int
) -> None:
    reliability(
        "server restart",
        "MinIO killed (SIGKILL) once 300 objects are done, back 3 s later on the same port and data",
        operation=operation,
        items=FILES,
        done=summary["objects_done"],
        failed=summary["objects_failed"],
        lost=lost,
        retries=summary["retries"],
    )


@pytest.mark.campaign  # make reliability: a server restarted under a job, 23 s
def test_minio_restart_mid_upload_and_download_loses_nothing(
    tmp_path: Path, reliability: Callable[..., None]
) -> None:
    files = {f"d{i % 7}/f{i:05d}.bin": i.to_bytes(4, "big") * 512 for i in range(FILES)}
    source = make_tree(tmp_path / "src", files)
    with MinioServer(tmp_path / "minio") as server:  # its own server: this test takes it down
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | server.client_env()
        client = _client(server)
        client.create_bucket(Bucket="outage")

        def stored() -> int:
            try:
                return client.list_objects_v2(Bucket="outage", MaxKeys=300).get("KeyCount", 0)
            except Exception:
                return 0

        upload = ["cp", f"{source}/", "s3://outage/data/", "--workers", "2", "--concurrency", "4"]
        summary = _restart_mid_job(server, upload, lambda: stored() >= 300, env, tmp_path / "up.log")
        bodies = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket="outage", Prefix="data/"):
            for entry in page.get("Contents", []):
                bodies[entry["Key"][len("data/") :]] = sha256(
                    client.get_object(Bucket="outage", Key=entry["Key"])["Body"].read()
                )
        wrong = [key for key, data in files.items() if bodies.get(key) != sha256(data)]
        _record_restart(reliability, "cp upload", summary, len(wrong))
        assert summary["objects_done"] == FILES and summary["objects_failed"] == 0
        assert summary["retries"] > 0  # the outage was seen, and waited out
        assert bodies == {key: sha256(data) for key, data in files.items()}

        target = tmp_path / "down"
        download = ["cp", "s3://outage/data/", f"{target}/", "--workers", "2", "--concurrency", "4"]

        def landed() -> bool:
            return target.exists() and sum(1 for _ in target.rglob("*.bin")) >= 300

        summary = _restart_mid_job(server, download, landed, env, tmp_path / "down.log")
        _record_restart(reliability, "cp download", summary, len(tree_problems(target, files)))
        assert summary["objects_done"] == FILES and summary["objects_failed"] == 0
        assert summary["retries"] > 0
        assert tree_digests(target) == tree_digests(source)  # no partial file, nothing missing


def test_the_secret_key_appears_nowhere(
    minio: Endpoint, bucket: str, tmp_path: Path, job_journals: Path, reliability: Callable[..., None]
) -> None:
    """Successes, failures, --json records, summaries, journals and job listings: the secret
    key is in none of them. TLS checks are on unless --no-verify-ssl, which warns."""
    secret = minio.server.client_env()["AWS_SECRET_ACCESS_KEY"]
    source = make_tree(tmp_path / "src", {f"f{i}.txt": b"x" * i for i in range(20)})
    runs = [
        run_cli(minio.env, "cp", f"{source}/", f"s3://{bucket}/ok/", "--json"),
        run_cli(minio.env, "cp", f"{source}/", "s3://no-such-bucket-xyz/p/", "--json"),
        run_cli(minio.env, "cp", f"s3://{bucket}/ok/", f"{tmp_path}/down/", "--json"),
        run_cli(minio.env, "sync", f"{source}/", f"s3://{bucket}/ok/", "--json"),
        run_cli(minio.env, "rm", f"s3://{bucket}/nothing-here/", "--json"),
        run_cli(minio.env, "jobs"),
        run_cli(minio.env, "doctor", f"s3://{bucket}/doctor/", "--json"),
        run_cli(minio.env, "ls", f"s3://{bucket}/", "--no-verify-ssl"),
    ]
    assert (
        runs[0].returncode == 0
        and runs[1].returncode == 1
        and "NoSuchBucket" in runs[1].stdout + runs[1].stderr
    )
    assert "warning: TLS certificate verification is off (--no-verify-ssl)" in runs[-1].stderr
    for done in runs:
        assert secret not in done.stdout + done.stderr, done.args
    journals = [path for path in job_journals.rglob("*") if path.is_file()]
    assert journals  # the jobs above were journaled
    for path in journals:
        assert secret.encode() not in path.read_bytes(), path
    reliability(
        "secrets",
        "cp (ok and NoSuchBucket), download, sync, rm, jobs, doctor, ls --no-verify-ssl: "
        "stdout, stderr and journals searched for the secret key",
        commands=len(runs),
        journals=len(journals),
        leaks=0,
    )


def test_connections_cut_mid_body_leave_no_truncated_file_or_object(
    minio: Endpoint, bucket: str, tmp_path: Path, reliability: Callable[..., None]
) -> None:
    """toxiproxy closes every connection after 2 MB each way (limit_data), so with two
    connections at a time the bodies of 200 KiB objects are cut mid-stream again and again,
    uploads and downloads alike: every object and file arrives whole or the run says which did
    not; here all arrive, after retries."""
    from s3bulk._benchmark.network import ToxiproxyServer

    files = {f"p/f{i:04d}.bin": (i.to_bytes(4, "big") * 51_200) for i in range(120)}
    source = make_tree(tmp_path / "src", files)
    with ToxiproxyServer() as proxy:
        port = proxy.proxy("minio", f"127.0.0.1:{minio.server.port}")
        for stream in ("upstream", "downstream"):
            proxy.toxic("minio", "limit_data", stream, bytes=2_000_000)
        env = minio.env | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
        for command in (
            ["cp", f"{source}/", f"s3://{bucket}/cut/"],
            ["cp", f"s3://{bucket}/cut/", f"{tmp_path}/down/"],
        ):
            done = run_cli(env, *command, "--json", "--workers", "1", "--concurrency", "2")
            summary = json.loads(done.stdout.splitlines()[-1])["summary"]
            download = command[1].startswith("s3://")
            problems = (
                tree_problems(tmp_path / "down", files)
                if download
                else bucket_problems(minio, bucket, "cut/", files)
            )
            reliability(
                "network: cut after 2 MB",
                "toxiproxy limit_data: every connection closed after 2 MB each way; 200 KiB objects",
                operation="cp download" if download else "cp upload",
                items=len(files),
                done=summary["objects_done"],
                failed=summary["objects_failed"],
                lost=len(problems),
                retries=summary["retries"],
                exit_code=done.returncode,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            assert summary["objects_done"] == len(files) and summary["retries"] > 0
            assert problems == []


def test_unicode_normalisation_twins_stay_two_objects_and_two_files(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """'café' composed (NFC) and decomposed (NFD) are different keys and, on Linux, different
    file names: each keeps its own bytes both ways, and neither overwrites the other."""
    import unicodedata

    composed, decomposed = unicodedata.normalize("NFC", "café.txt"), unicodedata.normalize("NFD", "café.txt")
    assert composed != decomposed
    source = make_tree(tmp_path / "src", {composed: b"composed", decomposed: b"decomposed"})
    assert run_cli(minio.env, "cp", f"{source}/", f"s3://{bucket}/twins/").returncode == 0
    client = minio.client()
    for name, body in ((composed, b"composed"), (decomposed, b"decomposed")):
        assert client.get_object(Bucket=bucket, Key=f"twins/{name}")["Body"].read() == body
    done = run_cli(minio.env, "cp", f"s3://{bucket}/twins/", f"{tmp_path}/down/")
    assert done.returncode == 0, done.stderr
    assert tree_digests(tmp_path / "down") == {
        composed: sha256(b"composed"),
        decomposed: sha256(b"decomposed"),
    }


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted afterwards (mounting needs root, as CI runs)."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_stops_the_download_and_resume_finishes_it(
    minio: Endpoint, bucket: str, small_disk: Path, reliability: Callable[..., None]
) -> None:
    """20 objects of 200 KiB into a 1 MiB disk: the job stops at the first full write with one
    line that names the disk and the fix; every file there is whole, no temporary file is left;
    with space freed (the tmpfs grown), --resume downloads the rest."""
    bodies = {f"f{i:02d}.bin": bytes([i]) * 200 * 1024 for i in range(20)}
    client = minio.client()
    for key, data in bodies.items():
        client.put_object(Bucket=bucket, Key=f"p/{key}", Body=data)
    done = run_cli(
        minio.env, "cp", f"s3://{bucket}/p/", f"{small_disk}/", "--workers", "1", "--concurrency", "4"
    )
    assert done.returncode == 1
    assert f"error: stopped: no space left on the device holding {small_disk}: free space" in done.stderr
    job_id = done.stderr.split("after the fix, finish it: s3bulk cp --resume ", 1)[1].split()[0]
    landed = {path.name: path.read_bytes() for path in small_disk.iterdir()}
    assert 0 < len(landed) < len(bodies)
    assert all(bodies.get(name) == data for name, data in landed.items()), "a partial or temporary file"
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    resumed = run_cli(minio.env, "cp", "--resume", job_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert tree_problems(small_disk, bodies) == []
    reliability(
        "bad input: full disk",
        "download of 20 x 200 KiB into a 1 MiB tmpfs, then the tmpfs grown and --resume",
        items=len(bodies),
        landed_before_stop=len(landed),
        partial_files=0,
        lost=0,
        exit_code_stopped=done.returncode,
        exit_code_resumed=resumed.returncode,
    )


def test_a_file_that_appears_during_its_download_is_left_alone(
    minio: Endpoint, bucket: str, tmp_path: Path, reliability: Callable[..., None]
) -> None:
    """A 10 MiB download (streamed to its temporary file), slowed to 4 MB/s by toxiproxy; once
    that temporary file exists, another program creates the target. The download fails with that
    named, the other file keeps its content, and no temporary file is left."""
    from s3bulk._benchmark.network import ToxiproxyServer

    minio.client().put_object(Bucket=bucket, Key="big.bin", Body=b"s3" * 5 * 1024 * 1024)
    target = tmp_path / "down" / "big.bin"
    target.parent.mkdir()
    with ToxiproxyServer() as proxy:
        port = proxy.proxy("slow", f"127.0.0.1:{minio.server.port}")
        proxy.toxic("slow", "bandwidth", "downstream", rate=4000)
        env = minio.env | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
        process = subprocess.Popen(
            [*S3BULK, "cp", f"s3://{bucket}/big.bin", str(target)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not list(target.parent.glob("*.s3bulk-part")):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.02)
        target.write_bytes(b"someone else's file")
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert f"{target} appeared while it was being downloaded and was left as it is" in stderr
    assert target.read_bytes() == b"someone else's file"
    assert [path.name for path in target.parent.iterdir()] == ["big.bin"]
    reliability(
        "bad input: destination appears mid-download",
        "another program creates the target while its download runs (toxiproxy slows it to 4 MB/s)",
        items=1,
        overwritten=0,
        partial_files=0,
        exit_code=process.returncode,
    )


def test_temporary_files_of_killed_downloads_are_swept(minio: Endpoint, bucket: str, tmp_path: Path) -> None:
    """A download killed outright (kill -9 of the whole job) leaves its temporary file: the next
    sync into that tree removes those whose process is gone, and leaves a live process's alone."""
    client = minio.client()
    for name in ("a/x.bin", "b/y.bin"):
        client.put_object(Bucket=bucket, Key=f"p/{name}", Body=b"data")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a process id that no longer exists
    target = tmp_path / "down"
    (target / "a").mkdir(parents=True)
    (target / "c").mkdir()
    stale = [
        target / "a" / f".x.bin.{gone.pid}-7.s3bulk-part",
        target / "c" / f".z.bin.{gone.pid}-9.s3bulk-part",
    ]
    live = target / "a" / f".x.bin.{os.getpid()}-1.s3bulk-part"  # this test's own process: alive
    for path in (*stale, live):
        path.write_bytes(b"half")
    done = run_cli(minio.env, "sync", f"s3://{bucket}/p/", f"{target}/")
    assert done.returncode == 0, done.stderr
    assert not any(path.exists() for path in stale) and live.exists()
    assert (target / "a" / "x.bin").read_bytes() == b"data" == (target / "b" / "y.bin").read_bytes()
