"""s3fs's own `s3fs/tests/test_s3fs.py`, as its release ships it (the sdist on PyPI, fetched by pip
once and cached, never edited), imported for tests/integration/test_s3fs_release.py to run
against `s3bulk://`. The wheel s3fs installs has no tests, so the sdist it was built from is read."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

RELEASE = metadata.version("s3fs")  # the s3fs the suite's own imports (s3fs.core, s3fs.utils) load
MODULE = f"s3fs_release_{RELEASE.replace('.', '_')}_test_s3fs"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "s3bulk-tests" / f"s3fs-{RELEASE}"


def _pip() -> list[str]:
    """pip, from this interpreter or the machine's (uv's environments carry none)."""
    for python in (sys.executable, shutil.which("python3") or "python3"):
        if subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return [python, "-m", "pip"]
    raise RuntimeError("s3fs's test suite is fetched with pip: install pip (python3 -m ensurepip)")


def test_file() -> Path:
    """The release's test_s3fs.py, from the cache or from the sdist pip downloads."""
    cached = CACHE / f"{MODULE}.py"
    if cached.exists():
        return cached
    with tempfile.TemporaryDirectory() as where:
        command = [*_pip(), "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*command, f"s3fs=={RELEASE}", "-d", where], check=True, timeout=300)
        (sdist,) = Path(where).glob("s3fs-*.tar.gz")
        with tarfile.open(sdist) as archive:
            member = archive.extractfile(f"s3fs-{RELEASE}/s3fs/tests/test_s3fs.py")
            assert member is not None
            text = member.read()
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".partial")
    partial.write_bytes(text)
    partial.replace(cached)
    return cached


def load() -> ModuleType:
    """The release's test module, imported with pytest's assertion rewriting (as pytest would
    import it), by a name of its own."""
    path = test_file()
    pytest.register_assert_rewrite(MODULE)
    sys.path.insert(0, str(path.parent))
    try:
        return importlib.import_module(MODULE)
    finally:
        sys.path.remove(str(path.parent))
