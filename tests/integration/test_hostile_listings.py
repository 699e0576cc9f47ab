"""Listings that lie (issue 62, item 6): pages that bring no new key forever, keys said to be
URL-encoded and sent as they are, a key listed twice. `ls -r`, `du`, `cp` and `sync --delete`
stop with one line naming the service's fault, within a timeout that catches "forever", and
nothing is deleted on a listing that could not be read right.

The server is `s3bulk.testing.hostile.HostileS3` in front of the session's MinIO.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Endpoint, Hostile, bucket_digests, make_tree, run_cli, tree_digests

from s3bulk.testing.hostile import (
    EmptyPages,
    Exchange,
    Fault,
    ListedTwice,
    RawKeysSaidEncoded,
    SamePageFreshToken,
)

FOREVER = 60  # seconds: a listing still going by then would go on forever
TWO = {"p/one": b"first object", "p/two": b"second object"}


def _two_objects(minio: Endpoint, bucket: str) -> None:
    client = minio.client()
    for key, body in TWO.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)


def _of_prefix(prefix: str) -> Callable[[Exchange], bool]:
    return lambda exchange: exchange.request.query.get("prefix") == prefix


def _run(hostile: Hostile, *args: str) -> tuple[int, str, str]:
    result = run_cli(hostile.env | {"AWS_MAX_ATTEMPTS": "2"}, *args, timeout=FOREVER)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize("fault", [SamePageFreshToken, EmptyPages], ids=["same-keys", "empty-pages"])
@pytest.mark.parametrize("command", ["ls -r", "du", "cp"])
def test_a_listing_whose_pages_bring_no_new_key_stops_with_one_line(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, fault: type[Fault], command: str
) -> None:
    _two_objects(minio, bucket)
    hostile.misbehave(fault(), operation="ListObjectsV2", bucket=bucket)
    verb, *flags = command.split()
    target = [f"{tmp_path / 'down'}/"] if verb == "cp" else []
    code, out, err = _run(hostile, verb, *flags, f"s3://{bucket}/p/", *target)
    assert code == 1, out[-500:] + err
    said = err if verb == "cp" else err.strip().splitlines()[-1]  # cp: its failed listing, and how to go on
    assert f"list s3://{bucket}/p/: " in said and "the listing does not advance" in said, err
    if verb == "ls":
        assert len(out.splitlines()) <= len(TWO), out[-500:]
    if verb == "cp":  # each object fetched once at most, not again and again
        assert hostile.server.log.count("GetObject") <= len(TWO)
        for path in (tmp_path / "down").glob("*"):
            assert path.read_bytes() == TWO[f"p/{path.name}"]


@pytest.mark.parametrize("fault", [SamePageFreshToken, EmptyPages], ids=["same-keys", "empty-pages"])
def test_sync_delete_on_a_listing_that_never_ends_stops_and_deletes_nothing(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, fault: type[Fault]
) -> None:
    _two_objects(minio, bucket)
    local = make_tree(tmp_path / "d", {"one": b"first object", "only-local": b"not in the bucket"})
    before = tree_digests(local)
    minio.client().put_object(Bucket=bucket, Key="copy/only-there", Body=b"in the copy only")
    hostile.misbehave(fault(), operation="ListObjectsV2", bucket=bucket, when=_of_prefix("p/"))
    for source, destination in (
        (f"s3://{bucket}/p/", f"{local}/"),
        (f"s3://{bucket}/p/", f"s3://{bucket}/copy/"),
    ):
        code, out, err = _run(hostile, "sync", "--delete", source, destination)
        assert code == 1, out + err
        assert f"list s3://{bucket}/p/" in err, err
    assert tree_digests(local) == before
    assert list(bucket_digests(minio, bucket, "copy/")) == ["only-there"]


ODD = {"p/a+b": b"plus", "p/c%41d": b"percent", "p/plain": b"plain", "p/sp ace": b"space"}


def _odd_objects(minio: Endpoint, bucket: str, tmp_path: Path) -> Path:
    """Keys that URL decoding would change, in the bucket and, as files, in tmp_path/d."""
    client = minio.client()
    for key, body in ODD.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    return make_tree(tmp_path / "d", {key[2:]: body for key, body in ODD.items()})


def test_keys_said_to_be_url_encoded_and_sent_as_they_are_stop_the_job_and_delete_nothing(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    local = _odd_objects(minio, bucket, tmp_path)
    before = tree_digests(local)
    hostile.misbehave(RawKeysSaidEncoded(), operation="ListObjectsV2", bucket=bucket)
    code, out, err = _run(hostile, "sync", "--delete", f"s3://{bucket}/p/", f"{local}/")
    assert code == 1, out + err
    assert "URL-encoded" in err.strip().splitlines()[-1], err
    assert tree_digests(local) == before
    code, out, err = _run(hostile, "ls", "-r", f"s3://{bucket}/p/")
    assert code == 1 and "URL-encoded" in err, out + err
    assert "a b" not in out and "cAd" not in out


def test_a_service_that_misencodes_only_when_asked_is_read_right(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    local = _odd_objects(minio, bucket, tmp_path)
    (local / "only-local").write_bytes(b"not in the bucket")
    hostile.misbehave(RawKeysSaidEncoded(only_when_asked=True), operation="ListObjectsV2", bucket=bucket)
    code, out, err = _run(hostile, "sync", "--delete", f"s3://{bucket}/p/", f"{local}/")
    assert code == 0, out + err
    assert tree_digests(local) == {key[2:]: digest for key, digest in bucket_digests(minio, bucket).items()}
    code, out, err = _run(hostile, "ls", "-r", f"s3://{bucket}/p/")
    assert code == 0, err
    assert sorted(line.split(maxsplit=3)[-1] for line in out.splitlines()) == sorted(ODD)


def test_a_key_listed_twice_counts_once(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    _two_objects(minio, bucket)
    hostile.misbehave(ListedTwice("p/one"), operation="ListObjectsV2", bucket=bucket)
    code, out, err = _run(hostile, "du", f"s3://{bucket}/p/")
    assert code == 0, err
    assert out.split()[:2] == [str(sum(map(len, TWO.values()))), "2"], out
    code, out, err = _run(hostile, "ls", "-r", f"s3://{bucket}/p/")
    assert code == 0, err
    assert [line.split()[-1] for line in out.splitlines()] == ["p/one", "p/two"], out
    code, out, err = _run(hostile, "cp", f"s3://{bucket}/p/", f"{tmp_path / 'down'}/")
    assert code == 0, out + err
    assert hostile.server.log.count("GetObject") == 2
    local = make_tree(tmp_path / "d", {"one": b"first object", "only-local": b"x"})
    code, out, err = _run(hostile, "sync", "--delete", f"s3://{bucket}/p/", f"{local}/")
    assert code == 0, out + err
    assert sorted(tree_digests(local)) == ["one", "two"]
