"""Engine behaviour users rely on, against MinIO: work spread over processes, a killed worker that
loses nothing, and exit codes that reflect the job even across many back-to-back runs (retries
and the byte budget alone: tests/unit/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Endpoint, bucket_problems, make_tree, new_bucket, run_cli

import s3bulk


@pytest.mark.parametrize("workers", [1, 2])
def test_work_spreads_over_worker_processes(
    minio: Endpoint, aws_env: dict, tmp_path: Path, workers: int
) -> None:
    bucket = new_bucket(minio)
    files = {f"d{i % 7}/f{i:05d}": i.to_bytes(4, "big") for i in range(2001)}  # three listing pages
    make_tree(tmp_path / "src", files)
    up = s3bulk.copy(f"{tmp_path}/src/", f"s3://{bucket}/", workers=workers, concurrency=16)
    assert up.ok and up.objects_done == 2001 and up.workers == workers
    down = s3bulk.copy(f"s3://{bucket}/", f"{tmp_path}/out/", workers=workers, concurrency=16)
    assert down.ok and down.objects_done == 2001
    assert down.requests["LIST"] >= 3  # pages of 1,000: 1,000, 1,000 and 1
    assert all((tmp_path / "out" / key).read_bytes() == data for key, data in files.items())
    assert bucket_problems(minio, bucket, "", files) == []  # by the listing's ETags (MD5s): no GET each


@pytest.mark.campaign  # make reliability: the engine fifty times in a row, for a once-seen race
def test_fifty_back_to_back_cli_runs_all_exit_zero(minio: Endpoint, bucket: str, tmp_path: Path) -> None:
    """obstore's runtime can abort at interpreter shutdown; the exit code must not show it."""
    (tmp_path / "one.txt").write_bytes(b"1")
    codes = []
    for index in range(50):
        direction = (
            ["cp", str(tmp_path / "one.txt"), f"s3://{bucket}/k{index}"]
            if index % 2 == 0
            else ["cp", f"s3://{bucket}/k{index - 1}", f"{tmp_path}/back{index}"]
        )
        result = run_cli(minio.env, *direction)
        codes.append((result.returncode, result.stderr[-200:]))
    assert [code for code, _ in codes] == [0] * 50, [c for c in codes if c[0] != 0]


def test_a_killed_worker_loses_nothing_and_fails_the_job(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """SIGKILL one worker mid-upload: its descriptors go to the other worker, every object still
    arrives intact, and the exit code says something went wrong."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    files = {f"d{i % 5}/f{i:05d}": i.to_bytes(4, "big") * 64 for i in range(2000)}
    make_tree(tmp_path / "src", files)
    command = [sys.executable, "-m", "s3bulk", "cp", "--workers", "2", "--concurrency", "4"]
    process = subprocess.Popen(
        [*command, f"{tmp_path}/src/", f"s3://{bucket}/"],
        env=minio.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = minio.client()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the job is under way, then kill a worker
        listed = client.list_objects_v2(Bucket=bucket, MaxKeys=200).get("KeyCount", 0)
        driver = psutil.Process(process.pid)
        helpers = [  # a forkserver starts the workers once the driver has threads (its resolver's)
            child
            for child in driver.children()
            if any(name in " ".join(child.cmdline()) for name in ("forkserver", "resource_tracker"))
        ]
        children = [child for child in driver.children(recursive=True) if child not in helpers]
        if listed >= 200 and children:
            children[0].send_signal(signal.SIGKILL)
            break
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1, stderr
    assert "died" in stderr
    assert bucket_problems(minio, bucket, "", files) == []  # every key, each MD5 (its ETag) the file's
