"""The rule behind every delete (issue 46): for any single failure injected into a listing, a walk
or a copy (which page, which kind), `sync --delete` and `mv` delete nothing that still exists at
the source. A property, over real MinIO behind `s3bulk.testing.hostile.HostileS3`. And over
every option (issue 62): tests/unit/properties.py's cases, run on MinIO as a person types them
(`MinioBackend`), the same oracle judging them.

`make test` tries S3BULK_PROPERTY_EXAMPLES cases of each (4 by default), `make reliability` 100.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import S3BULK, Endpoint, Hostile, make_tree, new_bucket, run_cli, without_root
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from properties import Case as OptionCase
from properties import (
    Held,
    Outcome,
    Places,
    World,
    check_case,
    differences,
    flags_of,
    lay_out,
    read_world,
)
from properties import cases as option_cases

from s3bulk.testing.hostile import (
    CutBody,
    ErrorIn200,
    Fault,
    Listed,
    LostAnswer,
    NotXml,
    RepeatToken,
    Status,
    TruncatedWithoutToken,
)

EXAMPLES = int(os.environ.get("S3BULK_PROPERTY_EXAMPLES", "4"))
# A failing case is reported as found, not shrunk, in `make test` (a few examples): each shrinking
# step is a whole job again, and a case failed by load once kept a worker 29 minutes past its
# timeout; `make reliability` (S3BULK_PROPERTY_EXAMPLES set) shrinks.
SHRINKS = "S3BULK_PROPERTY_EXAMPLES" in os.environ
PHASES = tuple(p for p in Phase if SHRINKS or p is not Phase.shrink)
KEYS = 2100  # three listing pages
SOURCE = {f"d{i % 7}/k{i:04d}": b"%d\n" % i for i in range(KEYS)}
AT_DESTINATION = {key: data for index, (key, data) in enumerate(SOURCE.items()) if index % 10}
EXTRA = {f"zz/extra{i:02d}": b"only at the destination" for i in range(50)}
_cases = itertools.count()

LISTING_FAULTS: list[Fault] = [
    ErrorIn200(),
    ErrorIn200("AccessDenied", "Access Denied."),
    NotXml(),
    TruncatedWithoutToken(),
    RepeatToken(),
    Status(500),
    Status(403, "AccessDenied"),
    CutBody(after=300),
    Listed("Size", -1, key="d3/k1003"),
    Listed("LastModified", "not a time", key="d3/k1003"),
]
COPY_FAULTS: list[Fault] = [
    ErrorIn200("AccessDenied", "Access Denied."),
    ErrorIn200(),
    NotXml(),
    Status(500),
    LostAnswer(),
]


@dataclass(frozen=True)
class Case:
    shape: str  # "sync s3->local", "sync local->s3", "sync s3->s3", "mv s3->s3"
    where: str  # "source listing", "destination listing", "walk", "copy"
    fault: Fault
    page: int  # the listing page it starts on (1..3), or the key index a copy fails on

    def __str__(self) -> str:
        return f"{self.shape}: {self.fault} on the {self.where} (page/key {self.page})"


@st.composite
def cases(draw: st.DrawFn) -> Case:
    shape = draw(st.sampled_from(["sync s3->local", "sync local->s3", "sync s3->s3", "mv s3->s3"]))
    places = {
        "sync s3->local": ["source listing"],
        "sync local->s3": ["destination listing", "walk"],
        "sync s3->s3": ["source listing", "destination listing", "copy"],
        "mv s3->s3": ["source listing", "copy"],
    }[shape]
    where = draw(st.sampled_from(places))
    if where == "walk":
        return Case(shape, where, Fault(), draw(st.integers(0, 6)))
    if where == "copy":
        return Case(shape, where, draw(st.sampled_from(COPY_FAULTS)), draw(st.integers(0, KEYS - 1)))
    return Case(shape, where, draw(st.sampled_from(LISTING_FAULTS)), draw(st.integers(1, 3)))


@pytest.fixture(scope="module")
def world(minio: Endpoint, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The bucket, holding the source under src/; and the same tree on disk."""
    root = tmp_path_factory.mktemp("never-delete")
    source = make_tree(root / "src", SOURCE)
    make_tree(root / "dst", AT_DESTINATION | EXTRA)
    bucket = new_bucket(minio, "never-delete")
    assert run_cli(minio.env, "cp", f"{source}/", f"s3://{bucket}/src/").returncode == 0
    return bucket, root


def _keys(minio: Endpoint, bucket: str, prefix: str) -> set[str]:
    pages = minio.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {entry["Key"][len(prefix) :] for page in pages for entry in page.get("Contents", [])}


def _files(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}


@settings(
    max_examples=EXAMPLES,
    phases=PHASES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
def test_no_single_failure_makes_sync_delete_or_mv_delete_what_the_source_holds(
    case: Case, hostile: Hostile, minio: Endpoint, world: tuple[str, Path]
) -> None:
    hostile.server.reset()
    bucket, root = world
    n = next(_cases)
    work = root / f"case{n}"
    work.mkdir()
    source_prefix, destination_prefix = "src/", f"dst{n}/"
    if case.shape == "mv s3->s3":  # mv changes its source: a copy of its own
        source_prefix = f"mv{n}/"
        assert run_cli(minio.env, "cp", f"{root}/src/", f"s3://{bucket}/{source_prefix}").returncode == 0
    elif case.shape.endswith("->s3"):  # what sync finds there: most of the source, and extras
        assert run_cli(minio.env, "cp", f"{root}/dst/", f"s3://{bucket}/{destination_prefix}").returncode == 0
    local = work / "local"
    shutil.copytree(root / ("dst" if case.shape.endswith("->local") else "src"), local)
    source = f"{local}/" if case.shape.startswith("sync local") else f"s3://{bucket}/{source_prefix}"
    destination = f"{local}/" if case.shape.endswith("->local") else f"s3://{bucket}/{destination_prefix}"
    before = _files(local) if case.shape.endswith("->local") else _keys(minio, bucket, destination_prefix)
    held = _keys(minio, bucket, source_prefix) if source.startswith("s3://") else _files(local)

    locked = None
    if case.where == "walk":
        locked = local / f"d{case.page}"
        locked.chmod(0)
    elif case.where == "copy":
        key = source_prefix + list(SOURCE)[case.page]
        hostile.misbehave(
            case.fault,
            operation="CopyObject",
            bucket=bucket,
            key=destination_prefix + key[len(source_prefix) :],
        )
    else:
        prefix = source_prefix if case.where == "source listing" else destination_prefix
        hostile.misbehave(
            case.fault,
            operation="ListObjectsV2",
            bucket=bucket,
            after=case.page - 1,
            when=lambda exchange: (
                "max-keys" not in exchange.request.query and exchange.request.query.get("prefix") == prefix
            ),
        )
    verb = ["mv"] if case.shape.startswith("mv") else ["sync", "--delete"]
    env = hostile.env | {"AWS_MAX_ATTEMPTS": "2"}
    try:
        if locked is not None:  # a directory it may not read: a process without root's override
            result = subprocess.run(
                without_root([*S3BULK, *verb, source, destination]),
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        else:  # the job is the point, not the process: forked, without an interpreter's start-up
            result = run_cli(env, *verb, source, destination)
    finally:
        if locked is not None:
            locked.chmod(0o755)
    output = f"{case}\n{result.stdout[-1500:]}\n{result.stderr[-1500:]}"
    assert "Traceback" not in result.stderr, output

    if case.shape.startswith("mv"):  # every source that went is at the destination, the same
        left = _keys(minio, bucket, source_prefix)
        arrived = _keys(minio, bucket, destination_prefix)
        assert held - left <= arrived, output
    else:  # nothing the source holds was deleted at the destination
        after = _files(local) if case.shape.endswith("->local") else _keys(minio, bucket, destination_prefix)
        assert (before & held) - after == set(), output
        if result.returncode == 0:  # a run that says it finished made them the same
            assert after == held, output


class MinioBackend:
    """Each case in a bucket of its own on MinIO, its local side a directory, the command run as a
    person types it. MinIO sets every object's time itself (now), so the oracle judges the
    times it finds, not those the case asked for."""

    def __init__(self, minio: Endpoint, root: Path) -> None:
        self.minio, self.root, self.count = minio, root, 0

    def prepare(self, case: OptionCase) -> Places:
        self.count += 1
        work = self.root / f"options{self.count}"
        work.mkdir(parents=True)
        bucket, client = new_bucket(self.minio, "options"), self.minio.client()

        def put(side: str, name: str, thing: Held) -> None:
            client.put_object(Bucket=bucket, Key=f"{side}/{name}", Body=thing.body)

        return lay_out(case, work, lambda side: f"s3://{bucket}/{side}/", put)

    def read(self, case: OptionCase, places: Places) -> World:
        return read_world(places, self._objects)

    def _objects(self, bucket: str, prefix: str) -> dict[str, Held]:
        client = self.minio.client()
        found = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for entry in page.get("Contents", []):
                body = client.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
                found[entry["Key"][len(prefix) :]] = Held(body, entry["LastModified"].timestamp())
        return found

    def run(self, case: OptionCase, places: Places) -> Outcome:
        done = run_cli(self.minio.env, *flags_of(case, places))  # forked: the job is the point
        output = done.stdout[-2000:] + done.stderr[-2000:]
        if case.command != "check":
            return Outcome(done.returncode, output)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        said = [(row["status"], row["source"]) for row in rows if "status" in row]
        return Outcome(done.returncode, output, differences(said, places))


@settings(
    max_examples=EXAMPLES,
    phases=PHASES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=option_cases(odd_keys=False, s3_conflicts=False))
def test_no_option_makes_a_command_delete_what_the_source_holds_on_minio(
    case: OptionCase, minio: Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> None:
    check_case(case, MinioBackend(minio, tmp_path_factory.mktemp("options")))
