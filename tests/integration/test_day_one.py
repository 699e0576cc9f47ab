"""s3bulk as a person uses it on the first day: from a shell in the destination directory, with
relative paths, a profile in ~/.aws/config (its endpoint there) and no AWS_* variables, piping
into `head`, pressing Ctrl-C, with odd file names and a website folder. Every test here failed on
the main branch this module was written against (issue 17) and names the item it covers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Endpoint, as_text, cli, make_tree, new_bucket, peak_group_rss, sha256

from s3bulk.testing.servers import ROOT_PASSWORD, ROOT_USER
from s3bulk.testing.throttle import S3ThrottlingProxy

MiB = 1024**2


@dataclass
class Person:
    """A shell user: HOME with an AWS profile `local` whose endpoint is MinIO, no AWS_* variables."""

    home: Path
    env: dict[str, str]
    state: Path  # where their journals go

    def run(
        self, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """`python -m s3bulk ARGS` in `cwd`: a process of its own, forked from one that has the CLI
        imported (conftest.cli), so a test pays for its job, not for an interpreter's start-up."""
        done = cli(env or self.env, *args, cwd=cwd, timeout=timeout)
        return subprocess.CompletedProcess(
            done.args, done.returncode, as_text(done.stdout), as_text(done.stderr)
        )

    def run_fresh(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """`python -m s3bulk ARGS` in a fresh interpreter, as the person's shell starts it: the
        tests here about the process itself (its start, pipes, signals, memory) start it this way."""
        return subprocess.run(
            [sys.executable, "-m", "s3bulk", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )

    def shell(self, script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """A bash pipeline, `s3bulk` being this checkout's."""
        env = self.env | {"PATH": f"{Path(sys.executable).parent}:{self.env['PATH']}"}
        return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)


def write_profiles(home: Path, endpoint: str) -> None:
    aws = home / ".aws"
    aws.mkdir(parents=True)
    (aws / "config").write_text(
        "[default]\nregion = us-east-1\n\n"
        f"[profile local]\nregion = us-east-1\nendpoint_url = {endpoint}\n\n"
        "[profile viaservices]\nregion = us-east-1\nservices = minio-here\n\n"
        f"[services minio-here]\ns3 =\n  endpoint_url = {endpoint}\n\n"
        "[profile nothere]\nregion = us-east-1\nservices = missing-section\n"
    )
    keys = f"aws_access_key_id = {ROOT_USER}\naws_secret_access_key = {ROOT_PASSWORD}\n"
    (aws / "credentials").write_text(f"[local]\n{keys}\n[viaservices]\n{keys}\n[nothere]\n{keys}")


@pytest.fixture
def person(minio: Endpoint, tmp_path: Path) -> Person:
    home = tmp_path / "home"
    write_profiles(home, minio.server.endpoint)
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    state = tmp_path / "state" / "jobs"
    env.update(HOME=str(home), AWS_PROFILE="local", S3BULK_STATE_DIR=str(state))
    env.pop("S3BULK_CACHE_DIR", None)
    return Person(home, env, state)


@pytest.fixture
def here(tmp_path: Path) -> Path:
    """The directory the person stands in (empty)."""
    directory = tmp_path / "here"
    directory.mkdir()
    return directory


def put(minio: Endpoint, bucket: str, objects: dict[str, bytes], **extra: str) -> None:
    client = minio.client()
    for key, body in objects.items():
        # after a PUT of a key ending in '/', MinIO leaves bytes on the connection that make the
        # next request on it wait 30 s for boto3's read timeout: such keys get a client of their own
        each = minio.client() if key.endswith("/") else client
        each.put_object(Bucket=bucket, Key=key, Body=body, **extra)


def uploads_left(minio: Endpoint, bucket: str) -> list[str]:
    return [
        upload["Key"] for upload in minio.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    ]


# ---- 1. downloads into the working directory ----------------------------------------------------
def test_downloads_land_in_the_working_directory_by_every_spelling(
    minio: Endpoint, person: Person, here: Path
) -> None:
    bucket = new_bucket(minio)
    objects = {
        "site/index.html": b"<html>",
        "k": b"kay",
        "k2": b"kay two",
        "p/a.txt": b"a",
        "p/s/b.txt": b"b",
    }
    put(minio, bucket, objects)
    for args in (
        ("cp", f"s3://{bucket}/site/index.html", "./index.html"),
        ("cp", f"s3://{bucket}/k", "k"),
        ("cp", f"s3://{bucket}/p/", "."),
        ("mv", f"s3://{bucket}/k2", "./k2"),
    ):
        done = person.run(*args, cwd=here)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    (here / "sub").mkdir()
    into_dot = person.run("cp", f"s3://{bucket}/k", ".", cwd=here / "sub")
    assert into_dot.returncode == 0, into_dot.stderr
    files = {
        path.relative_to(here).as_posix(): path.read_bytes() for path in here.rglob("*") if path.is_file()
    }
    assert files == {
        "index.html": b"<html>",
        "k": b"kay",
        "k2": b"kay two",
        "a.txt": b"a",
        "s/b.txt": b"b",
        "sub/k": b"kay",
    }
    assert "k2" not in {entry["Key"] for entry in minio.client().list_objects_v2(Bucket=bucket)["Contents"]}


# ---- 3. profiles and their endpoints --------------------------------------------------------------
def test_a_profile_s_endpoint_and_services_section_are_used(
    minio: Endpoint, person: Person, here: Path
) -> None:
    bucket = new_bucket(minio)
    put(minio, bucket, {"a.txt": b"a"})
    by_variable = person.run("ls", f"s3://{bucket}/", cwd=here)
    by_flag = person.run("ls", "--profile", "viaservices", f"s3://{bucket}/", cwd=here)
    for done in (by_variable, by_flag):
        assert done.returncode == 0, done.stderr
        assert done.stdout.rstrip().endswith(" 1 a.txt")
    missing = person.run("ls", "--profile", "nothere", f"s3://{bucket}/", cwd=here)
    assert missing.returncode == 2 and "missing-section" in missing.stderr


def test_an_unknown_profile_is_one_line(person: Person, here: Path) -> None:
    for args in (
        ("ls", "--profile", "nosuch", "s3://bucket/"),
        ("cp", "--profile", "nosuch", ".", "s3://bucket/"),
    ):
        done = person.run(*args, cwd=here)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [
            "error: AWS profile 'nosuch' not found in the AWS config or credentials file: check the name "
            "(aws configure list-profiles) or drop --profile / AWS_PROFILE"
        ]


# ---- 4. a file name that is not UTF-8 -----------------------------------------------------------
def test_a_file_name_that_is_not_utf8_is_refused_by_name_and_the_rest_goes(
    minio: Endpoint, person: Person, here: Path
) -> None:
    bucket = new_bucket(minio)
    make_tree(here / "docs", {"ok.txt": b"fine", "sub/also.txt": b"fine too"})
    (here / "docs").joinpath(os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name")
    done = person.run("cp", "docs/", f"s3://{bucket}/docs/", cwd=here)
    assert done.returncode == 1, done.stderr
    refused = [line for line in done.stderr.splitlines() if line.startswith("failed:")]
    assert refused == [
        "failed: docs/caf\\xe9.txt: its name is not valid UTF-8, and S3 keys must be: rename it "
        "(e.g. convmv -f latin1 -t utf8)"
    ]
    keys = {entry["Key"] for entry in minio.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert keys == {"docs/ok.txt", "docs/sub/also.txt"}
    jobs = json.loads(person.run("jobs", "--json", cwd=here).stdout.splitlines()[0])
    assert (jobs["status"], jobs["done"]) == ("failed", 2)


# ---- 5. Ctrl-C, SIGTERM and kill -9 -----------------------------------------------------------
def add_profile(person: Person, name: str, endpoint: str, secret: str = ROOT_PASSWORD) -> None:
    aws = person.home / ".aws"
    with open(aws / "config", "a") as config:
        config.write(f"\n[profile {name}]\nregion = us-east-1\nendpoint_url = {endpoint}\n")
    with open(aws / "credentials", "a") as credentials:
        credentials.write(f"\n[{name}]\naws_access_key_id = {ROOT_USER}\naws_secret_access_key = {secret}\n")


@pytest.fixture
def held(minio: Endpoint, person: Person) -> Iterator[S3ThrottlingProxy]:
    """A proxy in front of MinIO that a test can make hold every request (profile `held`)."""
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        add_profile(person, "held", proxy.endpoint)
        yield proxy


def journaled_uploads(state: Path) -> int:
    total = 0
    for path in state.glob("*.db"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            total += db.execute("SELECT count(*) FROM uploads").fetchone()[0]
    return total


def start_held(
    person: Person, proxy: S3ThrottlingProxy, answers: int, *args: str, cwd: Path
) -> subprocess.Popen[str]:
    """The CLI in its own process group (as a terminal runs it), held mid-way by the proxy."""
    proxy.hold_after(answers)
    process = subprocess.Popen(
        [sys.executable, "-m", "s3bulk", *args, "--profile", "held"],
        cwd=cwd,
        env=person.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    started = time.monotonic()
    while proxy.held == 0:
        assert process.poll() is None, f"the job ended before its hold: {process.communicate()}"
        assert time.monotonic() - started < 60, "the job never reached its hold"
        time.sleep(0.01)
    return process


LARGE = ("--multipart-threshold", "6MiB", "--part-size", "5MiB")


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_upload_keeps_its_multipart_uploads_for_the_resume_and_says_how_to_finish(
    minio: Endpoint, person: Person, held: S3ThrottlingProxy, here: Path, how: signal.Signals
) -> None:
    """Issue 65: aborting them had the resume send every part again, which a kill -9 did not."""
    bucket = new_bucket(minio)
    files = {f"big{n}.bin": os.urandom(12 * MiB + n) for n in range(3)}
    make_tree(here / "out", files)
    # 3 CreateMultipartUploads (one per file) and some parts pass; the rest are held
    job = start_held(person, held, 5, "cp", *LARGE, "out/", f"s3://{bucket}/up/", cwd=here)
    while journaled_uploads(person.state) == 0:  # an upload id exists and is journaled
        time.sleep(0.01)
    os.killpg(job.pid, how)  # Ctrl-C reaches the whole process group, as in a terminal
    held.release()
    out, err = job.communicate(timeout=60)
    assert job.returncode == 130, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted: job "), err
    job_id = lines[0].split()[2]
    assert lines[0].endswith(f"finish it with: s3bulk cp --resume {job_id}")
    assert ", 3 multipart upload(s) kept for the resume (" in lines[0], err
    assert sorted(uploads_left(minio, bucket)) == [f"up/{name}" for name in sorted(files)]
    assert journaled_uploads(person.state) == 3
    resumed = person.run("cp", "--resume", job_id, "--profile", "held", cwd=here)
    assert resumed.returncode == 0, resumed.stderr
    assert uploads_left(minio, bucket) == []
    assert journaled_uploads(person.state) == 0
    stored = minio.client()
    for name, body in files.items():
        data = stored.get_object(Bucket=bucket, Key=f"up/{name}")["Body"].read()
        assert sha256(data) == sha256(body)


@pytest.mark.parametrize("changed", [False, True], ids=["same-file", "file-changed"])
def test_kill_9_leaves_an_upload_that_the_resume_goes_on_with(
    minio: Endpoint, person: Person, held: S3ThrottlingProxy, here: Path, changed: bool
) -> None:
    bucket = new_bucket(minio)
    body = os.urandom(20 * MiB)  # 4 parts of 5 MiB
    make_tree(here / "out", {"big.bin": body})
    job = start_held(person, held, 4, "cp", *LARGE, "out/big.bin", f"s3://{bucket}/big.bin", cwd=here)
    while journaled_uploads(person.state) == 0:
        time.sleep(0.01)
    upload_id = ""
    while not upload_id or not parts_stored(minio, bucket, "big.bin", upload_id):  # a part is stored
        upload_id = next(iter(uploads_of(minio, bucket)), "")
        time.sleep(0.01)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate()
    held.release()
    assert uploads_left(minio, bucket) == ["big.bin"]  # the server still bills it
    stored = parts_stored(minio, bucket, "big.bin", upload_id)
    if changed:  # same size, other bytes: no part of the earlier upload may be kept
        body = os.urandom(20 * MiB)
        (here / "out" / "big.bin").write_bytes(body)
    job_id = next(person.state.glob("*.db")).stem
    resumed = person.run("cp", "--resume", job_id, "--profile", "held", "--json", cwd=here)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout.splitlines()[-1])["summary"]
    assert "went on with 1 multipart upload(s) an earlier run left unfinished" in " ".join(report["notes"])
    sent = report["requests"]["PUT"] - 1  # parts, and the one CompleteMultipartUpload
    # parts held by the proxy at the kill may still have been stored after it: at least those
    # stored before are kept when the file is the same; none when its bytes changed
    assert sent == 4 if changed else sent <= 4 - stored, (sent, stored)
    assert uploads_left(minio, bucket) == []
    assert sha256(minio.client().get_object(Bucket=bucket, Key="big.bin")["Body"].read()) == sha256(body)


def uploads_of(minio: Endpoint, bucket: str) -> list[str]:
    return [
        upload["UploadId"]
        for upload in minio.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    ]


def parts_stored(minio: Endpoint, bucket: str, key: str, upload_id: str) -> int:
    return len(minio.client().list_parts(Bucket=bucket, Key=key, UploadId=upload_id).get("Parts", []))


def test_an_interrupted_download_leaves_no_temporary_file(
    minio: Endpoint, person: Person, held: S3ThrottlingProxy, here: Path
) -> None:
    bucket = new_bucket(minio)
    put(minio, bucket, {f"d/{n}.bin": os.urandom(9 * MiB) for n in range(3)})
    job = start_held(person, held, 4, "cp", *LARGE, f"s3://{bucket}/d/", "got/", cwd=here)
    os.killpg(job.pid, signal.SIGINT)
    held.release()
    _, err = job.communicate(timeout=60)
    assert job.returncode == 130 and err.startswith("interrupted: job "), err
    assert [path.name for path in (here / "got").iterdir() if not path.name.endswith(".bin")] == []


# ---- 6. sync --checksum of multipart objects converges ----------------------------------------
def test_sync_checksum_of_a_multipart_object_does_nothing_the_second_time(
    minio: Endpoint, person: Person, here: Path
) -> None:
    bucket = new_bucket(minio)
    data = os.urandom(13 * MiB)
    (here / "big.bin").write_bytes(data)
    assert person.run("cp", *LARGE, "big.bin", f"s3://{bucket}/a/big.bin", cwd=here).returncode == 0
    put(minio, bucket, {"a/small.txt": b"small"})
    source_etag = minio.client().head_object(Bucket=bucket, Key="a/big.bin")["ETag"]
    assert source_etag.endswith('-3"')
    first = person.run("sync", "--checksum", "--json", f"s3://{bucket}/a/", f"s3://{bucket}/b/", cwd=here)
    second = person.run("sync", "--checksum", "--json", f"s3://{bucket}/a/", f"s3://{bucket}/b/", cwd=here)
    assert json.loads(first.stdout.splitlines()[-1])["summary"]["objects_done"] == 2, first.stderr
    again = json.loads(second.stdout.splitlines()[-1])["summary"]
    assert (again["objects_done"], again["objects_unchanged"]) == (0, 2)
    assert minio.client().head_object(Bucket=bucket, Key="b/big.bin")["ETag"] == source_etag


# ---- 7. --max-memory holds for large objects ---------------------------------------------------
def test_max_memory_holds_for_large_objects(minio: Endpoint, person: Person, here: Path) -> None:
    bucket = new_bucket(minio)
    make_tree(here / "large", {f"f{n}.bin": os.urandom(100 * MiB) for n in range(3)})
    cap = 128 * 1000**2
    up_code, up_peak, up_err = peak_group_rss(
        person.env, ["cp", "--max-memory", "128MB", "large/", f"s3://{bucket}/l/"], here
    )
    down_code, down_peak, down_err = peak_group_rss(
        person.env, ["cp", "--max-memory", "128MB", f"s3://{bucket}/l/", "back/"], here
    )
    assert (up_code, down_code) == (0, 0), (up_err, down_err)
    assert up_peak <= cap and down_peak <= cap, (up_peak / MiB, down_peak / MiB)
    assert all((here / "back" / name).stat().st_size == 100 * MiB for name in ("f0.bin", "f1.bin", "f2.bin"))


def test_a_large_file_s_parts_are_streamed_both_ways(minio: Endpoint, person: Person, here: Path) -> None:
    """Five 40 MiB parts in flight hold a chunk or two each, not 200 MiB: uploading, the parts are
    read from the file as they are sent (native/src/filebody.rs); downloading, the ranges are
    written into the file as they come. The object is the file, and the file the object."""
    bucket = new_bucket(minio)
    data = os.urandom(200 * MiB)
    (here / "huge.bin").write_bytes(data)
    wide = ["--part-size", "40MiB", "--max-in-flight", "200MiB"]
    code, peak, err = peak_group_rss(person.env, ["cp", *wide, "huge.bin", f"s3://{bucket}/h/huge.bin"], here)
    assert code == 0, err
    assert peak < 120 * MiB, peak / MiB  # ~55 MiB: the interpreter, its clients and a chunk a part
    head = minio.client().head_object(Bucket=bucket, Key="h/huge.bin")
    assert (head["ContentLength"], head["ETag"].endswith('-5"')) == (200 * MiB, True)
    body = minio.client().get_object(Bucket=bucket, Key="h/huge.bin")["Body"].read()
    assert sha256(body) == sha256(data)
    code, peak, err = peak_group_rss(person.env, ["cp", *wide, f"s3://{bucket}/h/huge.bin", "back/"], here)
    assert code == 0, err
    assert peak < 120 * MiB, peak / MiB
    assert sha256((here / "back" / "huge.bin").read_bytes()) == sha256(data)


def test_an_anonymous_large_upload_sends_each_part_with_its_content_md5(
    minio: Endpoint, person: Person, here: Path
) -> None:
    """Unsigned, a part read from its file carries its MD5 (Content-MD5, which the service checks)
    instead of a signed SHA-256: into a bucket anyone may write, the object is the file."""
    bucket = new_bucket(minio)
    public = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": ["*"]},
                "Action": ["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                "Resource": [f"arn:aws:s3:::{bucket}/*"],
            }
        ],
    }
    minio.client().put_bucket_policy(Bucket=bucket, Policy=json.dumps(public))
    data = os.urandom(13 * MiB)
    (here / "open.bin").write_bytes(data)
    done = person.run("cp", "--no-sign-request", *LARGE, "open.bin", f"s3://{bucket}/open.bin", cwd=here)
    assert done.returncode == 0, done.stderr
    head = minio.client().head_object(Bucket=bucket, Key="open.bin")
    assert head["ETag"].endswith('-3"'), head["ETag"]
    assert sha256(minio.client().get_object(Bucket=bucket, Key="open.bin")["Body"].read()) == sha256(data)


def test_a_file_that_shrinks_mid_upload_fails_once_in_plain_words(
    minio: Endpoint, person: Person, here: Path, held: S3ThrottlingProxy
) -> None:
    """A file cut short while its parts are being sent: the upload fails with one line naming the
    file (not "unhandled errors in a TaskGroup"), exit 1, and leaves no upload behind."""
    bucket = new_bucket(minio)
    (here / "log.bin").write_bytes(os.urandom(40 * MiB))
    one_at_a_time = ["--multipart-threshold", "6MiB", "--part-size", "5MiB", "--max-in-flight", "5MiB"]
    process = start_held(person, held, 3, "cp", *one_at_a_time, "log.bin", f"s3://{bucket}/log.bin", cwd=here)
    os.truncate(here / "log.bin", MiB)
    held.release()
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    assert "log.bin shrank while it was being uploaded" in stderr and "TaskGroup" not in stderr, stderr
    assert minio.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# ---- 8. large server-side copies keep every attribute -------------------------------------------
def test_a_copy_in_parts_keeps_the_source_s_attributes(minio: Endpoint, person: Person, here: Path) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    attributes = {
        "ContentType": "application/x-thing",
        "CacheControl": "max-age=60",
        "ContentDisposition": 'attachment; filename="thing.bin"',
        "ContentLanguage": "de",
        "Metadata": {"owner": "ops", "run": "42"},
    }
    client.put_object(
        Bucket=bucket, Key="src/thing.bin", Body=os.urandom(12 * MiB), Tagging="team=a&tier=b", **attributes
    )
    done = person.run(
        "cp",
        "--copy-multipart-threshold",
        "6MiB",
        "--part-size",
        "5MiB",
        "--stats",
        f"s3://{bucket}/src/",
        f"s3://{bucket}/dst/",
        cwd=here,
    )
    assert done.returncode == 0, done.stderr
    assert "COPY 3" in done.stdout  # UploadPartCopy, in 3 parts
    head = client.head_object(Bucket=bucket, Key="dst/thing.bin")
    for name, value in attributes.items():
        assert head[name] == value, name
    tags = client.get_object_tagging(Bucket=bucket, Key="dst/thing.bin")["TagSet"]
    assert {tag["Key"]: tag["Value"] for tag in tags} == {"team": "a", "tier": "b"}


# ---- 9. a website folder publishes with its Content-Types ---------------------------------------
SITE_TYPES = {
    "index.html": "text/html",
    "css/style.css": "text/css",
    "js/app.js": "text/javascript",  # RFC 9239 (Python 3.12+ and aws-cli v2 say so too)
    "data.json": "application/json",
    "img/logo.png": "image/png",
    "img/icon.svg": "image/svg+xml",
    "bin/mod.wasm": "application/wasm",
    "video/big.html": "text/html",  # large: a multipart upload
}


def test_a_website_folder_keeps_its_content_types(minio: Endpoint, person: Person, here: Path) -> None:
    bucket = new_bucket(minio)
    files = {name: b"x" * (7 * MiB if name.startswith("video/") else 100) for name in SITE_TYPES}
    make_tree(here / "site", files)
    done = person.run("sync", *LARGE, "./site/", f"s3://{bucket}/site/", cwd=here)
    assert done.returncode == 0, done.stderr
    plain = person.run("cp", "--no-guess-mime-type", "site/index.html", f"s3://{bucket}/plain.html", cwd=here)
    assert plain.returncode == 0, plain.stderr
    client = minio.client()
    for name, expected in SITE_TYPES.items():
        assert client.head_object(Bucket=bucket, Key=f"site/{name}")["ContentType"] == expected, name
    assert client.head_object(Bucket=bucket, Key="site/video/big.html")["ETag"].endswith('-2"')
    assert client.head_object(Bucket=bucket, Key="plain.html")["ContentType"] != "text/html"


# ---- 10. hostile keys never reach the terminal raw ---------------------------------------------
EVIL = "evil\x1b[31mred\x1b]0;owned\x07.txt"


def test_hostile_keys_are_escaped_for_people_and_exact_in_json(
    minio: Endpoint, person: Person, here: Path
) -> None:
    bucket = new_bucket(minio)
    put(minio, bucket, {EVIL: b"evil", "ok.txt": b"ok", "folder/": b"", "holds-data/": b"data!"})
    listing = person.run("ls", f"s3://{bucket}/", cwd=here)
    assert "\x1b" not in listing.stdout + listing.stderr and "\x07" not in listing.stdout
    assert "evil\\x1b[31mred\\x1b]0;owned\\x07.txt" in listing.stdout
    as_json = [
        json.loads(line)
        for line in person.run("ls", "-r", "--json", f"s3://{bucket}/", cwd=here).stdout.splitlines()
    ]
    assert EVIL in {entry["key"] for entry in as_json}
    down = person.run("cp", f"s3://{bucket}/", "got/", cwd=here)
    assert down.returncode == 1
    assert "\x1b" not in down.stdout + down.stderr
    assert (
        f"failed: s3://{bucket}/evil\\x1b[31mred\\x1b]0;owned\\x07.txt: refused key: key has a control "
        "character ('\\x1b'), unsafe in a file name and on a terminal "
        "(--allow-control-chars writes it under that name)"
    ) in down.stderr.splitlines()
    assert f"skipped: s3://{bucket}/holds-data/: its key ends in '/'" in down.stderr
    assert f"s3://{bucket}/folder/" not in down.stderr  # an empty marker is a directory: nothing to say
    assert sorted(path.name for path in (here / "got").iterdir()) == ["ok.txt"]


# ---- 11. a job-wide error stops the job once -----------------------------------------------------
def test_bad_credentials_and_a_missing_bucket_stop_an_upload_at_one_request(
    minio: Endpoint, person: Person, held: S3ThrottlingProxy, here: Path
) -> None:
    bucket = new_bucket(minio)
    make_tree(here / "many", {f"f{n:03d}.txt": b"x" for n in range(208)})
    add_profile(person, "badsecret", held.endpoint, secret="not-the-secret")
    for profile, target, code in (
        ("badsecret", f"s3://{bucket}/m/", "SignatureDoesNotMatch"),
        ("held", "s3://no-such-bucket-here/m/", "NoSuchBucket"),
    ):
        before = sum(held.log.accepted.values())
        done = person.run("cp", "--profile", profile, "many/", target, cwd=here)
        assert done.returncode == 1, done.stderr
        assert len(done.stderr.splitlines()) == 1 and code in done.stderr, done.stderr
        assert sum(held.log.accepted.values()) - before == 1  # one listing request, no PUT at all
    assert "not-the-secret" not in done.stderr


def test_a_destination_that_refuses_every_write_stops_the_job_once(
    minio: Endpoint, person: Person, held: S3ThrottlingProxy, here: Path
) -> None:
    bucket = new_bucket(minio)
    make_tree(here / "many", {f"f{n:03d}.txt": b"x" for n in range(100)})
    held.denied_methods = {"PUT"}
    done = person.run(
        "cp",
        "--profile",
        "held",
        "--workers",
        "1",
        "--concurrency",
        "4",
        "many/",
        f"s3://{bucket}/m/",
        cwd=here,
    )
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if "AccessDenied" in line]
    assert len(errors) == 1 and errors[0].startswith("error: stopped: "), done.stderr
    assert held.log.refused["denied"] <= 4  # what was in flight when the first answer came


def test_a_missing_source_bucket_stops_a_download_once(minio: Endpoint, person: Person, here: Path) -> None:
    done = person.run("cp", "s3://no-such-bucket-here/p/", "got/", cwd=here)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if "NoSuchBucket" in line]
    assert len(errors) == 1 and errors[0].startswith("error: stopped: "), done.stderr


def test_copies_that_cannot_work_are_refused_before_any_request(
    minio: Endpoint, person: Person, here: Path
) -> None:
    bucket = new_bucket(minio)
    put(minio, bucket, {f"p/{n}": b"x" for n in range(30)})
    (here / "afile").write_text("not a directory")
    cases = {
        (
            "cp",
            f"s3://{bucket}/p/",
            "afile",
        ): "destination 'afile' is a file, and many objects need a directory",
        ("cp", f"s3://{bucket}/p/", f"s3://{bucket}/p/"): "source and destination are the same",
        ("cp", f"s3://{bucket}/p/", f"s3://{bucket}/p/copy/"): "is inside the source",
        ("mv", f"s3://{bucket}/p/0", f"s3://{bucket}/p/0"): "source and destination are the same object",
        ("sync", f"s3://{bucket}/p/0", "mirror/"): "sync works on prefixes, and",
        (
            "sync",
            "afile",
            f"s3://{bucket}/q/",
        ): "sync works on directories and prefixes, and 'afile' is a file",
    }
    for args, message in cases.items():
        done = person.run(*args, cwd=here)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and message in done.stderr, (args, done.stderr)
    assert len(minio.client().list_objects_v2(Bucket=bucket)["Contents"]) == 30
    assert not (here / "mirror").exists() and not list(person.state.glob("*.db"))


# ---- 12. the smaller ones -------------------------------------------------------------------------
def test_version_and_the_help_a_mistake_points_to(person: Person, here: Path) -> None:
    from s3bulk import __version__

    version = person.run_fresh("--version", cwd=here)
    assert (version.returncode, version.stdout) == (0, f"s3bulk {__version__} (native part {__version__})\n")
    assert (
        __version__
        == tomllib.loads((Path(__file__).parents[2] / "native/Cargo.toml").read_text())["package"]["version"]
    )  # written once, there
    unknown = person.run("frobnicate", "s3://bucket/key", cwd=here)
    assert unknown.returncode == 2 and unknown.stderr.strip().endswith("(see: s3bulk --help)"), unknown.stderr
    flag = person.run("cp", "--no-such-flag", ".", "s3://bucket/", cwd=here)
    assert flag.returncode == 2 and "(see: s3bulk cp --help)" in flag.stderr
    zero = person.run("ls", "--concurrency", "0", "s3://bucket/", cwd=here)
    assert zero.returncode == 2 and "--concurrency must be at least 1" in zero.stderr
    tiny = person.run("cp", "--max-memory", "1KB", ".", "s3://bucket/x/", cwd=here)
    assert tiny.returncode == 2 and tiny.stderr.startswith("error: --max-memory 1000 B is below the "), (
        tiny.stderr
    )


def test_piping_into_head_keeps_the_job_s_exit_code(minio: Endpoint, person: Person, here: Path) -> None:
    bucket = new_bucket(minio)
    make_tree(here / "many", {f"f{n:03d}.txt": b"x" for n in range(300)})
    up = person.shell(
        f's3bulk cp --json many/ s3://{bucket}/m/ | head -1; echo "exit=${{PIPESTATUS[0]}}"', here
    )
    assert up.stdout.strip().endswith("exit=0"), up.stdout + up.stderr
    assert len(minio.client().list_objects_v2(Bucket=bucket, Prefix="m/")["Contents"]) == 300
    listing = person.shell(f's3bulk ls -r s3://{bucket}/ | head -2; echo "exit=${{PIPESTATUS[0]}}"', here)
    assert listing.stdout.splitlines()[-1] == "exit=0" and len(listing.stdout.splitlines()) == 3, (
        listing.stderr
    )
    assert "Traceback" not in up.stderr + listing.stderr


@pytest.mark.parametrize(
    "command",
    [
        "head --json s3://{bucket}/k",
        "head s3://{bucket}/",
        "ls -r s3://{bucket}/",
        "du s3://{bucket}/",
        "cat s3://{bucket}/k",
        "cp --json d/ s3://{bucket}/up/",
        "presign s3://{bucket}/k",
        "jobs",
        "--version",
    ],
)
def test_output_to_a_full_disk_is_one_line_and_exit_1_and_to_a_closed_pipe_no_error(
    minio: Endpoint, person: Person, here: Path, command: str
) -> None:
    """Every command writes its output the same way: a write refused (`> /dev/full`) ends it with
    one line and exit 1 (head --json said nothing and exited 0, with a traceback); a reader
    gone (`| true`) is no error."""
    bucket = new_bucket(minio)
    put(minio, bucket, {"k": b"an object"})
    make_tree(here / "d", {"f.txt": b"file"})
    line = command.format(bucket=bucket)
    full = person.shell(f"s3bulk {line} > /dev/full", here)
    assert full.returncode == 1, full.stderr
    assert full.stderr == "error: cannot write the output (stdout): No space left on device\n", full.stderr
    closed = person.shell(f"s3bulk {line} | true; echo exit=${{PIPESTATUS[0]}}", here)
    assert (closed.stdout, closed.stderr) == ("exit=0\n", ""), closed.stderr


def test_journals_are_private_and_leave_no_wal_files(minio: Endpoint, person: Person, here: Path) -> None:
    bucket = new_bucket(minio)
    make_tree(here / "d", {"a.txt": b"a"})
    assert person.run("cp", "d/", f"s3://{bucket}/d/", cwd=here).returncode == 0
    assert person.run("jobs", cwd=here).returncode == 0
    files = sorted(path.name for path in person.state.iterdir())
    assert len(files) == 1 and files[0].endswith(".db"), files
    assert stat.S_IMODE(person.state.stat().st_mode) == 0o700
    assert stat.S_IMODE((person.state / files[0]).stat().st_mode) == 0o600


def test_a_key_and_a_directory_of_the_same_name_are_named_as_such(moto: Endpoint, tmp_path: Path) -> None:
    """MinIO cannot hold both `x` and `x/y` (it lists one of them); moto's server can."""
    client = moto.client()
    client.create_bucket(Bucket="clash")
    client.put_object(Bucket="clash", Key="x", Body=b"file x")
    client.put_object(Bucket="clash", Key="x/y", Body=b"below x")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "s3bulk",
            "cp",
            "--engine",
            "serial",
            "s3://clash/",
            str(tmp_path / "got") + "/",
        ],
        env=moto.env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "a file and a directory cannot share a name locally (keys 'x' and 'x/...')" in done.stderr
    assert "appeared while it was being downloaded" not in done.stderr


# ---- 13. output in proportion to the job ---------------------------------------------------------
def test_output_is_in_proportion_to_the_job(minio: Endpoint, person: Person, here: Path) -> None:
    bucket = new_bucket(minio)
    put(minio, bucket, {"one.txt": b"one", **{f"many/{n:02d}": b"m" for n in range(25)}})
    one = person.run("cp", f"s3://{bucket}/one.txt", "./one.txt", cwd=here)
    assert one.returncode == 0 and one.stderr == ""
    lines = one.stdout.splitlines()
    assert lines[0] == f"download: s3://{bucket}/one.txt to one.txt"
    assert len(lines) == 2 and lines[1].startswith("download done: 1 object, 3 B in "), lines
    many = person.run("cp", f"s3://{bucket}/many/", "many/", cwd=here).stdout.splitlines()
    assert len(many) == 11 and many[-1].startswith("download done: 25 objects"), many
    stats = person.run("cp", "--stats", f"s3://{bucket}/one.txt", "./two.txt", cwd=here).stdout
    assert "requests: " in stats and "engine " in stats and "where the time went: " in stats
    quiet = person.run("cp", "-q", f"s3://{bucket}/one.txt", "./three.txt", cwd=here)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    failing = person.run("cp", "--quiet", f"s3://{bucket}/nothing-here", "./four.txt", cwd=here)
    assert failing.returncode == 1 and failing.stdout == "" and "no such object" in failing.stderr


def test_a_cancelled_download_waits_for_the_thread_writing_its_temporary(tmp_path: Path) -> None:
    """Ctrl-C cancels downloads while threads write their temporary files (bodies over 256 KiB).
    A thread cannot be stopped: had the download's cleanup run before the thread created its
    file, the file was left behind (seen in 3 of 7 Ctrl-Cs of 2,000 x 1 MiB). The cancelled
    write ends only after its thread has."""
    import asyncio
    import threading

    from s3bulk._stores.localfiles import write_in_thread

    started, release = threading.Event(), threading.Event()
    temporary = tmp_path / ".f.s3bulk-part"

    def slow_write() -> int:
        started.set()
        release.wait(30)
        return temporary.write_bytes(b"body")

    async def main() -> None:
        task = asyncio.create_task(write_in_thread(slow_write))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        try:
            done, _ = await asyncio.wait([task], timeout=0.5)
            assert not done  # still waiting for its thread, though cancelled
        finally:
            release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert temporary.exists()  # written before the task ended: a cleanup after it finds it

    asyncio.run(main())
