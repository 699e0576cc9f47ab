"""`cp` against a real MinIO: upload, download and server-side copy, byte for byte, plus the
options users rely on and the failures they must be told about."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Endpoint, bucket_digests, make_tree, new_bucket, run_cli, sha256, tree_digests

import s3bulk
from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError
from s3bulk._stores.retry import Retrier, RetryPolicy
from s3bulk._stores.routes import MiB, Parts
from s3bulk._stores.storage import Storage

FILES = {
    "a.txt": b"alpha\n",
    "dir/b.bin": os.urandom(70_000),
    "dir/sub/c.txt": b"gamma" * 1000,
    "space name/é ü.txt": b"unicode",
    "empty.dat": b"",
    "odd/q?a=b&c+d%20.txt": b"odd characters",
}


@pytest.fixture
def source_tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "src", FILES)


def test_upload_download_and_copy_round_trip(
    minio: Endpoint, aws_env: dict[str, str], source_tree: Path, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    other = new_bucket(minio)
    expected = tree_digests(source_tree)

    up = s3bulk.copy(f"{source_tree}/", f"s3://{bucket}/data/", workers=2)
    assert up.ok, up.failures
    assert (up.objects_done, up.bytes_done) == (len(FILES), sum(map(len, FILES.values())))
    assert bucket_digests(minio, bucket, "data/") == expected

    same = s3bulk.copy(f"s3://{bucket}/data/", f"s3://{bucket}/again/")
    across = s3bulk.copy(f"s3://{bucket}/data/", f"s3://{other}/copy/")
    assert same.ok and across.ok, (same.failures, across.failures)
    assert bucket_digests(minio, bucket, "again/") == expected
    assert bucket_digests(minio, other, "copy/") == expected
    assert across.requests.get("COPY") == len(FILES)

    down = s3bulk.copy(f"s3://{other}/copy/", f"{tmp_path}/out/")
    assert down.ok, down.failures
    assert tree_digests(tmp_path / "out") == expected
    assert not list((tmp_path / "out").rglob("*.s3bulk-part"))


def test_directory_without_slash_keeps_its_name(minio: Endpoint, aws_env: dict, source_tree: Path) -> None:
    bucket = new_bucket(minio)
    assert s3bulk.copy(str(source_tree), f"s3://{bucket}/").ok
    assert set(bucket_digests(minio, bucket)) == {f"src/{name}" for name in FILES}


def test_large_objects_use_parts_and_stay_identical(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    data = os.urandom(13 * 1024**2 + 17)
    (tmp_path / "big.bin").write_bytes(data)
    options = {"part_size": 5 * 1024**2, "multipart_threshold": 6 * 1024**2}
    up = s3bulk.copy(str(tmp_path / "big.bin"), f"s3://{bucket}/big.bin", **options)
    assert up.ok and up.requests["PUT"] == 5  # create + 3 parts + complete
    etag = minio.client().head_object(Bucket=bucket, Key="big.bin")["ETag"]
    assert etag.endswith('-3"')  # stored as a 3-part multipart object

    copied = s3bulk.copy(
        f"s3://{bucket}/big.bin", f"s3://{bucket}/copy.bin", copy_multipart_threshold=6 * 1024**2, **options
    )
    assert copied.ok and copied.requests["COPY"] == 3  # UploadPartCopy for each part
    down = s3bulk.copy(f"s3://{bucket}/copy.bin", f"{tmp_path}/back.bin", **options)
    assert down.ok and down.requests["GET"] == 3  # three ranged GETs
    assert sha256((tmp_path / "back.bin").read_bytes()) == sha256(data)


def test_single_object_destinations(minio: Endpoint, aws_env: dict[str, str], tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    (tmp_path / "one.txt").write_bytes(b"one")
    assert s3bulk.copy(str(tmp_path / "one.txt"), f"s3://{bucket}/dir/").ok
    assert s3bulk.copy(str(tmp_path / "one.txt"), f"s3://{bucket}/named.txt").ok
    assert set(bucket_digests(minio, bucket)) == {"dir/one.txt", "named.txt"}
    (tmp_path / "into").mkdir()
    assert s3bulk.copy(f"s3://{bucket}/named.txt", f"{tmp_path}/into/").ok
    assert s3bulk.copy(f"s3://{bucket}/dir/one.txt", f"{tmp_path}/exact.txt").ok
    assert (tmp_path / "into" / "named.txt").read_bytes() == b"one"
    assert (tmp_path / "exact.txt").read_bytes() == b"one"


def test_include_exclude(minio: Endpoint, aws_env: dict[str, str], source_tree: Path) -> None:
    bucket = new_bucket(minio)
    report = s3bulk.copy(f"{source_tree}/", f"s3://{bucket}/", include=["*.txt"], exclude=["odd/*"])
    assert report.ok
    assert set(bucket_digests(minio, bucket)) == {"a.txt", "dir/sub/c.txt", "space name/é ü.txt"}


def test_cli_dry_run_writes_nothing(minio: Endpoint, bucket: str, source_tree: Path) -> None:
    result = run_cli(minio.env, "cp", "--dry-run", f"{source_tree}/", f"s3://{bucket}/x/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(dryrun) upload: ") == len(FILES)
    assert bucket_digests(minio, bucket) == {}


def test_cli_json_lines(minio: Endpoint, bucket: str, source_tree: Path) -> None:
    result = run_cli(minio.env, "cp", "--json", f"{source_tree}/", f"s3://{bucket}/j/")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["destination"] for r in records[:-1]) == sorted(f"s3://{bucket}/j/{k}" for k in FILES)
    summary = records[-1]["summary"]
    assert summary["objects_done"] == len(FILES) and summary["ok"] is True


def test_cli_summary_and_exit_code(minio: Endpoint, bucket: str, source_tree: Path, tmp_path: Path) -> None:
    up = run_cli(minio.env, "cp", f"{source_tree}/", f"s3://{bucket}/s/")
    assert up.returncode == 0, up.stderr
    assert f"upload done: {len(FILES)} objects" in up.stdout
    down = run_cli(minio.env, "cp", f"s3://{bucket}/s/", f"{tmp_path}/d/")
    assert down.returncode == 0 and tree_digests(tmp_path / "d") == tree_digests(source_tree)


def test_failed_objects_are_listed_and_exit_non_zero(
    minio: Endpoint, bucket: str, source_tree: Path, tmp_path: Path
) -> None:
    run_cli(minio.env, "cp", f"{source_tree}/", f"s3://{bucket}/f/")
    target = tmp_path / "dst"
    (target / "a.txt").mkdir(parents=True)  # a directory where a file must land: that one fails
    result = run_cli(minio.env, "cp", f"s3://{bucket}/f/", f"{target}/")
    assert result.returncode == 1
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1 and f"s3://{bucket}/f/a.txt" in failed[0]
    assert f"{len(FILES) - 1} objects" in result.stdout and "1 failed" in result.stdout
    assert (target / "dir" / "b.bin").read_bytes() == FILES["dir/b.bin"]
    assert not list(target.rglob("*.s3bulk-part"))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["cp", "s3:/bad/x", "/tmp/x"], "malformed S3 URL"),
        (["cp", "gs://bucket/x", "/tmp/x"], "unsupported URL scheme"),
        (["cp", "/definitely/not/here/", "s3://bucket-x/"], "does not exist"),
        (["cp", "/tmp", "/tmp/y"], "both locations are local"),
        (["cp", "--part-size", "1MiB", "s3://bucket-x/a/", "/tmp/z/"], "at least 5 MiB"),
        (["cp", "--bogus", "a", "b"], "No such option"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(minio: Endpoint, args: list[str], fragment: str) -> None:
    result = run_cli(minio.env, *args)
    assert result.returncode == 2, result
    assert fragment in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_bucket(minio: Endpoint, tmp_path: Path) -> None:
    result = run_cli(minio.env, "cp", "s3://no-such-bucket-zz/p/", f"{tmp_path}/out/")
    assert result.returncode == 1
    assert "NoSuchBucket" in result.stderr
    assert not (tmp_path / "out").exists()


def test_missing_single_object_suggests_a_prefix(minio: Endpoint, bucket: str, tmp_path: Path) -> None:
    result = run_cli(minio.env, "cp", f"s3://{bucket}/nothing", f"{tmp_path}/x")
    assert result.returncode == 1
    assert "no such object" in result.stderr and "end the URL with '/'" in result.stderr


def test_wrong_credentials_never_print_the_secret(minio: Endpoint, bucket: str, source_tree: Path) -> None:
    env = dict(minio.env, AWS_SECRET_ACCESS_KEY="wrong-secret-value-123")
    result = run_cli(env, "cp", f"{source_tree}/", f"s3://{bucket}/w/")
    assert result.returncode == 1
    assert "SignatureDoesNotMatch" in result.stderr
    assert "wrong-secret-value-123" not in result.stdout + result.stderr
    assert bucket_digests(minio, bucket) == {}


def test_hostile_keys_are_refused_and_nothing_escapes(
    moto: Endpoint, tmp_path: Path, reliability: Callable[..., None]
) -> None:
    """MinIO refuses to store such keys, so moto's server plays the hostile peer: parent
    segments, an absolute path, a segment longer than any file name may be. Each is refused
    with its key named, and nothing is written outside the destination."""
    client = moto.client()
    client.create_bucket(Bucket="hostile")
    hostile = ["p/../escape.txt", "p/a/../../escape2.txt", "p//etc/absolute.txt", "p/" + "n" * 300 + ".txt"]
    for key in ("p/ok.txt", *hostile, "p/sub/fine.txt"):
        client.put_object(Bucket="hostile", Key=key, Body=b"payload")
    target = tmp_path / "deep" / "dst"
    target.mkdir(parents=True)
    result = run_cli(moto.env, "cp", "s3://hostile/p/", f"{target}/")
    assert result.returncode == 1
    escape = "key has a '..' segment that would escape the destination"
    reasons = [escape, escape, "key is an absolute path", "key has a path segment longer than 255 bytes"]
    refused = [line for line in result.stderr.splitlines() if "refused key" in line]
    assert sorted(refused) == sorted(
        f"failed: s3://hostile/{key}: refused key: {reason}"
        for key, reason in zip(hostile, reasons, strict=True)
    )
    assert tree_digests(target) == {"ok.txt": sha256(b"payload"), "sub/fine.txt": sha256(b"payload")}
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["fine.txt", "ok.txt"]
    reliability(
        "bad input: hostile keys",
        "download of keys with '..' segments, an absolute path and a 300-byte segment (moto serves them)",
        cases=len(hostile),
        refused=len(refused),
        written_outside=0,
        exit_code=result.returncode,
    )


def test_unreadable_local_file_fails_alone(minio: Endpoint, bucket: str, source_tree: Path) -> None:
    secret = source_tree / "locked.txt"
    secret.write_bytes(b"no")
    secret.chmod(0)
    command = ["cp", f"{source_tree}/", f"s3://{bucket}/u/"]
    if os.geteuid() == 0:  # root reads anything: drop the capabilities that let it
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]
        import subprocess
        import sys

        result = subprocess.run(
            [*prefix, sys.executable, "-m", "s3bulk", *command], env=minio.env, capture_output=True, text=True
        )
    else:
        result = run_cli(minio.env, *command)
    assert result.returncode == 1, result.stderr
    assert "locked.txt" in result.stderr and "ermission denied" in result.stderr
    assert set(bucket_digests(minio, bucket, "u/")) == set(FILES)


def test_symlinks_are_skipped_unless_followed_and_loops_never_are(
    minio: Endpoint, bucket: str, tmp_path: Path, reliability: Callable[..., None]
) -> None:
    """A link to a file outside the tree, a link to a directory outside it, a loop (a link to
    the tree's own root) and a dangling link. Without --follow-symlinks all four are skipped and
    named; with it the two outside targets are uploaded, the loop and the dangling link are still
    skipped with their reason, and the walk ends."""
    outside = make_tree(tmp_path / "outside", {"secret.txt": b"outside file", "dir/inner.txt": b"inner"})
    source = make_tree(tmp_path / "src", {"real.txt": b"real", "sub/x.txt": b"x"})
    (source / "link.txt").symlink_to(outside / "secret.txt")
    (source / "linked-dir").symlink_to(outside / "dir")
    (source / "sub" / "loop").symlink_to(source)
    (source / "dangling.txt").symlink_to(tmp_path / "nothing-here")
    result = run_cli(minio.env, "cp", f"{source}/", f"s3://{bucket}/s/")
    assert result.returncode == 0, result.stderr
    for name in ("link.txt", "linked-dir", "sub/loop", "dangling.txt"):
        assert f"{source}/{name}: symbolic link not followed (--follow-symlinks follows it)" in result.stderr
    assert "4 skipped" in result.stdout
    assert set(bucket_digests(minio, bucket, "s/")) == {"real.txt", "sub/x.txt"}

    followed = run_cli(minio.env, "cp", f"{source}/", f"s3://{bucket}/f/", "--follow-symlinks")
    assert followed.returncode == 0, followed.stderr
    assert f"{source}/sub/loop: symbolic link loop: it leads back to a directory above it" in followed.stderr
    assert f"{source}/dangling.txt: broken symbolic link: its target does not exist" in followed.stderr
    assert "2 skipped" in followed.stdout
    assert bucket_digests(minio, bucket, "f/") == {
        "real.txt": sha256(b"real"),
        "sub/x.txt": sha256(b"x"),
        "link.txt": sha256(b"outside file"),
        "linked-dir/inner.txt": sha256(b"inner"),
    }
    reliability(
        "bad input: symbolic links",
        "links to a file and a directory outside the tree, a loop, a dangling link; with and without "
        "--follow-symlinks",
        cases=4,
        followed_without_flag=0,
        loops_followed=0,
        exit_code_without_flag=result.returncode,
        exit_code_with_flag=followed.returncode,
    )


def test_many_objects_to_a_destination_without_slash_land_below_it(
    minio: Endpoint, aws_env: dict[str, str], source_tree: Path
) -> None:
    bucket = new_bucket(minio)
    assert s3bulk.copy(f"{source_tree}/", f"s3://{bucket}/up").ok
    assert s3bulk.copy(f"s3://{bucket}/up/", f"s3://{bucket}/copied").ok
    assert bucket_digests(minio, bucket, "up/") == tree_digests(source_tree)
    assert bucket_digests(minio, bucket, "copied/") == tree_digests(source_tree)


@pytest.mark.parametrize(
    ("stored", "listed"),  # the object grew or shrank since its listing
    [(10, 5), (10, 9), (10, 11), (10, 16), (10 * MiB, 9 * MiB), (10 * MiB, 10 * MiB + 1)],
)
def test_an_object_that_changed_since_its_listing_is_not_landed(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path, stored: int, listed: int
) -> None:
    """An object under the multipart threshold is fetched with one ranged GET of one byte more
    than its listed size (from 8 MiB, streamed into its file by the native writer thread), so a
    size that differs from the listing is caught as a whole GET would catch it, even with the
    ETag check off."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="k", Body=b"x" * stored)
    target = tmp_path / "k"

    async def download() -> int:
        client = Storage(AwsSettings.from_env(), retry=Retrier(RetryPolicy(max_attempts=1)), verify=False)
        try:
            return await client.download(bucket, "k", str(target), listed, 0.0, Parts())
        finally:
            await client.close()

    with pytest.raises(ItemError, match=f"of an object listed at {listed:,}: it changed since"):
        asyncio.run(download())
    assert list(tmp_path.iterdir()) == []  # nothing landed, no temporary left
