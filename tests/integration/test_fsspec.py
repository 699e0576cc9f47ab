"""s3bulk as an fsspec filesystem (issue 51), against MinIO: fsspec's own shared suites (copy,
get, put, pipe, open), which nobody here wrote, as s3fs runs them; and the calls fsspec's users
make, each checked by the objects or files it leaves."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import fsspec
import fsspec.tests.abstract as abstract
import pytest
from conftest import Endpoint, Hostile, new_bucket
from test_hostile import _listed_tree

from s3bulk.fsspec import S3BulkFileSystem
from s3bulk.testing.hostile import ErrorIn200, Meanwhile, RepeatToken, continued


@pytest.fixture(scope="module")
def minio_env(minio: Endpoint) -> Iterator[dict[str, str]]:
    """The AWS variables pointing at MinIO, for a whole module (fsspec's fixtures are per class)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("AWS_")]:
            patch.delenv(name)
        for name, value in minio.server.client_env().items():
            patch.setenv(name, value)
        yield minio.env


class S3BulkFixtures(abstract.AbstractFixtures):
    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls, minio: Endpoint, minio_env: dict[str, str]) -> S3BulkFileSystem:
        S3BulkFileSystem.clear_instance_cache()
        return S3BulkFileSystem(endpoint_url=minio.server.client_env()["AWS_ENDPOINT_URL"])

    @pytest.fixture(scope="class")
    @classmethod
    def fs_path(cls, minio: Endpoint) -> str:
        return new_bucket(minio, "abstract")

    @pytest.fixture
    def supports_empty_directories(self) -> bool:
        return False


class TestS3BulkCopy(abstract.AbstractCopyTests, S3BulkFixtures):
    pass


class TestS3BulkGet(abstract.AbstractGetTests, S3BulkFixtures):
    pass


class TestS3BulkPut(abstract.AbstractPutTests, S3BulkFixtures):
    pass


class TestS3BulkPipe(abstract.AbstractPipeTests, S3BulkFixtures):
    pass


class TestS3BulkOpen(abstract.AbstractOpenTests, S3BulkFixtures):
    pass


# ---- the calls fsspec's users make, each checked by what it leaves ------------------------------
@pytest.fixture
def fs(minio: Endpoint, aws_env: dict[str, str]) -> S3BulkFileSystem:
    return fsspec.filesystem("s3bulk", endpoint_url=aws_env["AWS_ENDPOINT_URL"], skip_instance_cache=True)


def test_the_protocol_is_registered_by_the_entry_point_and_s3_only_when_asked(aws_env: dict) -> None:
    import subprocess
    import sys

    program = (
        "import fsspec; print(type(fsspec.filesystem('s3bulk')).__name__); "
        "import s3bulk.fsspec; print(fsspec.get_filesystem_class('s3').__name__); "
        "s3bulk.fsspec.register(as_s3=True); print(fsspec.get_filesystem_class('s3').__name__)"
    )
    shown = subprocess.run([sys.executable, "-c", program], env=aws_env, capture_output=True, text=True)
    assert shown.stdout.split() == ["S3BulkFileSystem", "S3FileSystem", "S3BulkFileSystem"], shown.stderr


def test_a_prefix_is_fetched_as_one_tree_job_not_a_request_per_object(
    fs: S3BulkFileSystem, minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    written = {f"p/d{i % 3}/k{i}": os.urandom(i * 7) for i in range(60)}
    fs.pipe({f"{bucket}/{key}": data for key, data in written.items()})

    fs.get(f"s3bulk://{bucket}/p", f"{tmp_path}/", recursive=True)

    assert fs.last_report is not None and fs.last_report.requests == {"LIST": 1, "GET": 60}
    for key, data in written.items():
        assert (tmp_path / key).read_bytes() == data


def test_put_cp_and_rm_of_a_tree_leave_the_objects_they_name(
    fs: S3BulkFileSystem, minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    for i in range(40):
        (tmp_path / f"t/sub{i % 4}").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"t/sub{i % 4}/f{i}.bin").write_bytes(bytes([i]) * i)

    fs.put(f"{tmp_path}/t", f"{bucket}/up", recursive=True)
    fs.copy(f"{bucket}/up", f"{bucket}/copied", recursive=True)
    names = fs.find(f"{bucket}/copied")

    assert len(names) == 40 and fs.cat(f"{bucket}/copied/sub1/f9.bin") == bytes([9]) * 9
    assert fs.du(f"{bucket}/up") == sum(range(40))
    fs.rm(f"{bucket}/up", recursive=True)
    assert not fs.exists(f"{bucket}/up") and fs.exists(f"{bucket}/copied/sub3/f39.bin")


def test_single_objects_answer_as_fsspec_callers_expect(fs: S3BulkFileSystem, minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    fs.pipe({f"{bucket}/a/one": b"0123456789", f"{bucket}/a/b/two": b"x"})

    assert fs.cat_file(f"{bucket}/a/one", start=2, end=5) == b"234"
    assert fs.cat_ranges([f"{bucket}/a/one"] * 2, [0, -3], [2, None]) == [b"01", b"789"]
    info = fs.info(f"{bucket}/a/one")
    assert (info["type"], info["size"], fs.size(f"{bucket}/a/one")) == ("file", 10, 10)
    assert info["ETag"].strip('"') and fs.modified(f"{bucket}/a/one") == info["LastModified"]
    assert fs.isdir(f"{bucket}/a") and fs.isdir(f"{bucket}/a/b") and not fs.isfile(f"{bucket}/a")
    assert fs.ls(f"{bucket}/a", detail=False) == [f"{bucket}/a/b", f"{bucket}/a/one"]
    assert fs.glob(f"{bucket}/a/*") == [f"{bucket}/a/b", f"{bucket}/a/one"]
    with pytest.raises(FileNotFoundError):
        fs.info(f"{bucket}/a/none")
    with pytest.raises(FileNotFoundError):
        fs.cat_file(f"{bucket}/a/none")
    with pytest.raises(FileNotFoundError):
        fs.ls(f"{bucket}/nothing-here")
    with fs.open(f"{bucket}/a/one") as handle:
        handle.seek(7)
        assert handle.read() == b"789"
    with fs.open(f"{bucket}/big", "wb", block_size=5 * 1024**2) as handle:
        for _ in range(3):
            handle.write(b"z" * 4 * 1024**2)
    assert fs.size(f"{bucket}/big") == 12 * 1024**2


def test_mv_deletes_each_source_only_once_its_copy_is_there_and_progress_counts_objects_moved(
    fs: S3BulkFileSystem, minio: Endpoint, tmp_path: Path
) -> None:
    from fsspec.callbacks import Callback

    class Seen(Callback):
        def __init__(self) -> None:
            super().__init__()
            self.updates: list[int] = []

        def call(self, *args: object, **kwargs: object) -> None:
            self.updates.append(self.value)

    bucket = new_bucket(minio)
    fs.pipe({f"{bucket}/src/k{n:03d}": bytes([n]) * n for n in range(30)})
    fs.mv(f"{bucket}/src", f"{bucket}/dst", recursive=True)
    assert fs.find(f"{bucket}/src") == [] and len(fs.find(f"{bucket}/dst")) == 30
    assert fs.last_report is not None and fs.last_report.objects_done == 30

    seen = Seen()
    fs.get(f"{bucket}/dst", f"{tmp_path}/", recursive=True, callback=seen)
    assert seen.size == 30 and seen.updates and seen.updates[-1] == 30
    assert (tmp_path / "dst/k029").read_bytes() == bytes([29]) * 29


# Names a key may hold (anything but NUL): the first, quoted into a line of `s3bulk run`, split it,
# and its second line (`rm s3://<bucket>/VICTIM`, the backslash read away) deleted VICTIM; the
# rest break other quoting (\r, quotes, a line separator, NEL) or read as comments and options
# (fsspec itself reads *, ? and [ in a path as a glob).
ODD_NAMES = [
    "x\nrm s3:/\\/{bucket}/VICTIM\n#",
    "car\rriage",
    "car\nriage",
    'it\'s "quoted" $(x) `y`;z',
    "tab\tand\x01control",
    "#hash",
    "-dash",
    "close]bracket",
    "line\u2028sep\x85nel",
]


def test_bulk_calls_over_many_paths_hand_keys_over_as_data_never_as_command_text(
    fs: S3BulkFileSystem, minio: Endpoint, tmp_path: Path
) -> None:
    """fs.get, fs.copy, fs.mv and fs.put over 16 paths or more that are not one tree ran as
    `s3bulk run` lines quoted with shlex: a key holding a newline split its line, and the line it
    spelled ran (VICTIM deleted, exit 0). Every pair is now an item the job reads as data:
    VICTIM survives each call, and each odd key's bytes arrive exactly where fsspec's rules name
    (a list of paths into a directory: under their base names), and fs.rm deletes them alone."""
    bucket = new_bucket(minio)
    victim = f"{bucket}/VICTIM"
    fs.pipe_file(victim, b"keep me")
    odd = [name.format(bucket=bucket) for name in ODD_NAMES]
    plain = [f"f{number:02d}" for number in range(16)]
    bodies = {name: hashlib.sha256(name.encode()).digest() * len(name) for name in odd + plain}
    fs.pipe({f"{bucket}/src/{name}": body for name, body in bodies.items()})
    sources = fs.find(f"{bucket}/src/")
    assert len(sources) == len(bodies) >= 16
    base = {name: name.rsplit("/", 1)[-1] for name in bodies}  # where a list into a directory puts each

    def landed_in(prefix: str) -> dict[str, bytes]:
        return {path.removeprefix(prefix): fs.cat_file(path) for path in fs.find(prefix)}

    fs.copy(sources, f"{bucket}/copied/")
    assert fs.cat_file(victim) == b"keep me"
    assert landed_in(f"{bucket}/copied/") == {base[name]: body for name, body in bodies.items()}

    fs.get(sources, f"{tmp_path}/got/")
    assert fs.cat_file(victim) == b"keep me"
    got = {path.name: path.read_bytes() for path in (tmp_path / "got").iterdir()}
    assert got == {base[name]: body for name, body in bodies.items()}

    files = sorted(str(path) for path in (tmp_path / "got").iterdir())
    fs.put(files, f"{bucket}/put/")
    assert fs.cat_file(victim) == b"keep me"
    assert landed_in(f"{bucket}/put/") == {base[name]: body for name, body in bodies.items()}

    fs.mv(fs.find(f"{bucket}/put/"), f"{bucket}/moved/")
    assert fs.cat_file(victim) == b"keep me"
    assert landed_in(f"{bucket}/moved/") == {base[name]: body for name, body in bodies.items()}
    assert fs.find(f"{bucket}/put/") == []

    fs.rm(fs.find(f"{bucket}/copied/"))
    assert fs.find(f"{bucket}/copied/") == [] and fs.cat_file(victim) == b"keep me"
    assert len(fs.find(f"{bucket}/src/")) == len(bodies)


def _gets(fs: S3BulkFileSystem) -> int:
    """GETs this filesystem's own storages sent (one per event loop)."""
    return sum(storage.meter.requests.get("GET", 0) for storage in fs._storages.values())


def test_cat_ranges_of_one_object_close_together_are_one_get(fs: S3BulkFileSystem, minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    data = os.urandom(3 * 1024 * 1024)
    fs.pipe({f"{bucket}/blob": data, f"{bucket}/other": b"0123456789"})
    starts = [0, 1000, 5000, 2 * 1024 * 1024, 0]
    ends = [100, 1200, 5100, 2 * 1024 * 1024 + 10, 4]
    paths = [f"{bucket}/blob"] * 4 + [f"{bucket}/other"]
    before = _gets(fs)

    got = fs.cat_ranges(paths, starts, ends)

    assert got[:4] == [data[s:e] for s, e in zip(starts[:4], ends[:4], strict=True)] and got[4] == b"0123"
    assert _gets(fs) - before == 3  # bytes 0-5100 as one GET, the range 2 MiB in, the other object
    assert isinstance(fs.cat_ranges([f"{bucket}/none"], [0], [1])[0], FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([f"{bucket}/none"], [0], [1], on_error="raise")


def test_cat_ranges_of_an_object_replaced_between_its_gets_never_mix_two_versions(
    hostile: Hostile, minio: Endpoint, aws_env: dict[str, str], bucket: str
) -> None:
    """Two ranges of one object, far apart (two GETs), the object replaced between them: each
    GET asks for the version an `info` found, so the second fails rather than give bytes of
    the next version beside the first's."""
    client, mib = minio.client(), 1024 * 1024
    client.put_object(Bucket=bucket, Key="blob", Body=b"1" * (3 * mib))
    replace = Meanwhile(lambda: client.put_object(Bucket=bucket, Key="blob", Body=b"2" * (3 * mib)))
    hostile.misbehave(replace, operation="GetObject", bucket=bucket, after=1, times=1)
    fs = S3BulkFileSystem(endpoint_url=hostile.server.endpoint, skip_instance_cache=True)
    got = fs.cat_ranges([f"{bucket}/blob"] * 2, [0, 2 * mib], [10, 2 * mib + 10])
    assert len({bytes(each[:1]) for each in got if isinstance(each, bytes)}) == 1, got
    assert any(isinstance(each, OSError) and "changed since it was listed" in str(each) for each in got), got


def test_a_listing_whose_token_comes_round_again_is_an_error_not_a_short_ls(
    hostile: Hostile,
    minio: Endpoint,
    aws_env: dict[str, str],
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ls`, `walk` and `isdir` read one level page by page: a token that comes round again (the
    same page forever) stops the listing with an error, as s3bulk ls does, and a page that fails
    is an error after the attempts the AWS config allows, not a shorter directory."""
    _listed_tree(minio, bucket, tmp_path)  # 1,100 objects under p/: two pages
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # a fault that lasts fails in seconds, not a minute
    fs = S3BulkFileSystem(endpoint_url=hostile.server.endpoint, skip_instance_cache=True)
    hostile.misbehave(RepeatToken(), operation="ListObjectsV2", bucket=bucket, when=continued)
    with pytest.raises(OSError, match="continuation token it had given before"):
        fs.ls(f"{bucket}/p", detail=False)
    hostile.server.reset()
    hostile.misbehave(ErrorIn200(), operation="ListObjectsV2", bucket=bucket, when=continued)
    with pytest.raises(OSError, match="InternalError"):
        fs.ls(f"{bucket}/p", detail=False)
    # page one, then page two tried by AWS_MAX_ATTEMPTS as every s3bulk listing is: twice the
    # attempts for a listing's page (`with_retries`), so 2 x 2 (the default 6 would make 12)
    assert hostile.server.log.count("ListObjectsV2") == 1 + 2 * 2
    hostile.server.reset()
    assert len(fs.ls(f"{bucket}/p", detail=False)) == 1100


def test_files_a_listing_found_are_opened_without_a_head_each(
    hostile: Hostile, minio: Endpoint, aws_env: dict[str, str], bucket: str
) -> None:
    """A pyarrow dataset lists its directory, then checks and opens each file: with the listing
    kept (as s3fs keeps it), each small file costs one GET and no HEAD, which at 20 ms RTT made
    200 files 2.6x slower than s3fs when every open asked for its size."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs = S3BulkFileSystem(endpoint_url=hostile.server.endpoint, skip_instance_cache=True)
    for n in range(12):
        with fs.open(f"{bucket}/d/part-{n:02d}.parquet", "wb") as handle:
            pq.write_table(pa.table({"n": list(range(n * 100, n * 100 + 100))}), handle)
    hostile.server.reset()

    table = ds.dataset(f"{bucket}/d", filesystem=PyFileSystem(FSSpecHandler(fs)), format="parquet").to_table()

    assert sorted(table.column("n").to_pylist()) == list(range(1200))
    seen = hostile.server.log.seen
    assert [each.key for each in seen if each.operation == "HeadObject"] == ["d", "d"]  # the directory
    gets = Counter(each.key for each in seen if each.operation == "GetObject")
    assert gets == {f"d/part-{n:02d}.parquet": 2 if n == 0 else 1 for n in range(12)}  # 0: the schema


def test_kept_listings_follow_this_filesystems_writes_and_a_changed_object_fails_its_read(
    fs: S3BulkFileSystem, minio: Endpoint, aws_env: dict[str, str]
) -> None:
    """What this filesystem writes or deletes, its next listing shows; an object replaced by
    someone else after the listing is read either afresh (`invalidate_cache`) or not at all:
    its read fails on the ETag listed, never mixing the old size with the new bytes."""
    bucket = new_bucket(minio)
    fs.pipe({f"{bucket}/d/a": b"first", f"{bucket}/d/sub/b": b"b"})
    assert fs.ls(f"{bucket}/d", detail=False) == [f"{bucket}/d/a", f"{bucket}/d/sub"]

    fs.pipe_file(f"{bucket}/d/c", b"c")
    with fs.open(f"{bucket}/d/e", "wb") as handle:
        handle.write(b"e")
    fs.rm(f"{bucket}/d/sub/b")
    assert fs.ls(f"{bucket}/d", detail=False) == [f"{bucket}/d/a", f"{bucket}/d/c", f"{bucket}/d/e"]
    fs.put_file(__file__, f"{bucket}/d/sub/f.py")
    fs.copy(f"{bucket}/d/a", f"{bucket}/d/sub/a")
    assert fs.find(f"{bucket}/d/sub") == [f"{bucket}/d/sub/a", f"{bucket}/d/sub/f.py"]
    fs.mv(f"{bucket}/d/sub", f"{bucket}/moved", recursive=True)
    assert not fs.exists(f"{bucket}/d/sub/a") and fs.cat(f"{bucket}/moved/a") == b"first"

    fs.ls(f"{bucket}/d")
    assert fs.info(f"{bucket}/d/a")["size"] == 5  # kept from the listing
    other = S3BulkFileSystem(skip_instance_cache=True)  # another writer
    other.pipe_file(f"{bucket}/d/a", b"replaced, and longer")
    with (
        pytest.raises(OSError, match="changed since it was opened or listed"),
        fs.open(f"{bucket}/d/a") as handle,
    ):
        handle.read()
    fs.invalidate_cache(f"{bucket}/d")
    with fs.open(f"{bucket}/d/a") as handle:
        assert handle.read() == b"replaced, and longer"

    fresh = S3BulkFileSystem(use_listings_cache=False, skip_instance_cache=True)
    fresh.ls(f"{bucket}/d")
    other.pipe_file(f"{bucket}/d/z", b"z")
    assert f"{bucket}/d/z" in fresh.ls(f"{bucket}/d", detail=False)


@pytest.mark.parametrize("count", [2, 17], ids=["one by one", "as run's items"])
def test_mv_deletes_a_source_only_while_it_is_the_version_it_copied(
    hostile: Hostile, minio: Endpoint, aws_env: dict[str, str], bucket: str, count: int
) -> None:
    """fs.mv of a few paths (each pair on its own) deleted each source by its key once its copy
    was done, and `s3bulk run`'s mv (over 16 paths or more) did too: another writer's version
    put there between the copy and the delete was lost, in neither place. Now the source is
    deleted only while it is the version copied: here s/f00 is overwritten just after its
    CopyObject, and it is kept with the writer's bytes (the call fails naming it); every other
    source moves."""
    client = minio.client()
    names = [f"f{number:02d}" for number in range(count)]
    for name in names:
        client.put_object(Bucket=bucket, Key=f"s/{name}", Body=b"old " + name.encode())
    fs = S3BulkFileSystem(endpoint_url=hostile.server.endpoint, skip_instance_cache=True)
    sources = fs.find(f"{bucket}/s/")
    overwrite = Meanwhile(lambda: client.put_object(Bucket=bucket, Key="s/f00", Body=b"theirs"), after=True)
    hostile.misbehave(overwrite, operation="CopyObject", bucket=bucket, key="m/f00", times=1)
    with pytest.raises(OSError, match="changed after it was copied"):
        fs.mv(sources, f"{bucket}/m/")
    assert client.get_object(Bucket=bucket, Key="s/f00")["Body"].read() == b"theirs"
    assert client.get_object(Bucket=bucket, Key="m/f00")["Body"].read() == b"old f00"
    left = {entry["Key"] for entry in client.list_objects_v2(Bucket=bucket, Prefix="s/").get("Contents", [])}
    assert left == {"s/f00"}
