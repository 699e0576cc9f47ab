"""--engine ray on a Ray cluster of one node (2 CPUs) on loopback, with MinIO and moto.

The cluster is started once for the tests that join it (conftest.ray_cluster: they run one after
the other on one worker, test_engines' ray case too); every job joins it with --ray-address, as
jobs on a real cluster would. Results are compared with the hybrid engine's, a worker and the
driver are killed mid-job, and a shared rate limit is checked from the service's side (a proxy).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from conftest import (
    S3BULK,
    Endpoint,
    bucket_digests,
    bucket_problems,
    held_at,
    make_tree,
    new_bucket,
    run_cli,
    tree_digests,
)
from test_vectors_load import embeddings, new_index, stored, vectors_env, write_parquet

from s3bulk.testing.raycluster import RayCluster
from s3bulk.testing.throttle import S3ThrottlingProxy, ThrottlingProxy

FILES = 800


@pytest.fixture
def cluster(ray_cluster: RayCluster) -> RayCluster:
    """The session's cluster (conftest.ray_cluster), shared with test_engines' ray case."""
    return ray_cluster


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    return {f"d{i % 7}/f{i:04d}.bin": f"ray {i}\n".encode() * (1 + i % 200) for i in range(FILES)}


def ray_env(env: dict[str, str], cluster: RayCluster, state: Path) -> dict[str, str]:
    return env | cluster.client_env() | {"S3BULK_STATE_DIR": str(state)}


def summary(stdout: str) -> dict[str, object]:
    return dict(json.loads(stdout.splitlines()[-1])["summary"])


@pytest.mark.campaign  # make reliability (35 s); make test runs ray in test_engines' every-engine check
def test_cp_sync_rm_on_ray_match_hybrid(
    minio: Endpoint, cluster: RayCluster, tmp_path: Path, files: dict[str, bytes]
) -> None:
    """Upload, download, server-side copy, sync and rm: the same objects, bytes and counts as
    the hybrid engine; the object-store journal sits beside the data and is never copied."""
    source = make_tree(tmp_path / "src", files)
    bucket = new_bucket(minio, "ray")
    env = ray_env(minio.env, cluster, tmp_path / "state")
    ray = ["--engine", "ray", "--ray-address", cluster.address, "--json"]

    up = run_cli(env, "cp", f"{source}/", f"s3://{bucket}/data/", *ray)
    assert up.returncode == 0, up.stderr[-2000:]
    assert bucket_problems(minio, bucket, "data/", files) == []
    up_summary = summary(up.stdout)
    assert (up_summary["engine"], up_summary["workers"], up_summary["objects_done"]) == ("ray", 2, FILES)
    journal = bucket_digests(minio, bucket, f".s3bulk/jobs/{up_summary['job_id']}/")
    assert "job.json" in journal and any(key.startswith("parts/") for key in journal)

    hybrid = run_cli(env, "cp", f"{source}/", f"s3://{bucket}/hybrid/", "--json")
    assert summary(hybrid.stdout)["objects_done"] == FILES

    down = run_cli(env, "cp", f"s3://{bucket}/data/", f"{tmp_path}/down/", *ray)
    assert down.returncode == 0, down.stderr[-2000:]
    assert tree_digests(tmp_path / "down") == tree_digests(source)

    target = new_bucket(minio, "ray-copy")
    copy = run_cli(env, "cp", f"s3://{bucket}/", f"s3://{target}/", *ray)
    assert copy.returncode == 0, copy.stderr[-2000:]
    assert summary(copy.stdout)["objects_done"] == 2 * FILES  # the root listing left journals out

    def data(digests: dict[str, str]) -> dict[str, str]:
        return {key: digest for key, digest in digests.items() if not key.startswith(".s3bulk/")}

    copied = bucket_digests(minio, target)
    assert data(copied) == data(bucket_digests(minio, bucket))
    assert not [key for key in copied if key.startswith(f".s3bulk/jobs/{up_summary['job_id']}/")]

    (source / "d1" / "f0001.bin").write_bytes(b"changed")
    (source / "new.bin").write_bytes(b"new")
    synced = run_cli(env, "sync", f"{source}/", f"s3://{bucket}/data/", *ray)
    hybrid_sync = run_cli(env, "sync", f"{source}/", f"s3://{bucket}/hybrid/", "--json")
    ray_counts, hybrid_counts = summary(synced.stdout), summary(hybrid_sync.stdout)
    for count in ("objects_done", "objects_unchanged", "objects_failed"):
        assert ray_counts[count] == hybrid_counts[count], count
    assert (ray_counts["objects_done"], ray_counts["objects_unchanged"]) == (2, FILES - 1)

    removed = run_cli(env, "rm", f"s3://{bucket}/data/", *ray)
    assert removed.returncode == 0 and summary(removed.stdout)["objects_done"] == FILES + 1
    assert bucket_digests(minio, bucket, "data/") == {}


def test_vectors_put_on_ray_shares_the_index_limit(
    moto: Endpoint, cluster: RayCluster, tmp_path: Path
) -> None:
    """Two workers load one index through a proxy that refuses anything above 2,000 vectors/s:
    their shares of --vectors-per-second 1,900 add up to it, so nothing is ever refused (two
    workers with the whole budget each would go at 3,800/s). The proxy's bucket holds 1.5 s of
    its rate, so requests paced right but bunched on the way by a busy machine (its CPU shared by
    the workers, the driver and the server) pass, while 3,800/s empties it in under 2 s of the
    ~3 s such a load would take."""
    rows = 12_000
    source = write_parquet(tmp_path / "docs.parquet", embeddings(rows, 8), row_group_size=2000)
    bucket, index = new_index(moto, 8)
    with ThrottlingProxy(moto.server.endpoint, vectors_per_second=2000, burst=3000) as proxy:
        env = ray_env(vectors_env(moto, proxy.endpoint), cluster, tmp_path / "state")
        put = run_cli(
            env, "vectors", "put", str(source), "--bucket", bucket, "--index", index,
            "--vectors-per-second", "1900", "--engine", "ray", "--ray-address", cluster.address, "--json",
        )  # fmt: skip
    assert put.returncode == 0, put.stderr[-2000:]
    result = summary(put.stdout)
    assert (result["engine"], result["workers"], result["vectors_done"]) == ("ray", 2, rows)
    assert sum(proxy.log.refused.values()) == 0 and result["throttles"] == 0
    assert proxy.log.peak_rate(window=2.0, index=index) <= (1900 * 2 + 2 * 500 + 500) / 2
    assert len(stored(moto, bucket, index)) == rows


def ray_upload(source: Path, bucket: str, cluster: RayCluster, *extra: str) -> list[str]:
    target = f"s3://{bucket}/data/"
    return [*S3BULK, "cp", f"{source}/", target, "--engine", "ray", "--ray-address", cluster.address, *extra]


def _kill_one_ray_worker() -> int:
    for process in psutil.process_iter(["cmdline"]):
        if "ray::_run_worker" in " ".join(process.info["cmdline"] or []):
            process.kill()
            return process.pid
    raise AssertionError("no Ray worker is running s3bulk")


def test_a_killed_ray_worker_is_replaced_by_the_others_exactly(
    minio: Endpoint,
    cluster: RayCluster,
    tmp_path: Path,
    files: dict[str, bytes],
    reliability: Callable[..., None],
) -> None:
    """A worker process is killed while it holds work (requests held by a proxy): the other
    worker redoes its partitions without the items it had finished, so the job succeeds with
    every object stored and each counted once."""
    source = make_tree(tmp_path / "src", files)
    bucket = new_bucket(minio, "ray-kill")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = ray_env(minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}, cluster, tmp_path / "state")
        command = ray_upload(source, bucket, cluster, "--concurrency", "8", "--json")
        with held_at(proxy, FILES // 3, command, env, tmp_path / "job.log") as job:
            _kill_one_ray_worker()
            proxy.release()
            assert job.wait() == 0, job.output()
    result = summary((tmp_path / "job.log").read_text())
    assert bucket_problems(minio, bucket, "data/", files) == []
    assert (result["objects_done"], result["objects_failed"]) == (FILES, 0)
    assert any("was lost" in note and "redone" in note for note in result["notes"]), result["notes"]
    puts = proxy.log.accepted["PUT"]
    reliability(
        "crash: ray worker",
        f"`cp --engine ray` of {FILES:,} files, 2 workers; one worker process SIGKILLed once the "
        f"service has answered {FILES // 3} requests; the job goes on",
        items=FILES,
        done=result["objects_done"],
        failed=result["objects_failed"],
        lost=0,  # asserted above, key by key
        duplicated=puts - FILES,
        exit_code=0,
    )


def test_a_killed_driver_resumes_from_the_object_store_on_another_machine(
    minio: Endpoint,
    cluster: RayCluster,
    tmp_path: Path,
    files: dict[str, bytes],
    reliability: Callable[..., None],
) -> None:
    """The driver dies mid-job (SIGKILL; its Ray workers notice and stop). A driver with none
    of its local state (another machine) resumes from the journal's s3:// URL: every object is
    stored, and what the dead run's workers recorded is not done again."""
    source = make_tree(tmp_path / "src", files)
    bucket = new_bucket(minio, "ray-resume")
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = ray_env(minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}, cluster, tmp_path / "first")
        command = ray_upload(source, bucket, cluster, "--concurrency", "8")
        with held_at(proxy, FILES // 2, command, env, tmp_path / "job.log") as job:
            job.kill()
            job.wait()
        job_id = next((tmp_path / "first").glob("*.db")).stem
        url = f"s3://{bucket}/.s3bulk/jobs/{job_id}/"
        elsewhere = ray_env(minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}, cluster, tmp_path / "second")
        resumed = run_cli(elsewhere, "cp", "--resume", url, "--ray-address", cluster.address, "--json")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    result = summary(resumed.stdout)
    assert bucket_problems(minio, bucket, "data/", files) == []
    assert result["engine"] == "ray" and result["job_id"] == job_id
    assert 0 < result["objects_already_done"] <= FILES // 2
    assert result["objects_done"] + result["objects_already_done"] == FILES
    assert (tmp_path / "second" / f"{job_id}.db").is_file()  # rebuilt here from the store
    reliability(
        "crash: ray driver",
        f"`cp --engine ray` of {FILES:,} files: the driver SIGKILLed once the service has answered "
        f"{FILES // 2} requests, then `--resume s3://...` with none of its local state",
        items=FILES,
        already_done=result["objects_already_done"],
        done_on_resume=result["objects_done"],
        lost=0,
        duplicated=proxy.log.accepted["PUT"] - FILES,
    )


def test_map_on_ray_gives_every_result_and_transforms(
    minio: Endpoint, cluster: RayCluster, tmp_path: Path
) -> None:
    """`s3bulk map` of a function in the user's own module (not installed: it travels by value)
    on Ray: a row per object with the serial loop's result, and a --to transform of each."""
    import hashlib
    import zlib

    bucket = new_bucket(minio, "ray-map")
    client = minio.client()
    bodies = {f"in/k{n:03d}": f"ray map {n}\n".encode() * (n % 30 + 1) for n in range(120)}
    for key, body in bodies.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    tests = Path(__file__).resolve().parent
    env = ray_env(minio.env, cluster, tmp_path / "state") | {"PYTHONPATH": str(tests)}
    ray = ["--engine", "ray", "--ray-address", cluster.address]
    rows_file = tmp_path / "rows.jsonl"
    done = run_cli(env, "map", "mapfns:digest", f"s3://{bucket}/in/", "--output", str(rows_file), *ray)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["key"]: row["result"] for row in map(json.loads, rows_file.read_text().splitlines())}
    expected = {
        key: f"{key}:{len(body)}:{hashlib.sha256(body).hexdigest()[:16]}" for key, body in bodies.items()
    }
    assert rows == expected
    moved = run_cli(env, "map", "mapfns:compress", f"s3://{bucket}/in/", "--to", f"s3://{bucket}/gz/", *ray)
    assert moved.returncode == 0, moved.stderr[-2000:]
    assert (
        zlib.decompress(client.get_object(Bucket=bucket, Key="gz/k077")["Body"].read()) == bodies["in/k077"]
    )


def test_ray_engine_on_its_own_local_instance(minio: Endpoint, tmp_path: Path) -> None:
    """Without --ray-address the engine starts a local Ray instance with this machine's CPUs."""
    source = make_tree(tmp_path / "src", {f"f{i}.txt": b"x" * i for i in range(50)})
    bucket = new_bucket(minio, "ray-local")
    env = minio.env | {"S3BULK_STATE_DIR": str(tmp_path / "state")}
    result = run_cli(env, "cp", f"{source}/", f"s3://{bucket}/", "--engine", "ray", "--workers", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "upload done: 50 objects" in result.stdout
    assert "Token authentication" not in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--ray-address", "127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1"),
        (["--max-memory", "512MB"], "--max-memory applies to one machine"),
        (["--journal-url", "s3://no-such-bucket-here/jobs/"], "cannot write the job's journal"),
    ],
)
def test_ray_bad_input_is_one_line(
    minio: Endpoint, tmp_path: Path, arguments: list[str], message: str
) -> None:
    source = make_tree(tmp_path / "src", {"a.txt": b"a"})
    bucket = new_bucket(minio, "ray-bad")
    env = minio.env | {"S3BULK_STATE_DIR": str(tmp_path / "state")}
    result = run_cli(
        env, "cp", f"{source}/", f"s3://{bucket}/", "--engine", "ray", "--workers", "1", *arguments
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr[-2000:]
    assert bucket_digests(minio, bucket) == {}
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").glob("*.db"))


def test_gather_refuses_the_ray_engine(tmp_path: Path) -> None:
    result = run_cli(
        dict(os.environ),
        "gather",
        "s3://b/x.h5",
        "-d",
        "ws",
        "-o",
        str(tmp_path / "o.npy"),
        "--engine",
        "ray",
    )
    assert result.returncode == 2
    assert "--engine ray does not apply" in result.stderr
