"""Manifests (issue 21, item 1), against MinIO: `--files-from FILE|-` on cp, mv and rm works on
exactly the names it lists (relative to the source; comments and empty lines left out), a name
that is not there fails alone and `--retry-failed` finds it once it is, stdin manifests survive
for a resume, and bad manifests are one line with nothing done."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import S3BULK, Endpoint, new_bucket, run_cli

NAMES = ["a.txt", "dir/b.txt", "c d.txt", "e+f.txt", "skip.txt"]


def seeded(endpoint: Endpoint, prefix: str = "src/") -> str:
    bucket = new_bucket(endpoint)
    client = endpoint.client()
    for name in NAMES:
        client.put_object(Bucket=bucket, Key=prefix + name, Body=name.encode())
    return bucket


def keys(endpoint: Endpoint, bucket: str, prefix: str) -> list[str]:
    found = endpoint.client().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(item["Key"].removeprefix(prefix) for item in found)


def manifest(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "list.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_download_copy_and_move_take_exactly_the_named(minio: Endpoint, tmp_path: Path) -> None:
    bucket = seeded(minio)
    names = manifest(tmp_path, "# what to fetch", "a.txt", "", "dir/b.txt", "c d.txt", "e+f.txt")
    down = run_cli(minio.env, "cp", "--files-from", str(names), f"s3://{bucket}/src/", f"{tmp_path}/out/")
    assert down.returncode == 0, down.stderr
    landed = sorted(
        str(path.relative_to(tmp_path / "out")) for path in (tmp_path / "out").rglob("*") if path.is_file()
    )
    assert landed == sorted(NAMES[:4])
    assert all((tmp_path / "out" / name).read_bytes() == name.encode() for name in NAMES[:4])
    copy = run_cli(minio.env, "cp", "--files-from", str(names), f"s3://{bucket}/src", f"s3://{bucket}/copy/")
    assert copy.returncode == 0, copy.stderr
    assert keys(minio, bucket, "copy/") == sorted(NAMES[:4])
    move = run_cli(
        minio.env,
        "mv",
        "--files-from",
        str(manifest(tmp_path, "a.txt")),
        f"s3://{bucket}/src/",
        f"s3://{bucket}/moved/",
    )
    assert move.returncode == 0, move.stderr
    assert keys(minio, bucket, "moved/") == ["a.txt"] and "a.txt" not in keys(minio, bucket, "src/")


def test_upload_from_stdin_and_a_missing_name_fails_alone(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    for name in ("one", "two", "sub/three"):
        (tree / name).write_text(name)
    up = subprocess.run(
        [*S3BULK, "cp", "--files-from", "-", f"{tree}/", f"s3://{bucket}/up/"],
        input="one\nsub/three\nabsent\n",
        env=minio.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert up.returncode == 1, up.stderr
    assert "absent: cannot read local file" in up.stderr
    assert keys(minio, bucket, "up/") == ["one", "sub/three"]
    (tree / "absent").write_text("now here")  # the manifest was kept: a rerun reads it again
    job = next(line for line in up.stderr.splitlines() if "--retry-failed" in line).split()[-1]
    again = run_cli(minio.env, "cp", "--retry-failed", job)
    assert again.returncode == 0, again.stderr
    assert keys(minio, bucket, "up/") == ["absent", "one", "sub/three"]


def test_a_missing_object_fails_alone_and_a_retry_finds_it(minio: Endpoint, tmp_path: Path) -> None:
    bucket = seeded(minio)
    names = manifest(tmp_path, "a.txt", "later.txt")
    first = run_cli(minio.env, "cp", "--files-from", str(names), f"s3://{bucket}/src/", f"{tmp_path}/out/")
    assert first.returncode == 1
    assert f"no such object: s3://{bucket}/src/later.txt (named by --files-from)" in first.stderr
    assert (tmp_path / "out" / "a.txt").exists() and not (tmp_path / "out" / "later.txt").exists()
    minio.client().put_object(Bucket=bucket, Key="src/later.txt", Body=b"arrived")
    job = next(line for line in first.stderr.splitlines() if "--retry-failed" in line).split()[-1]
    again = run_cli(minio.env, "cp", "--retry-failed", job)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "out" / "later.txt").read_bytes() == b"arrived"


def test_rm_deletes_exactly_the_named_keys(minio: Endpoint, tmp_path: Path) -> None:
    bucket = seeded(minio)
    names = manifest(tmp_path, "a.txt", "c d.txt", "never-was.txt")
    done = run_cli(minio.env, "rm", "--files-from", str(names), f"s3://{bucket}/src/")
    assert done.returncode == 0, done.stderr
    assert keys(minio, bucket, "src/") == sorted(set(NAMES) - {"a.txt", "c d.txt"})


def test_bad_manifests_are_one_line_and_nothing_is_done(minio: Endpoint, tmp_path: Path) -> None:
    bucket = seeded(minio)
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00bad")
    cases = [
        (
            ["cp", "--files-from", str(tmp_path / "nope"), f"s3://{bucket}/src/", f"{tmp_path}/x/"],
            "no such file",
        ),
        (
            ["cp", "--files-from", str(binary), f"s3://{bucket}/src/", f"{tmp_path}/x/"],
            "cannot read it as UTF-8",
        ),
        (
            ["rm", "--files-from", str(manifest(tmp_path, "a.txt")), f"s3://{bucket}/src/*"],
            "give one ending in '/'",
        ),
    ]
    for args, message in cases:
        done = run_cli(minio.env, *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert keys(minio, bucket, "src/") == sorted(NAMES) and not (tmp_path / "x").exists()


def test_sync_considers_only_the_named_on_both_sides(minio: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(minio)
    tree = tmp_path / "tree"
    (tree / "dir").mkdir(parents=True)
    for name in ("a.txt", "dir/b.txt", "c.txt", "z.txt"):
        (tree / name).write_text(name)
    client = minio.client()
    for key in ("gone.txt", "kept-extra.txt"):
        client.put_object(Bucket=bucket, Key=f"s/{key}", Body=b"old")
    names = manifest(tmp_path, "z.txt", "dir/b.txt", "gone.txt", "a.txt", "a.txt")  # any order, twice
    done = run_cli(minio.env, "sync", "--delete", "--files-from", str(names), f"{tree}/", f"s3://{bucket}/s/")
    assert done.returncode == 0, done.stderr
    # named and at the source: copied; named and only at the destination: deleted; not named: untouched
    assert keys(minio, bucket, "s/") == ["a.txt", "dir/b.txt", "kept-extra.txt", "z.txt"]
    again = run_cli(minio.env, "sync", "--files-from", str(names), f"{tree}/", f"s3://{bucket}/s/")
    assert again.returncode == 0 and "3 unchanged" in again.stdout, again.stdout
