"""The tests' CLI runner (zygote.py) gives what a fresh `python -m s3bulk` gives: the same exit
code, output and effects, for commands that read stdin, resolve relative paths and import the
user's modules; so a test that uses `run_cli` promises what it would with a fresh interpreter."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, cli, cli_on_path, new_bucket


def fresh(
    env: dict[str, str], *args: str, cwd: Path | None = None, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*S3BULK, *args],
        env=env,
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["cp", "--help"],
        ["cp"],  # a usage error: exit 2 and typer's panel
        ["no-such-command"],
        ["cp", "nowhere/", "s3://b/"],  # bad input: one line, exit 1
    ],
    ids=["version", "help", "cp-help", "cp-usage", "unknown", "missing-source"],
)
def test_a_forked_command_says_what_a_fresh_interpreter_says(
    minio: Endpoint, tmp_path: Path, args: list[str]
) -> None:
    forked = cli(minio.env, *args, cwd=tmp_path)
    alone = fresh(minio.env, *args, cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (alone.returncode, alone.stdout, alone.stderr)


def test_a_forked_command_reads_stdin_resolves_relative_paths_and_imports_from_pythonpath(
    minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "a.txt").write_bytes(b"a")
    piped = cli(minio.env, "pipe", f"s3://{bucket}/piped", input=b"x" * 100_000)
    assert piped.returncode == 0, piped.stderr
    up = cli(minio.env, "cp", "-q", "here/", f"s3://{bucket}/up/", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    client = minio.client()
    assert client.get_object(Bucket=bucket, Key="piped")["Body"].read() == b"x" * 100_000  # type: ignore[attr-defined]
    assert client.get_object(Bucket=bucket, Key="up/a.txt")["Body"].read() == b"a"  # type: ignore[attr-defined]
    cat = cli(minio.env, "cat", f"s3://{bucket}/up/a.txt")
    assert (cat.returncode, cat.stdout) == (0, b"a"), cat.stderr

    module = tmp_path / "lib" / "zygote_probe_fns.py"
    module.parent.mkdir()
    module.write_text("def size(obj, body):\n    return len(body)\n")
    env = minio.env | {"PYTHONPATH": str(module.parent)}
    for run in (cli, fresh):
        mapped = run(env, "map", "zygote_probe_fns:size", f"s3://{bucket}/up/", cwd=tmp_path)
        assert mapped.returncode == 0, mapped.stderr
    assert "zygote_probe_fns" not in sys.modules  # the child's imports stay in the child


def test_a_forked_command_that_runs_too_long_is_killed_as_subprocess_run_kills_one(minio: Endpoint) -> None:
    with socket.socket() as silent:  # takes connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        env = minio.env | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{silent.getsockname()[1]}"}
        with pytest.raises(subprocess.TimeoutExpired):
            cli(env, "ls", "s3://any/", timeout=3)
    assert cli(minio.env, "--version").returncode == 0  # and the runner goes on


def test_startup_variables_take_a_fresh_interpreter(minio: Endpoint) -> None:
    """PYTHONUTF8, the locale and their like are read as Python starts: a command given other
    values than the test session's runs fresh, so its streams are set up by them."""
    env = minio.env | {"PYTHONIOENCODING": "latin-1"}
    forked, alone = cli(env, "--help"), fresh(env, "--help")
    assert (forked.returncode, forked.stdout) == (alone.returncode, alone.stdout)


def test_the_s3bulk_on_a_shell_s_path_says_what_the_real_one_says(minio: Endpoint, tmp_path: Path) -> None:
    """cli_on_path's `s3bulk` (the docs' examples run it): a shell script that runs it gets the
    same output, exit codes (a pipe's too), standard input and working directory as with the real
    one; a variable that changes the start-up makes it run the real one."""
    bucket = new_bucket(minio)
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "a.txt").write_bytes(b"a")
    script = (
        "s3bulk --version; s3bulk no-such-command; echo exit=$?\n"
        f"echo piped | s3bulk pipe s3://{bucket}/piped && s3bulk cp -q here/ s3://{bucket}/up/\n"
        f"s3bulk ls -r s3://{bucket}/ | head -1 | wc -l; echo pipe=${{PIPESTATUS[0]}}\n"
        f"s3bulk cat s3://{bucket}/piped > /dev/full; echo full=$?\n"
        f"LANG=C.UTF-8 s3bulk cat s3://{bucket}/up/a.txt; echo\n"
    )
    outputs = []
    for path in (cli_on_path(), str(Path(sys.executable).parent)):
        env = minio.env | {"PATH": f"{path}:{minio.env['PATH']}"}
        found = subprocess.run(["bash", "-c", "command -v s3bulk"], env=env, capture_output=True, text=True)
        assert found.stdout.strip() == f"{path}/s3bulk"
        outputs.append(subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True))
    forked, real = outputs
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert b"exit=2\n" in real.stdout and b"pipe=0\n" in real.stdout and b"full=1\n" in real.stdout
    assert real.stdout.endswith(b"a\n"), real.stdout
    assert minio.client().get_object(Bucket=bucket, Key="piped")["Body"].read() == b"piped\n"  # type: ignore[attr-defined]
