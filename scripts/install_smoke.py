"""What a user does first with an installed s3bulk (scripts/install-test.sh runs it with the
Python of a brand-new virtual environment, from a directory outside the repository): the
command and the API against a local MinIO, and, per install, what its extras allow.

    python install_smoke.py core   # pip install s3bulk: moves objects; gather names its extra
    python install_smoke.py all    # pip install 's3bulk[all]': gather reads an HDF5 file
    python install_smoke.py beside # s3bulk beside s3fs and boto3, on the botocore they chose:
                                   # core's, and what s3bulk asks of botocore (a profile's
                                   # services section, a presigned URL)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from s3bulk.testing import MinioServer

BIN = Path(sys.executable).parent


def run(env: dict[str, str], *words: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(BIN / "s3bulk"), *words], env=env, capture_output=True, text=True)
    print(f"$ s3bulk {' '.join(words)}\n{done.stdout}{done.stderr}".rstrip())
    return done


def main(kind: str) -> None:
    import s3bulk

    where = s3bulk.__file__ or ""
    assert Path(where).is_relative_to(sys.prefix), f"not the installed s3bulk: {where}"
    with MinioServer() as server:
        env = os.environ | server.client_env()
        version = run(env, "--version")
        assert version.stdout.strip() == f"s3bulk {s3bulk.__version__} (native part {s3bulk.__version__})"
        assert run(env, "mb", "s3://smoke").returncode == 0
        up = Path("up")
        up.mkdir(exist_ok=True)
        for n in range(50):
            (up / f"f{n:02d}.txt").write_text(f"file {n}\n" * 100)
        assert run(env, "cp", "up/", "s3://smoke/up/").returncode == 0
        assert run(env, "cp", "s3://smoke/up/", "down/").returncode == 0
        assert sorted(p.read_text() for p in Path("down").iterdir()) == sorted(
            p.read_text() for p in up.iterdir()
        )
        os.environ.update(server.client_env())
        report = s3bulk.copy("s3://smoke/up/", "again/")
        assert report.objects_done == 50, report
        if kind == "beside":
            botocore_s_part(server, env)
        if kind in ("core", "beside"):
            refused = run(env, "gather", "s3://smoke/x.h5", "-d", "ws", "-s", ":,1", "-o", "x.npy")
            assert refused.returncode == 2 and "pip install 's3bulk[arrays]'" in refused.stderr
            if importlib.util.find_spec("fsspec") is None:  # s3bulk.fsspec names its extra
                try:
                    importlib.import_module("s3bulk.fsspec")
                except s3bulk.UsageError as error:
                    assert "pip install 's3bulk[fsspec]'" in str(error), error
                else:
                    raise AssertionError("s3bulk.fsspec imported without fsspec installed")
        else:
            import h5py
            import numpy as np

            grid = np.arange(200, dtype="float32").reshape(20, 10)
            with h5py.File("grid.h5", "w") as handle:
                handle.create_dataset("ws", data=grid, chunks=(5, 5))
            assert run(env, "cp", "grid.h5", "s3://smoke/grid.h5").returncode == 0
            gathered = run(env, "gather", "s3://smoke/grid.h5", "-d", "ws", "-s", ":,3", "-o", "col.npy")
            assert gathered.returncode == 0
            assert np.load("col.npy").ravel().tolist() == grid[:, 3].tolist()
            import fsspec

            fs = fsspec.filesystem("s3bulk")  # found by the installed wheel's entry point
            assert len(fs.find("smoke/up")) == 50
            assert fs.cat("smoke/up/f07.txt") == (up / "f07.txt").read_bytes()
    print(f"install smoke ({kind}): ok")


def botocore_s_part(server: MinioServer, env: dict[str, str]) -> None:
    """What s3bulk reads through botocore, on the version installed: a profile whose endpoint
    is in a services section (botocore's config loader and session, 1.31 on), and a presigned
    URL (its query signer) that plain urllib fetches."""
    import urllib.request

    import botocore

    client = server.client_env()
    config, credentials = Path("aws-config").absolute(), Path("aws-credentials").absolute()
    config.write_text(
        "[profile beside]\nregion = us-east-1\nservices = here\n\n"
        f"[services here]\ns3 =\n  endpoint_url = {client['AWS_ENDPOINT_URL']}\n"
    )
    credentials.write_text(
        f"[beside]\naws_access_key_id = {client['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {client['AWS_SECRET_ACCESS_KEY']}\n"
    )
    profiled = {name: value for name, value in env.items() if not name.startswith("AWS_")}
    profiled |= {"AWS_CONFIG_FILE": str(config), "AWS_SHARED_CREDENTIALS_FILE": str(credentials)}
    listed = run(profiled, "ls", "--profile", "beside", "s3://smoke/up/")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 50, listed.stderr
    url = run(env, "presign", "s3://smoke/up/f07.txt", "--expires-in", "60").stdout.strip()
    with urllib.request.urlopen(url) as answer:
        assert answer.read() == Path("up/f07.txt").read_bytes()
    print(f"botocore {botocore.__version__}: a services section and a presigned URL work")


if __name__ == "__main__":
    main(sys.argv[1])
