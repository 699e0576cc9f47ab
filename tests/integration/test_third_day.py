"""s3bulk on its third day (issue 65): the live line of large objects and of jobs still listing,
map's results beside its report, versioned buckets, and the smaller surprises. Driven as a person
drives it: the CLI in a pseudo-terminal for the live line, SIGINT for Ctrl-C, scripts run with
`python`. Each test failed on the main branch it was written against."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, make_tree, new_bucket, run_cli, run_script, sha256, small_logs

from s3bulk.testing.throttle import S3ThrottlingProxy

MiB = 1024 * 1024
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


class Terminal:
    """`s3bulk WORDS` on a pseudo-terminal (stdout and stderr both, as a person's shell runs
    it), 200 columns wide, what it shows read as it comes."""

    def __init__(self, env: dict[str, str], *words: str, cwd: Path | None = None) -> None:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        shown = {name: value for name, value in env.items() if name not in ("COLUMNS", "LINES")}
        self.process = subprocess.Popen(
            [*S3BULK, *words], stdin=follower, stdout=follower, stderr=follower, env=shown, cwd=cwd
        )
        os.close(follower)
        self.leader = leader
        self.raw = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.leader, 65536)
            except OSError:  # the terminal closed with the process
                return
            if not chunk:
                return
            self.raw += chunk

    @property
    def text(self) -> str:
        return self.raw.decode(errors="replace")

    def states(self) -> list[str]:
        """Every state the screen's lines went through: the live line is redrawn in place, so
        each redraw (after a carriage return or a cursor move) is a state of its own."""
        return [
            piece.strip() for piece in re.split(r"\r|\n|\x1b\[[0-9;?]*[a-zA-Z]", self.text) if piece.strip()
        ]

    def wait_for(self, seen: Callable[[list[str]], bool], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not seen(self.states()):
            assert self.process.poll() is None, f"it ended first: {self.text[-2000:]}"
            assert time.monotonic() < deadline, f"not seen in {timeout}s: {self.text[-2000:]}"
            time.sleep(0.05)

    def finish(self, timeout: float = 300) -> int:
        code = self.process.wait(timeout)
        self.reader.join(10)
        os.close(self.leader)
        return code

    def shown(self) -> str:
        """The whole output with the terminal's escapes removed, as lines."""
        return _ESCAPE.sub("", self.text).replace("\r\n", "\n")


@pytest.fixture
def person_env(minio: Endpoint, tmp_path: Path) -> dict[str, str]:
    return minio.env | {"S3BULK_STATE_DIR": str(tmp_path / "state")}


# 2. bytes count as they move


LIVE = re.compile(r"(?P<done>[\d,]+)/(?P<total>[\d,]+)\+? obj\s+(?P<moved>[\d.]+) (?P<unit>B|KiB|MiB|GiB)/")
UNITS = {"B": 1, "KiB": 1024, "MiB": MiB, "GiB": 1024 * MiB}


def moving(states: list[str]) -> list[tuple[int, float, str]]:
    """(objects done, bytes moved, the line) of each live-line state."""
    found = []
    for state in states:
        match = LIVE.search(state)
        if match:
            moved = float(match["moved"]) * UNITS[match["unit"]]
            found.append((int(match["done"].replace(",", "")), moved, state))
    return found


def part_way(states: list[str]) -> bool:
    """A state where the one large object is not done, part of its bytes have moved, and an ETA
    is given."""
    return any(done == 0 and moved > 0 and "ETA" in line for done, moved, line in moving(states))


@pytest.fixture(scope="module")
def large_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("large") / "big.bin"
    path.write_bytes(os.urandom(40 * MiB))
    return path


IN_PARTS = ["--multipart-threshold", "8MiB", "--part-size", "5MiB"]


def test_the_live_line_counts_an_upload_s_parts_as_they_are_stored(
    minio: Endpoint, person_env: dict[str, str], large_file: Path
) -> None:
    bucket = new_bucket(minio, "bytes-up")
    terminal = Terminal(
        person_env, "cp", str(large_file), f"s3://{bucket}/big.bin", *IN_PARTS, "--bwlimit", "8MiB"
    )
    terminal.wait_for(part_way)
    assert terminal.finish() == 0, terminal.shown()
    assert "upload: " in terminal.shown()


def test_the_live_line_counts_a_download_s_ranges_as_they_are_written(
    minio: Endpoint, person_env: dict[str, str], large_file: Path, tmp_path: Path
) -> None:
    bucket = new_bucket(minio, "bytes-down")
    minio.client().upload_file(str(large_file), bucket, "big.bin")
    target = tmp_path / "big.bin"
    terminal = Terminal(
        person_env, "cp", f"s3://{bucket}/big.bin", str(target), *IN_PARTS, "--bwlimit", "8MiB"
    )
    terminal.wait_for(part_way)
    assert terminal.finish() == 0, terminal.shown()
    assert target.read_bytes() == large_file.read_bytes()


def test_the_live_line_counts_a_copy_s_parts_as_the_service_copies_them(
    minio: Endpoint, person_env: dict[str, str], large_file: Path
) -> None:
    bucket = new_bucket(minio, "bytes-copy")
    minio.client().upload_file(str(large_file), bucket, "big.bin")
    terminal = Terminal(
        person_env,
        "cp",
        f"s3://{bucket}/big.bin",
        f"s3://{bucket}/copy.bin",
        "--copy-multipart-threshold",
        "8MiB",
        "--part-size",
        "5MiB",
        "--tpslimit",
        "3",
    )
    terminal.wait_for(part_way)
    assert terminal.finish() == 0, terminal.shown()
    head = minio.client().head_object(Bucket=bucket, Key="copy.bin")
    assert head["ContentLength"] == 40 * MiB


# 3. totals that are still being found


@pytest.fixture
def many_files(tmp_path: Path) -> Path:
    """4,000 small files: more than the walk hands out ahead of the uploads."""
    return small_files(tmp_path / "many", 4000)


def small_files(root: Path, count: int) -> Path:
    root.mkdir()
    for n in range(count):
        (root / f"f{n:05d}.txt").write_bytes(b"x" * 100)
    return root


def found_so_far(states: list[str]) -> bool:
    return any(re.search(r"/[\d,]+\+ obj", state) and "ETA" not in state for state in states)


def walking(minio: Endpoint, env: dict[str, str], files: Path, bwlimit: str) -> Terminal:
    """`cp files/ s3://new-bucket/p/` at `bwlimit`, shown while its walk is still going on."""
    bucket = new_bucket(minio, "walking")
    terminal = Terminal(env, "cp", f"{files}/", f"s3://{bucket}/p/", "--bwlimit", bwlimit)
    terminal.wait_for(found_so_far)
    return terminal


def test_totals_still_being_found_say_so_and_give_no_eta_until_whole(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    # the walk runs ~256 files ahead of the uploads: the total is whole for the last 256 (25 KiB),
    # which at 20 KiB/s the live line shows ~10 times (at 100 KiB/s a run once showed none)
    files = small_files(tmp_path / "files", 1000)
    terminal = walking(minio, person_env, files, "20KiB")
    growing = [int(m["total"].replace(",", "")) for m in map(LIVE.search, terminal.states()) if m]
    assert growing and growing[0] < 1000  # the walk was still handing out files
    terminal.wait_for(lambda states: any("/1,000 obj" in state and "ETA" in state for state in states))
    assert terminal.finish() == 0, terminal.shown()
    growing_states = [state for state in terminal.states() if re.search(r"/[\d,]+\+ obj", state)]
    assert not any("ETA" in state for state in growing_states)  # no ETA for a total still growing


def test_ctrl_c_while_the_walk_goes_on_says_how_many_were_found_so_far(
    minio: Endpoint, person_env: dict[str, str], many_files: Path
) -> None:
    terminal = walking(minio, person_env, many_files, "50KiB")
    terminal.process.send_signal(signal.SIGINT)
    assert terminal.finish() == 130
    stopped = [line for line in terminal.shown().splitlines() if "stopped:" in line]
    assert len(stopped) == 1, terminal.shown()
    line = stopped[0]
    assert re.search(
        r"stopped: [\d,]+ items done \([\d,]+ found so far\); finish it with: s3bulk cp --resume ", line
    ), line
    assert " of " not in line


# 4. map's results and its report


OBJECTS = 100


@pytest.fixture(scope="module")
def logs(minio: Endpoint) -> str:
    """A bucket of OBJECTS small objects under in/."""
    return small_logs(minio, "third", OBJECTS)


def test_reading_map_s_report_first_keeps_its_results_and_its_repr_says_where_it_is(
    logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    """As a notebook reads it: the report first, then the results; and the object itself."""
    done = run_script(
        person_env,
        tmp_path,
        f"""
        import pathlib, time
        import s3bulk

        def size(obj, body):
            while not pathlib.Path("gate").exists():
                time.sleep(0.01)
            return len(body)

        res = s3bulk.map(size, "s3://{logs}/in/", engine="async")
        print(repr(res))
        pathlib.Path("gate").touch()
        print(res.report.objects_done)
        print(repr(res))
        pairs = list(res)
        print(len(pairs), sum(result for _, result in pairs))
        print(repr(res))
        print(len(list(res)))
        """,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"<MapResults of s3://{logs}/in/: running, 0 done"), lines[0]
    assert lines[1] == str(OBJECTS)
    assert lines[2] == (
        f"<MapResults of s3://{logs}/in/: ended, {OBJECTS} done, 0 failed, {OBJECTS} results not yet read>"
    )
    total = sum(len(f"line {n}.") * 50 for n in range(OBJECTS))
    assert lines[3] == f"{OBJECTS} {total}"
    assert lines[4] == f"<MapResults of s3://{logs}/in/: ended, {OBJECTS} done, 0 failed, all results read>"
    assert lines[5] == "0"  # read once, as an iterator is


# 8. the smaller ones


def test_an_object_s_line_starts_a_line_of_its_own_under_the_live_line(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    """`cp` in a terminal names its first objects one line each while the live line runs: the
    live line is cleared first, not continued (`... 0 B/supload: ...`)."""
    bucket = new_bucket(minio, "lines")
    files = tmp_path / "files"
    files.mkdir()
    for n in range(6):
        (files / f"f{n}.bin").write_bytes(os.urandom(256 * 1024))
    terminal = Terminal(person_env, "cp", f"{files}/", f"s3://{bucket}/p/", "--bwlimit", "300KiB")
    assert terminal.finish() == 0, terminal.shown()
    named = [line for line in terminal.shown().splitlines() if " to s3://" in line]
    assert len(named) == 6, terminal.shown()
    assert all(line.startswith(f"upload: {files}/f") and " obj " not in line for line in named), named


def test_a_summary_gives_no_rate_of_zero(
    minio: Endpoint, person_env: dict[str, str], large_file: Path
) -> None:
    """One large object in a few seconds: 0.2 obj/s is no rate to print as "0 obj/s"."""
    bucket = new_bucket(minio, "rates")
    done = run_cli(person_env, "cp", str(large_file), f"s3://{bucket}/big.bin", "--bwlimit", "8MiB")
    assert done.returncode == 0, done.stderr
    summary = done.stdout.splitlines()[-1]
    assert summary.startswith("upload done: 1 object, 40.0 MiB in "), summary
    assert "0 obj/s" not in summary and re.search(r"\(0\.\d\d Gb/s\)$", summary), summary


def test_a_wrong_secret_is_named_alike_by_every_command_that_reads(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    """A HEAD's 403 carries no body to say why: `cat` and `head`, whose first request is one,
    say what `ls` and `cp` say (the service's SignatureDoesNotMatch), not a guessed AccessDenied."""
    bucket = new_bucket(minio, "secret")
    minio.client().put_object(Bucket=bucket, Key="k.txt", Body=b"hello")
    wrong = person_env | {"AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    said = {}
    for words in (
        ("ls", f"s3://{bucket}/"),
        ("cat", f"s3://{bucket}/k.txt"),
        ("head", f"s3://{bucket}/k.txt"),
        ("cp", f"s3://{bucket}/k.txt", str(tmp_path / "k.txt")),
    ):
        done = run_cli(wrong, *words)
        assert done.returncode != 0 and done.stderr, words
        said[words[0]] = done.stderr.splitlines()[0]  # (a job adds how to resume it)
    for command, line in said.items():
        assert line.startswith("error: ") and "SignatureDoesNotMatch (403)" in line, (command, line)
        assert "check AWS_SECRET_ACCESS_KEY / AWS_PROFILE" in line, (command, line)
        assert "not-the-secret" not in line


def without_extras(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """A Python where the extras' modules cannot be imported, as in a core install (every
    process of the job: a sitecustomize makes them absent)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "absent = 'numpy pyarrow h5py numcodecs isal ray fsspec psutil matplotlib'.split()\n"
        "for name in absent:\n"
        "    sys.modules[name] = None\n"
    )
    return env | {"PYTHONPATH": str(site)}


def test_every_api_entry_point_of_an_extra_names_the_extra_to_install(
    minio: Endpoint, logs: str, person_env: dict[str, str], tmp_path: Path
) -> None:
    """As the CLI does: one line, a UsageError, naming the extra (not a bare ModuleNotFoundError
    from deep inside); map's Parquet output asks for the `parquet` extra, named for what it does."""
    core = without_extras(person_env, tmp_path)
    (tmp_path / "rows.jsonl").write_text('{"key": "a", "vector": [1.0, 2.0]}\n')
    done = run_script(
        core,
        tmp_path,
        f"""
        import asyncio, inspect
        import s3bulk

        calls = {{
            "gather": lambda: s3bulk.gather("s3://{logs}/x.h5", "ws", ":,1"),
            "gather_async": lambda: s3bulk.gather_async("s3://{logs}/x.h5", "ws", ":,1"),
            "gather_to_file": lambda: s3bulk.gather_to_file("s3://{logs}/x.h5", "ws", ":,1", output="x.npy"),
            "gather_to_file_async": lambda: s3bulk.gather_to_file_async(
                "s3://{logs}/x.h5", "ws", ":,1", output="x.npy"
            ),
            "put_vectors": lambda: s3bulk.put_vectors("rows.jsonl", "vb", "ix"),
            "put_vectors_async": lambda: s3bulk.put_vectors_async("rows.jsonl", "vb", "ix"),
            "verify_vectors": lambda: s3bulk.verify_vectors("rows.jsonl", "vb", "ix"),
            "verify_vectors_async": lambda: s3bulk.verify_vectors_async("rows.jsonl", "vb", "ix"),
            "count_vectors": lambda: s3bulk.count_vectors("vb", "ix"),
            "count_vectors_async": lambda: s3bulk.count_vectors_async("vb", "ix"),
            "sync_vectors": lambda: s3bulk.sync_vectors("rows.jsonl", "vb", "ix"),
            "sync_vectors_async": lambda: s3bulk.sync_vectors_async("rows.jsonl", "vb", "ix"),
            "export_vectors": lambda: s3bulk.export_vectors("vb", "ix", "out.parquet"),
            "export_vectors_async": lambda: s3bulk.export_vectors_async("vb", "ix", "out.parquet"),
            "copy_vectors": lambda: s3bulk.copy_vectors("vb", "ix", "ix2"),
            "copy_vectors_async": lambda: s3bulk.copy_vectors_async("vb", "ix", "ix2"),
            "delete_vectors": lambda: s3bulk.delete_vectors("vb", "ix", "rows.jsonl"),
            "delete_vectors_async": lambda: s3bulk.delete_vectors_async("vb", "ix", "rows.jsonl"),
            "query_vectors": lambda: s3bulk.query_vectors("rows.jsonl", "vb", "ix", "hits.jsonl"),
            "query_vectors_async": lambda: s3bulk.query_vectors_async("rows.jsonl", "vb", "ix", "hits.jsonl"),
            "map parquet": lambda: s3bulk.map(len, "s3://{logs}/in/", output="out.parquet"),
            "copy ray": lambda: s3bulk.copy("s3://{logs}/in/", "down/", engine="ray"),
            "fsspec": lambda: __import__("s3bulk.fsspec"),
        }}
        for name, call in calls.items():
            try:
                result = call()
                if inspect.isawaitable(result):
                    asyncio.run(result)
                print(name, "|", "no error")
            except s3bulk.UsageError as exc:
                print(name, "|", exc)
            except BaseException as exc:
                print(name, "|", type(exc).__name__, exc)
        """,
    )
    assert done.returncode == 0, done.stderr
    said = dict(line.split(" | ", 1) for line in done.stdout.splitlines())
    assert len(said) == 23, done.stdout
    extra = {"gather": "arrays", "map parquet": "parquet", "copy ray": "ray", "fsspec": "fsspec"}
    wrong = []
    for name, line in said.items():
        wanted = next((value for key, value in extra.items() if name.startswith(key)), "vectors")
        if not (f"needs the {wanted} extra (" in line and f"pip install 's3bulk[{wanted}]'" in line):
            wrong.append((name, line))
    assert not wrong, "\n".join(map(str, wrong))


# 6. versioning: switched on, and used to restore


def test_versioning_switched_on_and_an_old_version_restored_in_place(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    bucket = f"versioned-{os.getpid()}"
    made = run_cli(person_env, "mb", "--versioning", f"s3://{bucket}")
    assert made.returncode == 0 and made.stdout == f"make_bucket: {bucket} (versioning Enabled)\n", (
        made.stderr
    )
    client = minio.client()
    assert client.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    status = run_cli(person_env, "versioning", "status", f"s3://{bucket}")
    assert status.stdout == f"s3://{bucket}: versioning Enabled\n", status.stderr

    first = client.put_object(Bucket=bucket, Key="doc.txt", Body=b"one", Metadata={"draft": "1"})
    client.put_object(Bucket=bucket, Key="doc.txt", Body=b"two, worse", Metadata={"draft": "2"})
    plain = run_cli(person_env, "cp", f"s3://{bucket}/doc.txt", f"s3://{bucket}/doc.txt")
    assert plain.returncode == 2 and "cp --version-id V SRC SRC" in plain.stderr, plain.stderr

    restored = run_cli(
        person_env,
        "cp",
        "--version-id",
        first["VersionId"],
        f"s3://{bucket}/doc.txt",
        f"s3://{bucket}/doc.txt",
    )
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout == (
        f"restore: s3://{bucket}/doc.txt ({first['VersionId']}) to s3://{bucket}/doc.txt (3 bytes)\n"
    )
    current = client.get_object(Bucket=bucket, Key="doc.txt")
    assert current["Body"].read() == b"one" and current["Metadata"] == {"draft": "1"}
    versions = client.list_object_versions(Bucket=bucket)["Versions"]
    assert len(versions) == 3  # the restore is a version of its own; the others stay

    suspended = run_cli(person_env, "versioning", "suspend", f"s3://{bucket}")
    assert suspended.stdout == f"s3://{bucket}: versioning Suspended\n", suspended.stderr
    assert client.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    plain_bucket = new_bucket(minio, "plain")
    never = run_script(
        person_env,
        tmp_path,
        f"""
        import s3bulk
        print(repr(s3bulk.versioning("s3://{plain_bucket}")))
        print(s3bulk.versioning("s3://{plain_bucket}", "enable"))
        """,
    )
    assert never.stdout.splitlines() == ["''", "Enabled"], never.stderr
    missing = run_cli(
        person_env, "cp", "--version-id", "no-such", f"s3://{bucket}/doc.txt", f"s3://{bucket}/doc.txt"
    )
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1, missing.stderr
    assert "NoSuchVersion" in missing.stderr, missing.stderr


# 1. a clean stop keeps what a resume can use


def parts_stored(minio: Endpoint, bucket: str) -> int:
    """The bytes of the parts the server holds, over every unfinished upload in `bucket`."""
    client = minio.client()
    total = 0
    for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
        parts = client.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        total += sum(part["Size"] for part in parts.get("Parts", []))
    return total


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_keeps_the_stored_parts_and_the_resume_sends_only_what_was_left(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path, how: signal.Signals
) -> None:
    """Ctrl-C in the middle of 3 large uploads, then --resume: the bytes the resume sends (counted
    by a proxy in front of the server) are at most 1.1 times what the server did not yet hold."""
    bucket = new_bucket(minio, "kept")
    files = {f"big{n}.bin": os.urandom(20 * MiB + n) for n in range(3)}
    make_tree(tmp_path / "big", files)
    total = sum(len(body) for body in files.values())
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = person_env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        with open(tmp_path / "cp.log", "wb") as log:  # in its own group, as a terminal runs it
            job = subprocess.Popen(
                [*S3BULK, "cp", "big/", f"s3://{bucket}/p/", *IN_PARTS, "--bwlimit", "16MiB"],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while (stored := parts_stored(minio, bucket)) < total // 3:  # a third is on the server
            assert job.poll() is None, (tmp_path / "cp.log").read_text()
            assert time.monotonic() < deadline, "no part was stored"
            time.sleep(0.05)
        os.killpg(job.pid, how)  # Ctrl-C reaches the whole process group
        assert job.wait(120) == 130
        said = (tmp_path / "cp.log").read_text().strip().splitlines()[-1]
        job_id = said.split()[2]
        sent_before = proxy.log.received["PUT"]
        resumed = run_cli(env, "cp", "--resume", job_id, "--bwlimit", "0")
        assert resumed.returncode == 0, resumed.stderr
        sent = proxy.log.received["PUT"] - sent_before
    left = total - stored
    assert sent <= 1.1 * left, (sent, left, total)
    assert re.search(r"stopped: .*, 3 multipart upload\(s\) kept for the resume \([\d.]+ MiB stored", said), (
        said
    )
    assert minio.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    for name, body in files.items():
        got = minio.client().get_object(Bucket=bucket, Key=f"p/{name}")["Body"].read()
        assert sha256(got) == sha256(body), name


# 5. the errors of every public entry point are s3bulk's, and the builtin ones


ENTRY_POINTS = """
import json, os, sys
import s3bulk

bucket = os.environ["BUCKET"]
there, absent = f"s3://{bucket}/k.txt", f"s3://{bucket}/absent.txt"
no_bucket = "s3://no-such-bucket-65/k.txt"
os.makedirs("here", exist_ok=True)
with open("here/a.txt", "w") as local:
    local.write("a")


def write(url):
    with s3bulk.open(url, "wb") as out:
        out.write(b"x" * 100)


def read(url):
    with s3bulk.open(url) as handle:
        return handle.read()


missing = {
    "open rb, no such key": lambda: read(absent),
    "open rb, no such bucket": lambda: read(no_bucket),
    "open wb, no such bucket": lambda: write(no_bucket),
    "get, no such key": lambda: s3bulk.get(absent),
    "get, no such bucket": lambda: s3bulk.get(no_bucket),
    "get_to_file, no such key": lambda: s3bulk.get_to_file(absent, "here.txt"),
    "head, no such key": lambda: s3bulk.head(absent),
    "put, no such bucket": lambda: s3bulk.put(no_bucket, b"x"),
    "ls, no such bucket": lambda: s3bulk.ls("s3://no-such-bucket-65/"),
    "copy, no such bucket": lambda: s3bulk.copy("here/", "s3://no-such-bucket-65/p/", journal=False),
}
denied = {
    "open rb": lambda: read(there),
    "open wb": lambda: write(f"s3://{bucket}/new.txt"),
    "get": lambda: s3bulk.get(there),
    "head": lambda: s3bulk.head(there),
    "put": lambda: s3bulk.put(f"s3://{bucket}/new.txt", b"x"),
    "ls": lambda: s3bulk.ls(f"s3://{bucket}/"),
}
for name, call in (denied if os.environ.get("WRONG") else missing).items():
    try:
        call()
    except Exception as exc:
        kinds = [kind.__name__ for kind in type(exc).__mro__]
        print(json.dumps({"call": name, "kinds": kinds, "module": type(exc).__module__, "text": str(exc)}))
    else:
        print(json.dumps({"call": name, "kinds": [], "module": "", "text": "no error"}))
"""


def test_every_entry_point_raises_s3bulk_s_error_as_the_builtin_one_in_one_line(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    """A missing key, a missing bucket, a 403 (a wrong secret): from `open` (reading and
    writing), `get`, `head`, `put`, `ls` and a job's start alike, an s3bulk.S3Error that is also
    the FileNotFoundError or PermissionError Python's own files raise, in one line; never
    obstore's exceptions with their Rust debug dumps. (A job that starts and then meets a
    refusal ends with its report saying so, `report.aborted`, as before.)"""
    bucket = new_bucket(minio, "errors")
    minio.client().put_object(Bucket=bucket, Key="k.txt", Body=b"hello")
    env = person_env | {"BUCKET": bucket}
    wrong = env | {"WRONG": "1", "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    for run_env, builtin in ((env, "FileNotFoundError"), (wrong, "PermissionError")):
        done = run_script(run_env, tmp_path, ENTRY_POINTS)
        assert done.returncode == 0, done.stderr
        said = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(said) == (6 if builtin == "PermissionError" else 10), done.stdout
        for each in said:
            assert builtin in each["kinds"] and "S3Error" in each["kinds"], each
            assert each["module"].startswith("s3bulk"), each
            assert "\n" not in each["text"] and "Debug" not in each["text"], each
            assert "not-the-secret" not in each["text"], each
        texts = {each["call"]: each["text"] for each in said}
        if builtin == "FileNotFoundError":
            for call, text in texts.items():
                missing = "NoSuchBucket" if "bucket" in call else "NoSuchKey"
                assert missing in text, (call, text)


# 9. large downloads: where they waited


def test_a_large_download_keeps_eight_ranges_in_flight_under_the_default_budget(
    minio: Endpoint, person_env: dict[str, str], tmp_path: Path
) -> None:
    """A range streams into its file holding a chunk or two, not its part: the byte budget
    (16 MiB) allows 8 in flight, where it held a download to the 3 parts of 5 MiB an upload may
    hold. A proxy holds the ranges the download sends and counts them."""
    bucket = new_bucket(minio, "ranges")
    body = os.urandom(60 * MiB)  # 12 ranges of 5 MiB
    minio.client().put_object(Bucket=bucket, Key="big.bin", Body=body)
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = person_env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        proxy.hold_after(2)  # the key looked up, its checksum asked for: then the ranges
        job = subprocess.Popen(
            [*S3BULK, "cp", f"s3://{bucket}/big.bin", "big.bin", *IN_PARTS],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while proxy.held < 8:
            assert job.poll() is None, job.communicate()
            assert time.monotonic() < deadline, f"{proxy.held} ranges in flight, {proxy.log.accepted}"
            time.sleep(0.05)
        proxy.release()
        _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert sha256((tmp_path / "big.bin").read_bytes()) == sha256(body)
