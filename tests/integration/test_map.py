"""`s3bulk.map` and `s3bulk map` (issue 22), against MinIO: results equal a serial loop's for sync
and async functions on every local engine; an exception fails exactly its objects; `to=` uploads
what the function returns under the mapped key (None skips) and a SIGKILLed transform resumes with
every output present and correct; `output=` writes one row per object; a lambda travels to worker
processes; a function that waits does not hold the others (or the fetching) back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import zlib
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, new_bucket, peak_group_rss, put_objects, run_cli

TESTS = Path(__file__).resolve().parent
OBJECTS = 400
MANY, COMPARED = 20_000, 5_000  # the counts: results compared on 5,000, memory over 20,000


@pytest.fixture(scope="module")
def bucket_of_objects(minio: Endpoint) -> tuple[str, dict[str, bytes]]:
    bucket = new_bucket(minio, "map")
    bodies = {f"in/{n % 10}/k{n:04d}": os.urandom(n % 97 + 1) for n in range(OBJECTS)}
    put_objects(minio, bucket, bodies)
    return bucket, bodies


@pytest.fixture(scope="module")
def many_objects(minio: Endpoint) -> tuple[str, dict[str, bytes]]:
    """20,000 small objects; the first 5,000 under many/a/, the rest under many/b/. Put in one
    request (conftest's put_objects: ~11 s of CPU where 20,000 PUTs took ~39 s, load 15)."""
    bucket = new_bucket(minio, "many")
    bodies = {
        f"many/{'a' if n < COMPARED else 'b'}/{n % 10}/k{n:05d}": os.urandom(n % 97 + 1) for n in range(MANY)
    }
    put_objects(minio, bucket, bodies)
    return bucket, bodies


@pytest.fixture
def api(aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(TESTS))
    import s3bulk

    return s3bulk


@pytest.mark.parametrize(
    "engine",
    # the default and the event loop's in make test; the others (10 s each) in make reliability
    [
        "hybrid",
        "async",
        *(pytest.param(e, marks=pytest.mark.campaign) for e in ("threads", "processes", "serial")),
    ],
)
def test_results_equal_a_serial_loop(api, many_objects, engine: str) -> None:
    import mapfns

    bucket, bodies = many_objects
    serial = {key: mapfns.digest(type("O", (), {"key": key})(), body) for key, body in bodies.items()}
    expected = sorted((key, result) for key, result in serial.items() if key.startswith("many/a/"))
    for fn in (mapfns.digest, mapfns.digest_async):
        results = api.map(fn, f"s3://{bucket}/many/a/", engine=engine)
        got = sorted((obj.key, result) for obj, result in results)
        assert len(got) == COMPARED and results.report.ok, (engine, fn.__name__, len(got))
        assert got == expected, (engine, fn.__name__)


def test_max_memory_holds_over_twenty_thousand_objects(minio: Endpoint, many_objects, tmp_path: Path) -> None:
    bucket, bodies = many_objects
    env = minio.env | {"PYTHONPATH": str(TESTS)}
    rows = tmp_path / "rows.jsonl"
    code, peak, stderr = peak_group_rss(
        env, ["map", "mapfns:digest", f"s3://{bucket}/many/", "--max-memory", "128MB", "--output", str(rows)]
    )
    assert code == 0, stderr
    assert peak <= 128 * 1000**2, peak / 2**20
    assert sorted(json.loads(line)["key"] for line in rows.read_text().splitlines()) == sorted(bodies)


def test_an_exception_fails_exactly_its_objects(api, bucket_of_objects) -> None:
    import mapfns

    bucket, bodies = bucket_of_objects
    results = api.map(mapfns.fails_on_sevens, f"s3://{bucket}/in/")
    got = {obj.key: result for obj, result in results}
    sevens = {key for key in bodies if key.endswith("7")}
    assert set(got) == set(bodies) - sevens
    failures = results.report.failures
    assert {failure.source.removeprefix(f"s3://{bucket}/") for failure in failures} == sevens
    assert all("the function raised ValueError: no sevens" in failure.reason for failure in failures)
    aborted = api.map(mapfns.fails_on_sevens, f"s3://{bucket}/in/", on_error="abort")
    list(aborted)
    assert aborted.report.aborted and "map stopped at s3://" in aborted.report.aborted
    assert "no sevens" in aborted.report.aborted


def test_a_lambda_runs_in_worker_processes_and_output_writes_rows(
    api, bucket_of_objects, tmp_path: Path
) -> None:
    bucket, bodies = bucket_of_objects
    sizes = {
        obj.key: size for obj, size in api.map(lambda obj, body: len(body), f"s3://{bucket}/in/", workers=2)
    }
    assert sizes == {key: len(body) for key, body in bodies.items()}
    rows_file = tmp_path / "rows.jsonl"
    import mapfns

    report = api.map(mapfns.digest, f"s3://{bucket}/in/", output=str(rows_file))
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert report.ok and sorted(row["key"] for row in rows) == sorted(bodies)


def test_a_waiting_function_does_not_hold_the_others_back(api, bucket_of_objects) -> None:
    import mapfns

    bucket, _ = bucket_of_objects
    at_once = max(result for _, result in api.map(mapfns.sleeps, f"s3://{bucket}/in/0/", engine="async"))
    assert at_once >= 16  # 40 calls that each wait 50 ms: they wait together, not in turn


def test_a_killed_transform_resumes_with_every_output_present_and_correct(
    minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    bodies = {f"logs/{n:04d}.log": f"line {n}\n".encode() * (n % 50 + 1) for n in range(600)}
    bodies["logs/please.skip"] = b"left out"
    put_objects(minio, bucket, bodies)
    env = minio.env | {"PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    args = [
        *S3BULK,
        "map",
        "mapfns:compress",
        f"s3://{bucket}/logs/",
        "--to",
        f"s3://{bucket}/gz/",
        "--engine",
        "async",
        "--concurrency",
        "8",
    ]
    job = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while client.list_objects_v2(Bucket=bucket, Prefix="gz/").get("KeyCount", 0) < 100:
        assert time.monotonic() < deadline and job.poll() is None, "the job ended before it could be killed"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    state = Path(env.get("S3BULK_STATE_DIR") or os.environ["S3BULK_STATE_DIR"])
    job_id = max(state.glob("*.db"), key=lambda path: path.stat().st_mtime).stem
    resumed = run_cli(env, "map", "--resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="gz/")
    stored = [item["Key"] for page in pages for item in page.get("Contents", [])]
    expected = {key.replace("logs/", "gz/", 1) for key in bodies if not key.endswith("skip")}
    assert len(stored) == len(set(stored)) and set(stored) == expected
    for key in ("gz/0000.log", "gz/0377.log", "gz/0599.log"):
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert zlib.decompress(body) == bodies[key.replace("gz/", "logs/", 1)]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_killed_output_rows_resume_with_exactly_one_row_per_object(
    minio: Endpoint, tmp_path: Path, suffix: str
) -> None:
    import hashlib

    import pyarrow.parquet as pq

    bucket = new_bucket(minio)
    bodies = {f"r/{n:04d}": os.urandom(n % 300 + 1) for n in range(600)}
    put_objects(minio, bucket, bodies)
    env = minio.env | {"PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    output = tmp_path / f"rows{suffix}"
    written = Path(f"{output}.rows.jsonl") if suffix == ".parquet" else output
    args = [*S3BULK, "map", "mapfns:slow_digest", f"s3://{bucket}/r/", "--output", str(output)]
    job = subprocess.Popen(
        [*args, "--engine", "async", "--concurrency", "8"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not written.exists() or written.read_bytes().count(b"\n") < 100:
        assert time.monotonic() < deadline and job.poll() is None, "the job ended before it could be killed"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert not (suffix == ".parquet" and output.exists())  # written when the job ends
    with written.open("ab") as rows:
        rows.write(b'{"key": "r/half-writ')  # what a kill inside a write leaves
    state = Path(env.get("S3BULK_STATE_DIR") or os.environ["S3BULK_STATE_DIR"])
    job_id = max(state.glob("*.db"), key=lambda path: path.stat().st_mtime).stem
    resumed = run_cli(env, "map", "--resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    if suffix == ".parquet":
        rows = pq.read_table(output).to_pylist()
        assert not written.exists()
    else:
        rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(row["key"] for row in rows) == sorted(bodies)  # each once
    digests = [row["digest"] if suffix == ".parquet" else row["result"]["digest"] for row in rows]
    assert digests == [hashlib.sha256(bodies[row["key"]]).hexdigest() for row in rows]
    assert all(row["size"] == len(bodies[row["key"]]) for row in rows)


def test_retry_failed_adds_the_missing_rows_to_a_parquet_file(
    minio: Endpoint, bucket_of_objects, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    bucket, bodies = bucket_of_objects
    env = minio.env | {"PYTHONPATH": str(TESTS)}
    output = tmp_path / "sizes.parquet"
    first = run_cli(env, "map", "mapfns:sevens_until_forgiven", f"s3://{bucket}/in/", "--output", str(output))
    assert first.returncode == 1, first.stderr
    sevens = {key for key in bodies if key.endswith("7")}
    assert sorted(pq.read_table(output).column("key").to_pylist()) == sorted(set(bodies) - sevens)
    state = Path(env.get("S3BULK_STATE_DIR") or os.environ["S3BULK_STATE_DIR"])
    job_id = max(state.glob("*.db"), key=lambda path: path.stat().st_mtime).stem
    retried = run_cli(env | {"MAPFNS_FORGIVE": "1"}, "map", "--retry-failed", job_id)
    assert retried.returncode == 0, retried.stderr
    rows = pq.read_table(output).to_pylist()
    assert sorted(row["key"] for row in rows) == sorted(bodies)
    assert all(row["size_seen"] == row["size"] == len(bodies[row["key"]]) for row in rows)


def test_the_cli_prints_results_and_refuses_bad_input(minio: Endpoint, bucket_of_objects) -> None:
    bucket, bodies = bucket_of_objects
    env = minio.env | {"PYTHONPATH": str(TESTS)}
    done = run_cli(env, "map", "mapfns:digest", f"s3://{bucket}/in/3/")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(row["key"] for row in rows) == sorted(key for key in bodies if key.startswith("in/3/"))
    for args, message in [
        (["map", "nowhere:fn", f"s3://{bucket}/in/"], "cannot import nowhere:fn"),
        (["map", "mapfns", f"s3://{bucket}/in/"], "name the function as package.module:function"),
        (
            [
                "map",
                "mapfns:digest",
                f"s3://{bucket}/in/",
                "--to",
                f"s3://{bucket}/o/",
                "--output",
                "x.jsonl",
            ],
            "pick one",
        ),
        (["map", "mapfns:digest", f"s3://{bucket}/in/", "--on-error", "ignore"], "on_error 'ignore'"),
    ]:
        refused = run_cli(env, *args)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and message in refused.stderr, (
            refused.stderr
        )


def test_stream_hands_a_reader_and_parquet_output_has_a_row_each(
    api, minio: Endpoint, tmp_path: Path
) -> None:
    import mapfns
    import pyarrow.parquet as pq

    bucket = new_bucket(minio)
    client = minio.client()
    client.put_object(
        Bucket=bucket, Key="t/big.txt", Body=b"".join(b"%d\n" % n for n in range(3_000_000))
    )  # ~21 MB
    client.put_object(Bucket=bucket, Key="t/small.txt", Body=b"a\nb\n")
    counted = {obj.key: n for obj, n in api.map(mapfns.lines_streamed, f"s3://{bucket}/t/", stream=True)}
    assert counted == {"t/big.txt": 3_000_000, "t/small.txt": 2}
    with pytest.raises(api.UsageError, match="stream=True"):
        _ = api.map(mapfns.digest_async, f"s3://{bucket}/t/", stream=True).report
    table_path = tmp_path / "rows.parquet"
    report = api.map(mapfns.summary, f"s3://{bucket}/t/", output=str(table_path))
    table = pq.read_table(table_path).to_pylist()
    assert report.ok and sorted((row["key"], row["size"]) for row in table) == [
        ("t/big.txt", 22888890),
        ("t/small.txt", 4),
    ]


def test_map_async_yields_the_same_pairs(api, bucket_of_objects) -> None:
    import asyncio

    import mapfns

    bucket, bodies = bucket_of_objects

    async def collect() -> dict[str, str]:
        return {obj.key: result async for obj, result in api.map_async(mapfns.digest, f"s3://{bucket}/in/5/")}

    got = asyncio.run(collect())
    assert set(got) == {key for key in bodies if key.startswith("in/5/")}
