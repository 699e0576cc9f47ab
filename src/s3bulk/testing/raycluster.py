"""A Ray cluster of one node on loopback, for tests and benchmarks of the ray engine.

`ray start --head --block` runs in its own session, so stopping it (SIGTERM, then SIGKILL to the
whole group) ends its GCS, raylet and worker processes and nothing else on the machine (`ray
stop` would end every Ray instance, a test's local one included). Token authentication stays on,
with a token made for this cluster: a fresh machine has no ~/.ray token to fall back on, and
clients get the token in their environment (`client_env`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from s3bulk.testing.servers import free_port


class RayCluster:
    def __init__(self, cpus: int = 2, env: dict[str, str] | None = None) -> None:
        self.cpus = cpus
        self.port = 0
        self.token = secrets.token_hex(32)
        self.env = dict(env if env is not None else os.environ)  # what workers run with (credentials)
        self.process: subprocess.Popen[bytes] | None = None
        self.temp = Path(tempfile.mkdtemp(prefix="s3bulk-ray-"))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client_env(self) -> dict[str, str]:
        """What a driver needs to join: the token (the address goes to --ray-address)."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def __enter__(self) -> RayCluster:
        self.port = free_port()
        ray = Path(sys.executable).with_name("ray")
        command = [
            str(ray), "start", "--head", "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={self.port}",
            f"--num-cpus={self.cpus}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={self.temp}",
        ]  # fmt: skip
        log = open(self.temp / "head.log", "wb")  # lives as long as the cluster
        self.process = subprocess.Popen(
            command,
            env=self.env | self.client_env() | {"RAY_USAGE_STATS_ENABLED": "0"},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 120) -> None:
        """Ready once a driver can join and sees the cluster's CPUs."""
        probe = (
            f"import ray; ray.init(address={self.address!r}, _node_ip_address='127.0.0.1', "
            "log_to_driver=False); print(int(ray.cluster_resources().get('CPU', 0)))"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"ray start failed:\n{self.log_tail()}")
            reply = subprocess.run(
                [sys.executable, "-c", probe],
                env=os.environ | self.client_env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if reply.returncode == 0 and reply.stdout.strip().endswith(str(self.cpus)):
                return
            time.sleep(1)
        raise RuntimeError(f"the Ray cluster did not come up:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        path = self.temp / "head.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def __exit__(self, *exc: Any) -> None:
        if self.process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        _kill_session_leftovers(self.temp)


def _kill_session_leftovers(temp: Path) -> None:
    """Ray daemons that left the group (they may start their own sessions) but belong to this
    cluster: they were started with its temp dir on their command line."""
    import psutil

    marker = str(temp)
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if marker in " ".join(process.info["cmdline"] or []):
                process.kill()
