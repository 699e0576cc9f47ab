"""`sync` against a real MinIO, in each direction and comparison mode, with --delete and
--dry-run: what a second run transfers is what users rely on."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import Endpoint, bucket_digests, make_tree, new_bucket, run_cli, sha256, tree_digests

import s3bulk

FILES = {
    "a.txt": b"alpha\n",
    "a-b.txt": b"sorts before a/ in key order",
    "a/x.bin": os.urandom(3000),
    "a/y/z.txt": b"deep",
    "b/c.txt": b"gamma" * 100,
    "space name/é.txt": b"unicode",
}


def _a_second_after(written: float) -> None:
    """Wait until 1.1 s after `written` (time.monotonic()): LastModified has one-second resolution
    on some servers, so an object put now is later than what was written then. The checks made
    in between count towards the second, which is not waited again."""
    time.sleep(max(0.0, written + 1.1 - time.monotonic()))


def _touch_later(path: Path) -> None:
    """Give a file a modification time clearly after anything written so far."""
    later = time.time() + 5
    os.utime(path, (later, later))


@pytest.mark.parametrize("mode", ["mtime", "size", "checksum"])
def test_upload_sync_modes(minio: Endpoint, aws_env: dict, tmp_path: Path, mode: str) -> None:
    source = make_tree(tmp_path / "src", FILES)
    bucket = new_bucket(minio)
    destination = f"s3://{bucket}/data/"

    first = s3bulk.sync(str(source), destination, mode=mode)
    assert first.ok, first.failures
    assert (first.objects_done, first.objects_unchanged) == (len(FILES), 0)
    assert bucket_digests(minio, bucket, "data/") == tree_digests(source)

    again = s3bulk.sync(str(source), destination, mode=mode)
    assert (again.objects_done, again.objects_unchanged) == (0, len(FILES))
    assert set(again.requests) == {"LIST"}  # no HEAD, no GET: the listing answers everything

    # same size, new content and a newer time: mtime and checksum see it, size-only cannot
    (source / "a/x.bin").write_bytes(os.urandom(3000))
    _touch_later(source / "a/x.bin")
    changed = s3bulk.sync(str(source), destination, mode=mode)
    assert changed.ok, changed.failures
    expected = 0 if mode == "size" else 1
    assert (changed.objects_done, changed.objects_unchanged) == (expected, len(FILES) - expected)
    if mode != "size":
        assert bucket_digests(minio, bucket, "data/") == tree_digests(source)


@pytest.mark.parametrize("mode", ["mtime", "size", "checksum"])
def test_download_sync_modes(minio: Endpoint, aws_env: dict, tmp_path: Path, mode: str) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for name, data in FILES.items():
        client.put_object(Bucket=bucket, Key=f"p/{name}", Body=data)
    target = tmp_path / "out"

    first = s3bulk.sync(f"s3://{bucket}/p/", str(target), mode=mode)
    written = time.monotonic()
    assert first.ok, first.failures
    assert tree_digests(target) == {name: sha256(data) for name, data in FILES.items()}
    again = s3bulk.sync(f"s3://{bucket}/p/", str(target), mode=mode)
    assert (again.objects_done, again.objects_unchanged) == (0, len(FILES))

    _a_second_after(written)  # the new object later than the downloads
    client.put_object(Bucket=bucket, Key="p/b/c.txt", Body=b"delta" * 100)  # same size
    changed = s3bulk.sync(f"s3://{bucket}/p/", str(target), mode=mode)
    expected = 0 if mode == "size" else 1
    assert changed.objects_done == expected
    assert (target / "b/c.txt").read_bytes() == (b"gamma" * 100 if mode == "size" else b"delta" * 100)


def test_exact_timestamps_fetch_again_a_file_changed_after_its_download(
    minio: Endpoint, aws_env: dict, tmp_path: Path
) -> None:
    """A file edited after its download (same size, a later time) is left alone by a plain sync,
    whose object is not newer, and fetched again by sync --exact-timestamps, as aws s3 sync does."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="p/c.txt", Body=b"gamma" * 100)
    minio.client().put_object(Bucket=bucket, Key="p/d.txt", Body=b"kept")
    target = f"{tmp_path}/out/"
    assert run_cli(aws_env, "sync", f"s3://{bucket}/p/", target).returncode == 0
    edited = tmp_path / "out/c.txt"
    edited.write_bytes(b"GAMMA" * 100)
    _touch_later(edited)

    plain = run_cli(aws_env, "sync", f"s3://{bucket}/p/", target, "--json")
    assert json.loads(plain.stdout.splitlines()[-1])["summary"]["objects_unchanged"] == 2
    assert edited.read_bytes() == b"GAMMA" * 100

    exact = run_cli(aws_env, "sync", "--exact-timestamps", f"s3://{bucket}/p/", target, "--json")
    summary = json.loads(exact.stdout.splitlines()[-1])["summary"]
    assert (summary["objects_done"], summary["objects_unchanged"]) == (1, 1)
    assert edited.read_bytes() == b"gamma" * 100


@pytest.mark.parametrize("mode", ["mtime", "size", "checksum"])
def test_copy_sync_modes(minio: Endpoint, aws_env: dict, mode: str) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for name, data in FILES.items():
        client.put_object(Bucket=bucket, Key=f"src/{name}", Body=data)
    first = s3bulk.sync(f"s3://{bucket}/src", f"s3://{bucket}/dst", mode=mode)  # no '/': still prefixes
    written = time.monotonic()
    assert first.ok and first.objects_done == len(FILES), first.failures
    assert bucket_digests(minio, bucket, "dst/") == bucket_digests(minio, bucket, "src/")
    again = s3bulk.sync(f"s3://{bucket}/src/", f"s3://{bucket}/dst/", mode=mode)
    assert (again.objects_done, again.objects_unchanged) == (0, len(FILES))

    _a_second_after(written)  # the new source object later than the copies
    client.put_object(Bucket=bucket, Key="src/a.txt", Body=b"ALPHA\n")
    changed = s3bulk.sync(f"s3://{bucket}/src/", f"s3://{bucket}/dst/", mode=mode)
    assert changed.objects_done == (0 if mode == "size" else 1)


def test_checksum_recognises_multipart_etags(minio: Endpoint, aws_env: dict, tmp_path: Path) -> None:
    """A file uploaded in parts has an ETag that is not its MD5; checksum mode still sees it as equal."""
    source = make_tree(tmp_path / "src", {"big.bin": os.urandom(11 * 1024**2 + 7)})
    bucket = new_bucket(minio)
    up = s3bulk.sync(str(source), f"s3://{bucket}/", multipart_threshold=6 * 1024**2, part_size=5 * 1024**2)
    assert up.ok, up.failures
    etag = minio.client().head_object(Bucket=bucket, Key="big.bin")["ETag"]
    assert etag.strip('"').endswith("-3")
    again = s3bulk.sync(str(source), f"s3://{bucket}/", mode="checksum", part_size=5 * 1024**2)
    assert (again.objects_done, again.objects_unchanged) == (0, 1)
    (source / "big.bin").write_bytes(os.urandom(11 * 1024**2 + 7))
    changed = s3bulk.sync(str(source), f"s3://{bucket}/", mode="checksum")
    assert changed.objects_done == 1


def test_objects_cut_into_other_parts_are_the_same_by_their_checksums(
    minio: Endpoint, aws_env: dict, tmp_path: Path
) -> None:
    """Two multipart objects of the same bytes, cut into parts of other sizes, have other ETags
    but the same full-object CRC64NVME: sync --checksum from one prefix to the other copies
    nothing, and check agrees; objects of the same size whose bytes differ are copied and told
    apart. (Before, each ETag's difference was taken as the bytes'.)"""
    MiB = 1024**2
    same, changed = os.urandom(13 * MiB + 7), os.urandom(13 * MiB + 7)
    (tmp_path / "same").write_bytes(same)
    (tmp_path / "changed").write_bytes(changed)
    (tmp_path / "other").write_bytes(os.urandom(len(changed)))
    bucket = new_bucket(minio)
    for name, key, part_size in (
        ("same", "src/same", 5),
        ("same", "dst/same", 6),
        ("changed", "src/changed", 5),
        ("other", "dst/changed", 6),
    ):
        result = run_cli(
            minio.env, "cp", "--part-size", f"{part_size}MiB", "--multipart-threshold", "8MiB",
            str(tmp_path / name), f"s3://{bucket}/{key}",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    client = minio.client()
    etags = {key: client.head_object(Bucket=bucket, Key=key)["ETag"] for key in ("src/same", "dst/same")}
    assert etags["src/same"] != etags["dst/same"]

    def check() -> dict[str, int]:
        found = run_cli(minio.env, "check", "--json", f"s3://{bucket}/src/", f"s3://{bucket}/dst/")
        return json.loads(found.stdout.splitlines()[-1])["summary"]

    assert check() == {"same": 1, "differs": 1}
    synced = s3bulk.sync(f"s3://{bucket}/src/", f"s3://{bucket}/dst/", mode="checksum")
    assert (synced.objects_done, synced.objects_unchanged) == (1, 1), synced.failures
    assert client.get_object(Bucket=bucket, Key="dst/changed")["Body"].read() == changed
    assert check() == {"same": 2}


def test_delete_and_dry_run(minio: Endpoint, aws_env: dict, tmp_path: Path) -> None:
    source = make_tree(tmp_path / "src", FILES)
    bucket = new_bucket(minio)
    client = minio.client()
    client.put_object(Bucket=bucket, Key="data/stale.txt", Body=b"old")
    client.put_object(Bucket=bucket, Key="data/a/old.bin", Body=b"old")
    client.put_object(Bucket=bucket, Key="elsewhere.txt", Body=b"outside the prefix")

    plan = run_cli(minio.env, "sync", "--delete", "--dry-run", f"{source}/", f"s3://{bucket}/data/")
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    assert f"(dryrun) delete: s3://{bucket}/data/stale.txt" in lines
    assert f"(dryrun) delete: s3://{bucket}/data/a/old.bin" in lines
    assert f"(dryrun) upload: {source}/a/x.bin to s3://{bucket}/data/a/x.bin" in lines
    assert sorted(bucket_digests(minio, bucket)) == ["data/a/old.bin", "data/stale.txt", "elsewhere.txt"]

    kept = s3bulk.sync(str(source), f"s3://{bucket}/data/")
    assert kept.objects_deleted == 0 and "stale.txt" in bucket_digests(minio, bucket, "data/")

    done = run_cli(minio.env, "sync", "--delete", f"{source}/", f"s3://{bucket}/data/")
    assert done.returncode == 0, done.stderr
    assert "2 deleted" in done.stdout
    assert bucket_digests(minio, bucket, "data/") == tree_digests(source)
    assert "elsewhere.txt" in bucket_digests(minio, bucket)

    # and the other way: a local destination loses what the bucket lacks, nothing else
    target = make_tree(tmp_path / "out", {"extra/file.txt": b"x", "a.txt": b"old"})
    down = s3bulk.sync(f"s3://{bucket}/data/", str(target), delete=True)
    assert down.ok, down.failures
    assert tree_digests(target) == tree_digests(source)


def test_sync_respects_filters(minio: Endpoint, aws_env: dict, tmp_path: Path) -> None:
    source = make_tree(tmp_path / "src", FILES)
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="keep.log", Body=b"excluded names are never deleted")
    report = s3bulk.sync(str(source), f"s3://{bucket}/", exclude=["*.log", "a/*"], delete=True)
    assert report.ok, report.failures
    expected = ["a-b.txt", "a.txt", "b/c.txt", "keep.log", "space name/é.txt"]
    assert sorted(bucket_digests(minio, bucket)) == expected


def test_sync_usage_errors(minio: Endpoint, tmp_path: Path) -> None:
    both = run_cli(minio.env, "sync", "--size-only", "--checksum", str(tmp_path), "s3://bucket-x/")
    assert both.returncode == 2 and "exclude each other" in both.stderr
    missing = run_cli(minio.env, "sync", str(tmp_path / "nope"), "s3://bucket-x/")
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_delete_from_an_empty_or_missing_source_is_refused_unless_allowed(
    minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for name in ("a", "b", "c"):
        client.put_object(Bucket=bucket, Key=f"site/{name}", Body=b"x")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        f"{empty}/": "is empty or missing: sync --delete would delete everything",
        f"s3://{bucket}/nothing-here/": "is empty or missing: sync --delete would delete everything",
        f"{tmp_path}/not-mounted/": "does not exist",
    }
    for source, message in cases.items():
        done = run_cli(minio.env, "sync", "--delete", source, f"s3://{bucket}/site/")
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
        assert client.list_objects_v2(Bucket=bucket, Prefix="site/")["KeyCount"] == 3  # nothing deleted
    plain = run_cli(minio.env, "sync", f"{empty}/", f"s3://{bucket}/site/")  # no --delete: harmless
    assert plain.returncode == 0, plain.stderr
    allowed = run_cli(
        minio.env, "sync", "--delete", "--allow-empty-source", f"{empty}/", f"s3://{bucket}/site/"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert client.list_objects_v2(Bucket=bucket, Prefix="site/")["KeyCount"] == 0


def test_a_refused_destination_listing_ends_the_sync_in_one_line(minio: Endpoint, tmp_path: Path) -> None:
    """The destination's listing is refused while the local side, listed ahead, waits with its
    pages: one line, exit 1, and the process ends (it hung for good once the error was printed)."""
    from conftest import S3BULK, held_at

    from s3bulk.testing.throttle import S3ThrottlingProxy

    bucket = new_bucket(minio)
    make_tree(tmp_path / "src", {f"d{i % 10}/f{i:05d}": b"x" * 100 for i in range(5000)})
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        command = [*S3BULK, "sync", f"{tmp_path}/src/", f"s3://{bucket}/p/"]
        with held_at(proxy, 1, command, env, tmp_path / "log") as job:  # the preflight passes
            time.sleep(0.5)  # the local walk fills its queue meanwhile
            proxy.denied_methods = {"GET"}
            proxy.release()
            assert job.wait(60) == 1
            lines = job.output().strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(f"error: list s3://{bucket}/p/: AccessDenied (403)")
