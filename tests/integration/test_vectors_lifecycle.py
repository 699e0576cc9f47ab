"""An index's life after its first load (issue 52), against the S3 Vectors stand-in (segmented
ListVectors, the per-index limits, counts per second: what moto lacks), each result checked from
the server's side."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import S3BULK, run_cli

from s3bulk._vectors.digest import without_hash
from s3bulk.testing.vectorstandin import VectorsStandInServer

_names = itertools.count()
DIMENSION = 256  # 1 KiB a vector: a 1 MiB part holds 1,024
# the client's write limits lifted where the rate is not what a test is about (the stand-in's
# own are too): a load of 10,000 vectors at the published 2,500/s would take 4 s
LIFTED = ("--vectors-per-second", "1000000", "--requests-per-second", "100000")


@pytest.fixture
def env(standin: VectorsStandInServer) -> dict[str, str]:
    clean = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    return clean | standin.client_env()


def new_index(env: dict[str, str], dimension: int = DIMENSION, bucket: str | None = None) -> tuple[str, str]:
    """A new index, in a new vector bucket unless `bucket` names one."""
    index = f"idx-{next(_names)}"
    if bucket is None:
        bucket = f"vb-{os.getpid()}-{next(_names)}"
        made = run_cli(env, "vectors", "create-bucket", bucket)
        assert made.returncode == 0, made.stderr
    made = run_cli(
        env, "vectors", "create-index", "--bucket", bucket, "--index", index, "--dimension", str(dimension)
    )
    assert made.returncode == 0, made.stderr
    return bucket, index


def load(
    env: dict[str, str], path: Path, bucket: str, index: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """`vectors put` of a source into an index, at lifted limits."""
    return run_cli(env, "vectors", "put", *LIFTED, str(path), "--bucket", bucket, "--index", index, *options)


def last_job(env: dict[str, str], command: str) -> str:
    """The newest job of `command` (vectors-delete, ...): a load just before it may share its
    second, so the newest job of all is not always it."""
    listed = run_cli(env, "jobs", "--json").stdout.strip().splitlines()
    return next(str(job["job_id"]) for job in map(orjson.loads, listed) if job["command"] == command)


def source(path: Path, rows: int, seed: int = 3) -> tuple[Path, np.ndarray, list[str]]:
    vectors = np.random.default_rng(seed).standard_normal((rows, DIMENSION)).astype(np.float32)
    genres = [f"g{n % 7}" for n in range(rows)]
    table = pa.table(
        {
            "key": [f"doc-{n:06d}" for n in range(rows)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION),
            "genre": genres,
        }
    )
    pq.write_table(table, path, row_group_size=2000)
    return path, vectors, genres


def contents(standin: VectorsStandInServer, bucket: str, index: str) -> dict[str, tuple[bytes, Any]]:
    """The index as the server holds it: key -> (float32 bytes, metadata)."""
    import asyncio

    from s3bulk._config import AwsSettings
    from s3bulk._stores.vectors import VectorsClient

    async def listed() -> dict[str, tuple[bytes, Any]]:
        client = VectorsClient(AwsSettings.from_env(vectors_endpoint_url=standin.endpoint))
        found: dict[str, tuple[bytes, Any]] = {}
        try:
            async for page, _ in client.list_pages(bucket, index, data=True, metadata=True):
                for entry in page:
                    data = np.array(entry["data"]["float32"], dtype=np.float32).tobytes()
                    found[entry["key"]] = (data, entry.get("metadata"))
        finally:
            await client.close()
        return found

    with pytest.MonkeyPatch.context() as patch:
        for name, value in standin.client_env().items():
            patch.setenv(name, value)
        return asyncio.run(listed())


def summary(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    return dict(orjson.loads(result.stdout.strip().splitlines()[-1])["summary"])


def exported_rows(directory: Path) -> pa.Table:
    return pq.ParquetDataset(sorted(str(path) for path in directory.rglob("*.parquet"))).read()


# ---- export -------------------------------------------------------------------------------------
def test_export_then_put_into_a_new_index_gives_an_equal_index(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, vectors, genres = source(tmp_path / "docs.parquet", 5000)
    bucket, index = new_index(env)
    loaded = load(env, path, bucket, index, "--metadata-columns", "genre")
    assert loaded.returncode == 0, loaded.stderr
    out = tmp_path / "out"

    exported = run_cli(
        env, "vectors", "export", str(out), "--bucket", bucket, "--index", index,
        "--segments", "4", "--part-size", "1MiB", "--json",
    )  # fmt: skip

    assert exported.returncode == 0, exported.stderr
    report = summary(exported)
    assert report["vectors_done"] == 5000
    # 4 segments of ~1,250 vectors: 2 pages each (at most 1,000 a page), and a part once the
    # pages hold 1 MiB of vectors (1,024) or the segment ends: one part each
    assert report["requests"]["ListVectors"] == 8 and report["objects_done"] == 4
    table = exported_rows(out / index)
    assert table.num_rows == 5000 and len(set(table.column("key").to_pylist())) == 5000
    row = table.to_pylist()[123]
    number = int(row["key"].split("-")[1])
    assert np.array(row["vector"], dtype=np.float32).tobytes() == vectors[number].tobytes()
    assert orjson.loads(row["metadata"]) == {"genre": genres[number]}  # without s3bulk's content hash

    kept = run_cli(
        env,
        "vectors",
        "export",
        str(tmp_path / "kept"),
        "--bucket",
        bucket,
        "--index",
        index,
        "--content-hash",
    )
    assert kept.returncode == 0, kept.stderr
    asked = orjson.loads(exported_rows(tmp_path / "kept" / index).to_pylist()[0]["metadata"])
    assert set(asked) == {"genre", "s3bulk_hash"}  # s3bulk's own key, handed back when asked for

    _, copy = new_index(env, bucket=bucket)
    reloaded = run_cli(env, "vectors", "put", *LIFTED, str(out / index), "--bucket", bucket, "--index", copy)
    assert reloaded.returncode == 0, reloaded.stderr
    assert "metadata as JSON from column 'metadata'" in reloaded.stderr + reloaded.stdout
    original = contents(standin, bucket, index)
    assert len(original) == 5000 and contents(standin, bucket, copy) == original


def test_a_killed_export_resumes_from_each_segments_last_file(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, _, _ = source(tmp_path / "docs.parquet", 8000)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index).returncode == 0
    out = tmp_path / "out"
    export = [*S3BULK, "vectors", "export", str(out), "--bucket", bucket, "--index", index]
    before = standin.stats()["requests"].get("ListVectors", 0)
    # two pages of each of the 2 segments, a part each: held per segment, as the segments list
    # side by side (a count over all requests could fall 3 and 1, and the wait below never end)
    standin.hold_pages(2)
    process = subprocess.Popen(
        [*export, "--segments", "2", "--part-size", "1MiB"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        while standin.stats()["held"] < 2 or len(list(out.rglob("s*.parquet"))) < 2:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        standin.release()
    assert not list(out.rglob("*.partial"))  # nothing half-written is left as a part
    first_run = standin.stats()["requests"]["ListVectors"] - before
    job = orjson.loads((out / ".s3bulk-export").read_bytes())["job"]

    refused = run_cli(env, "vectors", "export", str(out), "--bucket", bucket, "--index", index)
    assert refused.returncode == 2 and f"resume it (s3bulk vectors export --resume {job})" in refused.stderr

    resumed = run_cli(env, "vectors", "export", "--resume", job, "--json")
    assert resumed.returncode == 0, resumed.stderr
    table = exported_rows(out / index)
    assert table.num_rows == 8000 and len(set(table.column("key").to_pylist())) == 8000
    # the resume listed on from each segment's last part: 8 pages in all, not 8 more
    total = standin.stats()["requests"]["ListVectors"] - before
    assert total <= 8 + first_run - 4 + 2, (first_run, total)
    assert set(contents(standin, bucket, index)) == set(table.column("key").to_pylist())
    again = run_cli(env, "vectors", "export", str(out), "--bucket", bucket, "--index", index)
    assert again.returncode == 2 and "holds a finished export" in again.stderr


def test_export_refuses_what_it_cannot_do_before_anything_is_written(
    env: dict[str, str], tmp_path: Path
) -> None:
    bucket, index = new_index(env)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep")
    cases = {
        ("--index", "nope"): "index 'nope' not found",
        ("--index", index, "--segments", "17"): "1 to 16 segments",
        ("--index", index, "--part-size", "1KiB"): "at least 1MiB",
    }
    for extra, said in cases.items():
        result = run_cli(env, "vectors", "export", str(tmp_path / "new"), "--bucket", bucket, *extra)
        assert result.returncode == 2 and said in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    result = run_cli(env, "vectors", "export", str(tmp_path / "full"), "--bucket", bucket, "--index", index)
    assert result.returncode == 2 and "is not empty" in result.stderr
    assert (tmp_path / "full" / "mine.txt").read_text() == "keep" and not (tmp_path / "new").exists()


def test_a_listing_whose_token_comes_round_again_stops_with_an_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A service that hands back the token it was given would make a listing go on forever (an
    export without end, a count that never returns): it is an error after the first repeat."""
    with VectorsStandInServer(vectors_per_second=0, requests_per_second=0) as server:
        env = env | server.client_env()
        path, _, _ = source(tmp_path / "docs.parquet", 2500)
        bucket, index = new_index(env)
        assert load(env, path, bucket, index).returncode == 0
        server.repeat_tokens()
        counted = run_cli(env, "vectors", "count", "--bucket", bucket, "--index", index, "--segments", "1")
        exported = run_cli(
            env,
            "vectors",
            "export",
            str(tmp_path / "out"),
            "--bucket",
            bucket,
            "--index",
            index,
            "--segments",
            "1",
        )
        requests = server.stats()["requests"]["ListVectors"]
    said = "gave a continuation token it had given before"
    assert counted.returncode != 0 and said in counted.stderr, counted.stderr
    assert exported.returncode != 0 and said in exported.stderr + exported.stdout, exported.stderr
    assert requests <= 2 * 3  # each: page 1, page 2 (its token), page 2 again: stopped there


# ---- copy ---------------------------------------------------------------------------------------
def index_metric(server: VectorsStandInServer, bucket: str, index: str) -> str:
    import boto3

    client = boto3.client(
        "s3vectors",
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
    )
    return str(client.get_index(vectorBucketName=bucket, indexName=index)["index"]["distanceMetric"])


def test_copy_into_a_new_index_elsewhere_with_another_metric_gives_an_equal_index(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """The source on one server (another account's endpoint), the copy on another, made by
    --create with the other metric: every key, float32 value and metadata entry equal, and the
    content hashes kept, so a sync from the source afterwards finds nothing to do."""
    path, _, _ = source(tmp_path / "docs.parquet", 5000)
    bucket, index = new_index(env)
    loaded = load(env, path, bucket, index, "--metadata-columns", "genre")
    assert loaded.returncode == 0, loaded.stderr
    with VectorsStandInServer(vectors_per_second=0, requests_per_second=0) as mine:
        here = env | mine.client_env()
        made = run_cli(here, "vectors", "create-bucket", "mine")
        assert made.returncode == 0, made.stderr

        copied = run_cli(
            here, "vectors", "copy", *LIFTED, "--bucket", bucket, "--index", index, "--to-bucket", "mine",
            "--to-index", "docs-l2", "--create", "--metric", "euclidean",
            "--source-endpoint-url", standin.endpoint, "--json",
        )  # fmt: skip

        assert copied.returncode == 0, copied.stderr
        report = summary(copied)
        assert report["vectors_done"] == 5000
        assert "created mine/docs-l2 (256 dimensions, euclidean)" in report["notes"]
        assert index_metric(mine, "mine", "docs-l2") == "euclidean"
        assert contents(mine, "mine", "docs-l2") == contents(standin, bucket, index)
        synced = run_cli(
            here, "vectors", "sync", *LIFTED, str(path), "--bucket", "mine", "--index", "docs-l2",
            "--metadata-columns", "genre", "--delete", "--json",
        )  # fmt: skip
        assert synced.returncode == 0, synced.stderr
        assert summary(synced)["objects_unchanged"] == 5000 and summary(synced)["vectors_done"] == 0
        assert mine.stats()["requests"].get("GetVectors", 0) == 0  # compared by the copied hashes


def test_a_killed_copy_resumed_sends_only_what_it_had_not_stored(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, _, _ = source(tmp_path / "docs.parquet", 12_000)
    bucket, index = new_index(env)
    loaded = load(env, path, bucket, index, "--metadata-columns", "genre")
    assert loaded.returncode == 0, loaded.stderr
    with VectorsStandInServer(vectors_per_second=0, requests_per_second=0) as mine:
        here = env | mine.client_env()
        assert run_cli(here, "vectors", "create-bucket", "mine").returncode == 0
        copy = [
            *S3BULK, "vectors", "copy", *LIFTED, "--bucket", bucket, "--index", index, "--to-bucket", "mine",
            "--to-index", "copy", "--create", "--source-endpoint-url", standin.endpoint,
            "--concurrency", "2",  # few in flight: a held PutVectors is stored, only its answer waits
        ]  # fmt: skip
        mine.hold_after(2 + 10)  # GetIndex, CreateIndex, 10 PutVectors; the rest wait
        process = subprocess.Popen(
            copy, env=here, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            while mine.stats()["held"] < 1:
                assert process.poll() is None, process.communicate()
                time.sleep(0.05)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            mine.release()
        stored_before = len(contents(mine, "mine", "copy"))
        assert 0 < stored_before < 12_000
        puts_before = mine.stats()["requests"]["PutVectors"]
        job = last_job(here, "vectors-copy")
        listed = run_cli(here, "jobs").stdout  # how to go on, as the user runs it
        assert f"continue: s3bulk vectors copy --resume {job}" in listed, listed

        resumed = run_cli(here, "vectors", "copy", "--resume", job, "--json")

        assert resumed.returncode == 0, resumed.stderr
        report = summary(resumed)
        assert report["objects_already_done"] >= 1  # batches the killed run stored and journaled
        assert report["vectors_done"] < 12_000
        assert mine.stats()["requests"]["PutVectors"] - puts_before == report["objects_done"]
        assert contents(mine, "mine", "copy") == contents(standin, bucket, index)


def test_copy_refuses_what_it_cannot_do_before_anything_is_sent(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, _, _ = source(tmp_path / "docs.parquet", 100)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index).returncode == 0
    _, narrow = new_index(env, dimension=8, bucket=bucket)
    _, other = new_index(env, bucket=bucket)
    before = standin.stats()["requests"]
    cases = {
        ("--to-index", narrow): f"index {bucket}/{narrow} holds vectors of 8 values, the source 256",
        ("--to-index", "absent"): f"index {bucket}/absent not found: pass --create",
        ("--to-index", index): "copy into another index",
        ("--to-index", other, "--create", "--metric", "euclidean"): "exists with metric cosine",
        (
            "--to-index",
            "new",
            "--metric",
            "euclidean",
        ): "--metric and --non-filterable shape the index --create",
        (
            "--to-index",
            "new",
            "--create",
            "--metric",
            "manhattan",
        ): "--metric 'manhattan': use cosine or euclidean",
    }
    for args, said in cases.items():
        result = run_cli(env, "vectors", "copy", *LIFTED, "--bucket", bucket, "--index", index, *args)
        assert result.returncode == 2 and said in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    after = standin.stats()["requests"]
    for operation in ("PutVectors", "CreateIndex", "ListVectors"):
        assert after.get(operation, 0) == before.get(operation, 0), operation


def test_a_listing_page_that_answers_200_with_an_error_is_an_error_not_the_end(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A ListVectors that answers 200 with an error's body (no vectors, no token) is not the end
    of a segment, where an export took it for one and was marked finished with part of the
    index: retried, the export is whole; a count that meets nothing else fails, not short."""
    with VectorsStandInServer(vectors_per_second=0, requests_per_second=0) as server:
        env = env | server.client_env()
        path = small_source(tmp_path / "docs.parquet", 20_000)  # segments of two pages
        bucket, index = new_index(env, dimension=4)
        assert load(env, path, bucket, index, "--metadata-columns", "genre").returncode == 0
        server.error_pages(after=20, times=6)  # some segments' first pages, then six errors
        out = tmp_path / "out"
        exported = run_cli(env, "vectors", "export", str(out), "--bucket", bucket, "--index", index, "--json")
        server.error_pages(after=0)  # from now on, every page
        counted = run_cli(
            env | {"AWS_MAX_ATTEMPTS": "2"}, "vectors", "count", "--bucket", bucket, "--index", index
        )
    assert exported.returncode == 0, exported.stderr
    assert summary(exported)["vectors_done"] == 20_000
    assert orjson.loads((out / ".s3bulk-export").read_text())["finished"]
    assert sorted(exported_rows(out).column("key").to_pylist()) == [f"doc-{n:06d}" for n in range(20_000)]
    said = "the service answered 200 with an error's body"
    assert counted.returncode != 0 and said in counted.stderr, counted.stderr


# ---- delete -------------------------------------------------------------------------------------
def test_delete_by_key_list_and_by_parquet_keys_leaves_the_rest(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, _, _ = source(tmp_path / "docs.parquet", 3000)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index).returncode == 0
    gone = [f"doc-{n:06d}" for n in range(0, 3000, 3)]  # 1,000 keys
    listed = tmp_path / "gone.txt"
    listed.write_text("\n".join([*gone, "", "  ", "doc-000000", "never-loaded"]) + "\n")
    before = standin.stats()["requests"].get("DeleteVectors", 0)

    planned = run_cli(
        env, "vectors", "delete", str(listed), "--bucket", bucket, "--index", index, "--dry-run"
    )
    assert planned.returncode == 0, planned.stderr
    said = planned.stdout + planned.stderr
    assert "1,001 vectors in 3 requests into 1 index: at least 0.4 s at 2,500 vectors/s" in said, said
    assert standin.stats()["requests"].get("DeleteVectors", 0) == before
    assert len(contents(standin, bucket, index)) == 3000

    deleted = run_cli(env, "vectors", "delete", str(listed), "--bucket", bucket, "--index", index, "--json")
    assert deleted.returncode == 0, deleted.stderr
    # 1,001 distinct keys (blank lines left out, the repeated key once): 500 + 500 + 1
    assert summary(deleted)["vectors_done"] == 1001
    assert standin.stats()["requests"]["DeleteVectors"] - before == 3
    left = contents(standin, bucket, index)
    assert len(left) == 2000 and not set(gone) & set(left)

    some = pq.read_table(path).slice(1, 600)  # rows 1-600: 400 of them still there
    pq.write_table(some, tmp_path / "some.parquet")
    by_source = run_cli(
        env, "vectors", "delete", str(tmp_path / "some.parquet"), "--bucket", bucket, "--index", index,
        "--max-delete", "450", "--concurrency", "1", "--json",
    )  # fmt: skip
    assert by_source.returncode == 1, by_source.stderr  # stopped by the cap, as rm is
    assert "--max-delete 450 reached" in by_source.stdout + by_source.stderr
    assert summary(by_source)["vectors_done"] == 450
    first = set(some.column("key").to_pylist()[:450])  # in the file's order, one request at a time
    assert set(contents(standin, bucket, index)) == set(left) - first


def test_delete_from_stdin_resumes_after_a_kill_and_refuses_bad_input(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, _, _ = source(tmp_path / "docs.parquet", 4000)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index).returncode == 0
    keys = "".join(f"doc-{n:06d}\n" for n in range(4000))
    standin.hold_after(1 + 3)  # GetIndex, three DeleteVectors; the rest wait
    delete = [*S3BULK, "vectors", "delete", "--files-from", "-", "--bucket", bucket, "--index", index]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    process = subprocess.Popen(delete, env=env, start_new_session=True, **pipes)  # type: ignore[call-overload]
    assert process.stdin is not None
    process.stdin.write(keys.encode())
    process.stdin.close()
    try:
        while standin.stats()["held"] < 1:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        standin.release()
    job = last_job(env, "vectors-delete")
    resumed = run_cli(env, "vectors", "delete", "--resume", job, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert summary(resumed)["objects_already_done"] >= 1  # what the killed run finished is not sent
    assert contents(standin, bucket, index) == {}

    cases = {
        (str(path),): "missing arguments: see s3bulk vectors delete --help",  # no index
        (str(path), "--index", index, "--files-from", str(path)): "name the keys once",
        ("--index", index): "name the keys once",
        (str(path), "--index", "nope"): "index 'nope' not found",
        (str(path), "--index", index, "--max-delete", "-1"): "--max-delete -1",
    }
    for args, said in cases.items():
        result = run_cli(env, "vectors", "delete", "--bucket", bucket, *args)
        assert result.returncode == 2 and said in result.stderr, (args, result.stderr)


def test_delete_by_filter_deletes_each_indexs_matches_from_that_index(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """Two indexes holding the same keys with other metadata (loaded one by one, not sharded):
    each loses exactly its own matches, counted by a dry run first, found by listing it."""
    path, _, genres = source(tmp_path / "docs.parquet", 3000)
    bucket, first = new_index(env)
    _, second = new_index(env, bucket=bucket)
    shifted = pq.read_table(path).set_column(2, "genre", pa.array([f"g{(n + 1) % 7}" for n in range(3000)]))
    pq.write_table(shifted, tmp_path / "shifted.parquet")
    for index, loaded in ((first, path), (second, tmp_path / "shifted.parquet")):
        put = load(env, loaded, bucket, index, "--metadata-columns", "genre")
        assert put.returncode == 0, put.stderr
    where = ["--bucket", bucket, "--index", first, "--index", second]
    condition = '{"$or": [{"genre": "g3"}, {"genre": {"$in": ["g5"]}}]}'
    before = standin.stats()["requests"].get("DeleteVectors", 0)

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    planned = run_cli(
        env | {"TMPDIR": str(scratch)}, "vectors", "delete", *where, "--filter", condition, "--dry-run"
    )
    assert planned.returncode == 0, planned.stderr
    assert not list(scratch.glob("s3bulk-filter-*"))  # a dry run keeps no list of matches
    said = planned.stdout + planned.stderr
    matched = {index: sum(genre in ("g3", "g5") for genre in kept) for index, kept in
               ((first, genres), (second, shifted.column("genre").to_pylist()))}  # fmt: skip
    for index, count in matched.items():
        assert f"{index}: 3,000 vectors listed" in said and f"{count:,} match the filter" in said, said
    assert standin.stats()["requests"].get("DeleteVectors", 0) == before

    deleted = run_cli(env, "vectors", "delete", *where, "--filter", condition, "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert summary(deleted)["vectors_done"] == sum(matched.values())
    for index, loaded in ((first, path), (second, tmp_path / "shifted.parquet")):
        table = pq.read_table(loaded)
        keep = {key for key, genre in zip(table["key"].to_pylist(), table["genre"].to_pylist(), strict=True)
                if genre not in ("g3", "g5")}  # fmt: skip
        assert set(contents(standin, bucket, index)) == keep, index


def small_source(path: Path, rows: int, genres: list[str] | None = None, first: int = 0) -> Path:
    """Vectors of 4 values (quick to load and list), genre g0-g6 by row unless given."""
    vectors = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
    table = {
        "key": [f"doc-{n:06d}" for n in range(first, first + rows)],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4),
        "genre": genres or [f"g{n % 7}" for n in range(first, first + rows)],
    }
    pq.write_table(pa.table(table), path)
    return path


def test_a_killed_delete_by_filter_resumed_deletes_what_the_first_listing_found(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """A resume goes on with the matches listed when the job began: a vector that came to match
    afterwards is not deleted by it (a new run would list again)."""
    path = small_source(tmp_path / "docs.parquet", 14_000)  # a page per segment
    bucket, index = new_index(env, dimension=4)
    where = ["--bucket", bucket, "--index", index, "--metadata-columns", "genre"]
    assert run_cli(env, "vectors", "put", *LIFTED, str(path), *where).returncode == 0
    delete = [
        *S3BULK,
        "vectors",
        "delete",
        "--bucket",
        bucket,
        "--index",
        index,
        "--filter",
        '{"genre": "g1"}',
    ]
    standin.hold_after(1 + 16 + 3)  # GetIndex, the 16 segments' pages, 3 DeleteVectors of 4
    process = subprocess.Popen(
        delete, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        while standin.stats()["held"] < 1:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        standin.release()
    job = last_job(env, "vectors-delete")
    late = small_source(tmp_path / "late.parquet", 1, genres=["g1"], first=99_000)
    assert run_cli(env, "vectors", "put", *LIFTED, str(late), *where).returncode == 0

    resumed = run_cli(env, "vectors", "delete", "--resume", job, "--json")

    assert resumed.returncode == 0, resumed.stderr
    assert summary(resumed)["objects_already_done"] >= 1  # what the killed run finished is not sent
    left = set(contents(standin, bucket, index))
    assert left == {f"doc-{n:06d}" for n in range(14_000) if n % 7 != 1} | {"doc-099000"}


def test_delete_by_filter_after_a_listing_that_broke_deletes_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    """What a filter deletes rests on a complete listing: one that fails part-way stops the job
    before any DeleteVectors, and leaves no list of matches for a resume to trust."""
    with VectorsStandInServer(vectors_per_second=0, requests_per_second=0) as server:
        env = env | server.client_env()
        path = small_source(tmp_path / "docs.parquet", 33_000)  # segments of three pages
        bucket, index = new_index(env, dimension=4)
        put = load(env, path, bucket, index, "--metadata-columns", "genre")
        assert put.returncode == 0, put.stderr
        server.repeat_tokens()
        deleted = run_cli(
            env, "vectors", "delete", "--bucket", bucket, "--index", index, "--filter", '{"genre": "g1"}'
        )
        sent = server.stats()["requests"].get("DeleteVectors", 0)
        held = server.stats()
    assert deleted.returncode != 0, deleted.stdout
    assert "gave a continuation token it had given before" in deleted.stderr + deleted.stdout, deleted.stderr
    assert sent == 0, held
    assert not list(Path(os.environ["S3BULK_STATE_DIR"]).glob(f"*.{index}.matches.parquet*"))


# ---- several indexes at once ---------------------------------------------------------------------
def test_put_index_per_file_loads_each_file_into_the_index_named_after_it(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """Two files of different dimensions, one job: each file's rows in its own index (checked
    against that index's shape, not the other's), nothing in the other."""
    bucket = f"vb-{os.getpid()}-{next(_names)}"
    assert run_cli(env, "vectors", "create-bucket", bucket).returncode == 0
    files = tmp_path / "by-file"
    files.mkdir()
    expected = {}
    for name, dimension, rows in (("films-2023", 8, 700), ("films-2024", 16, 1200)):
        made = run_cli(
            env, "vectors", "create-index", "--bucket", bucket, "--index", name, "--dimension", str(dimension)
        )
        assert made.returncode == 0, made.stderr
        vectors = np.random.default_rng(dimension).standard_normal((rows, dimension)).astype(np.float32)
        keys = [f"{name[-2:]}-{n}" for n in range(rows)]
        flat = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension)
        pq.write_table(pa.table({"key": keys, "vector": flat}), files / f"{name}.parquet")
        expected[name] = {key: vectors[n].tobytes() for n, key in enumerate(keys)}

    loaded = run_cli(
        env, "vectors", "put", *LIFTED, str(files), "--bucket", bucket, "--index-per-file", "--json"
    )

    assert loaded.returncode == 0, loaded.stderr
    assert summary(loaded)["vectors_done"] == 1900
    for name, stored in expected.items():
        assert {key: data for key, (data, _) in contents(standin, bucket, name).items()} == stored, name

    (files / "Films 2025.parquet").write_bytes((files / "films-2023.parquet").read_bytes())
    refused = run_cli(env, "vectors", "put", *LIFTED, str(files), "--bucket", bucket, "--index-per-file")
    assert refused.returncode == 2 and "'Films 2025', which S3 Vectors refuses" in refused.stderr
    both = run_cli(
        env, "vectors", "put", *LIFTED, str(files), "--bucket", bucket, "--index-per-file", "--index", "x"
    )
    assert both.returncode == 2 and "leave out --index" in both.stderr


# ---- the bill and the time before the run -------------------------------------------------------
def test_put_dry_run_checks_every_row_sends_nothing_and_states_cost_and_time(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, _, _ = source(tmp_path / "docs.parquet", 6000)
    bucket, first = new_index(env)
    _, second = new_index(env, bucket=bucket)
    before = standin.stats()["requests"].get("PutVectors", 0)

    planned = run_cli(
        env, "vectors", "put", str(path), "--bucket", bucket, "--index", first, "--index", second, "--dry-run"
    )

    assert planned.returncode == 0, planned.stderr
    said = planned.stdout + planned.stderr
    assert "vectors put would do: 6,000 vectors in" in said
    # 6,000 x 256 float32 = 5.86 MiB; at 2,500 vectors/s per index, two indexes: 1.2 s at least
    assert "0.01 GB of vector data: PutVectors $0.00, storage $0.00/month (S3 Vectors prices" in said
    assert "6,000 vectors in" in said and "across 2 indexes: at least 1.2 s at 2,500 vectors/s" in said
    assert standin.stats()["requests"].get("PutVectors", 0) == before
    assert contents(standin, bucket, first) == {} and contents(standin, bucket, second) == {}


# ---- query --------------------------------------------------------------------------------------
def test_query_writes_each_querys_answers_and_measures_recall(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, vectors, genres = source(tmp_path / "docs.parquet", 3000)
    bucket, index = new_index(env)
    loaded = load(env, path, bucket, index, "--metadata-columns", "genre")
    assert loaded.returncode == 0, loaded.stderr
    queries = vectors[:600] + np.float32(0.01)  # near rows 0-599: each one's nearest is its row
    table = pa.table(
        {
            "key": [f"q{n}" for n in range(600)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(queries.ravel()), DIMENSION),
        }
    )
    pq.write_table(table, tmp_path / "queries.parquet")
    before = standin.stats()["requests"].get("QueryVectors", 0)

    asked = run_cli(
        env, "vectors", "query", str(tmp_path / "queries.parquet"), "--bucket", bucket, "--index", index,
        "-k", "5", "-o", str(tmp_path / "results"), "--recall", "50", "--json",
    )  # fmt: skip

    assert asked.returncode == 0, asked.stderr
    report = summary(asked)
    assert report["vectors_done"] == 600
    assert standin.stats()["requests"]["QueryVectors"] - before == 600
    results = pq.ParquetDataset(sorted(str(p) for p in (tmp_path / "results").glob("*.parquet"))).read()
    assert results.num_rows == 600 * 5
    rows = results.to_pylist()
    first = {row["query"]: row for row in rows if row["rank"] == 1}
    assert all(first[f"q{n}"]["key"] == f"doc-{n:06d}" for n in range(600))  # the service's answers
    assert orjson.loads(first["q7"]["metadata"]) == {"genre": genres[7]}  # without s3bulk's content hash
    # the stand-in searches exactly: recall 1.0, measured by listing the whole index with its data
    assert any("recall@5 over 50 sampled queries: 1.000" in note for note in report["notes"]), report["notes"]

    filtered = run_cli(
        env, "vectors", "query", str(tmp_path / "queries.parquet"), "--bucket", bucket, "--index", index,
        "-k", "3", "-o", str(tmp_path / "g1"), "--filter", '{"genre": "g1"}',
    )  # fmt: skip
    assert filtered.returncode == 0, filtered.stderr
    answers = pq.ParquetDataset(sorted(str(p) for p in (tmp_path / "g1").glob("*.parquet"))).read()
    assert {orjson.loads(text)["genre"] for text in answers.column("metadata").to_pylist()} == {"g1"}
    bad = run_cli(
        env, "vectors", "query", str(tmp_path / "queries.parquet"), "--bucket", bucket, "--index", index,
        "-o", str(tmp_path / "bad"), "--filter", "{genre: g1}",
    )  # fmt: skip
    assert bad.returncode == 2 and "--filter '{genre: g1}': not JSON" in bad.stderr


# ---- sync ---------------------------------------------------------------------------------------
def stored_as_source(standin: VectorsStandInServer, bucket: str, index: str) -> dict[str, tuple[bytes, Any]]:
    """The index's contents with each vector's metadata as the user gave it (no content hash)."""
    return {key: (data, without_hash(meta)) for key, (data, meta) in contents(standin, bucket, index).items()}


def source_contents(path: Path) -> dict[str, tuple[bytes, Any]]:
    table = pq.read_table(path).to_pylist()
    return {
        row["key"]: (np.array(row["vector"], dtype=np.float32).tobytes(), {"genre": row["genre"]})
        for row in table
    }


def test_sync_puts_what_changed_deletes_what_is_gone_and_then_has_nothing_to_do(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, vectors, genres = source(tmp_path / "docs.parquet", 3000)
    bucket, index = new_index(env)
    sync = [
        "vectors",
        "sync",
        *LIFTED,
        "--bucket",
        bucket,
        "--index",
        index,
        "--metadata-columns",
        "genre",
        "--json",
    ]

    first = run_cli(env, *sync[:2], str(path), *sync[2:])
    assert first.returncode == 0, first.stderr
    assert summary(first)["vectors_done"] == 3000 and stored_as_source(
        standin, bucket, index
    ) == source_contents(path)

    puts = standin.stats()["requests"]["PutVectors"]
    again = run_cli(env, *sync[:2], str(path), *sync[2:])
    assert again.returncode == 0, again.stderr
    assert summary(again)["vectors_done"] == 0 and summary(again)["objects_unchanged"] == 3000
    assert standin.stats()["requests"]["PutVectors"] == puts  # equal by the hashes listed: nothing sent

    changed = vectors.copy()
    changed[0:30] += 1.0  # 30 vectors changed
    genres = list(genres)
    genres[100:130] = ["moved"] * 30  # 30 rows' metadata changed
    keep = [n for n in range(3000) if not 200 <= n < 230]  # 30 rows gone from the source
    keys = [f"doc-{n:06d}" for n in keep] + [f"new-{n}" for n in range(30)]  # 30 new
    rows = np.concatenate([changed[keep], np.random.default_rng(9).standard_normal((30, DIMENSION))]).astype(
        np.float32
    )
    table = pa.table(
        {
            "key": keys,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), DIMENSION),
            "genre": [genres[n] for n in keep] + ["new"] * 30,
        }
    )
    edited = tmp_path / "edited.parquet"
    pq.write_table(table, edited, row_group_size=700)

    planned = run_cli(env, *sync[:2], str(edited), *sync[2:], "--delete", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "(90 to put, 30 to delete)" in planned.stdout + planned.stderr
    assert len(contents(standin, bucket, index)) == 3000

    synced = run_cli(env, *sync[:2], str(edited), *sync[2:], "--delete")
    assert synced.returncode == 0, synced.stderr
    report = summary(synced)
    assert (report["vectors_done"], report["objects_deleted"], report["objects_unchanged"]) == (90, 30, 2910)
    assert stored_as_source(standin, bucket, index) == source_contents(edited)
    settled = run_cli(env, *sync[:2], str(edited), *sync[2:], "--delete")
    assert summary(settled)["vectors_done"] == 0 and summary(settled)["objects_deleted"] == 0

    empty = tmp_path / "empty.parquet"
    pq.write_table(table.slice(0, 0), empty)
    refused = run_cli(env, *sync[:2], str(empty), *sync[2:], "--delete")
    assert refused.returncode == 2 and "--allow-empty-source" in refused.stderr
    assert len(contents(standin, bucket, index)) == 3000


def test_sync_compares_vectors_stored_without_a_hash_by_reading_them_back(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """An index another tool loaded has no content hashes: equal vectors are read back
    (GetVectors, 100 a request) and left alone; only the different ones are put."""
    import asyncio

    from s3bulk._config import AwsSettings
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.payload import put_vectors_body

    path, vectors, genres = source(tmp_path / "docs.parquet", 1000)
    bucket, index = new_index(env)
    other = vectors.copy()
    other[:10] *= 2.0  # the other tool's copy differs in 10 rows

    async def load_without_hashes() -> None:
        client = VectorsClient(AwsSettings.from_env(vectors_endpoint_url=standin.endpoint))
        try:
            for start in range(0, 1000, 500):
                keys = [f"doc-{n:06d}" for n in range(start, start + 500)]
                metadata = [{"genre": genres[n]} for n in range(start, start + 500)]
                await client.put_vectors(
                    put_vectors_body(bucket, index, keys, other[start : start + 500], metadata)
                )
        finally:
            await client.close()

    with pytest.MonkeyPatch.context() as patch:
        for name, value in standin.client_env().items():
            patch.setenv(name, value)
        asyncio.run(load_without_hashes())
    gets = standin.stats()["requests"].get("GetVectors", 0)

    synced = run_cli(
        env,
        "vectors",
        "sync",
        *LIFTED,
        str(path),
        "--bucket",
        bucket,
        "--index",
        index,
        "--metadata-columns",
        "genre",
        "--json",
    )

    assert synced.returncode == 0, synced.stderr
    report = summary(synced)
    assert report["vectors_done"] == 10 and report["objects_unchanged"] == 990
    assert standin.stats()["requests"]["GetVectors"] - gets == 10  # 1,000 keys, 100 a request
    assert stored_as_source(standin, bucket, index) == source_contents(path)


def test_a_killed_sync_resumed_plans_again_and_sends_only_the_rest(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, _, _ = source(tmp_path / "docs.parquet", 6000)
    bucket, index = new_index(env)
    sync = [
        *S3BULK,
        "vectors",
        "sync",
        *LIFTED,
        str(path),
        "--bucket",
        bucket,
        "--index",
        index,
        "--metadata-columns",
        "genre",
        "--concurrency",
        "2",  # few in flight: a held PutVectors is stored, only its answer waits
    ]
    standin.hold_after(1 + 16 + 4)  # GetIndex, the 16 segments' listing, then 4 PutVectors of 12
    process = subprocess.Popen(
        sync, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        while standin.stats()["held"] < 1:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        standin.release()
    stored_before = len(contents(standin, bucket, index))
    assert 2000 <= stored_before < 6000
    job = last_job(env, "vectors-sync")

    resumed = run_cli(env, "vectors", "sync", "--resume", job, "--json")

    assert resumed.returncode == 0, resumed.stderr
    report = summary(resumed)
    assert report["objects_unchanged"] == stored_before and report["vectors_done"] == 6000 - stored_before
    assert stored_as_source(standin, bucket, index) == source_contents(path)


def test_sync_delete_never_deletes_a_key_whose_source_row_is_bad(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """A row the source has but cannot be loaded (no vector) stops the sync as put stops; its
    key is the source's all the same, so --delete leaves its stored vector alone."""
    path, vectors, _ = source(tmp_path / "docs.parquet", 1200)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index).returncode == 0
    rows: list[Any] = [vectors[n].tolist() for n in range(1200)]
    rows[5] = None  # a row whose vector the reader cannot read at all
    table = pa.table(
        {
            "key": [f"doc-{n:06d}" for n in range(1200)],
            "vector": pa.array(rows, type=pa.list_(pa.float32(), DIMENSION)),
        }
    )
    pq.write_table(table, tmp_path / "broken.parquet")

    synced = run_cli(
        env,
        "vectors",
        "sync",
        *LIFTED,
        str(tmp_path / "broken.parquet"),
        "--bucket",
        bucket,
        "--index",
        index,
        "--delete",
    )

    assert synced.returncode != 0 and "row 5 of" in synced.stderr, synced.stderr
    assert "doc-000005" in contents(standin, bucket, index) and len(contents(standin, bucket, index)) == 1200
    assert _planned_deletes(standin, tmp_path / "broken.parquet", bucket, index) == []  # not even planned


def _planned_deletes(standin: VectorsStandInServer, path: Path, bucket: str, index: str) -> list[str]:
    import asyncio

    from s3bulk._config import AwsSettings
    from s3bulk._sources.embeddings import EmbeddingSpec
    from s3bulk._stores.vectors import VectorsClient
    from s3bulk._vectors.sync import plan_sync

    async def planned() -> list[str]:
        settings = AwsSettings.from_env(vectors_endpoint_url=standin.endpoint)
        client = VectorsClient(settings)
        try:
            source = EmbeddingSpec((str(path),), settings=settings)
            plan = await plan_sync(client, source, bucket, (index,), True)
        finally:
            await client.close()
        return plan.deletes[index]

    with pytest.MonkeyPatch.context() as patch:
        for name, value in standin.client_env().items():
            patch.setenv(name, value)
        return asyncio.run(planned())


def test_sync_gathers_sparse_changes_into_full_requests(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """Five changed rows far apart in one row group go out in one PutVectors, not one each."""
    path, vectors, genres = source(tmp_path / "docs.parquet", 3000)
    bucket, index = new_index(env)
    sync = [
        "vectors",
        "sync",
        *LIFTED,
        "--bucket",
        bucket,
        "--index",
        index,
        "--metadata-columns",
        "genre",
        "--json",
    ]
    assert run_cli(env, *sync[:2], str(path), *sync[2:]).returncode == 0
    changed = vectors.copy()
    changed[[0, 600, 1200, 1800, 2400]] *= -1.0
    table = pa.table(
        {
            "key": [f"doc-{n:06d}" for n in range(3000)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(changed.ravel()), DIMENSION),
            "genre": genres,
        }
    )
    pq.write_table(table, tmp_path / "sparse.parquet", row_group_size=3000)
    puts = standin.stats()["requests"]["PutVectors"]

    synced = run_cli(env, *sync[:2], str(tmp_path / "sparse.parquet"), *sync[2:])

    assert synced.returncode == 0 and summary(synced)["vectors_done"] == 5, synced.stderr
    assert standin.stats()["requests"]["PutVectors"] - puts == 1
    assert stored_as_source(standin, bucket, index) == source_contents(tmp_path / "sparse.parquet")


def test_sync_delete_from_a_directory_it_cannot_read_whole_deletes_nothing(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """A source directory with a subdirectory the user cannot read is not a source without those
    rows: the sync stops, non-zero, before anything is deleted."""
    from conftest import without_root

    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    path, _, _ = source(tmp_path / "all.parquet", 2000)
    table = pq.read_table(path)
    pq.write_table(table.slice(0, 1000), tree / "a.parquet")
    pq.write_table(table.slice(1000, 1000), tree / "sub" / "b.parquet")
    bucket, index = new_index(env)
    sync = [
        "vectors",
        "sync",
        *LIFTED,
        str(tree),
        "--bucket",
        bucket,
        "--index",
        index,
        "--metadata-columns",
        "genre",
    ]
    assert run_cli(env, *sync).returncode == 0
    assert len(contents(standin, bucket, index)) == 2000
    (tree / "sub").chmod(0)
    try:
        refused = subprocess.run(
            without_root([*S3BULK, *sync, "--delete"]), env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        (tree / "sub").chmod(0o755)
    assert refused.returncode != 0 and "sub" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert len(contents(standin, bucket, index)) == 2000


def plain_index(env: dict[str, str], standin: VectorsStandInServer) -> tuple[str, str]:
    """An index as the console, boto3 or Terraform make it: no non-filterable keys, so no room
    for s3bulk's content hash that would cost the user nothing."""
    bucket = f"vb-{os.getpid()}-{next(_names)}"
    assert run_cli(env, "vectors", "create-bucket", bucket).returncode == 0
    import boto3

    boto3.client(
        "s3vectors",
        endpoint_url=standin.endpoint,
        region_name="us-east-1",
        aws_access_key_id=standin.access_key,
        aws_secret_access_key=standin.secret_key,
    ).create_index(
        vectorBucketName=bucket,
        indexName="plain",
        dataType="float32",
        dimension=DIMENSION,
        distanceMetric="cosine",
    )
    return bucket, "plain"


def test_sync_and_verify_without_the_metadata_columns_read_the_source_as_the_put_did(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """The README's steps as a new user runs them: a put with --metadata-columns into an index
    another tool made, then `sync --delete` and `verify` without the option. The put stored
    each row exactly (no key added); the sync reads the source as the put did (remembered beside
    the jobs, and said), compares by reading back (the vectors carry no hash, and the plan says
    what would spare that), puts nothing and strips nothing; verify matches."""
    path, _, _ = source(tmp_path / "docs.parquet", 3000)
    bucket, index = plain_index(env, standin)
    loaded = load(env, path, bucket, index, "--metadata-columns", "genre")
    assert loaded.returncode == 0, loaded.stderr
    assert contents(standin, bucket, index) == source_contents(path)  # the rows, and nothing else
    puts = standin.stats()["requests"]["PutVectors"]
    sync = ["vectors", "sync", *LIFTED, str(path), "--bucket", bucket, "--index", index, "--delete"]

    planned = run_cli(env, *sync, "--dry-run")
    synced = run_cli(env, *sync, "--json")
    verified = run_cli(
        env, "vectors", "verify", str(path), "--bucket", bucket, "--index", index, "--sample", "100"
    )

    said = planned.stdout + planned.stderr
    assert planned.returncode == 0 and "would do: 0 vectors in 0 batches" in said, said
    assert "reading the source as the put into" in said and "--metadata-columns genre" in said
    assert "3,000 stored vectors had no content hash (s3bulk_hash): compared by reading them back" in said
    assert "(30 GetVectors); a put with --content-hash" in said
    assert synced.returncode == 0, synced.stderr
    report = summary(synced)
    assert (report["vectors_done"], report["objects_deleted"], report["objects_unchanged"]) == (0, 0, 3000)
    assert standin.stats()["requests"]["PutVectors"] == puts  # nothing put again
    assert contents(standin, bucket, index) == source_contents(path)  # no metadata lost
    assert verified.returncode == 0 and "100 of 100 rows match" in verified.stdout, verified.stdout


def test_sync_and_verify_that_would_strip_metadata_are_refused_in_one_line(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """On another machine (nothing remembered), a sync or verify without --metadata-columns of
    an index whose vectors hold metadata is refused, naming the option and the keys, exit 2:
    nothing is put."""
    path, _, _ = source(tmp_path / "docs.parquet", 1000)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index, "--metadata-columns", "genre").returncode == 0
    elsewhere = env | {"S3BULK_STATE_DIR": str(tmp_path / "elsewhere")}
    puts = standin.stats()["requests"]["PutVectors"]

    synced = run_cli(elsewhere, "vectors", "sync", *LIFTED, str(path), "--bucket", bucket, "--index", index)
    verified = run_cli(elsewhere, "vectors", "verify", str(path), "--bucket", bucket, "--index", index)

    for refused in (synced, verified):
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.count("\n") == 1 and "--metadata-columns genre" in refused.stderr, (
            refused.stderr
        )
    assert standin.stats()["requests"]["PutVectors"] == puts
    assert stored_as_source(standin, bucket, index) == source_contents(path)
    named = run_cli(
        elsewhere, "vectors", "sync", *LIFTED, str(path), "--bucket", bucket, "--index", index,
        "--metadata-columns", "genre", "--json",
    )  # fmt: skip
    assert named.returncode == 0 and summary(named)["objects_unchanged"] == 1000, named.stderr


def test_sync_dry_run_prices_its_writes_as_a_put_does(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    path, vectors, genres = source(tmp_path / "docs.parquet", 2000)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index, "--metadata-columns", "genre").returncode == 0
    changed = vectors.copy()
    changed[:5] *= -1.0
    table = pa.table(
        {
            "key": [f"doc-{n:06d}" for n in range(2000)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(changed.ravel()), DIMENSION),
            "genre": genres,
        }
    )
    pq.write_table(table, tmp_path / "edited.parquet", row_group_size=2000)

    planned = run_cli(
        env,
        "vectors",
        "sync",
        str(tmp_path / "edited.parquet"),
        "--bucket",
        bucket,
        "--index",
        index,
        "--dry-run",
    )
    put = run_cli(env, "vectors", "put", str(path), "--bucket", bucket, "--index", index, "--dry-run")

    said = planned.stdout + planned.stderr
    assert planned.returncode == 0 and "would do: 5 vectors in 1 batch " in said, said
    assert "GB of vector data: PutVectors $" in said and "GB of vector data: PutVectors $" in put.stdout
    assert "5 vectors in 1 request into 1 index: at least" in said and "(5 to put, 0 to delete)" in said
    assert "2,000 vectors in 4 requests into 1 index: at least" in put.stdout, put.stdout


def test_copy_into_an_index_that_does_not_declare_the_hash_stores_the_metadata_alone(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """A copy of an index whose vectors carry s3bulk's hash into one made by another tool
    stores each vector's metadata as the user gave it; with --content-hash, the hash too."""
    path, _, _ = source(tmp_path / "docs.parquet", 1500)
    bucket, index = new_index(env)  # create-index: the hash declared, so the put keeps it
    assert load(env, path, bucket, index, "--metadata-columns", "genre").returncode == 0
    assert all("s3bulk_hash" in meta for _, meta in contents(standin, bucket, index).values())
    copy = ["vectors", "copy", *LIFTED, "--bucket", bucket, "--index", index, "--to-index", "plain"]
    mine, _ = plain_index(env, standin)
    theirs, _ = plain_index(env, standin)

    copied = run_cli(env, *copy, "--to-bucket", mine)
    hashed = run_cli(env, *copy, "--to-bucket", theirs, "--content-hash")

    assert copied.returncode == 0 and hashed.returncode == 0, copied.stderr + hashed.stderr
    assert contents(standin, mine, "plain") == source_contents(path)
    assert contents(standin, theirs, "plain") == contents(standin, bucket, index)  # the hash asked for


def test_sync_delete_with_another_key_column_than_the_put_used_is_refused_in_one_line(
    standin: VectorsStandInServer, env: dict[str, str], tmp_path: Path
) -> None:
    """A put keyed by the default column `key`, then `sync --delete --key-column genre` of the
    same file: none of the index's keys is a key of the source read so, and the sync deleted
    every vector (1,000, exit 0). It is refused in one line naming the key column the index was
    loaded with (exit 2), and nothing is deleted; the same column named, or left out, syncs."""
    path, _, _ = source(tmp_path / "docs.parquet", 1000)
    bucket, index = new_index(env)
    assert load(env, path, bucket, index, "--metadata-columns", "genre").returncode == 0
    before = contents(standin, bucket, index)
    sync = ["vectors", "sync", *LIFTED, str(path), "--bucket", bucket, "--index", index, "--delete"]

    refused = run_cli(env, *sync, "--key-column", "genre", "--metadata-columns", "genre")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.count("\n") == 1 and "--key-column key" in refused.stderr, refused.stderr
    assert contents(standin, bucket, index) == before

    same = run_cli(env, *sync, "--key-column", "key", "--json")
    assert same.returncode == 0, same.stderr
    assert summary(same)["objects_deleted"] == 0 and contents(standin, bucket, index) == before
