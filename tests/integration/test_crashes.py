"""Crashes: SIGKILL at seeded random points of cp, sync and vectors put, then --resume. The final
state is exact every time, and what was done twice is counted by a proxy in front of the service:
only requests in flight (or done but not yet journaled) at the kill are repeated.

Kill points: a seeded number of requests answered by the service, after which a proxy holds
every request until the kill (so no trial can race past its point): a fifth of the trials die
within the first 3 answers (start-up, listing: before the journal holds anything), the rest
anywhere up to 90% of the job. Half kill the whole process group (a crashed machine), half
only the driver (its workers must notice and exit). S3BULK_CRASH_TRIALS sets the trials per kind:
`make test` runs 2 (the first two of the seeds), `make reliability` 10 (early, mid-way and late
kills, both kinds of kill). S3BULK_CRASH_FILES and S3BULK_CRASH_VECTORS set the size of each job:
`make test` 400 files and 8,000 vectors (a job still mid-way at every kill point, at a third of
the CPU), `make reliability` 1,200 and 20,000.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from conftest import (
    S3BULK,
    Endpoint,
    bucket_problems,
    held_at,
    job_journal,
    journal_items_done,
    make_tree,
    new_bucket,
    run_cli,
    tree_problems,
)
from test_vectors_load import embeddings, new_index, stored, vectors_env, write_parquet

from s3bulk.testing.throttle import LoopbackProxy, S3ThrottlingProxy, ThrottlingProxy

TRIALS = int(os.environ.get("S3BULK_CRASH_TRIALS", "2"))
FILES = int(os.environ.get("S3BULK_CRASH_FILES", "400"))
ROWS, BATCH = int(os.environ.get("S3BULK_CRASH_VECTORS", "8000")), 500
STALE = len(range(0, FILES, 7))  # the files a sync --delete finds stale: every seventh


@dataclass
class Crash:
    killed: str  # "group" or "driver", and when
    done_at_kill: int  # items the journal held when the job died
    resumed: bool  # False: no journal yet, so the command was simply run again
    exit_code: int
    summary: dict[str, int]


def crash_and_resume(
    command: list[str], env: dict[str, str], state: Path, proxy: LoopbackProxy, requests: int, seed: int
) -> Crash:
    """Run `command` (CLI arguments), SIGKILL it at a point chosen by `seed`, then resume it from
    its journal (or run it again if it died before having one) and return what happened.

    The kill point is a number of requests the service answered: the proxy then holds every
    further request, so the job cannot finish (or race past the point) before the kill."""
    rng = random.Random(seed)
    env = env | {"S3BULK_STATE_DIR": str(state)}
    early = rng.random() < 0.2
    answers = rng.randint(0, 3) if early else rng.randint(4, int(requests * 0.9))
    group = rng.random() < 0.5
    log = state.parent / f"{state.name}.log"
    with held_at(proxy, answers, [*S3BULK, *command], env, log) as process:
        workers = psutil.Process(process.pid).children(recursive=True)
        if group:
            process.kill_group()
        else:
            process.kill()
        process.wait()
        _, alive = psutil.wait_procs(workers, timeout=30)
        assert not alive, "worker processes outlived their killed driver"
    journal = job_journal(state)
    done_at_kill = journal_items_done(journal)
    when = f"{answers} answers, {done_at_kill} items done"
    if journal is not None:
        verb = command[:2] if command[0] == "vectors" else command[:1]
        rerun = run_cli(env, *verb, "--resume", journal.stem, "--json")
    else:
        rerun = run_cli(env, *command, "--json")
    summary = json.loads(rerun.stdout.splitlines()[-1])["summary"] if rerun.stdout else {}
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    return Crash(f"{'group' if group else 'driver'} at {when}", done_at_kill, journal is not None, 0, summary)


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    return {f"d{i % 9}/f{i:05d}.bin": f"object {i}\n".encode() * (20 + i % 300) for i in range(FILES)}


def _record(
    reliability: Callable[..., None],
    kind: str,
    how: str,
    crashes: list[Crash],
    duplicated: list[int],
    each: int = FILES,
) -> None:
    reliability(
        f"crash: {kind}",
        how,
        trials=len(crashes),
        resumed=sum(crash.resumed for crash in crashes),
        kill_points=[crash.killed for crash in crashes],
        verified=len(crashes) * each,  # objects (vectors) checked after the resumes, one by one
        lost=0,  # asserted per trial
        duplicated=duplicated,
    )


def test_cp_upload_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    source = make_tree(tmp_path / "src", files)
    bucket = new_bucket(minio, "crash-cp")
    crashes, duplicated = [], []
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:  # it only counts
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        for trial in range(TRIALS):
            puts_before = proxy.log.accepted["PUT"]
            command = [
                "cp",
                f"{source}/",
                f"s3://{bucket}/trial{trial}/",
                "--workers",
                "2",
                "--concurrency",
                "8",
            ]
            crash = crash_and_resume(command, env, tmp_path / f"state{trial}", proxy, FILES, seed=trial)
            assert bucket_problems(minio, bucket, f"trial{trial}/", files) == [], crash.killed
            crashes.append(crash)
            duplicated.append(proxy.log.accepted["PUT"] - puts_before - FILES)
    _record(
        reliability,
        "cp upload",
        f"SIGKILL mid `cp` of {FILES:,} files, then `cp --resume`",
        crashes,
        duplicated,
    )


def test_sync_download_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    bucket = new_bucket(minio, "crash-sync")
    tree = make_tree(tmp_path / "src", files)  # uploaded as one job, not a PUT at a time from here
    assert run_cli(minio.env, "cp", f"{tree}/", f"s3://{bucket}/src/").returncode == 0
    crashes, duplicated = [], []
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:
        env = minio.env | {"AWS_ENDPOINT_URL": proxy.endpoint}
        for trial in range(TRIALS):
            gets_before = proxy.log.accepted["GET"]
            target = tmp_path / f"down{trial}"
            command = ["sync", f"s3://{bucket}/src/", f"{target}/", "--workers", "2", "--concurrency", "8"]
            crash = crash_and_resume(command, env, tmp_path / f"state{trial}", proxy, FILES, seed=100 + trial)
            assert tree_problems(target, files) == [], crash.killed  # no temp file, nothing missing
            crashes.append(crash)
            duplicated.append(proxy.log.accepted["GET"] - gets_before - FILES)  # listings included
    _record(
        reliability,
        "sync download",
        f"SIGKILL mid `sync` of {FILES:,} objects, then `sync --resume`",
        crashes,
        duplicated,
    )


def test_vectors_put_killed_and_resumed_is_exact(
    moto: Endpoint, tmp_path: Path, reliability: Callable[..., None]
) -> None:
    source = write_parquet(tmp_path / "docs.parquet", embeddings(ROWS, 8), row_group_size=5000)
    batches, concurrency = ROWS // BATCH, 4
    crashes, duplicated = [], []
    with ThrottlingProxy(moto.server.endpoint, vectors_per_second=1e9) as proxy:  # it only counts
        env = vectors_env(moto, proxy.endpoint)
        for trial in range(TRIALS):
            bucket, index = new_index(moto, 8)
            sent_before = proxy.log.accepted[index]  # every index here is called "idx"
            put = ["vectors", "put", str(source), "--bucket", bucket, "--index", index]
            limits = ["--vectors-per-second", "8000", "--concurrency", str(concurrency)]
            crash = crash_and_resume(
                [*put, *limits], env, tmp_path / f"state{trial}", proxy, batches, seed=200 + trial
            )
            assert len(stored(moto, bucket, index)) == ROWS, crash.killed  # keys overwrite: count them
            crashes.append(crash)
            resent = proxy.log.accepted[index] - sent_before - batches
            assert resent <= concurrency + 2, f"{resent} batches sent twice ({crash.killed})"
            duplicated.append(resent)
    _record(
        reliability,
        "vectors put",
        f"SIGKILL mid `vectors put` of {ROWS:,} vectors, then `--resume`",
        crashes,
        duplicated,
        each=ROWS,
    )


# ---- the other kinds of job (issue 46): `make reliability` runs them, `make test` leaves them out --
EXTRA = {f"zz-extra/{i:03d}": b"only at the destination\n" for i in range(60)}  # what --delete removes


def _put(minio: Endpoint, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    client = minio.client()
    for key, data in files.items():
        client.put_object(Bucket=bucket, Key=f"{prefix}{key}", Body=data)


def _trials(
    minio: Endpoint,
    tmp_path: Path,
    reliability: Callable[..., None],
    kind: str,
    how: str,
    arrange: Callable[[int], list[str]],
    check: Callable[[int], list[str]],
    seed: int,
    env: dict[str, str] | None = None,
) -> None:
    """TRIALS seeded kills of the job `arrange(trial)` sets up and returns (CLI arguments), each
    resumed, then `check(trial)`: what differs from the exact end state (nothing, or it fails)."""
    crashes, requests = [], []
    with S3ThrottlingProxy(minio.server.endpoint) as proxy:  # it only counts, and holds
        proxied = (env or minio.env) | {"AWS_ENDPOINT_URL": proxy.endpoint}
        for trial in range(TRIALS):
            command = arrange(trial)
            before = sum(proxy.log.accepted.values())
            crash = crash_and_resume(
                command, proxied, tmp_path / f"state{trial}", proxy, FILES, seed=seed + trial
            )
            assert check(trial) == [], crash.killed
            crashes.append(crash)
            requests.append(sum(proxy.log.accepted.values()) - before)
    reliability(
        f"crash: {kind}",
        how,
        trials=len(crashes),
        resumed=sum(crash.resumed for crash in crashes),
        kill_points=[crash.killed for crash in crashes],
        verified=len(crashes) * FILES,  # objects checked after the resumes, key by key
        lost=0,  # asserted per trial
        requests_per_trial=requests,
    )


@pytest.mark.campaign
def test_cp_download_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    bucket = new_bucket(minio, "crash-down")
    _put(minio, bucket, "src/", files)
    _trials(
        minio,
        tmp_path,
        reliability,
        "cp download",
        f"SIGKILL mid `cp` of {FILES:,} objects to a directory, then `cp --resume`",
        lambda trial: ["cp", f"s3://{bucket}/src/", f"{tmp_path}/down{trial}/", "--concurrency", "8"],
        lambda trial: tree_problems(tmp_path / f"down{trial}", files),
        seed=300,
    )


@pytest.mark.campaign
def test_sync_delete_upload_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    source = make_tree(tmp_path / "src", files)
    bucket = new_bucket(minio, "crash-sync-up")

    def arrange(trial: int) -> list[str]:
        _put(minio, bucket, f"t{trial}/", EXTRA | {key: b"stale" for key in list(files)[::7]})
        return ["sync", "--delete", f"{source}/", f"s3://{bucket}/t{trial}/", "--concurrency", "8"]

    _trials(
        minio,
        tmp_path,
        reliability,
        "sync --delete upload",
        f"SIGKILL mid `sync --delete` of {FILES:,} files over a prefix holding 60 extra and {STALE} stale "
        "objects, then `sync --resume`",
        arrange,
        lambda trial: bucket_problems(minio, bucket, f"t{trial}/", files),
        seed=400,
    )


@pytest.mark.campaign
def test_sync_delete_download_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    bucket = new_bucket(minio, "crash-sync-down")
    _put(minio, bucket, "src/", files)

    def arrange(trial: int) -> list[str]:
        target = tmp_path / f"down{trial}"
        make_tree(target, EXTRA | {key: b"stale" for key in list(files)[::7]})
        return ["sync", "--delete", f"s3://{bucket}/src/", f"{target}/", "--concurrency", "8"]

    _trials(
        minio,
        tmp_path,
        reliability,
        "sync --delete download",
        f"SIGKILL mid `sync --delete` of {FILES:,} objects over a directory holding 60 extra and "
        f"{STALE} stale files, then `sync --resume`",
        arrange,
        lambda trial: tree_problems(tmp_path / f"down{trial}", files),
        seed=500,
    )


@pytest.mark.campaign
def test_mv_upload_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    bucket = new_bucket(minio, "crash-mv-up")

    def arrange(trial: int) -> list[str]:
        source = make_tree(tmp_path / f"src{trial}", files)
        return ["mv", f"{source}/", f"s3://{bucket}/t{trial}/", "--concurrency", "8"]

    def check(trial: int) -> list[str]:
        left = [str(path) for path in (tmp_path / f"src{trial}").rglob("*") if path.is_file()]
        return bucket_problems(minio, bucket, f"t{trial}/", files) + [f"not moved: {path}" for path in left]

    _trials(
        minio,
        tmp_path,
        reliability,
        "mv upload",
        f"SIGKILL mid `mv` of {FILES:,} files, then `mv --resume`",
        arrange,
        check,
        seed=600,
    )


@pytest.mark.campaign
def test_mv_download_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    bucket = new_bucket(minio, "crash-mv-down")

    def arrange(trial: int) -> list[str]:
        _put(minio, bucket, f"t{trial}/", files)
        return ["mv", f"s3://{bucket}/t{trial}/", f"{tmp_path}/down{trial}/", "--concurrency", "8"]

    def check(trial: int) -> list[str]:
        left = minio.client().list_objects_v2(Bucket=bucket, Prefix=f"t{trial}/").get("KeyCount", 0)
        return tree_problems(tmp_path / f"down{trial}", files) + (
            [f"{left} objects not moved"] if left else []
        )

    _trials(
        minio,
        tmp_path,
        reliability,
        "mv download",
        f"SIGKILL mid `mv` of {FILES:,} objects to a directory, then `mv --resume`",
        arrange,
        check,
        seed=700,
    )


@pytest.mark.campaign
def test_map_to_killed_and_resumed_is_exact(
    minio: Endpoint, tmp_path: Path, files: dict[str, bytes], reliability: Callable[..., None]
) -> None:
    import zlib

    bucket = new_bucket(minio, "crash-map")
    _put(minio, bucket, "src/", files)
    tests = Path(__file__).parent
    env = minio.env | {"PYTHONPATH": f"{tests}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    compressed = {key: zlib.compress(data, 6) for key, data in files.items()}
    _trials(
        minio,
        tmp_path,
        reliability,
        "map --to",
        f"SIGKILL mid `map mapfns:compress --to` of {FILES:,} objects, then `map --resume`",
        lambda trial: ["map", "mapfns:compress", f"s3://{bucket}/src/", "--to", f"s3://{bucket}/out{trial}/"],
        lambda trial: bucket_problems(minio, bucket, f"out{trial}/", compressed),
        seed=800,
        env=env,
    )
