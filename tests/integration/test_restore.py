"""`s3bulk restore` and copies of archived objects, on moto: the only S3 server on loopback that
implements RestoreObject and `x-amz-restore` (MinIO, versitygw and Garage keep no archive tier).
moto makes a restored copy at once by default. A restore under way (`ongoing-request="true"`, as
S3 shows one for hours) is made with its state manager (`/moto-api/state-manager`): a key's state
moves on after so many reads of it, so one read with a count of 1 moves it to IN_PROGRESS, and a
count of 10**9 then keeps it there.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, Hostile, RunningJob, group_rss, held_at, new_bucket, run_cli

from s3bulk._stores.s3 import OPTIONAL_ATTRIBUTES
from s3bulk.testing.hostile import Status
from s3bulk.testing.throttle import S3ThrottlingProxy

RESTORE_MODEL = "s3::keyrestore"


def _transition(moto: Endpoint, path: str, body: dict[str, object]) -> None:
    request = urllib.request.Request(
        f"{moto.server.endpoint}/moto-api/state-manager/{path}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


@pytest.fixture
def under_way(moto: Endpoint) -> Iterator[Callable[[str, str], None]]:
    """Makes a restore of an archived object under way, and keeps it so for the test."""

    def restoring(bucket: str, key: str) -> None:
        _transition(
            moto,
            "set-transition",
            {"model_name": RESTORE_MODEL, "transition": {"progression": "manual", "times": 1}},
        )
        client = moto.client()
        client.restore_object(Bucket=bucket, Key=key, RestoreRequest={"Days": 1})  # type: ignore[attr-defined]
        client.head_object(Bucket=bucket, Key=key)  # type: ignore[attr-defined]  # read: now IN_PROGRESS
        _transition(
            moto,
            "set-transition",
            {"model_name": RESTORE_MODEL, "transition": {"progression": "manual", "times": 10**9}},
        )
        assert _restore_header(moto, bucket, key) == 'ongoing-request="true"'

    try:
        yield restoring
    finally:
        _transition(moto, "unset-transition", {"model_name": RESTORE_MODEL})


def _restore_header(moto: Endpoint, bucket: str, key: str) -> str:
    return moto.client().head_object(Bucket=bucket, Key=key).get("Restore", "")  # type: ignore[attr-defined]


def _summary(stdout: str) -> dict[str, object]:
    return json.loads(stdout.splitlines()[-1])["summary"]


def test_restore_asks_once_for_each_archived_object_and_counts_the_rest(moto: Endpoint) -> None:
    bucket = new_bucket(moto)
    client = moto.client()
    for n in range(3):
        client.put_object(Bucket=bucket, Key=f"p/g{n}", Body=b"g" * 100, StorageClass="GLACIER")  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="p/deep", Body=b"d" * 50, StorageClass="DEEP_ARCHIVE")  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="p/ready", Body=b"r", StorageClass="GLACIER")  # type: ignore[attr-defined]
    client.restore_object(Bucket=bucket, Key="p/ready", RestoreRequest={"Days": 1})  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="p/plain", Body=b"s")  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="p/instant", Body=b"i", StorageClass="GLACIER_IR")  # type: ignore[attr-defined]

    dry = run_cli(moto.env, "restore", f"s3://{bucket}/p/", "--days", "3", "--tier", "Standard", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "4 to request, 1 already restored, 2 not archived" in _sorted_counts(dry.stdout)
    assert "4 Standard retrievals of 350 B would cost $0.00" in dry.stdout  # 3 x 100 + 50 bytes
    assert all(not _restore_header(moto, bucket, f"p/g{n}") for n in range(3))  # a dry run asks nothing

    done = run_cli(moto.env, "restore", f"s3://{bucket}/p/", "--days", "3", "--tier", "Bulk", "--json")
    assert done.returncode == 0, done.stderr
    summary = _summary(done.stdout)
    assert summary["outcomes"] == {"requested": 4, "already restored": 1, "not archived": 2}
    assert summary["requests"]["RESTORE"] == 4  # type: ignore[index]
    lines = {
        json.loads(line)["source"]: json.loads(line)["restore"] for line in done.stdout.splitlines()[:-1]
    }
    assert lines[f"s3://{bucket}/p/deep"] == "requested"
    assert lines[f"s3://{bucket}/p/plain"] == "not archived"
    for key in ("p/g0", "p/g1", "p/g2", "p/deep"):
        assert 'ongoing-request="false"' in _restore_header(moto, bucket, key)  # moto restores at once

    again = run_cli(moto.env, "restore", f"s3://{bucket}/p/", "--days", "3", "--json")
    assert again.returncode == 0, again.stderr
    summary = _summary(again.stdout)
    assert summary["outcomes"] == {"already restored": 5, "not archived": 2}
    assert "RESTORE" not in summary["requests"]  # type: ignore[operator]


def _sorted_counts(stdout: str) -> str:
    """The summary line's counts after the "; " (they come in the order the workers met them)."""
    line = next(line for line in stdout.splitlines() if line.startswith("restore "))
    counts = dict(reversed(part.split(" ", 1)) for part in line.split("; ", 1)[1].split(", "))
    order = ["to request", "requested", "restore already in progress", "already restored", "not archived"]
    return ", ".join(f"{counts[name]} {name}" for name in order if name in counts)


def test_restores_under_way_are_counted_not_asked_again(
    moto: Endpoint, under_way: Callable[[str, str], None]
) -> None:
    bucket = new_bucket(moto)
    client = moto.client()
    for n in range(4):
        client.put_object(Bucket=bucket, Key=f"g{n}", Body=b"g", StorageClass="GLACIER")  # type: ignore[attr-defined]
    under_way(bucket, "g0")

    done = run_cli(moto.env, "restore", f"s3://{bucket}/", "--days", "1")
    assert done.returncode == 0, done.stderr
    assert _sorted_counts(done.stdout) == "3 requested, 1 restore already in progress"
    assert f"restore: s3://{bucket}/g0 (restore already in progress)" in done.stdout

    shown = {}
    for key in ("g0", "g1"):
        head = run_cli(moto.env, "head", "--json", f"s3://{bucket}/{key}")
        record = json.loads(head.stdout.splitlines()[0])
        shown[key] = record.get("attributes", record)
    assert shown["g0"]["restore_ongoing"] is True and "restore_ready_until" not in shown["g0"]
    assert shown["g1"]["restore_ongoing"] is False  # moto made it at once: ready until a day hence
    assert shown["g1"]["restore_ready_until"].endswith(".000Z")

    again = run_cli(moto.env, "restore", f"s3://{bucket}/", "--days", "1")  # moto: the 3 made at once
    assert _sorted_counts(again.stdout) == "1 restore already in progress, 3 already restored"


def test_refused_options_and_tiers_are_one_line(moto: Endpoint) -> None:
    bucket = new_bucket(moto)
    moto.client().put_object(Bucket=bucket, Key="deep", Body=b"d", StorageClass="DEEP_ARCHIVE")  # type: ignore[attr-defined]
    missing = run_cli(moto.env, "restore", f"s3://{bucket}/")
    assert missing.returncode == 2
    assert (
        missing.stderr.strip()
        .splitlines()[-1]
        .endswith("give --days N: how many days the restored copy stays")
    )
    tier = run_cli(moto.env, "restore", f"s3://{bucket}/", "--days", "1", "--tier", "Fast")
    assert tier.returncode == 2 and "--tier 'Fast': give one of Bulk, Standard, Expedited" in tier.stderr
    expedited = run_cli(moto.env, "restore", f"s3://{bucket}/deep", "--days", "1", "--tier", "Expedited")
    assert expedited.returncode == 1
    assert f"failed: s3://{bucket}/deep: Deep Archive has no Expedited retrieval" in expedited.stderr
    assert not _restore_header(moto, bucket, "deep")


def test_cp_of_archived_objects_names_restore_and_restored_only_copies_the_ready(
    moto: Endpoint, tmp_path: Path, under_way: Callable[[str, str], None]
) -> None:
    bucket = new_bucket(moto)
    client = moto.client()
    client.put_object(Bucket=bucket, Key="a/cold", Body=b"cold", StorageClass="GLACIER")  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="a/warming", Body=b"warming", StorageClass="DEEP_ARCHIVE")  # type: ignore[attr-defined]
    under_way(bucket, "a/warming")
    client.put_object(Bucket=bucket, Key="a/thawed", Body=b"thawed", StorageClass="GLACIER")  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="a/plain", Body=b"plain")  # type: ignore[attr-defined]
    _transition(moto, "unset-transition", {"model_name": RESTORE_MODEL})  # a restore made at once
    client.restore_object(Bucket=bucket, Key="a/thawed", RestoreRequest={"Days": 1})  # type: ignore[attr-defined]
    _transition(
        moto,
        "set-transition",
        {"model_name": RESTORE_MODEL, "transition": {"progression": "manual", "times": 10**9}},
    )

    done = run_cli(moto.env, "cp", f"s3://{bucket}/a/", f"{tmp_path}/all/")
    assert done.returncode == 1
    failed = sorted(line for line in done.stderr.splitlines() if line.startswith("failed: "))
    assert failed == [
        f"failed: s3://{bucket}/a/cold -> {tmp_path}/all/cold: in GLACIER: restore it first: "
        f"s3bulk restore s3://{bucket}/a/cold",
        f"failed: s3://{bucket}/a/warming -> {tmp_path}/all/warming: in DEEP_ARCHIVE: restore it first: "
        f"s3bulk restore s3://{bucket}/a/warming",
    ]
    assert "InvalidObjectState" not in done.stderr
    server_side = run_cli(moto.env, "cp", f"s3://{bucket}/a/cold", f"s3://{bucket}/b/cold")
    assert server_side.returncode == 1
    assert f"restore it first: s3bulk restore s3://{bucket}/a/cold" in server_side.stderr

    ready = run_cli(moto.env, "cp", "--restored-only", f"s3://{bucket}/a/", f"{tmp_path}/ready/")
    assert ready.returncode == 0, ready.stderr
    assert sorted(path.name for path in (tmp_path / "ready").iterdir()) == ["plain", "thawed"]
    assert (tmp_path / "ready" / "thawed").read_bytes() == b"thawed"
    assert "2 objects, 11 B" in ready.stdout and "2 skipped" in ready.stdout


def _listed(env: dict[str, str], url: str) -> dict[str, dict[str, object]]:
    done = run_cli(env, "ls", "-r", "--json", url)
    assert done.returncode == 0, done.stderr
    return {record["key"]: record for record in map(json.loads, done.stdout.splitlines())}


def test_ls_json_shows_each_archived_objects_restore_as_head_does(
    moto: Endpoint, under_way: Callable[[str, str], None]
) -> None:
    """moto lists no RestoreStatus (it ignores `x-amz-optional-object-attributes`): the probe
    HEAD of the page's first archived object finds a restore the listing left out, and the
    other archived objects are asked with a HEAD each; objects in no archive are not."""
    bucket = new_bucket(moto)
    client = moto.client()
    client.put_object(Bucket=bucket, Key="a-thawed", Body=b"t", StorageClass="GLACIER")  # type: ignore[attr-defined]
    client.restore_object(Bucket=bucket, Key="a-thawed", RestoreRequest={"Days": 2})  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="b-thawing", Body=b"w", StorageClass="DEEP_ARCHIVE")  # type: ignore[attr-defined]
    under_way(bucket, "b-thawing")
    client.put_object(Bucket=bucket, Key="c-cold", Body=b"c", StorageClass="GLACIER")  # type: ignore[attr-defined]
    client.put_object(Bucket=bucket, Key="d-plain", Body=b"p")  # type: ignore[attr-defined]

    listed = _listed(moto.env, f"s3://{bucket}/")
    assert sorted(listed) == ["a-thawed", "b-thawing", "c-cold", "d-plain"]
    head = json.loads(run_cli(moto.env, "head", "--json", f"s3://{bucket}/a-thawed").stdout.splitlines()[0])
    head = head.get("attributes", head)
    assert listed["a-thawed"]["restore_ongoing"] is False
    assert listed["a-thawed"]["restore_ready_until"] == head["restore_ready_until"]
    assert listed["b-thawing"]["restore_ongoing"] is True and "restore_ready_until" not in listed["b-thawing"]
    assert "restore_ongoing" not in listed["c-cold"] and "restore_ongoing" not in listed["d-plain"]
    assert listed["c-cold"]["storage_class"] == "GLACIER" and listed["d-plain"]["size"] == 1


def test_ls_json_asks_restore_states_of_services_without_archives_unharmed(minio: Endpoint) -> None:
    """MinIO (like versitygw and Garage) ignores the header that asks for restore states: ls
    lists as it did, with no HEAD (nothing is archived)."""
    bucket = new_bucket(minio)
    for key in ("x", "y/z"):
        minio.client().put_object(Bucket=bucket, Key=key, Body=b"m")  # type: ignore[attr-defined]
    listed = _listed(minio.env, f"s3://{bucket}/")
    assert {key: (record["size"], "restore_ongoing" in record) for key, record in listed.items()} == {
        "x": (1, False),
        "y/z": (1, False),
    }


def test_ls_json_on_a_service_that_refuses_the_restore_header_lists_as_before(hostile: Hostile) -> None:
    """A service that answers a listing asked for restore states 501 NotImplemented (the proxy
    refuses every request that carries the header): asked once more without it, and no more."""
    bucket = new_bucket(hostile.minio)
    for n in range(3):
        hostile.minio.client().put_object(Bucket=bucket, Key=f"k{n}", Body=b"m")  # type: ignore[attr-defined]
    rule = hostile.misbehave(
        Status(501, "NotImplemented"),
        operation="ListObjectsV2",
        when=lambda exchange: OPTIONAL_ATTRIBUTES in exchange.request.headers,
    )
    listed = _listed(hostile.env, f"s3://{bucket}/")
    assert sorted(listed) == ["k0", "k1", "k2"]
    assert rule.applied == 1  # refused once: the job asks no more


def _settled(moto: Endpoint, bucket: str, keys: list[str], proxy: S3ThrottlingProxy) -> list[str]:
    """The keys with a restore, once the RestoreObjects the proxy let through (held ones go on
    after the kill, or fail with their connection) have all reached moto."""
    deadline = time.monotonic() + 60
    while True:
        asked = proxy.log.accepted["POST"]
        found = [key for key in keys if _restore_header(moto, bucket, key)]
        if len(found) == asked == proxy.log.accepted["POST"] or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_restore_killed_and_resumed_asks_only_for_the_rest(moto: Endpoint, tmp_path: Path) -> None:
    bucket = new_bucket(moto)
    client = moto.client()
    keys = [f"k/{n:03d}" for n in range(60)]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=b"x", StorageClass="GLACIER")  # type: ignore[attr-defined]
    env = moto.env | {"S3BULK_STATE_DIR": str(tmp_path / "state")}
    command = ["restore", f"s3://{bucket}/k/", "--days", "2", "--concurrency", "4"]
    with S3ThrottlingProxy(moto.server.endpoint) as proxy:
        env |= {"AWS_ENDPOINT_URL": proxy.endpoint}  # the resume goes where the job went
        with held_at(proxy, 50, [*S3BULK, *command], env, tmp_path / "k.log") as job:
            job.kill_group()
            job.wait()
        under_way = _settled(moto, bucket, keys, proxy)  # what the killed run asked for
        assert 0 < len(under_way) < len(keys)
        jobs = run_cli(env, "jobs", "--json")
        job_id = json.loads(jobs.stdout.splitlines()[0])["job_id"]
        resumed = run_cli(env, "restore", "--resume", job_id, "--json")
        assert resumed.returncode == 0, resumed.stdout[-3000:]
        assert proxy.log.accepted["POST"] == len(keys)  # one RestoreObject each, over both runs
    summary = _summary(resumed.stdout)
    assert summary["requests"]["RESTORE"] == len(keys) - len(under_way)  # type: ignore[index]
    assert all('ongoing-request="false"' in _restore_header(moto, bucket, key) for key in keys)
    counted = summary["outcomes"].get("already restored", 0) + summary["objects_already_done"]  # type: ignore[attr-defined,operator]
    assert counted == len(under_way)


def _archive(moto: Endpoint, bucket: str, keys: list[str]) -> None:
    """Archived objects, written 8 at a time (moto takes ~60 PUTs/s on this machine)."""
    from concurrent.futures import ThreadPoolExecutor

    client = moto.client()

    def put(key: str) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=b"x", StorageClass="GLACIER")  # type: ignore[attr-defined]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, keys))


def _sampled_peak(job: RunningJob, stop: Callable[[], bool]) -> int:
    """The peak RSS summed over the job's process group, sampled until `stop()`."""
    peak = 0
    while not stop():
        peak = max(peak, group_rss(job.pid))
        time.sleep(0.02)
    return peak


def _quiet(proxy: S3ThrottlingProxy) -> int:
    """The RestoreObjects the proxy let through, once the held ones (released after the kill)
    have gone on: the count no longer moves."""
    last, since = -1, time.monotonic()
    while time.monotonic() - since < 2:
        now = proxy.log.accepted["POST"]
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.1)
    return last


@pytest.mark.campaign
@pytest.mark.timeout(3600)
def test_restore_of_20000_archived_objects_killed_and_resumed_asks_once_each(
    moto: Endpoint, tmp_path: Path, reliability: Callable[..., None]
) -> None:
    """Issue 66's goal: `restore` of 20,000 archived objects on moto, SIGKILLed half-way (the
    proxy holds every request after the 10,000th answer), then `--resume`: one RestoreObject per
    object over both runs, counted at the proxy; and the peak RSS of each run's process group."""
    count = 20_000
    bucket = new_bucket(moto)
    keys = [f"a/{n:06d}" for n in range(count)]
    _archive(moto, bucket, keys)
    env = moto.env | {"S3BULK_STATE_DIR": str(tmp_path / "state")}
    command = ["restore", f"s3://{bucket}/a/", "--days", "1", "--tier", "Bulk"]
    with S3ThrottlingProxy(moto.server.endpoint) as proxy:
        env |= {"AWS_ENDPOINT_URL": proxy.endpoint}
        started = time.monotonic()
        proxy.hold_after(count)  # a HEAD and a RestoreObject each: half-way, every later one held
        try:
            with RunningJob([*S3BULK, *command], env, tmp_path / "k.log") as job:
                first_peak = _sampled_peak(job, lambda: proxy.held > 0 or job.poll() is not None)
                assert job.poll() is None, f"the job ended before its kill point: {job.output()}"
                job.kill_group()
                job.wait()
        finally:
            proxy.release()
        killed_wall = time.monotonic() - started
        asked_before = _quiet(proxy)
        assert 0 < asked_before < count
        job_id = json.loads(run_cli(env, "jobs", "--json").stdout.splitlines()[0])["job_id"]
        started = time.monotonic()
        resumed = RunningJob([*S3BULK, "restore", "--resume", job_id, "--json"], env, tmp_path / "r.log")
        resumed_peak = _sampled_peak(resumed, lambda: resumed.poll() is not None)
        resumed_wall = time.monotonic() - started
        assert resumed.wait() == 0, resumed.output()
        assert proxy.log.accepted["POST"] == count  # one RestoreObject each, over both runs
    summary = _summary((tmp_path / "r.log").read_text())
    assert summary["requests"]["RESTORE"] == count - asked_before  # type: ignore[index]
    figures = {
        "objects": count,
        "restores_first_run": asked_before,
        "restores_resumed": count - asked_before,
        "killed_run_wall_s": round(killed_wall, 1),
        "resumed_wall_s": round(resumed_wall, 1),
        "killed_run_peak_rss_mib": round(first_peak / 1024**2),
        "resumed_peak_rss_mib": round(resumed_peak / 1024**2),
        "load": Path("/proc/loadavg").read_text().split()[:3],
    }
    print("FIGURES", json.dumps(figures))
    reliability("restore", "SIGKILL mid `restore` of 20,000 archived objects, then `--resume`", **figures)
