"""s3bulk in its first week (issue 47): scripts that call the API as statements, run with
`python script.py` from a directory of their own, and the less common paths a person meets after
day one. Each test names its item, and failed on the main branch it was written against."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli, run_script, small_logs

OBJECTS = 40


@pytest.fixture(scope="module")
def logs(minio: Endpoint) -> str:
    """A bucket of OBJECTS small text objects under in/."""
    return small_logs(minio, "week", OBJECTS)


@pytest.fixture
def person_env(minio: Endpoint, tmp_path: Path) -> dict[str, str]:
    return minio.env | {"S3BULK_STATE_DIR": str(tmp_path / "state")}


def keys_under(minio: Endpoint, bucket: str, prefix: str) -> dict[str, bytes]:
    client = minio.client()
    found = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in found}


# 1. map as a statement


def test_map_to_as_a_script_s_last_statement_writes_every_object(
    minio: Endpoint, logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    done = run_script(
        person_env,
        tmp_path,
        f"""
        import gzip
        import s3bulk

        def gzip_it(obj, body):
            return gzip.compress(body)

        s3bulk.map(gzip_it, "s3://{logs}/in/", to="s3://{logs}/gz/")
        """,
    )
    assert done.returncode == 0, done.stderr
    written = keys_under(minio, logs, "gz/")
    assert len(written) == OBJECTS
    assert gzip.decompress(written["gz/k007.log"]) == b"line 7\n" * 50


def test_map_to_returns_the_report_and_output_too(
    minio: Endpoint, logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    done = run_script(
        person_env,
        tmp_path,
        f"""
        import s3bulk

        report = s3bulk.map(lambda obj, body: body.upper(), "s3://{logs}/in/", to="s3://{logs}/up/")
        print("to", type(report).__name__, report.objects_done)
        report = s3bulk.map(lambda obj, body: len(body), "s3://{logs}/in/", output="rows.jsonl")
        print("output", type(report).__name__, report.objects_done)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [f"to Report {OBJECTS}", f"output Report {OBJECTS}"]
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == OBJECTS


def test_map_whose_results_are_never_read_still_runs_to_its_end(
    logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    """A plain map as the last statement, its function writing files: Python's exit waits for
    the job and says so; a MapResults dropped with its queue full lets the job go on."""
    marks = tmp_path / "marks"
    marks.mkdir()
    done = run_script(
        person_env,
        tmp_path,
        f"""
        import gc, pathlib
        import s3bulk, s3bulk._api.map

        s3bulk._api.map.RESULTS_WAITING = 3  # the queue fills at once

        def mark(obj, body):
            pathlib.Path("{marks}", obj.key.replace("/", "_")).write_bytes(body)
            return len(body)

        dropped = s3bulk.map(mark, "s3://{logs}/in/", engine="async")
        del dropped
        gc.collect()
        s3bulk.map(mark, "s3://{logs}/in/", engine="async")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert len(list(marks.iterdir())) == OBJECTS
    assert "the job runs to its end before Python exits" in done.stderr


def test_map_failures_nobody_read_are_printed_at_exit(
    logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    done = run_script(
        person_env,
        tmp_path,
        f"""
        import s3bulk

        def picky(obj, body):
            if obj.key.endswith("7.log"):
                raise ValueError("sevens are refused")
            return len(body)

        s3bulk.map(picky, "s3://{logs}/in/", engine="async")
        s3bulk.map(picky, "s3://nobucket-{os.getpid()}/in/", engine="async")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "s3bulk.map: 36 done, 4 failed (the first: " in done.stderr
    assert "sevens are refused" in done.stderr
    assert f"s3bulk.map: stopped: list s3://nobucket-{os.getpid()}/in/: NoSuchBucket" in done.stderr


def test_ctrl_c_while_python_waits_for_a_map_stops_it_resumably(
    logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    gate, started = tmp_path / "open", tmp_path / "started"
    (tmp_path / "slow.py").write_text(
        textwrap.dedent(
            f"""
            import asyncio, pathlib

            async def waits(obj, body):
                pathlib.Path("{started}").touch()
                while not pathlib.Path("{gate}").exists():
                    await asyncio.sleep(0.02)
                return body[::-1]
            """
        )
    )
    (tmp_path / "script.py").write_text(
        f'import s3bulk, slow\ns3bulk.map(slow.waits, "s3://{logs}/in/", engine="async", concurrency=4)\n'
    )
    script = subprocess.Popen(
        [sys.executable, "script.py"], cwd=tmp_path, env=person_env, stderr=subprocess.PIPE, text=True
    )
    assert script.stderr is not None
    first = script.stderr.readline()
    assert "the job runs to its end before Python exits (Ctrl-C stops it, to be resumed)" in first
    while not started.exists() and script.poll() is None:  # the job has begun: it has a journal
        time.sleep(0.01)
    script.send_signal(signal.SIGINT)
    rest = script.stderr.read()
    script.wait(timeout=60)
    # in Python, the call that finishes it (issue 65), not the command line
    assert "(map) stopped: 0 " in rest and "; finish it with: s3bulk.resume('" in rest, rest
    job = rest.split("s3bulk.resume('")[1].split("'")[0]
    gate.touch()
    resumed = run_script(person_env, tmp_path, f"import s3bulk\nprint(s3bulk.resume({job!r}).objects_done)\n")
    assert resumed.returncode == 0 and resumed.stdout == f"{OBJECTS}\n", resumed.stderr


# 5. the Python API as a person calls it


def test_the_api_takes_what_the_cli_takes_and_names_what_it_refuses(
    logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    done = run_script(
        person_env,
        tmp_path,
        f"""
        import asyncio, datetime, os, warnings
        import s3bulk

        warnings.simplefilter("error")  # a coroutine never awaited is a failure here
        report = s3bulk.copy("s3://{logs}/in/", "got/", part_size="8MiB", concurrency="10", max_memory="1GB")
        print("copied", report.objects_done)
        since = s3bulk.copy("s3://{logs}/in/", "since/", newer_than="2020-01-01T00:00:00Z").objects_done
        future = datetime.datetime(2999, 1, 1, tzinfo=datetime.UTC)
        after = s3bulk.copy("s3://{logs}/in/", "after/", newer_than=future)
        print("since", since, after.objects_done)

        def refused(call):
            try:
                call()
            except Exception as exc:
                print(type(exc).__name__, exc)

        refused(lambda: s3bulk.copy("s3://{logs}/in/", "got/", concurency=3))
        refused(lambda: s3bulk.copy("s3://{logs}/in/", "got/", concurrency=[3]))
        refused(lambda: s3bulk.copy("s3://{logs}/in/", "got/", part_size="eight"))
        refused(lambda: s3bulk.map(len, "s3://{logs}/in/", concurency=3))
        refused(lambda: s3bulk.put("s3://{logs}/x", 5))

        async def inside_a_loop():
            s3bulk.copy("s3://{logs}/in/", "got/")

        refused(lambda: asyncio.run(inside_a_loop()))
        refused(lambda: s3bulk.get("s3://nobucket-{os.getpid()}/k"))
        refused(lambda: s3bulk.get("s3://{logs}/in/nokey"))
        refused(lambda: s3bulk.head("s3://{logs}/in/nokey"))
        """,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"copied {OBJECTS}"
    assert lines[1] == f"since {OBJECTS} 0"
    assert lines[2:] == [
        "TypeError s3bulk.copy() got an unexpected keyword argument 'concurency' "
        "(did you mean 'concurrency'?)",
        "TypeError concurrency must be a number (or a str such as '8MiB'), not list",
        "UsageError part_size: cannot read size 'eight': use e.g. 8MiB, 64MB or 1048576",
        "TypeError s3bulk.map() got an unexpected keyword argument 'concurency' "
        "(did you mean 'concurrency'?)",
        "TypeError put(url, data): data is bytes, a local file's path or an iterable of bytes, not int",
        "UsageError s3bulk.copy() blocks, and an event loop runs here: use await s3bulk.copy_async(...)",
        f"NoSuchObject get s3://nobucket-{os.getpid()}/k: NoSuchBucket (404): there is no bucket "
        f"nobucket-{os.getpid()}; check the bucket name (and AWS_ENDPOINT_URL / --endpoint-url)",
        f"NoSuchObject get s3://{logs}/in/nokey: NoSuchKey (404): no object has that key",
        f"NoSuchObject head s3://{logs}/in/nokey: NoSuchKey (404): no object has that key",
    ]
    assert "never awaited" not in done.stderr


def test_get_to_file_takes_a_home_a_directory_and_parents_to_make(
    logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "locked").mkdir(mode=0o500)
    done = run_script(
        person_env | {"HOME": str(home)},
        tmp_path,
        f"""
        import s3bulk

        print(s3bulk.get_to_file("s3://{logs}/in/k001.log", "~/downloads/new/"))
        print(s3bulk.get_to_file("s3://{logs}/in/k002.log", "~/downloads/new"))
        print(s3bulk.get_to_file("s3://{logs}/in/k003.log", "deep/er/named.log"))
        try:
            s3bulk.get_to_file("s3://{logs}/in/k004.log", "locked/k004.log")
        except OSError as exc:
            print(exc)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert (home / "downloads/new/k001.log").read_bytes() == b"line 1\n" * 50
    assert (home / "downloads/new/k002.log").read_bytes() == b"line 2\n" * 50
    assert (tmp_path / "deep/er/named.log").read_bytes() == b"line 3\n" * 50
    assert done.stdout.splitlines()[-1] == f"[Errno 13] Permission denied: '{tmp_path}/locked/k004.log'"
    assert not list((tmp_path / "locked").iterdir())


# 4. map's output, skips and resumes


def test_map_rows_keep_the_object_s_columns_skips_are_skips_and_resumes_say_what_they_did(
    minio: Endpoint, logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    (tmp_path / "week.py").write_text(
        textwrap.dedent(
            """
            def clash(obj, body):
                return {"key": "overwritten", "size": -1, "lines": body.count(b"\\n")}

            def odd_only(obj, body):
                return None if int(obj.key[-5]) % 2 == 0 else body.upper()
            """
        )
    )
    env = person_env | {"PYTHONPATH": str(tmp_path)}
    rows = run_cli(env, "map", "week:clash", f"s3://{logs}/in/", "--output", str(tmp_path / "rows.parquet"))
    assert rows.returncode == 0, rows.stderr
    table = pq.read_table(tmp_path / "rows.parquet").to_pylist()
    assert sorted(row["key"] for row in table) == [f"in/k{n:03d}.log" for n in range(OBJECTS)]
    assert table[0]["result"] == {"key": "overwritten", "size": -1, "lines": 50}

    skipping = run_cli(env, "map", "week:odd_only", f"s3://{logs}/in/", "--to", f"s3://{logs}/odd/")
    assert skipping.returncode == 0, skipping.stderr
    lines = skipping.stdout.splitlines()
    shown = {line.split()[1]: line for line in lines if line.startswith(("skip: ", "map: "))}
    assert shown, skipping.stdout
    for url, line in shown.items():
        odd = int(url[-5]) % 2 == 1
        assert line == (
            f"map: {url} to {url.replace('/in/', '/odd/')}"
            if odd
            else f"skip: {url} (the function returned None)"
        )
    assert "map done: 20 objects, " in lines[-1] and lines[-1].endswith("; 20 skipped"), lines[-1]
    assert len(keys_under(minio, logs, "odd/")) == 20

    listed = run_cli(env, "jobs", "--json")
    job = json.loads(listed.stdout.splitlines()[0])["job_id"]  # the newest
    resumed = run_cli(env, "map", "--resume", job)
    assert resumed.returncode == 0, resumed.stderr
    assert "map done: 0 objects" in resumed.stdout and "40 already done earlier" in resumed.stdout, resumed
    again = run_cli(env, "map", "--retry-failed", job)
    assert again.returncode == 0, again.stderr
    assert "map done: 0 objects" in again.stdout, again


# 10. counts and advice that add up


def test_counts_and_advice_add_up(
    minio: Endpoint, logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "kept.txt").write_text("kept")
    (tree / "gone.txt").write_text("gone")
    assert run_cli(person_env, "sync", f"{tree}/", f"s3://{logs}/tree/").returncode == 0
    (tree / "gone.txt").unlink()
    deleting = run_cli(person_env, "sync", "--delete", f"{tree}/", f"s3://{logs}/tree/")
    assert deleting.returncode == 0, deleting.stderr
    assert deleting.stdout.splitlines()[-1].startswith("sync (upload) done: 0 objects, 0 B in ")
    assert deleting.stdout.splitlines()[-1].endswith("; 1 unchanged, 1 deleted")

    removed = run_script(
        person_env,
        tmp_path,
        f'import s3bulk\nr = s3bulk.remove("s3://{logs}/tree/")\nprint(r.objects_done, r.objects_deleted)\n',
    )
    assert removed.stdout.split() == ["1", "1"], removed.stderr
    rm = run_cli(person_env, "rm", f"s3://{logs}/nothing-here/x")
    assert "deleted" not in rm.stdout

    du = run_cli(person_env, "du", f"s3://{logs}/in/k001.log")
    assert du.stdout.split()[1:3] == ["1", "object"], du.stdout

    capped = run_cli(
        person_env, "cp", "--tpslimit", "22", "--stats", f"s3://{logs}/in/", f"{tmp_path}/capped/"
    )
    assert capped.returncode == 0, capped.stderr
    assert "rate-limited, as asked: each item waited" in capped.stdout + capped.stderr
    assert "service-bound" not in capped.stdout + capped.stderr

    minio.client().put_object(Bucket=logs, Key="moving/one.txt", Body=b"one")
    (tmp_path / "lines.txt").write_text(f"mv s3://{logs}/moving/one.txt s3://{logs}/moved/\n")
    ran = run_cli(person_env, "run", str(tmp_path / "lines.txt"))
    assert ran.returncode == 0, ran.stderr
    assert f"move: s3://{logs}/moving/one.txt to s3://{logs}/moved/one.txt" in ran.stdout


# 11. bench runs Ray only when asked


def test_bench_runs_ray_only_when_asked() -> None:
    from s3bulk._benchmark.suite import default_strategies

    assert "ray" not in default_strategies("copy") and "hybrid" in default_strategies("copy")
    assert "ray" not in default_strategies("upload")


# 12. help that matches the program


def help_text(env: dict[str, str], *words: str) -> str:
    """A command's help as one line of words (the panels' borders and wrapping taken out)."""
    shown = run_cli(env | {"COLUMNS": "100"}, *words, "--help")
    assert shown.returncode == 0, shown.stderr
    return " ".join(shown.stdout.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


def test_help_says_what_the_program_does(
    minio: Endpoint, logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    engine = help_text(person_env, "cp")
    assert "processes x asyncio" not in engine and "each one event loop" in engine
    assert "x.parquet" in help_text(person_env, "map")
    assert "s3://bucket/key" not in help_text(person_env, "sync").split("--size-only")[0]
    assert "--metadata-directive" not in help_text(person_env, "pipe")
    assert "--metadata-directive" in help_text(person_env, "cp")

    from test_day_one import write_profiles

    home = tmp_path / "home"
    write_profiles(home, minio.server.endpoint)
    env = {name: value for name, value in person_env.items() if not name.startswith("AWS_")} | {
        "HOME": str(home)
    }
    listed = run_cli(env, "--profile", "local", "ls", f"s3://{logs}/in/")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == OBJECTS
    listed = run_cli(env, "--profile=local", "--region", "us-east-1", "ls", "--recursive", f"s3://{logs}/in/")
    assert len(listed.stdout.splitlines()) == OBJECTS, listed.stderr


# 7. versioned buckets


def test_versions_can_be_deleted_and_rb_force_empties_a_versioned_bucket(
    minio: Endpoint, person_env: dict[str, str]
) -> None:
    bucket = new_bucket(minio, "versions")
    client = minio.client()
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    for key in ("old/a", "old/a", "old/b", "keep/c"):
        client.put_object(Bucket=bucket, Key=key, Body=b"bytes")
    client.delete_object(Bucket=bucket, Key="old/a")  # a delete marker over two versions
    client.delete_object(Bucket=bucket, Key="old/b")

    refused = run_cli(person_env, "rb", f"s3://{bucket}")
    assert (
        refused.returncode == 2
        and "rb --force deletes its objects (and their old versions)" in refused.stderr
    )

    dry = run_cli(person_env, "rm", "--all-versions", "--dry-run", f"s3://{bucket}/old/")
    assert dry.stdout.splitlines()[-1] == "rm --all-versions: 5 would delete"
    removed = run_cli(person_env, "rm", "--all-versions", f"s3://{bucket}/old/")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines()[-1] == "rm --all-versions: 5 deleted"
    assert sum("(delete marker " in line for line in removed.stdout.splitlines()) == 2
    left = client.list_object_versions(Bucket=bucket)
    assert [v["Key"] for v in left.get("Versions", [])] == ["keep/c"] and not left.get("DeleteMarkers")

    client.delete_object(Bucket=bucket, Key="keep/c")  # only an old version and a marker left
    emptied = run_cli(person_env, "rb", "--force", f"s3://{bucket}")
    assert emptied.returncode == 0, emptied.stderr
    assert bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]


# 2 and 3. help in an 80-column terminal


def in_a_terminal(env: dict[str, str], *words: str, columns: int = 80) -> str:
    """What `s3bulk WORDS` prints to a pseudo-terminal of `columns` columns, as a person sees it."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    shown = {name: value for name, value in env.items() if name not in ("COLUMNS", "LINES")}
    process = subprocess.Popen(
        [sys.executable, "-m", "s3bulk", *words], stdin=follower, stdout=follower, stderr=follower, env=shown
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(leader)
    import re

    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", b"".join(chunks).decode()).replace("\r\n", "\n")


PANELS = [
    "Transfers",
    "One object, or a look at many",
    "Buckets",
    "Jobs",
    "Your function, vectors and arrays",
    "Measure",
]


def test_the_command_list_is_grouped_one_line_each_aliases_as_aliases(person_env: dict[str, str]) -> None:
    from s3bulk._cli import MENU

    shown = in_a_terminal(person_env, "--help")
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert [next(i for i, line in enumerate(lines) if f"─ {panel} ─" in line) for panel in PANELS] == sorted(
        next(i for i, line in enumerate(lines) if f"─ {panel} ─" in line) for panel in PANELS
    )
    for name, entry in MENU.items():
        listed = [line for line in lines if line.startswith(f"│ {name} ")]
        if name == "stat":
            assert not listed  # an alias: named on head's line
            continue
        assert len(listed) == 1 and entry.summary in listed[0], (name, listed)
    assert "(alias: stat)" in shown


@pytest.mark.parametrize(
    "command",
    [
        "cp",
        "sync",
        "rm",
        "ls",
        "cat",
        "map",
        "jobs",
        "doctor",
        "mb",
        "vectors put",
        "vectors count",
        "multipart abort",
    ],
)
def test_a_command_s_help_starts_with_one_line_and_an_example(
    person_env: dict[str, str], command: str
) -> None:
    from s3bulk._cli import MENU, SUBMENU

    entry = MENU.get(command) or SUBMENU[command]
    shown = in_a_terminal(person_env, *command.split(), "--help")
    lines = [line.strip() for line in shown.splitlines() if line.strip()]
    assert lines[0].startswith(f"Usage: s3bulk {command} ")
    assert lines[1] == entry.summary + "." and len(lines[1]) <= 78
    assert lines[2] == f"Example: {entry.example}"


def test_cp_help_has_panels_and_only_cp_s_options(person_env: dict[str, str]) -> None:
    shown = in_a_terminal(person_env, "cp", "--help")
    for panel in (
        "What to copy",
        "Attributes",
        "Encryption",
        "Endpoints and accounts",
        "Speed and memory",
        "The job",
    ):
        assert f"─ {panel} ─" in shown, panel
    assert "--max-delete" not in shown and "--sse-c " not in shown and "--sse-c-key" in shown
    assert "--max-delete" in in_a_terminal(person_env, "mv", "--help")
    refused = run_cli(person_env, "cp", "--max-delete", "3", "a", "s3://b/a")
    assert refused.returncode == 2 and "cp deletes nothing" in refused.stderr


# 9. one output vocabulary


def test_every_json_output_speaks_one_vocabulary(
    minio: Endpoint, logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    import re

    iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$")
    url = f"s3://{logs}/in/k001.log"

    def lines(*words: str) -> list[dict[str, object]]:
        done = run_cli(person_env, *words)
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    (listed,) = lines("ls", "--json", url)
    (headed,) = lines("head", "--json", url)
    attributes = [row for row in lines("ls", "--attributes", "--json", f"s3://{logs}/in/") if "key" in row]
    for row in (listed, headed, attributes[0]):
        assert row["key"].startswith("in/k")  # type: ignore[union-attr]
        assert iso.match(str(row["last_modified"])), row
        assert not str(row["etag"]).startswith('"'), row
    assert headed["url"] == url and headed["etag"] == listed["etag"] and headed["size"] == listed["size"]

    versions = lines("ls", "--all-versions", "--json", url)
    assert "modified" not in versions[0] and iso.match(str(versions[0]["last_modified"]))
    assert run_cli(person_env, "cp", url, f"{tmp_path}/one.log").returncode == 0  # a job to list
    (job,) = lines("jobs", "--json")
    assert iso.match(str(job["created"])), job

    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "k.txt").write_text("local only")
    compared = [row for row in lines("check", "--json", f"s3://{logs}/in/", f"{tree}/") if "status" in row]
    extra = next(row for row in compared if row["status"] == "extra")
    missing = next(row for row in compared if row["status"] == "missing")
    assert extra["name"] == "sub/k.txt" and extra["destination"] == f"{tree}/sub/k.txt"
    assert missing["name"] == "k000.log" and missing["source"] == f"s3://{logs}/in/k000.log"


# 8. what it uploads it can download


def test_a_name_with_a_control_character_comes_back_when_asked(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    bucket = new_bucket(minio, "esc")
    name = "a\x1b[31mred.txt"
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / name).write_bytes(b"red")
    assert run_cli(person_env, "cp", f"{tmp_path}/up/", f"s3://{bucket}/esc/").returncode == 0

    refused = run_cli(person_env, "cp", f"s3://{bucket}/esc/", f"{tmp_path}/down/")
    assert refused.returncode == 1
    assert "--allow-control-chars writes it under that name" in refused.stderr
    assert "\x1b" not in refused.stderr + refused.stdout  # printed escaped, never raw

    asked = run_cli(person_env, "cp", "--allow-control-chars", f"s3://{bucket}/esc/", f"{tmp_path}/down/")
    assert asked.returncode == 0, asked.stderr
    assert (tmp_path / "down" / name).read_bytes() == b"red"
    again = run_cli(person_env, "sync", "--allow-control-chars", f"s3://{bucket}/esc/", f"{tmp_path}/down/")
    assert again.returncode == 0 and "1 unchanged" in again.stdout


def test_doctor_quotes_the_rate_at_the_knee_it_names_and_says_why_it_recommends_more() -> None:
    """Job logic on numbers (no server): the knee at 4 in flight, a few percent more at 8 and 16."""
    from s3bulk._doctor import Diagnosis, Level, _recommend

    found = Diagnosis("s3://b/p/", "http://127.0.0.1:9000")
    found.cpu_ms_per_request, found.knee = 0.2, 4
    found.levels = [
        Level(n, rate, rate * 0.064, 5.0) for n, rate in [(1, 100), (2, 190), (4, 350), (8, 370), (16, 380)]
    ]
    _recommend(found)
    assert found.recommendation.startswith(
        "throughput stops growing at about 4 requests in flight (350 requests/s there)"
    )
    assert "--concurrency 8 (twice the knee per worker" in found.recommendation


# issue 48, item 2: extras (numpy, pyarrow, h5py and the decoders are not needed to move objects)


def test_a_core_install_moves_objects_and_names_the_extra_a_feature_needs(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    """A Python where the extras' modules cannot be imported (every process of the job: a
    sitecustomize that makes them absent, as a core install has them)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "for name in ('numpy', 'pyarrow', 'h5py', 'numcodecs', 'isal', 'ray'):\n"
        "    sys.modules[name] = None\n"
    )
    core = person_env | {"PYTHONPATH": str(site)}
    bucket = new_bucket(minio, "core")
    (tmp_path / "up").mkdir()
    for n in range(20):
        (tmp_path / "up" / f"f{n}.txt").write_text(f"file {n}")
    assert run_cli(core, "cp", f"{tmp_path}/up/", f"s3://{bucket}/up/").returncode == 0
    down = run_cli(core, "sync", f"s3://{bucket}/up/", f"{tmp_path}/down/")
    assert down.returncode == 0, down.stderr
    assert len(list((tmp_path / "down").iterdir())) == 20

    gather = run_cli(core, "gather", f"s3://{bucket}/x.h5", "-d", "ws", "-s", ":,1", "-o", "x.npy")
    assert gather.returncode == 2
    assert gather.stderr.strip() == (
        "error: s3bulk gather needs the arrays extra (numpy, h5py, numcodecs, isal not installed): "
        "pip install 's3bulk[arrays]'"
    )
    vectors = run_cli(core, "vectors", "put", str(tmp_path / "up"), "--bucket", "v", "--index", "i")
    assert vectors.returncode == 2 and "pip install 's3bulk[vectors]'" in vectors.stderr
    api = run_script(
        core,
        tmp_path,
        f"""
        import s3bulk
        try:
            s3bulk.put_vectors("{tmp_path}/up", bucket="v", index="i")
        except s3bulk.UsageError as exc:
            print(exc)
        print(s3bulk.copy("s3://{bucket}/up/", "again/").objects_done)
        """,
    )
    assert api.stdout.splitlines() == [
        "s3bulk vectors put needs the vectors extra (numpy, pyarrow not installed): "
        "pip install 's3bulk[vectors]'",
        "20",
    ], api.stderr


def test_rm_all_versions_deletes_only_what_it_names(minio: Endpoint, person_env: dict[str, str]) -> None:
    """A key without '/' is that key, not a prefix (logs/a must not take logs/ab with it); a
    filter --all-versions does not apply is refused, not ignored; a name matching nothing fails."""
    bucket = new_bucket(minio, "only")
    client = minio.client()
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    for key in ("logs/a", "logs/a", "logs/ab", "logs/x.log"):
        client.put_object(Bucket=bucket, Key=key, Body=b"bytes")

    def versions() -> list[str]:
        return sorted(v["Key"] for v in client.list_object_versions(Bucket=bucket).get("Versions", []))

    named = run_cli(person_env, "rm", "--all-versions", f"s3://{bucket}/logs/a")
    assert named.returncode == 0, named.stderr
    assert named.stdout.splitlines()[-1] == "rm --all-versions: 2 deleted"
    assert versions() == ["logs/ab", "logs/x.log"]

    filtered = run_cli(person_env, "rm", "--all-versions", "--include", "*.log", f"s3://{bucket}/logs/")
    assert filtered.returncode == 2
    assert "error: --all-versions takes no --include: it deletes every version under" in filtered.stderr
    assert versions() == ["logs/ab", "logs/x.log"]

    nothing = run_cli(person_env, "rm", "--all-versions", f"s3://{bucket}/logs/*.log")
    assert nothing.returncode == 1 and "no version or delete marker of" in nothing.stderr
    assert versions() == ["logs/ab", "logs/x.log"]
