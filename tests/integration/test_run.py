"""`s3bulk run FILE|-` (issue 21, item 1), against MinIO: a file of cp/mv/rm lines runs as one
job (downloads, uploads, server-side copies, moves and deletes, each checked where it landed),
a bad line fails alone by its number, a missing object fails its line and `--retry-failed` runs
that line again once it is there, `-` reads stdin, and a dry run changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import S3BULK, Endpoint, new_bucket, run_cli


def keys(endpoint: Endpoint, bucket: str) -> set[str]:
    return {item["Key"] for item in endpoint.client().list_objects_v2(Bucket=bucket).get("Contents", [])}


def test_a_file_of_commands_runs_as_one_job(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for key in ("src/a.txt", "src/b.txt", "src/c.txt", "old/x.txt"):
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    (tmp_path / "local.txt").write_text("from here")
    (tmp_path / "down").mkdir()
    commands = tmp_path / "commands.txt"
    commands.write_text(
        "# one job\n"
        f"cp s3://{bucket}/src/a.txt {tmp_path}/down/\n"
        f"cp s3://{bucket}/src/b.txt {tmp_path}/down/renamed.txt\n"
        f"cp {tmp_path}/local.txt s3://{bucket}/up/\n"
        f"cp s3://{bucket}/src/a.txt s3://{bucket}/copies/a.txt\n"
        f"mv s3://{bucket}/src/c.txt s3://{bucket}/moved/c.txt\n"
        f"rm s3://{bucket}/old/x.txt\n"
        "\n"
        f"cp s3://{bucket}/src/ {tmp_path}/down/\n"
        "chmod 777 everything\n"
        f"cp s3://{bucket}/src/later.txt {tmp_path}/down/\n"
    )
    done = run_cli(minio.env, "run", str(commands))
    assert done.returncode == 1, done.stderr
    assert "line 9: " in done.stderr and "one object or file per line" in done.stderr  # file line numbers
    assert "line 10: chmod 777 everything: 'chmod' is not a command run takes" in done.stderr
    assert f"no such object: s3://{bucket}/src/later.txt" in done.stderr
    assert (tmp_path / "down" / "a.txt").read_bytes() == b"src/a.txt"
    assert (tmp_path / "down" / "renamed.txt").read_bytes() == b"src/b.txt"
    assert keys(minio, bucket) == {"src/a.txt", "src/b.txt", "up/local.txt", "copies/a.txt", "moved/c.txt"}
    assert client.get_object(Bucket=bucket, Key="up/local.txt")["ContentType"] == "text/plain"

    client.put_object(Bucket=bucket, Key="src/later.txt", Body=b"arrived")
    job = next(line for line in done.stderr.splitlines() if "--retry-failed" in line).split()[-1]
    again = run_cli(minio.env, "run", "--retry-failed", job)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "down" / "later.txt").read_bytes() == b"arrived"


def test_stdin_and_a_dry_run(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"v")
    lines = f"rm s3://{bucket}/k\ncp s3://{bucket}/k {tmp_path}/k\n"
    dry = subprocess.run(
        [*S3BULK, "run", "--dry-run", "-"],
        input=lines,
        env=minio.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    assert keys(minio, bucket) == {"k"} and not (tmp_path / "k").exists()
    real = subprocess.run(
        [*S3BULK, "run", "-"],
        input=f"cp s3://{bucket}/k {tmp_path}/k\n",
        env=minio.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert real.returncode == 0 and (tmp_path / "k").read_bytes() == b"v", real.stderr
    missing = run_cli(minio.env, "run", str(tmp_path / "no-such-file"))
    assert missing.returncode == 2 and "s3bulk run" in missing.stderr and "no such file" in missing.stderr
