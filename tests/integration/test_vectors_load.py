"""`s3bulk vectors put|verify|count|create-*` against moto's S3 Vectors server (and MinIO for
s3:// sources), with a throttling proxy in front of moto where rate control is the subject.

boto3's s3vectors client only arranges and checks; the code under test never uses it.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import S3BULK, Endpoint, new_bucket, run_cli

from s3bulk._vectors.digest import HASH_KEY, content_hashes
from s3bulk.testing.throttle import ThrottlingProxy

_names = itertools.count()


def vectors_client(endpoint: str) -> Any:
    return boto3.client(
        "s3vectors",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing-secret",
        region_name="us-east-1",
    )


def new_index(moto: Endpoint, dimension: int, metric: str = "cosine", **extra: Any) -> tuple[str, str]:
    bucket, index = f"vb-{os.getpid()}-{next(_names)}", "idx"
    client = vectors_client(moto.server.endpoint)
    client.create_vector_bucket(vectorBucketName=bucket)
    client.create_index(
        vectorBucketName=bucket,
        indexName=index,
        dataType="float32",
        dimension=dimension,
        distanceMetric=metric,
        **extra,
    )
    return bucket, index


def stored(moto: Endpoint, bucket: str, index: str) -> dict[str, dict[str, Any]]:
    reply = vectors_client(moto.server.endpoint).list_vectors(
        vectorBucketName=bucket, indexName=index, returnData=True, returnMetadata=True
    )
    return {entry["key"]: entry for entry in reply["vectors"]}


def vectors_env(moto: Endpoint, endpoint: str | None = None) -> dict[str, str]:
    env = moto.env
    env["AWS_ENDPOINT_URL_S3VECTORS"] = endpoint or moto.server.endpoint
    return env


@pytest.fixture
def moto_env(moto: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process API reaches moto through the standard AWS variables."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in moto.server.client_env().items():
        monkeypatch.setenv(name, value)


def embeddings(rows: int, dimension: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dimension)).astype(np.float32)


def write_parquet(path: Path, vectors: np.ndarray, row_group_size: int = 1000, **columns: list[Any]) -> Path:
    rows, dimension = vectors.shape
    table = pa.table(
        {
            "key": [f"doc-{n:05d}" for n in range(rows)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension),
            **columns,
        }
    )
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def summary(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    return dict(orjson.loads(result.stdout.strip().splitlines()[-1])["summary"])


# ---- loading ------------------------------------------------------------------------------------
def test_parquet_load_verify_and_rerun_overwrites(moto: Endpoint, tmp_path: Path) -> None:
    vectors = embeddings(2300, 32)
    genres = [f"genre-{n % 3}" for n in range(2300)]
    source = write_parquet(tmp_path / "docs.parquet", vectors, genre=genres)
    bucket, index = new_index(moto, 32)
    env = vectors_env(moto)
    put = ["vectors", "put", str(source), "--bucket", bucket, "--index", index, "--metadata-columns", "genre"]

    first = run_cli(env, *put, "--json")
    assert first.returncode == 0, first.stderr
    report = summary(first)
    # 3 row groups (1000, 1000, 300 rows) give 2 + 2 + 1 batches of at most 500
    assert report["vectors_done"] == 2300 and report["objects_done"] == 5
    assert report["requests"] == {"GetIndex": 1, "PutVectors": 5}
    found = stored(moto, bucket, index)
    assert len(found) == 2300
    stored_rows = np.array([found[f"doc-{n:05d}"]["data"]["float32"] for n in range(2300)], dtype=np.float32)
    assert stored_rows.tobytes() == vectors.tobytes()  # every value, bit for bit
    # the row's metadata and nothing else: an index made by another tool does not declare the
    # content hash's key non-filterable, so a put adds no key to what the user gave
    assert all(found[f"doc-{n:05d}"]["metadata"] == {"genre": genres[n]} for n in range(2300))

    again = run_cli(env, *put)  # a new job, not a resume: every key is written again, in place
    assert again.returncode == 0, again.stderr
    assert "2,300 vectors in 5 batches" in again.stdout and "vectors/s" in again.stdout
    # one segment: moto answers every segment with the whole index (it does not segment)
    count = run_cli(env, "vectors", "count", "--bucket", bucket, "--index", index, "--segments", "1")
    assert count.returncode == 0 and count.stdout == f"{bucket}/{index}\t2300\n"  # no duplicates

    verify = [
        "vectors",
        "verify",
        str(source),
        "--bucket",
        bucket,
        "--index",
        index,
        "--metadata-columns",
        "genre",
    ]
    checked = run_cli(env, *verify, "--all")
    assert checked.returncode == 0, checked.stderr
    assert "2,300 of 2,300 rows match, 0 missing, 0 differ" in checked.stdout


def test_the_content_hash_is_added_only_when_asked_for(
    moto: Endpoint, moto_env: None, tmp_path: Path
) -> None:
    """An index made by another tool does not declare s3bulk_hash non-filterable: a put stores
    each row as it is (above); `--content-hash` (`content_hash=True`) adds the hash a sync
    compares by, the same as the body's writer makes it, and verify still matches."""
    from s3bulk import put_vectors

    vectors = embeddings(700, 16, seed=4)
    genres = [f"genre-{n % 5}" for n in range(700)]
    source = write_parquet(tmp_path / "docs.parquet", vectors, genre=genres)
    bucket, index = new_index(moto, 16)
    env = vectors_env(moto)
    put = ["vectors", "put", str(source), "--bucket", bucket, "--index", index]

    asked = run_cli(env, *put, "--metadata-columns", "genre", "--content-hash")

    assert asked.returncode == 0, asked.stderr
    hashes = content_hashes(vectors, [{"genre": genre} for genre in genres])
    found = stored(moto, bucket, index)
    assert {key: entry["metadata"] for key, entry in found.items()} == {
        f"doc-{n:05d}": {"genre": genres[n], HASH_KEY: hashes[n]} for n in range(700)
    }
    verify = ["vectors", "verify", str(source), "--bucket", bucket, "--index", index, "--all"]
    checked = run_cli(env, *verify)
    assert checked.returncode == 0 and "700 of 700 rows match" in checked.stdout, checked.stdout
    # compared from one listing alone (moto does not segment: one segment lists it once)
    sync = ["vectors", "sync", str(source), "--bucket", bucket, "--index", index, "--segments", "1", "--json"]
    synced = run_cli(env, *sync)
    assert synced.returncode == 0, synced.stderr
    assert summary(synced)["objects_unchanged"] == 700 and summary(synced)["vectors_done"] == 0
    assert summary(synced)["requests"] == {"GetIndex": 1, "ListVectors": 1}
    report = put_vectors(str(source), bucket, index, content_hash=True)  # the API alike
    alone = content_hashes(vectors[3:4], None)[0]  # the row read without its metadata column
    assert report.ok and stored(moto, bucket, index)["doc-00003"]["metadata"] == {HASH_KEY: alone}


def test_verify_finds_missing_and_changed_vectors(moto: Endpoint, tmp_path: Path) -> None:
    vectors = embeddings(300, 8)
    source = write_parquet(tmp_path / "docs.parquet", vectors)
    bucket, index = new_index(moto, 8, "euclidean")
    env = vectors_env(moto)
    assert run_cli(env, "vectors", "put", str(source), "--bucket", bucket, "--index", index).returncode == 0
    client = vectors_client(moto.server.endpoint)
    client.delete_vectors(vectorBucketName=bucket, indexName=index, keys=["doc-00007"])
    changed = vectors[9].copy()
    changed[3] = np.nextafter(changed[3], np.float32(np.inf))  # one ulp: still a difference
    client.put_vectors(
        vectorBucketName=bucket,
        indexName=index,
        vectors=[{"key": "doc-00009", "data": {"float32": changed.tolist()}}],
    )
    result = run_cli(
        env, "vectors", "verify", str(source), "--bucket", bucket, "--index", index, "--json", "--all"
    )
    assert result.returncode == 1
    report = orjson.loads(result.stdout)
    assert report["missing"] == ["doc-00007"]
    assert report["differ"] == [{"key": "doc-00009", "what": "data: 1 of 8 values differ"}]
    assert report["matched"] == 298 and report["requests"] == {"GetIndex": 1, "GetVectors": 3}
    sampled = run_cli(
        env, "vectors", "verify", str(source), "--bucket", bucket, "--index", index, "--sample", "40"
    )
    assert "of 40 rows" in sampled.stdout and sampled.stdout.count("\n") == 1


def test_npy_keys_file_jsonl_and_s3_sources(
    moto: Endpoint, minio: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3bulk import put_vectors
    from s3bulk._config import AwsSettings
    from s3bulk._errors import UsageError

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in minio.server.client_env().items():
        monkeypatch.setenv(name, value)  # s3:// sources come from MinIO...
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3VECTORS", moto.server.endpoint)  # ...vectors go to moto
    settings = AwsSettings.from_env()
    bucket, index = new_index(moto, 16)

    vectors = embeddings(1200, 16, seed=2)
    np.save(tmp_path / "a.npy", vectors[:700].astype(np.float64))  # float64 is narrowed to float32
    np.save(tmp_path / "b.npy", vectors[700:])
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"id-{n}\n" for n in range(1200)))
    report = put_vectors(
        [str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
        bucket,
        index,
        keys_file=str(keys),
        settings=settings,
    )
    assert report.ok and report.vectors_done == 1200
    found = stored(moto, bucket, index)
    assert (
        np.array(found["id-1100"]["data"]["float32"], dtype=np.float32).tobytes() == vectors[1100].tobytes()
    )

    keys.write_text("".join(f"id-{n}\n" for n in range(1199)))
    with pytest.raises(UsageError, match=r"keys.txt ends after 1,199 keys but the .npy files have more rows"):
        put_vectors(
            [str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
            bucket,
            index,
            keys_file=str(keys),
            settings=settings,
        )

    # generated keys: the file's name and the row, so a re-run writes the same keys
    report = put_vectors(str(tmp_path / "b.npy"), bucket, index, settings=settings)
    assert report.ok and "b:499" in stored(moto, bucket, index)

    lines = [orjson.dumps({"id": f"j{n}", "embedding": vectors[n].tolist(), "lang": "en"}) for n in range(50)]
    (tmp_path / "c.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    source_bucket = new_bucket(minio)
    minio.client().upload_file(str(tmp_path / "c.jsonl"), source_bucket, "in/c.jsonl")
    report = put_vectors(
        f"s3://{source_bucket}/in/",
        bucket,
        index,
        key_column="id",
        vector_column="embedding",
        metadata_columns=["lang"],
        on_error="skip",
        settings=settings,
    )
    assert report.ok and report.vectors_done == 50
    entry = stored(moto, bucket, index)["j7"]
    assert entry["metadata"] == {"lang": "en"}
    write_parquet(tmp_path / "d.parquet", vectors[:10])
    minio.client().upload_file(str(tmp_path / "d.parquet"), source_bucket, "other/d.parquet")
    report = put_vectors(f"s3://{source_bucket}/other/d.parquet", bucket, index, settings=settings)
    assert report.ok and report.vectors_done == 10 and "doc-00009" in stored(moto, bucket, index)


def test_bad_input_is_refused_before_anything_is_sent(moto: Endpoint, tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "docs.parquet", embeddings(10, 8))
    bucket, index = new_index(moto, 8)
    env = vectors_env(moto)
    cases = [
        (["--index", "nope"], f"index 'nope' not found in vector bucket '{bucket}': create it with"),
        (["--index", index, "--vector-column", "emb"], "has no column 'emb' (it has key, vector)"),
        (["--index", index, "--on-error", "ignore"], "--on-error 'ignore': use abort or skip"),
        (["--index", index, "--batch-size", "501"], "--batch-size 501: PutVectors takes 1 to 500 vectors"),
    ]
    for flags, message in cases:
        result = run_cli(env, "vectors", "put", str(source), "--bucket", bucket, *flags)
        assert result.returncode == 2, result.stderr
        assert (
            result.stderr.startswith("error: ")
            and message in result.stderr
            and result.stderr.count("\n") == 1
        )
    missing = run_cli(
        env, "vectors", "put", str(tmp_path / "nothing.parquet"), "--bucket", bucket, "--index", index
    )
    assert missing.returncode == 2 and "nothing.parquet does not exist" in missing.stderr
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(os.urandom(5000))
    whole = source.read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(whole[: len(whole) // 2] + whole[-8:])  # footer magic kept, body cut
    for bad in (garbage, truncated):
        result = run_cli(env, "vectors", "put", str(bad), "--bucket", bucket, "--index", index)
        assert result.returncode == 2 and result.stderr.count("\n") == 1
        assert result.stderr.startswith(f"error: {bad} is not a readable Parquet file (")
    assert stored(moto, bucket, index) == {}


# ---- validation ---------------------------------------------------------------------------------
def test_every_rule_rejects_its_rows_with_the_reason(moto: Endpoint, tmp_path: Path) -> None:
    dimension = 4
    bucket, index = new_index(moto, dimension, metadataConfiguration={"nonFilterableMetadataKeys": ["text"]})
    good = [0.5, 0.25, -1.0, 2.0]
    rows: list[dict[str, Any]] = [{"key": f"ok-{n}", "vector": good} for n in range(6)]
    bad = {
        6: ({"key": "short", "vector": [1.0, 2.0, 3.0]}, "vector has 3 values, other rows have 4"),
        7: ({"key": "ok-1", "vector": good}, "duplicate key 'ok-1' in the same batch (row 1 has it too)"),
        8: ({"key": "huge", "vector": [1e39, 0.0, 0.0, 1.0]}, "vector has NaN or infinite values"),
        9: ({"key": "zero", "vector": [0.0] * 4}, "all-zero vector: a cosine index cannot store it"),
        10: ({"key": "k" * 1025, "vector": good}, "key length 1025 is outside 1-1024"),
        11: (
            {"key": "many", "vector": good, **{f"m{n}": n for n in range(51)}},
            "metadata has 51 keys (at most 50)",
        ),
        12: (
            {"key": "big", "vector": good, "text": "x" * 41_000},
            "metadata is 41,011 bytes (at most 40,960)",
        ),
        13: (
            {"key": "filter", "vector": good, "tag": "x" * 2100},
            "filterable metadata is 2,110 bytes (at most 2,048); "
            "declare big keys non-filterable when creating the index",
        ),
        14: ({"vector": good}, "no 'key' field"),
    }
    lines = [orjson.dumps(row) for row in rows] + [orjson.dumps(record) for record, _ in bad.values()]
    lines.append(b"{not json")
    source = tmp_path / "rows.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    columns = ",".join(["text", "tag", *[f"m{n}" for n in range(51)]])
    env = vectors_env(moto)
    rejects = tmp_path / "rejects.jsonl"
    put = ["vectors", "put", str(source), "--bucket", bucket, "--index", index, "--metadata-columns", columns]

    aborted = run_cli(env, *put, "--rejects", str(rejects))
    assert aborted.returncode == 1
    assert (
        f"error: stopped: row 6 of {source}: vector has 3 values, other rows have 4 (10 bad row(s)"
        in aborted.stderr
    )
    assert (
        "--on-error skip" in aborted.stderr and stored(moto, bucket, index) == {}
    )  # its batch was never sent

    rejects.unlink()
    skipped = run_cli(env, *put, "--rejects", str(rejects), "--on-error", "skip", "--json")
    assert skipped.returncode == 0, skipped.stderr
    assert summary(skipped)["vectors_rejected"] == 10 and summary(skipped)["vectors_done"] == 6
    listed = {record["row"]: record for record in map(orjson.loads, rejects.read_bytes().splitlines())}
    assert {row: listed[row]["reason"] for row in bad} == {row: reason for row, (_, reason) in bad.items()}
    assert listed[15]["reason"].startswith("not valid JSON") and listed[6]["file"] == str(source)
    assert set(stored(moto, bucket, index)) == {f"ok-{n}" for n in range(6)}


def test_dimension_mismatch_with_the_index_is_named(moto: Endpoint, tmp_path: Path) -> None:
    source = tmp_path / "v.npy"
    np.save(source, embeddings(20, 6))
    bucket, index = new_index(moto, 8)
    result = run_cli(vectors_env(moto), "vectors", "put", str(source), "--bucket", bucket, "--index", index)
    assert result.returncode == 1
    assert f"row 0 of {source}: dimension 6 does not match the index's 8" in result.stderr


# ---- rate control -------------------------------------------------------------------------------
def test_token_buckets_keep_each_index_under_its_limit(
    moto: Endpoint, moto_env: None, tmp_path: Path
) -> None:
    """Two indexes, each allowed 2,000 vectors/s by the proxy: the loader stays under the limit
    of each (no throttling at all) while the two together go past one index's limit."""
    from s3bulk import put_vectors
    from s3bulk._config import AwsSettings

    source = write_parquet(tmp_path / "docs.parquet", embeddings(12_000, 8), row_group_size=4000)
    bucket, first = new_index(moto, 8)
    vectors_client(moto.server.endpoint).create_index(
        vectorBucketName=bucket, indexName="second", dataType="float32", dimension=8, distanceMetric="cosine"
    )
    with ThrottlingProxy(moto.server.endpoint, vectors_per_second=2000) as proxy:
        settings = AwsSettings.from_env(vectors_endpoint_url=proxy.endpoint)
        report = put_vectors(
            str(source), bucket, [first, "second"], vectors_per_second=1900, settings=settings
        )
    assert report.ok and report.vectors_done == 12_000
    assert report.throttles == 0 and sum(proxy.log.refused.values()) == 0
    assert sum(proxy.log.vectors.values()) == 12_000
    for index in (first, "second"):
        assert 4_000 < proxy.log.vectors[index] < 8_000  # crc32 of the key spreads the rows
        # a token bucket's bound over any 2 s: rate x 2 s + its burst (+ a batch of network jitter)
        assert proxy.log.peak_rate(window=2.0, index=index) <= (1900 * 2 + 500 + 500) / 2
    assert proxy.log.peak_rate(window=2.0) > 3000  # together, well past what one index allows
    assert report.stage_seconds["rate"] > 0  # the report says the limit, not the client, held it
    from s3bulk._report import verdict

    assert verdict(report).startswith("rate-limited, as asked")


def test_throttling_backs_off_and_loses_nothing(moto: Endpoint, moto_env: None, tmp_path: Path) -> None:
    """The loader is told 8,000 vectors/s; the service gives 1,500 and answers 429/503 above it.
    Every vector lands, and the loader settles under the real limit within seconds."""
    from s3bulk import put_vectors
    from s3bulk._config import AwsSettings

    source = write_parquet(tmp_path / "docs.parquet", embeddings(15_000, 8), row_group_size=5000)
    bucket, index = new_index(moto, 8)
    with ThrottlingProxy(moto.server.endpoint, vectors_per_second=1500, burst=1500) as proxy:
        settings = AwsSettings.from_env(vectors_endpoint_url=proxy.endpoint)
        report = put_vectors(
            str(source), bucket, index, vectors_per_second=8000, requests_per_second=1000, settings=settings
        )
    assert report.ok, report.failures[:3]
    assert report.vectors_done == 15_000 and proxy.log.vectors[index] == 15_000
    refused, accepted = proxy.log.refused[index], proxy.log.accepted[index]
    assert refused > 0 and report.throttles == refused and report.retries == refused
    # a loader that only retried would be refused ~13 times a second for the whole load (~130);
    # this one is refused while it learns the real limit, then rarely
    assert refused * 3 <= accepted, (refused, accepted)
    # after the first 3 s it only probes: at most one refusal per 3 s as the rate creeps back up
    start, end = proxy.log.puts[0][0], proxy.log.puts[-1][0]
    late = [when for when in proxy.log.refusals if when - start > 3.0]
    assert len(late) <= 1 + (end - start - 3.0) / 3.0, [round(when - start, 2) for when in proxy.log.refusals]
    assert len(stored(moto, bucket, index)) == 15_000


# ---- resume -------------------------------------------------------------------------------------
def test_resume_after_sigkill_sends_no_batch_twice_but_the_in_flight_ones(
    moto: Endpoint, tmp_path: Path
) -> None:
    total_rows, concurrency = 20_000, 4
    source = write_parquet(tmp_path / "docs.parquet", embeddings(total_rows, 8), row_group_size=5000)
    bucket, index = new_index(moto, 8)
    with ThrottlingProxy(moto.server.endpoint, vectors_per_second=1e9) as proxy:  # it only counts
        env = vectors_env(moto, proxy.endpoint)
        put = [*S3BULK, "vectors", "put", str(source), "--bucket", bucket, "--index", index]
        limits = ["--vectors-per-second", "5000", "--concurrency", str(concurrency)]
        process = subprocess.Popen(
            [*put, *limits], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        journal = _journal_path(Path(env["S3BULK_STATE_DIR"]))
        while _done_batches(journal) < 8:  # a few seconds in: some batches done, most not
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        recorded = _done_batches(journal)
        assert 8 <= recorded < 40

        job_id = journal.stem
        resumed = run_cli(env, "vectors", "put", "--resume", job_id, "--json")
        assert resumed.returncode == 0, resumed.stderr
    report = summary(resumed)
    assert report["objects_already_done"] == recorded
    assert report["objects_done"] == 40 - recorded and report["vectors_done"] == total_rows - 500 * recorded
    # sent twice: only what was in flight (or done but not yet journaled) at the kill
    assert proxy.log.accepted[index] - 40 <= concurrency + 2
    assert len(stored(moto, bucket, index)) == total_rows


def test_ctrl_c_says_how_many_vectors_are_stored_and_how_to_finish(moto: Endpoint, tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "docs.parquet", embeddings(20_000, 8), row_group_size=5000)
    bucket, index = new_index(moto, 8)
    env = vectors_env(moto, moto.server.endpoint)
    env["S3BULK_STATS_INTERVAL"] = (
        "3600"  # no periodic stats line on a slow machine: the stop's line is the point
    )
    put = [*S3BULK, "vectors", "put", str(source), "--bucket", bucket, "--index", index]
    process = subprocess.Popen(
        [*put, "--vectors-per-second", "5000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    journal = _journal_path(Path(env["S3BULK_STATE_DIR"]))
    while _done_batches(journal) < 4:
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    stopped = re.search(
        r"stopped: ([\d,]+) of 20,000 vectors stored; finish it with: s3bulk vectors put --resume (\S+)$",
        lines[0],
    )
    assert stopped, lines[0]
    assert int(stopped[1].replace(",", "")) == 500 * _done_batches(journal)
    resumed = run_cli(env, "vectors", "put", "--resume", stopped[2])
    assert resumed.returncode == 0, resumed.stderr
    assert len(stored(moto, bucket, index)) == 20_000


def _journal_path(directory: Path) -> Path:
    while not list(directory.glob("*.db")):
        time.sleep(0.05)
    return next(directory.glob("*.db"))


def _done_batches(journal: Path) -> int:
    try:
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT count(*) FROM items WHERE state = 'done'").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


# ---- helpers ------------------------------------------------------------------------------------
def test_create_bucket_and_index_commands(moto: Endpoint) -> None:
    bucket = f"made-{os.getpid()}"
    with ThrottlingProxy(moto.server.endpoint, vectors_per_second=1e9) as proxy:  # to see the wire
        env = vectors_env(moto, proxy.endpoint)
        made = run_cli(env, "vectors", "create-bucket", bucket)
        assert made.returncode == 0 and made.stdout == f"created vector bucket {bucket}\n"
        create = ["vectors", "create-index", "--bucket", bucket, "--index", "docs", "--dimension", "1024"]
        index = run_cli(env, *create, "--metric", "euclidean", "--non-filterable", "text")
        assert index.returncode == 0, index.stderr
        assert orjson.loads(proxy.log.last["CreateIndex"]) == {
            "vectorBucketName": bucket,
            "indexName": "docs",
            "dataType": "float32",
            "dimension": 1024,
            "distanceMetric": "euclidean",
            # moto drops it; the content hash s3bulk's puts add takes no filterable room
            "metadataConfiguration": {"nonFilterableMetadataKeys": ["text", HASH_KEY]},
        }
    found = vectors_client(moto.server.endpoint).get_index(vectorBucketName=bucket, indexName="docs")["index"]
    assert found["dimension"] == 1024 and found["distanceMetric"] == "euclidean"
    env = vectors_env(moto)
    again = run_cli(env, "vectors", "create-bucket", bucket)
    assert again.returncode == 1
    assert again.stderr.startswith("error: CreateVectorBucket: ConflictException (409)")
    wrong = run_cli(env, "vectors", "create-index", "--bucket", bucket, "--index", "x", "--dimension", "5000")
    assert wrong.returncode == 2 and "--dimension 5000: S3 Vectors indexes hold 1 to 4096" in wrong.stderr
