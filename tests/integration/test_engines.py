"""Every `--engine` runs the same job to the same result, and the command line says which runs
(the limits alone, memory and the adaptive in-flight limit: tests/unit/test_engine_limits.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RAY_GROUP, Endpoint, bucket_digests, make_tree, new_bucket, run_cli, tree_digests

import s3bulk
from s3bulk._engine.strategies import ENGINES
from s3bulk.testing.raycluster import RayCluster

MiB = 1024**2
FILES = {f"p{i % 4}/f{i:04d}.bin": os.urandom(i % 5000) for i in range(240)} | {
    "big/multipart.bin": os.urandom(6 * MiB + 123)
}


@pytest.fixture
def engine_options(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, engine: str
) -> Iterator[dict[str, Any]]:
    """The options of one engine: ray joins the session's cluster (conftest.ray_cluster, which
    test_ray's jobs join too) rather than start a local instance in this process, where it would
    stay until the session ends (its start-up alone: test_ray's own-local-instance test)."""
    options: dict[str, Any] = {"engine": engine, "multipart_threshold": 5 * MiB, "part_size": 5 * MiB}
    if engine != "ray":
        yield options
        return
    cluster: RayCluster = request.getfixturevalue("ray_cluster")
    for name, value in cluster.client_env().items():  # its token, which Ray reads once per process
        monkeypatch.setenv(name, value)
    import ray
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")  # read again, should this process have loaded Ray before
    AuthenticationTokenLoader.instance().reset_cache()
    try:
        yield options | {"ray_address": cluster.address}
    finally:
        ray.shutdown()  # this process leaves the cluster, which stops after the last test that joins it


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(engine, marks=pytest.mark.xdist_group(RAY_GROUP)) if engine == "ray" else engine
        for engine in ENGINES
    ],
)
def test_every_engine_gives_identical_results(
    minio: Endpoint, aws_env: dict[str, str], tmp_path: Path, engine: str, engine_options: dict[str, Any]
) -> None:
    source = make_tree(tmp_path / "src", FILES)
    expected = tree_digests(source)
    bucket = new_bucket(minio)
    options = engine_options

    up = s3bulk.copy(f"{source}/", f"s3://{bucket}/up/", **options)
    copied = s3bulk.copy(f"s3://{bucket}/up/", f"s3://{bucket}/copy/", **options)
    down = s3bulk.copy(f"s3://{bucket}/copy/", f"{tmp_path}/down/", **options)
    (source / "p0/f0000.bin").write_bytes(b"changed")
    synced = s3bulk.sync(f"{source}/", f"s3://{bucket}/up/", **options)

    for report in (up, copied, down, synced):
        assert report.ok, (engine, report.failures)
        assert report.engine == engine
    total = sum(map(len, FILES.values()))
    assert (up.objects_done, up.bytes_done) == (len(FILES), total)
    assert (copied.objects_done, copied.bytes_done) == (len(FILES), total)
    assert (down.objects_done, down.bytes_done) == (len(FILES), total)
    assert (synced.objects_done, synced.objects_unchanged) == (1, len(FILES) - 1)
    assert bucket_digests(minio, bucket, "copy/") == expected
    assert tree_digests(tmp_path / "down") == expected
    # one LIST checks the bucket written to before anything is sent; the 6 MiB file: create, 2 parts,
    # complete; the copy also lists its source
    assert up.requests == {"LIST": 1, "PUT": len(FILES) - 1 + 4}
    assert copied.requests == {"LIST": 2, "COPY": len(FILES)}
    assert set(up.stage_seconds) >= {"list", "wait", "request"}
    assert up.cpu_seconds > 0 and up.driver_cpu["total"] <= up.cpu_seconds


def test_engine_choice_and_its_misuse_on_the_command_line(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    make_tree(tmp_path / "src", {"a": b"1", "b/c": b"2"})
    result = run_cli(
        minio.env,
        "cp",
        "--engine",
        "threads",
        "--workers",
        "3",
        "--json",
        f"{tmp_path}/src/",
        f"s3://{bucket}/",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1])["summary"]
    assert (summary["engine"], summary["workers"], summary["objects_done"]) == ("threads", 3, 2)

    bad = run_cli(minio.env, "cp", "--engine", "warp", f"{tmp_path}/src/", f"s3://{bucket}/")
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "error: unknown engine 'warp': use one of serial, threads, async, processes, hybrid, auto, ray"
    )
    one = run_cli(
        minio.env, "cp", "--engine", "async", "--workers", "4", f"{tmp_path}/src/", f"s3://{bucket}/"
    )
    assert one.returncode == 2 and "--workers does not apply to --engine async" in one.stderr


# ---- bounded memory: a job of 10,000 items whose items we can count while they are alive -------
