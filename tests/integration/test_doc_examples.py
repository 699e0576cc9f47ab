"""Every command line and Python example in README.md and docs/*.md, run against MinIO, so the
docs cannot drift from what s3bulk does.

Each fenced block whose language is a shell's (`bash`, `sh`, `shell`, `console`) or `python` is one
test. It runs in a fresh directory, as a person would run it: a shell block by bash (`set -e -o
pipefail`, `s3bulk` and `python` on PATH from this environment), a Python block as a script, with
the AWS variables pointing at the session's MinIO and no profile. Every bucket the block names
(`s3://NAME`, `s3bulk://NAME`) is made empty first. An HTML comment right above the fence (unseen
on the site and on GitHub) sets the rest, as `key="value"` pairs:

    <!-- example: files="photos/a.jpg photos/b.jpg" objects="s3://bucket/a.jpg" -->
    <!-- example: setup="python -m s3bulk.testing.wtk wtk --files 2" exit=1 -->
    <!-- example: skip="real AWS: KMS keys and another region" -->

`files`: local files made first (a name ending in `/` is a directory); `objects`: objects put
first; `buckets`: buckets made besides those named; `absent`: named buckets that must not exist
(`mb` makes them); `setup`: shell run first, in the same directory (in the same shell, for a
shell block: a variable it sets is the block's; `$DOCFILES` is tests/integration/docfiles, the
modules and scripts the examples name); `continues`: a Python block that goes on from the one
before it on the page (its definitions are run first); `vectors`: S3 Vectors calls go to
s3bulk.testing's stand-in server (`AWS_ENDPOINT_URL_S3VECTORS`; moto has no QueryVectors);
`exit`: the exit code the block ends with (a shell block stops at its first failing command: put
the one expected to fail last); `skip`: not run here, and why (real AWS, a Ray cluster): each is
listed in the run's summary (`-ra`).
"""

from __future__ import annotations

import gzip
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import Endpoint, cli_on_path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
KEYS = {"files", "objects", "buckets", "absent", "setup", "vectors", "continues", "exit", "skip"}
DOCFILES = Path(__file__).resolve().parent / "docfiles"
FENCE = re.compile(r"^```(\w+)\s*$")
DIRECTIVE = re.compile(r"<!--\s*example:(.*?)-->", re.S)
BUCKET = re.compile(r"\bs3(?:bulk)?://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])")


@dataclass
class Example:
    page: str
    line: int
    language: str
    text: str
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    def words(self, key: str) -> list[str]:
        return self.settings.get(key, "").split()


def examples_of(path: Path) -> list[Example]:
    """The fenced blocks of one page, each with the directive written right above it."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Example] = []
    python = ""  # the page's Python so far, for a block that continues it
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(n for n in range(index + 1, len(lines)) if lines[n].startswith("```"))
        language = opening.group(1)
        if language in SHELLS or language == "python":
            above = "\n".join(lines[max(0, index - 6) : index])
            directive = DIRECTIVE.findall(above)
            settings = parse(directive[-1]) if directive and above.rstrip().endswith("-->") else {}
            page = str(path.relative_to(ROOT))
            text = "\n".join(lines[index + 1 : end])
            if language == "python":
                python = f"{python}\n{text}" if "continues" in settings else text
                text = python
            found.append(Example(page, index + 1, language, text, settings))
        index = end + 1
    return found


def parse(directive: str) -> dict[str, str]:
    settings = dict(word.split("=", 1) if "=" in word else (word, "1") for word in shlex.split(directive))
    unknown = set(settings) - KEYS
    assert not unknown, f"unknown example settings {unknown}: the keys are {sorted(KEYS)}"
    return settings


EXAMPLES = [example for page in PAGES for example in examples_of(page)]


def test_every_page_is_read() -> None:
    """The pages hold examples and each is found (a fence the parser missed would not be run)."""
    fences = sum(
        1
        for page in PAGES
        for line in page.read_text(encoding="utf-8").split("\n")
        if (m := FENCE.match(line)) and (m.group(1) in SHELLS or m.group(1) == "python")
    )
    assert fences == len(EXAMPLES) > 10


def content_for(name: str) -> bytes:
    """A body that its name's tools can read: gzip for .gz, JSON for .json, text otherwise."""
    text = f"{name}\n".encode() * 64
    if name.endswith(".gz"):
        return gzip.compress(text)
    if name.endswith(".json"):
        return b'{"name": "%s"}\n' % name.encode()
    return text


def remove_bucket(endpoint: Endpoint, bucket: str) -> None:
    """What an earlier block left in the bucket gone, old versions and delete markers too."""
    client = endpoint.client()
    try:
        for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
            doomed = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            if doomed:
                client.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})
        client.delete_bucket(Bucket=bucket)
    except client.exceptions.NoSuchBucket:
        pass


def empty_bucket(endpoint: Endpoint, bucket: str) -> None:
    """The bucket as a block expects it: there, empty, and as new (no versioning)."""
    remove_bucket(endpoint, bucket)
    endpoint.client().create_bucket(Bucket=bucket)


def arrange(example: Example, endpoint: Endpoint, where: Path) -> None:
    named = set(
        BUCKET.findall(" ".join([example.text, example.settings.get("setup", ""), *example.words("objects")]))
    )
    for bucket in sorted(named - set(example.words("absent")) | set(example.words("buckets"))):
        empty_bucket(endpoint, bucket)
    for bucket in example.words("absent"):
        remove_bucket(endpoint, bucket)
    for name in example.words("files"):
        path = where / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content_for(name))
    client = endpoint.client()
    for url in example.words("objects"):
        bucket, key = url.removeprefix("s3://").split("/", 1)
        client.put_object(Bucket=bucket, Key=key, Body=content_for(key))


def environment(endpoint: Endpoint, where: Path, vectors: str | None) -> dict[str, str]:
    """MinIO through the AWS variables, no profile and a home of the block's own; s3bulk and
    python are this environment's, its `s3bulk` forked from the session's zygote (conftest's
    cli_on_path: each of the ~80 commands skips the interpreter's start-up; test_zygote checks it
    says what the real one says)."""
    env = endpoint.env | {
        "HOME": str(where),
        "PATH": f"{cli_on_path()}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "DOCFILES": str(DOCFILES),
    }
    env.pop("PYTHONPATH", None)
    if vectors:
        env["AWS_ENDPOINT_URL_S3VECTORS"] = vectors
    return env


def run(example: Example, env: dict[str, str], where: Path) -> subprocess.CompletedProcess[str]:
    setup = example.settings.get("setup", "")
    if setup and example.language == "python":
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", setup],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, f"{example.name}: its setup failed\n{done.stdout}\n{done.stderr}"
    if example.language == "python":
        (where / "example.py").write_text(example.text + "\n")
        command = [sys.executable, "example.py"]
    else:
        text = example.text
        if example.language == "console":  # the lines after a prompt are the commands
            text = "\n".join(line[2:] for line in text.split("\n") if line.startswith("$ "))
        script = where.parent / "example.sh"  # beside the directory, not in what the block uploads
        script.write_text(f"set -e -o pipefail\n{setup}\n{text}\n")
        command = ["bash", str(script)]
    return subprocess.run(
        command,
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example(example: Example, minio: Endpoint, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if "skip" in example.settings:
        pytest.skip(f"not run here: {example.settings['skip']}")
    where = tmp_path / "work"
    where.mkdir()
    vectors = request.getfixturevalue("standin").endpoint if "vectors" in example.settings else None
    env = environment(minio, where, vectors)
    arrange(example, minio, where)
    result = run(example, env, where)
    expected = int(example.settings.get("exit", "0"))
    assert result.returncode == expected, (
        f"{example.name} ({example.language}) exited {result.returncode}, expected {expected}\n"
        f"--- block\n{example.text}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    )
