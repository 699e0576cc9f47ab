"""The local side under attack (issue 62, item 5), against MinIO: a directory of a download's
destination swapped for a link while the job runs, `--files-from` names that lead out of the
source, and the temporary files a killed download leaves."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import fsspec
import pytest
from conftest import S3BULK, Endpoint, held_at, run_cli

from s3bulk.testing.throttle import S3ThrottlingProxy

OBJECTS = 400


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` (links not followed), by its path below it."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def _names(root: Path) -> set[str]:
    """The names of the files under `root`, read without opening them: while the job is held,
    a download already answered may still be renaming its temporary into place."""
    return {name for _, _, names in os.walk(root) for name in names if not name.endswith(".s3bulk-part")}


def _body(number: int) -> bytes:
    """Sizes across the ways a download takes: written at once (under 16 KiB), streamed to the
    native writer thread, and in ranges (above the multipart threshold, lowered for the test)."""
    size = (2_000, 40_000, 9 * 1024 * 1024 + 5)[0 if number % 50 else (number // 50) % 2 + 1]
    return hashlib.sha256(b"%d" % number).digest() * (size // 32) + b"x" * (size % 32)


@pytest.mark.parametrize("verb", ["cp", "sync"])
def test_a_directory_swapped_for_a_link_mid_download_sends_no_file_outside(
    minio: Endpoint, bucket: str, tmp_path: Path, verb: str
) -> None:
    """The job is held mid-way (the proxy answers 150 requests, then holds the rest), the
    destination's directory `d` is moved aside and a link to a directory outside put in its
    place, then the job goes on. Each directory was checked once, and files were written by
    path: the rest went through the link (148 of them in the red team's run). Written relative
    to the directory opened, they land in the moved directory, or fail by name: none outside."""
    client = minio.client()
    bodies = {f"d/f{number:04d}": _body(number) for number in range(OBJECTS)}
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=f"race/{key}", Body=body)
    destination, outside = tmp_path / "dest", tmp_path / "outside"
    outside.mkdir()
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        command = [*S3BULK, verb, f"s3://{bucket}/race/", f"{destination}/", "--multipart-threshold", "8MiB"]
        with held_at(proxy, 150, command, env, tmp_path / "job.log") as job:
            (destination / "d").rename(destination / "moved")
            (destination / "d").symlink_to(outside, target_is_directory=True)
            landed_before = len(_names(destination))
            proxy.release()
            code = job.wait(300)
            output = job.output()
    assert _files(outside) == {}, output
    assert 0 < landed_before < OBJECTS  # the swap came mid-way
    landed = _files(destination)
    for name, data in landed.items():  # whatever landed is whole, in the directory opened
        assert name.startswith("moved/") and data == bodies["d/" + name.removeprefix("moved/")], name
    failed = OBJECTS - len(landed)
    assert (code, failed) == (0, 0) or (code == 1 and f"{failed:,} failed" in output), output


GET_ONE = """
import sys, fsspec
fs = fsspec.filesystem("s3bulk", endpoint_url=sys.argv[1], skip_instance_cache=True)
fs.get(sys.argv[2], sys.argv[3])
"""


def test_a_killed_fsspec_get_leaves_a_temporary_that_is_swept_and_never_uploaded(
    minio: Endpoint, aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """`fs.get` killed outright (SIGKILL) mid-way left `.s3bulk-XXXX` (218 MB in the red team's
    run): nothing swept it, and a later `sync` of the directory uploaded it. Its temporary is
    named as every download's is now: a sync of the directory does not upload it, and the next
    download into the directory removes it."""
    client = minio.client()
    body = os.urandom(40 * 1024 * 1024)
    client.put_object(Bucket=bucket, Key="big.bin", Body=body)
    client.put_object(Bucket=bucket, Key="small.txt", Body=b"small")
    destination = tmp_path / "dest"
    destination.mkdir()
    (destination / "mine.txt").write_bytes(b"the user's")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        get = [f"{bucket}/big.bin", f"{destination}/big.bin"]
        command = [sys.executable, "-c", GET_ONE, proxy.endpoint, *get]
        # fsspec's 4 HEADs and 4 of the object's 5 ranges of 8 MiB are answered, the last held
        with held_at(proxy, 8, command, minio.env, tmp_path / "get.log") as job:
            while not [each for each in destination.glob(".*") if each.stat().st_size]:  # written into
                assert job.poll() is None, job.output()
                time.sleep(0.01)
            job.kill_group()
            job.wait()
    left = [path.name for path in destination.iterdir() if path.name != "mine.txt"]
    assert len(left) == 1 and left[0].startswith(".big.bin.") and left[0].endswith(".s3bulk-part"), left

    synced = run_cli(minio.env, "sync", f"{destination}/", f"s3://{bucket}/up/")
    assert synced.returncode == 0, synced.stderr
    listed = client.list_objects_v2(Bucket=bucket, Prefix="up/").get("Contents", [])
    assert [each["Key"] for each in listed] == ["up/mine.txt"]

    fs = fsspec.filesystem("s3bulk", endpoint_url=minio.server.endpoint, skip_instance_cache=True)
    fs.get(f"{bucket}/small.txt", f"{destination}/small.txt")
    assert sorted(path.name for path in destination.iterdir()) == ["mine.txt", "small.txt"]


def test_files_from_names_nothing_outside_the_source_nor_through_a_link(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """`cp --files-from` read `../outside.txt` and `/etc/hostname`, and followed a link a plain
    `cp` skips. A name is a file below the source, as a walk finds it: one that leads out is
    refused by name (exit 1, counted), a link on its way skipped as a walk skips it, and a retry
    of the failures refuses them again."""
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_bytes(b"a")
    (source / "sub" / "b.txt").write_bytes(b"b")
    (tmp_path / "outside.txt").write_bytes(b"secret")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "inner.txt").write_bytes(b"inner secret")
    (source / "link.txt").symlink_to(tmp_path / "outside.txt")
    (source / "linkdir").symlink_to(tmp_path / "outdir")
    refused = ["../outside.txt", "/etc/hostname", "sub/../../outside.txt"]
    manifest = tmp_path / "names.txt"
    names = ["a.txt", "./sub//b.txt", *refused, "link.txt", "linkdir/inner.txt"]
    manifest.write_text("\n".join(names) + "\n")
    result = run_cli(minio.env, "cp", "--files-from", str(manifest), f"{source}/", f"s3://{bucket}/p/")
    assert result.returncode == 1, result.stderr
    for name in refused:  # as the path it names
        assert f"{os.path.join(source, name)}: not below the source directory" in result.stderr
    for name in ("link.txt", "linkdir/inner.txt"):
        assert f"{source}/{name}: symbolic link not followed (--follow-symlinks follows it)" in result.stderr
    assert "3 failed" in result.stdout and "2 skipped" in result.stdout, result.stdout
    client = minio.client()

    def uploaded(prefix: str) -> dict[str, bytes]:
        listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        keys = [each["Key"] for each in listed]
        return {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}

    assert uploaded("p/") == {"p/a.txt": b"a", "p/sub/b.txt": b"b"}
    job = result.stderr.split("--retry-failed ")[-1].split()[0]
    again = run_cli(minio.env, "cp", "--retry-failed", job)
    assert again.returncode == 1 and "3 failed" in again.stdout, again.stdout + again.stderr
    assert uploaded("p/") == {"p/a.txt": b"a", "p/sub/b.txt": b"b"}

    followed = run_cli(
        minio.env, "cp", "--follow-symlinks", "--files-from", str(manifest), f"{source}/", f"s3://{bucket}/f/"
    )
    assert followed.returncode == 1 and "3 failed" in followed.stdout, followed.stderr
    assert uploaded("f/") == {
        "f/a.txt": b"a",
        "f/sub/b.txt": b"b",
        "f/link.txt": b"secret",  # as a walk with --follow-symlinks takes it
        "f/linkdir/inner.txt": b"inner secret",
    }


def test_a_retried_sync_reads_a_key_named_like_a_delete_as_a_key(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """sync journals a delete as `delete:` + the path, and a transfer by its name: a key named
    `delete:<path>` whose download failed came back from --retry-failed as a delete of <path>,
    anywhere on the machine. Here the key `delete:<victim>` fails (a directory is in its way),
    then the retry runs: the victim is kept, and the key is fetched."""
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_bytes(b"not the job's")
    key = f"src/delete:{victim}"
    minio.client().put_object(Bucket=bucket, Key=key, Body=b"object")
    destination = tmp_path / "dest"
    in_the_way = destination / f"delete:{victim}".lstrip("/")
    (in_the_way / "blocker").mkdir(parents=True)
    first = run_cli(minio.env, "sync", f"s3://{bucket}/src/", f"{destination}/")
    assert first.returncode == 1 and "1 failed" in first.stdout, first.stdout + first.stderr
    (in_the_way / "blocker").rmdir()
    in_the_way.rmdir()
    job = first.stderr.split("--retry-failed ")[-1].split()[0]
    again = run_cli(minio.env, "sync", "--retry-failed", job)
    assert victim.read_bytes() == b"not the job's"
    assert again.returncode == 0, again.stdout + again.stderr
    assert in_the_way.read_bytes() == b"object"
