"""Journals and resume: a job killed with SIGKILL midway resumes without losing or redoing
finished items; --retry-failed reruns only failures; `s3bulk jobs` tells what happened."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import psutil
from conftest import (
    S3BULK,
    Endpoint,
    bucket_digests,
    bucket_problems,
    make_tree,
    new_bucket,
    run_cli,
    tree_digests,
)


def _journal(directory: Path) -> Path:
    journals = list(directory.glob("*.db"))
    assert len(journals) == 1, journals
    return journals[0]


def _done_count(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT count(*) FROM items WHERE state = 'done'").fetchone()[0])
    except sqlite3.Error:
        return 0


def _kill_midway(command: list[str], env: dict[str, str], journals: Path, after: int) -> None:
    """Start a CLI job, SIGKILL the driver once the journal holds `after` done items, and check
    that its worker processes go away with it."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        paths = list(journals.glob("*.db"))
        if paths and _done_count(paths[0]) >= after:
            break
        time.sleep(0.05)
    assert process.poll() is None, f"job ended before it could be killed: {process.stderr.read()!r}"
    workers = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGKILL)
    process.wait()
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, "worker processes outlived their killed driver"


def test_resume_after_sigkill_finishes_exactly(minio: Endpoint, tmp_path: Path, job_journals: Path) -> None:
    count = 1500
    files = {f"d{i % 7}/f{i:05d}.txt": f"file {i}\n".encode() for i in range(count)}
    source = make_tree(tmp_path / "src", files)
    bucket = new_bucket(minio)
    env = minio.env
    command = [*S3BULK, "cp", "--workers", "2", "--concurrency", "8", f"{source}/", f"s3://{bucket}/up/"]
    _kill_midway(command, env, job_journals, after=300)
    journal = _journal(job_journals)
    done_before = _done_count(journal)
    assert 300 <= done_before < count

    listing = run_cli(env, "jobs", "--json")
    job = json.loads(listing.stdout.splitlines()[0])
    assert (job["command"], job["status"]) == ("cp", "interrupted")
    human = run_cli(env, "jobs")
    assert f"s3bulk cp --resume {job['job_id']}" in human.stdout

    resumed = run_cli(env, "cp", "--json", "--resume", job["job_id"])
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout.splitlines()[-1])["summary"]
    assert summary["objects_already_done"] >= done_before
    assert summary["objects_already_done"] + summary["objects_done"] == count
    assert bucket_problems(minio, bucket, "up/", files) == []  # each object's MD5 (ETag): no GET each

    with sqlite3.connect(journal) as db:
        states = dict(db.execute("SELECT state, count(*) FROM items GROUP BY state").fetchall())
        most = db.execute("SELECT max(times_done) FROM items").fetchone()[0]
        runs = db.execute("SELECT mode, status FROM runs ORDER BY run").fetchall()
    assert states == {"done": count}
    assert most == 1, "an item recorded as done was done again"
    assert runs == [("run", "running"), ("resume", "ok")]


def test_resume_download_after_sigkill_leaves_no_partial_files(
    minio: Endpoint, aws_env: dict, tmp_path: Path, job_journals: Path
) -> None:
    import s3bulk

    count = 1200
    source = make_tree(tmp_path / "src", {f"f{i:05d}.bin": bytes([i % 251]) * 2000 for i in range(count)})
    bucket = new_bucket(minio)
    assert s3bulk.copy(f"{source}/", f"s3://{bucket}/", journal=False).ok
    target = tmp_path / "out"
    command = [*S3BULK, "sync", "--workers", "2", "--concurrency", "8", f"s3://{bucket}/", str(target)]
    _kill_midway(command, minio.env, job_journals, after=200)
    assert not list(target.rglob("*.s3bulk-part")), "a killed download left a temporary file behind"

    job_id = _journal(job_journals).stem
    resumed = run_cli(minio.env, "sync", "--resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    assert tree_digests(target) == tree_digests(source)


def test_retry_failed_runs_only_failures(minio: Endpoint, aws_env: dict, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for index in range(20):
        client.put_object(Bucket=bucket, Key=f"p/f{index:02d}.txt", Body=f"{index}".encode())
    target = tmp_path / "out"
    (target / "f07.txt").mkdir(parents=True)  # blocks one download

    first = run_cli(minio.env, "cp", "--json", f"s3://{bucket}/p/", f"{target}/")
    assert first.returncode == 1
    summary = json.loads(first.stdout.splitlines()[-1])["summary"]
    assert (summary["objects_done"], summary["objects_failed"]) == (19, 1)

    (target / "f07.txt").rmdir()
    retried = run_cli(minio.env, "cp", "--json", "--retry-failed", summary["job_id"])
    assert retried.returncode == 0, retried.stderr
    again = json.loads(retried.stdout.splitlines()[-1])["summary"]
    assert (again["objects_done"], again["objects_failed"]) == (1, 0)
    assert again["requests"].get("LIST", 0) == 0  # the failures come from the journal, not a listing
    assert sorted(p.name for p in target.iterdir()) == [f"f{index:02d}.txt" for index in range(20)]

    wrong = run_cli(minio.env, "sync", "--resume", summary["job_id"])
    assert wrong.returncode == 2 and f"s3bulk cp --resume {summary['job_id']}" in wrong.stderr
    unknown = run_cli(minio.env, "cp", "--resume", "no-such-job")
    assert unknown.returncode == 2 and "s3bulk jobs" in unknown.stderr


def test_a_job_stopped_by_a_missing_bucket_resumes_once_it_exists(
    minio: Endpoint, aws_env: dict, tmp_path: Path
) -> None:
    """No bucket yet: the job stops at its listing (a job-wide error, said once) and a resume after
    the fix lists it again."""
    bucket = f"late-{time.monotonic_ns() % 10**9}"
    first = run_cli(minio.env, "cp", "--json", f"s3://{bucket}/p/", f"{tmp_path}/out/")
    summary = json.loads(first.stdout.splitlines()[-1])["summary"]
    assert first.returncode == 1 and "NoSuchBucket" in summary["aborted"]

    client = minio.client()
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="p/a.txt", Body=b"late")
    resumed = run_cli(minio.env, "cp", "--json", "--resume", summary["job_id"])
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[-1])["summary"]["objects_done"] == 1
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"late"

    again = run_cli(minio.env, "cp", "--json", "--retry-failed", summary["job_id"])  # nothing left
    assert json.loads(again.stdout.splitlines()[-1])["summary"]["objects_done"] == 0


def test_journals_of_the_untyped_format_still_resume_and_unknown_ones_are_refused(
    minio: Endpoint, aws_env: dict, tmp_path: Path, job_journals: Path
) -> None:
    """A journal written before typed specs (format 1: `{"args": {...}}`) resumes; one of a format
    this s3bulk does not know is refused with one line that says why."""
    from s3bulk._journal.local import Journal

    bucket = new_bucket(minio)
    source = make_tree(tmp_path / "src", {"a.txt": b"a", "b/c.txt": b"c"})
    args = {
        "source": f"{source}/",
        "destination": f"s3://{bucket}/old/",
        "include": [],
        "exclude": [],
        "dry_run": False,
        "part_size": 8 * 1024**2,
        "multipart_threshold": 64 * 1024**2,
        "copy_multipart_threshold": 5 * 1024**3,
        "partitioned_listing": None,
        "follow_symlinks": False,
        "engine": "hybrid",
        "workers": None,
        "concurrency": 64,
        "max_in_flight_bytes": 16 * 1024**2,
        "max_memory": None,
        "max_attempts": 6,
        "ray_address": None,
        "journal_url": None,
    }
    settings = {"profile": None, "region": None, "endpoint_url": minio.server.endpoint}
    old = Journal.create("cp", {"args": args, "settings": settings})
    old.close()
    resumed = run_cli(minio.env, "cp", "--resume", old.job_id)
    assert resumed.returncode == 0, resumed.stderr
    assert set(bucket_digests(minio, bucket, "old/")) == {"a.txt", "b/c.txt"}

    future = Journal.create("cp", {"version": 99, "spec": {}, "settings": settings})
    future.close()
    refused = run_cli(minio.env, "cp", "--resume", future.job_id)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "error: this job's journal has format 99, which this s3bulk does not read (it reads 2 and 1): "
        "resume it with the s3bulk that wrote it"
    ]


def test_jobs_shows_each_job_on_its_own_line_whatever_its_places_hold(
    minio: Endpoint, tmp_path: Path
) -> None:
    """A place holding a newline (legal in a key and a file name) printed as it is split its job's
    line in two, and a terminal escape in it acted on the terminal: written as escapes."""
    source = make_tree(tmp_path / "src\nnot a job\x1b[2J", {"a.txt": b"a"})
    bucket = new_bucket(minio)
    assert run_cli(minio.env, "cp", f"{source}/", f"s3://{bucket}/up/").returncode == 0
    shown = run_cli(minio.env, "jobs")
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout.splitlines()) == 1, shown.stdout
    assert "\x1b" not in shown.stdout and "src\\x0anot a job\\x1b[2J/" in shown.stdout, repr(shown.stdout)
