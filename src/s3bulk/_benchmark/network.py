"""Put a local MinIO behind a real round-trip time, so loopback benchmarks show what a network does.

On loopback the RTT is ~0 and the seeds' effects (threads help I/O-bound work, processes help
CPU-bound work, concurrency hides latency) do not show; with 10-40 ms they do. Two ways:
- `tc netem` on a veth pair into a network namespace we create (root only), with MinIO inside
  it: the most faithful (every packet, handshakes included, is delayed). Traffic goes only to
  addresses inside that namespace.
- otherwise toxiproxy's latency toxic on loopback, half the RTT each way: every request and every
  response is delayed, but TCP handshakes (to the proxy) are not, and the proxy burns CPU on the
  same cores, so its CPU seconds are reported next to the figures.
The machines this project runs on have no sch_netem in their kernel, so the probe usually says no.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path
from types import TracebackType

from s3bulk.testing.servers import MinioServer, Server, find_tool


def netem_available() -> bool:
    """Try netem inside a throwaway namespace: never touches the host's own interfaces."""
    if os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("tc")):
        return False
    namespace = f"s3bulk-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", namespace], capture_output=True).returncode != 0:
        return False
    try:
        probe = [
            "ip",
            "netns",
            "exec",
            namespace,
            "tc",
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
            "netem",
            "delay",
            "1ms",
        ]
        return subprocess.run(probe, capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


class ToxiproxyServer(Server):
    """toxiproxy (built by scripts/build-tools.sh) with an HTTP API on a loopback port."""

    health_path = "/version"

    def command(self) -> list[str]:
        return [str(find_tool("toxiproxy-server")), "-host", "127.0.0.1", "-port", str(self.port)]

    def _api(self, method: str, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.endpoint + path, data=data, method=method)
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = reply.read()
        return json.loads(text) if text else {}

    def proxy(self, name: str, upstream: str) -> int:
        """A new proxy to `upstream` (host:port); returns the loopback port it listens on."""
        created = self._api("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0", "upstream": upstream})
        return int(str(created["listen"]).rsplit(":", 1)[1])

    def toxic(self, proxy: str, kind: str, stream: str, toxicity: float = 1.0, **attributes: int) -> None:
        """Add a toxic; `toxicity` is the share of connections it applies to."""
        body = {
            "name": f"{kind}-{stream}",
            "type": kind,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": attributes,
        }
        self._api("POST", f"/proxies/{proxy}/toxics", body)

    def cpu_seconds(self) -> float:
        if self.process is None:
            return 0.0
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


class NetemNamespace:
    """A namespace joined to the host by a veth pair with netem delay on both ends: half the RTT
    each way. Its addresses (10.213.N.0/30) exist only on that pair."""

    def __init__(self, rtt_ms: float) -> None:
        tag = os.getpid() % 100_000
        self.name = f"s3bulk-{tag}"
        self.host_side, self.inner_side = f"s3b{tag}h", f"s3b{tag}n"
        self.host_address = f"10.213.{tag % 250}.1"
        self.inner_address = f"10.213.{tag % 250}.2"
        self.rtt_ms = rtt_ms

    def start(self) -> NetemNamespace:
        inside = ("ip", "netns", "exec", self.name)
        delay = f"{self.rtt_ms / 2:g}ms"
        _run("ip", "netns", "add", self.name)
        try:
            _run("ip", "link", "add", self.host_side, "type", "veth", "peer", "name", self.inner_side)
            _run("ip", "link", "set", self.inner_side, "netns", self.name)
            _run("ip", "addr", "add", f"{self.host_address}/30", "dev", self.host_side)
            _run("ip", "link", "set", self.host_side, "up")
            _run(*inside, "ip", "addr", "add", f"{self.inner_address}/30", "dev", self.inner_side)
            _run(*inside, "ip", "link", "set", self.inner_side, "up")
            _run(*inside, "ip", "link", "set", "lo", "up")
            _run("tc", "qdisc", "add", "dev", self.host_side, "root", "netem", "delay", delay)
            _run(*inside, "tc", "qdisc", "add", "dev", self.inner_side, "root", "netem", "delay", delay)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)  # the veth pair goes too


class DelayedMinio:
    """A MinIO (or, given `server`, any S3 server) whose clients see `rtt_ms` of round-trip
    time; `endpoint` is where they connect."""

    def __init__(
        self, data_dir: Path | None, rtt_ms: float, public_metrics: bool = False, server: Server | None = None
    ) -> None:
        self.minio = server or MinioServer(data_dir, public_metrics=public_metrics)
        self.rtt_ms = rtt_ms
        self.proxy: ToxiproxyServer | None = None
        self.namespace: NetemNamespace | None = None
        self.endpoint = ""
        self.method = "loopback"

    def start(self) -> DelayedMinio:
        try:
            return self._start()
        except BaseException:
            self.stop()  # a half-started setup leaves no server or namespace behind
            raise

    def _start(self) -> DelayedMinio:
        if self.rtt_ms > 0 and netem_available():
            self.method = "netem"
            self.namespace = NetemNamespace(self.rtt_ms).start()
            self.minio.host = self.namespace.inner_address
            self.minio.wrapper = ("ip", "netns", "exec", self.namespace.name)
        self.minio.start()
        self.endpoint = self.minio.endpoint
        if self.rtt_ms <= 0 or self.namespace is not None:
            return self
        self.method = "toxiproxy"
        proxy = self.proxy = ToxiproxyServer()
        proxy.start()
        port = proxy.proxy("minio", f"127.0.0.1:{self.minio.port}")
        for stream in ("upstream", "downstream"):
            proxy.toxic("minio", "latency", stream, latency=round(self.rtt_ms / 2), jitter=0)  # whole ms
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    def describe(self) -> str:
        if self.method == "loopback":
            return "loopback (RTT ~0)"
        if self.method == "netem":
            return f"{self.rtt_ms:g} ms RTT by tc netem on a veth pair into a network namespace"
        return (
            f"{self.rtt_ms:g} ms RTT by toxiproxy's latency toxic, half each way "
            "(tc netem unavailable: not root, or no sch_netem in this kernel)"
        )

    def proxy_cpu_seconds(self) -> float:
        return self.proxy.cpu_seconds() if self.proxy else 0.0

    def client_env(self) -> dict[str, str]:
        return self.minio.client_env() | {"AWS_ENDPOINT_URL": self.endpoint}

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        self.minio.stop()
        if self.namespace is not None:
            self.namespace.stop()
            self.namespace = None

    def __enter__(self) -> DelayedMinio:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
