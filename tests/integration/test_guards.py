"""Guards on deletes and overwrites (issue 21, item 4), against MinIO: `--max-delete N` on rm,
sync --delete (to S3 and to a directory) and mv deletes exactly N, stops the job with one line
and a non-zero exit, and a resume deletes up to N more; a dry run stops where the real run would;
an engine of several workers, cp, and a negative count are refused before anything is deleted."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, new_bucket, run_cli

import s3bulk

MESSAGE = "--max-delete {} reached, so nothing more is deleted"


def keys(endpoint: Endpoint, bucket: str, prefix: str) -> list[str]:
    pages = endpoint.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def seed(endpoint: Endpoint, tmp_path: Path, bucket: str, prefix: str, count: int) -> Path:
    tree = tmp_path / f"seed-{prefix.strip('/')}"
    tree.mkdir()
    for number in range(count):
        (tree / f"f{number:05d}").write_text(str(number))
    done = run_cli(endpoint.env, "cp", f"{tree}/", f"s3://{bucket}/{prefix}")
    assert done.returncode == 0, done.stderr
    return tree


def job_of(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if "--resume" in line).split()[-1]


def test_rm_deletes_exactly_n_and_a_resume_n_more(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    seed(minio, tmp_path, bucket, "a/", 2500)  # 1,000 keys a request: the cap cuts a batch
    first = run_cli(minio.env, "rm", f"s3://{bucket}/a/", "--max-delete", "1200")
    assert first.returncode == 1
    assert MESSAGE.format(1200) in first.stderr and first.stderr.count(MESSAGE.format(1200)) == 1
    assert len(keys(minio, bucket, "a/")) == 1300
    again = run_cli(minio.env, "rm", "--resume", job_of(first.stderr), "--max-delete", "1000")
    assert again.returncode == 1, again.stderr
    assert len(keys(minio, bucket, "a/")) == 300
    last = run_cli(minio.env, "rm", "--resume", job_of(first.stderr))  # the job's own cap: 1,200
    assert last.returncode == 0, last.stderr
    assert keys(minio, bucket, "a/") == []


def test_sync_delete_to_s3_and_to_a_directory_stops_at_n(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    tree = seed(minio, tmp_path, bucket, "site/", 300)
    for path in sorted(tree.iterdir())[100:]:
        path.unlink()  # the source keeps 100 of 300: sync --delete would delete 200
    up = run_cli(
        minio.env, "sync", "--delete", "--max-delete", "50", "--size-only", f"{tree}/", f"s3://{bucket}/site/"
    )
    assert up.returncode == 1 and MESSAGE.format(50) in up.stderr
    assert len(keys(minio, bucket, "site/")) == 250

    local = tmp_path / "mirror"
    local.mkdir()
    for number in range(40):
        (local / f"extra{number}").write_text("x")
    down = run_cli(minio.env, "sync", "--delete", "--max-delete", "15", f"s3://{bucket}/site/", f"{local}/")
    assert down.returncode == 1 and MESSAGE.format(15) in down.stderr
    assert len(list(local.glob("extra*"))) == 25


def test_mv_moves_n_and_keeps_every_other_source(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    seed(minio, tmp_path, bucket, "from/", 200)
    moved = run_cli(minio.env, "mv", f"s3://{bucket}/from/", f"s3://{bucket}/to/", "--max-delete", "30")
    assert moved.returncode == 1 and MESSAGE.format(30) in moved.stderr
    sources, copies = keys(minio, bucket, "from/"), keys(minio, bucket, "to/")
    assert len(sources) == 170 and len(copies) == 30
    assert {key.removeprefix("to/") for key in copies}.isdisjoint(
        key.removeprefix("from/") for key in sources
    )


def test_a_dry_run_stops_where_the_run_would(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    seed(minio, tmp_path, bucket, "d/", 40)
    dry = run_cli(minio.env, "rm", f"s3://{bucket}/d/", "--max-delete", "5", "--dry-run", "--json")
    assert dry.returncode == 1 and MESSAGE.format(5) in dry.stdout  # in the --json summary
    assert dry.stdout.count('"status":"ok","dry_run":true') == 5
    assert len(keys(minio, bucket, "d/")) == 40


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["rm", "{url}", "--max-delete", "5", "--workers", "2"],
            "so the job runs as one worker: drop --engine",
        ),
        (["rm", "{url}", "--max-delete", "5", "--engine", "processes"], "so the job runs as one worker"),
        (["rm", "{url}", "--max-delete", "-1"], "--max-delete -1: give a count of objects, 0 or more"),
        (
            ["cp", "{url}", "{dir}", "--max-delete", "5"],
            "--max-delete is for mv, sync and rm: cp deletes nothing",
        ),
    ],
)
def test_refused_caps_delete_nothing(minio: Endpoint, tmp_path: Path, args: list[str], message: str) -> None:
    bucket = new_bucket(minio)
    seed(minio, tmp_path, bucket, "k/", 10)
    url, directory = f"s3://{bucket}/k/", f"{tmp_path}/out/"
    done = run_cli(minio.env, *(arg.format(url=url, dir=directory) for arg in args))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert len(keys(minio, bucket, "k/")) == 10 and not Path(directory).exists()


def test_no_clobber_if_size_differ_and_if_newer_on_uploads(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    tree = tmp_path / "up"
    tree.mkdir()
    for name in ("same", "grown", "touched", "old"):
        (tree / name).write_text("v1")
    assert run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/u/").returncode == 0
    (tree / "grown").write_text("v2 longer")  # size differs, and newer than its object
    (tree / "touched").write_text("v3")  # same size, newer than its object
    (tree / "old").write_text("v4 longer")  # size differs, but older than its object
    later, earlier = time.time() + 60, time.time() - 86400
    for name, when in (("grown", later), ("touched", later), ("old", earlier), ("same", earlier)):
        os.utime(tree / name, (when, when))
    (tree / "new").write_text("v5")  # no object yet: every guard lets it through

    def stored() -> dict[str, str]:
        client = minio.client()
        return {
            key.removeprefix("u/"): client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            for key in keys(minio, bucket, "u/")
        }

    for flag, written in [
        ("--no-clobber", {"new"}),
        ("--if-size-differ", {"grown", "old", "new"}),
        ("--if-newer", {"grown", "touched", "new"}),
    ]:
        for key in keys(minio, bucket, "u/"):  # back to the first upload's state
            minio.client().put_object(Bucket=bucket, Key=key, Body=b"v1")
        minio.client().delete_object(Bucket=bucket, Key="u/new")
        done = run_cli(minio.env, "cp", flag, "--json", f"{tree}/", f"s3://{bucket}/u/")
        assert done.returncode == 0, done.stderr
        now = stored()
        assert {name for name, text in now.items() if text != "v1"} == written, flag
        assert f'"objects_unchanged":{5 - len(written)}' in done.stdout.replace(" ", ""), done.stdout[-600:]


def test_guards_on_downloads_copies_and_mv(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for name in ("a", "b", "c"):
        client.put_object(Bucket=bucket, Key=f"s/{name}", Body=name.encode() * 3)
    client.put_object(Bucket=bucket, Key="d/a", Body=b"kept")
    local = tmp_path / "down"
    local.mkdir()
    (local / "b").write_text("mine")
    down = run_cli(minio.env, "cp", "-n", f"s3://{bucket}/s/", f"{local}/")
    assert down.returncode == 0, down.stderr
    assert (local / "b").read_text() == "mine" and (local / "a").read_text() == "aaa"
    single = run_cli(minio.env, "cp", "-n", f"s3://{bucket}/s/b", f"{local}/b")
    assert single.returncode == 0 and (local / "b").read_text() == "mine"
    copy = run_cli(minio.env, "cp", "-s", f"s3://{bucket}/s/", f"s3://{bucket}/d/")
    assert copy.returncode == 0, copy.stderr
    assert client.get_object(Bucket=bucket, Key="d/a")["Body"].read() == b"aaa"  # 4 bytes vs 3: written
    moved = run_cli(minio.env, "mv", "-n", f"s3://{bucket}/s/", f"s3://{bucket}/d/")
    assert moved.returncode == 0, moved.stderr
    assert keys(minio, bucket, "s/") == ["s/a", "s/b", "s/c"]  # all were there already: none moved
    dry = run_cli(minio.env, "cp", "-n", "--dry-run", f"s3://{bucket}/s/", f"{tmp_path}/fresh/")
    assert dry.returncode == 0 and "download would do: 3 objects" in dry.stdout
    assert not (tmp_path / "fresh").exists()


@pytest.mark.parametrize(
    "size", [3000, 300_000, 3 * 1024 * 1024, 9 * 1024 * 1024], ids=["small", "whole", "thread", "ranged"]
)
def test_a_corrupted_download_is_caught_and_fetched_again(minio: Endpoint, tmp_path: Path, size: int) -> None:
    from s3bulk.testing.throttle import S3ThrottlingProxy

    bucket = new_bucket(minio)
    body = os.urandom(size)
    minio.client().put_object(Bucket=bucket, Key="d/blob", Body=body)
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        args = ["cp", "--multipart-threshold", "8MiB", "--part-size", "5MiB", "--json", f"s3://{bucket}/d/"]
        proxy.corrupt_bodies = 1
        checked = run_cli(env, *args, f"{tmp_path}/checked/")
        assert checked.returncode == 0, checked.stderr
        assert (tmp_path / "checked" / "blob").read_bytes() == body  # caught, fetched again
        assert proxy.log.refused["corrupted"] == 1
        assert '"retries":1' in checked.stdout.replace(" ", "")
        proxy.corrupt_bodies = 1
        unchecked = run_cli(env, *args, "--ignore-checksum", f"{tmp_path}/unchecked/")
        assert unchecked.returncode == 0, unchecked.stderr
        landed = (tmp_path / "unchecked" / "blob").read_bytes()
        assert len(landed) == size and landed != body  # what the check is there for


def caught_and_fetched_again(minio: Endpoint, corrupted: int, *args: str) -> None:
    """`s3bulk *args` through a proxy that corrupts the first `corrupted` bodies: it succeeds,
    having caught each and fetched it again (one retry each)."""
    from s3bulk.testing.throttle import S3ThrottlingProxy

    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        proxy.corrupt_bodies = corrupted
        done = run_cli(minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}, *args, "--json")
        assert done.returncode == 0, done.stderr
        assert proxy.log.refused["corrupted"] == corrupted
        assert f'"retries":{corrupted}' in done.stdout.replace(" ", "")


def put_in_parts(endpoint: Endpoint, bucket: str, key: str, body: bytes, part_size: int) -> str:
    """`body` stored as a multipart upload in parts of `part_size`: its ETag."""
    return put_parts(
        endpoint, bucket, key, [body[start : start + part_size] for start in range(0, len(body), part_size)]
    )


def put_parts(endpoint: Endpoint, bucket: str, key: str, bodies: list[bytes]) -> str:
    """A multipart object of exactly these parts (any tool's layout): its ETag."""
    client = endpoint.client()
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = [
        {
            "PartNumber": number,
            "ETag": client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=body)[
                "ETag"
            ],
        }
        for number, body in enumerate(bodies, start=1)
    ]
    done = client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )
    return str(done["ETag"])


@pytest.mark.parametrize(
    "sizes",
    [[6 * 1024**2, 6 * 1024**2, 3 * 1024**2], [5 * 1024**2, 7 * 1024**2, 1024**2]],
    ids=["even parts no guess gives", "uneven parts"],
)
def test_a_multipart_object_of_any_part_layout_is_checked_by_the_parts_the_service_tells(
    minio: Endpoint, tmp_path: Path, sizes: list[int]
) -> None:
    """Its ETag is the MD5 of its parts' MD5s, so checking the bytes needs its part sizes. A
    1 GiB file s5cmd uploaded (21 parts of 50 MiB, which 49 MiB parts would also give) failed
    every download as "changed on the way": where no guess is right, a HEAD of each part says
    (?partNumber=), and a body corrupted on the way is still caught."""
    bucket = new_bucket(minio)
    bodies = [os.urandom(size) for size in sizes]
    assert put_parts(minio, bucket, "d/other-tool.bin", bodies).endswith('-3"')
    done = run_cli(minio.env, "cp", "--json", f"s3://{bucket}/d/other-tool.bin", f"{tmp_path}/plain/")
    assert done.returncode == 0, done.stderr
    assert '"retries":0' in done.stdout.replace(" ", "")
    assert (tmp_path / "plain" / "other-tool.bin").read_bytes() == b"".join(bodies)
    caught_and_fetched_again(minio, 1, "cp", f"s3://{bucket}/d/other-tool.bin", f"{tmp_path}/checked/")
    assert (tmp_path / "checked" / "other-tool.bin").read_bytes() == b"".join(bodies)


def test_a_large_download_is_checked_by_its_parts_as_they_come(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large download's parts are hashed while its ranges come (native/src/parthash.rs), the
    ranges of 16 MiB parts asked side by side: the file is checked against its ETag with nothing
    read back. Parts of 6 MiB, taken for 8 MiB ones at first (both give 2 parts of 12 MiB), are
    still found, read back; and a range corrupted on its way in is caught and fetched again."""
    from s3bulk._stores import etags

    bucket = new_bucket(minio)
    bodies = {"d/wide": os.urandom(40 * 1024**2 + 123), "d/narrow": os.urandom(12 * 1024**2)}
    assert put_in_parts(minio, bucket, "d/wide", bodies["d/wide"], 16 * 1024**2).endswith('-3"')
    assert put_in_parts(minio, bucket, "d/narrow", bodies["d/narrow"], 6 * 1024**2).endswith('-2"')
    read_back: list[int] = []
    reading = etags._md5_file
    monkeypatch.setattr(
        etags, "_md5_file", lambda path, piece: (read_back.append(piece), reading(path, piece))[1]
    )
    for key, body in bodies.items():
        report = s3bulk.copy(
            f"s3://{bucket}/{key}",
            str(tmp_path / key),
            part_size=5 * 1024**2,
            multipart_threshold=8 * 1024**2,
        )
        assert report.ok and (tmp_path / key).read_bytes() == body
    assert read_back == [6 * 1024**2]  # the narrow one's second guess; the first of each came hashed
    args = ["cp", "--multipart-threshold", "8MiB", "--part-size", "5MiB"]
    caught_and_fetched_again(minio, 1, *args, f"s3://{bucket}/d/wide", f"{tmp_path}/checked/")
    assert (tmp_path / "checked" / "wide").read_bytes() == bodies["d/wide"]


def test_corrupted_bodies_among_many_checked_together_are_each_caught(
    minio: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Downloads from 16 KiB are checked side by side, up to 16 bodies in one hashing
    (stores/digests.py): each must still be held to its own ETag."""
    bucket = new_bucket(minio)
    bodies = {f"m/{number:02d}": os.urandom(20_000 + 9_000 * number) for number in range(40)}
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")  # no CRC32 stored, so
    client = minio.client()  # the ETag alone decides: no second opinion (_second_opinion) saves a mix-up
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    caught_and_fetched_again(minio, 3, "cp", f"s3://{bucket}/m/", f"{tmp_path}/many/")
    assert {key: (tmp_path / "many" / key[2:]).read_bytes() for key in bodies} == bodies


@pytest.mark.parametrize(
    "flags",
    [[], ["--storage-class", "REDUCED_REDUNDANCY"], ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]],
    ids=["obstore", "signed-client", "multipart"],
)
def test_a_body_corrupted_on_its_way_in_is_refused_and_sent_again(
    minio: Endpoint, tmp_path: Path, flags: list[str]
) -> None:
    from s3bulk.testing.throttle import S3ThrottlingProxy

    bucket = new_bucket(minio)
    body = os.urandom(7 * 1024 * 1024)
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "blob").write_bytes(body)
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        proxy.corrupt_uploads = 1
        done = run_cli(env, "cp", *flags, "--json", f"{tmp_path}/up/", f"s3://{bucket}/up/")
        assert done.returncode == 0, done.stderr
        assert proxy.log.refused["corrupted"] == 1 and '"retries":1' in done.stdout.replace(" ", "")
    assert minio.client().get_object(Bucket=bucket, Key="up/blob")["Body"].read() == body


def test_an_encrypted_object_is_checked_by_the_checksum_the_service_keeps(
    minio: Endpoint, tmp_path: Path
) -> None:
    """SSE-KMS: the ETag is no MD5 of the bytes, so the x-amz-checksum-sha256 stored with the
    object decides; a corrupted body is caught by it and fetched again."""
    from s3bulk.testing.servers import KMS_KEY_ID
    from s3bulk.testing.throttle import S3ThrottlingProxy

    bucket = new_bucket(minio)
    body = os.urandom(300_000)
    minio.client().put_object(
        Bucket=bucket, Key="d/secret", Body=body, ServerSideEncryption="aws:kms", SSEKMSKeyId=KMS_KEY_ID,
        ChecksumAlgorithm="SHA256",
    )  # fmt: skip
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        proxy.corrupt_bodies = 1
        done = run_cli(env, "cp", "--json", f"s3://{bucket}/d/", f"{tmp_path}/down/")
        assert done.returncode == 0, done.stderr
        assert proxy.log.refused["corrupted"] == 1 and '"retries":1' in done.stdout.replace(" ", "")
    assert (tmp_path / "down" / "secret").read_bytes() == body


def _assert_completed_once(minio: Endpoint, bucket: str, body: bytes) -> None:
    """up/blob holds `body`, completed from its 3 parts, and no upload is left open."""
    client = minio.client()
    assert client.get_object(Bucket=bucket, Key="up/blob")["Body"].read() == body
    assert client.head_object(Bucket=bucket, Key="up/blob")["ETag"].endswith('-3"')
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


@pytest.mark.parametrize("copy", [False, True], ids=["upload", "copy-in-parts"])
def test_a_completion_whose_answer_was_lost_is_not_a_failure(
    minio: Endpoint, tmp_path: Path, copy: bool
) -> None:
    """The service completed the upload, the connection reset before its answer: the completion
    sent again hears NoSuchUpload, and the object (its ETag the MD5 of the parts' MD5s) says it
    was done."""
    from s3bulk.testing.throttle import S3ThrottlingProxy

    bucket = new_bucket(minio)
    body = os.urandom(12 * 1024 * 1024 + 12_345)
    parts = ["--multipart-threshold", "5MiB", "--copy-multipart-threshold", "5MiB", "--part-size", "5MiB"]
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "blob").write_bytes(body)
    if copy:
        assert run_cli(minio.env, "cp", *parts, f"{tmp_path}/up/", f"s3://{bucket}/src/").returncode == 0
    source = f"s3://{bucket}/src/" if copy else f"{tmp_path}/up/"
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        proxy.lost_completions = 1
        done = run_cli(env, "cp", *parts, "--json", source, f"s3://{bucket}/up/")
        assert proxy.log.refused["lost"] == 1
        assert done.returncode == 0, done.stdout[-600:] + done.stderr
    _assert_completed_once(minio, bucket, body)


def test_a_piped_upload_whose_completion_answer_was_lost_is_not_a_failure(
    minio: Endpoint, tmp_path: Path
) -> None:
    """The same lost answer under `pipe`: stdin cannot be read again, so failing there loses the
    upload for a job that is done."""
    from s3bulk.testing.throttle import S3ThrottlingProxy

    bucket = new_bucket(minio)
    body = os.urandom(12 * 1024 * 1024 + 12_345)
    (tmp_path / "blob").write_bytes(body)
    with S3ThrottlingProxy(minio.server.endpoint) as proxy, open(tmp_path / "blob", "rb") as stdin:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        proxy.lost_completions = 1
        done = subprocess.run(
            [*S3BULK, "pipe", "--part-size", "5MiB", f"s3://{bucket}/up/blob"],
            env=env,
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proxy.log.refused["lost"] == 1
        assert done.returncode == 0, done.stdout[-600:] + done.stderr
    _assert_completed_once(minio, bucket, body)
