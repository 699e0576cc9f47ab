"""Start and stop real S3-speaking servers on free loopback ports.

MinIO is the S3 peer (real semantics); moto's server stands in only where nothing real exists
locally (S3 Vectors) or where a permissive peer is needed (keys with ``..`` segments, which MinIO
refuses to store). Both are plain subprocesses: `stop()` always kills them, and the context
manager form guarantees it even when a test fails.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

ROOT_USER = "s3bulk-test"
ROOT_PASSWORD = "s3bulk-test-secret-key"
REPO_ROOT = Path(__file__).resolve().parents[3]


KMS_KEY_ID = "s3bulk-test-key"


def free_port() -> int:
    """A loopback port that was free a moment ago (the server binding it may still race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_tool(name: str) -> Path:
    """The binary built by scripts/build-tools.sh, or one on PATH, or a clear error."""
    override = os.environ.get(f"S3BULK_{name.upper()}_BIN")
    candidates = [Path(override)] if override else []
    candidates.append(REPO_ROOT / ".tools" / "bin" / name)
    on_path = shutil.which(name)
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(
        f"{name} not found: run scripts/build-tools.sh (or set S3BULK_{name.upper()}_BIN)"
    )


class Server:
    """A subprocess serving HTTP on 127.0.0.1:port, ready once `health_path` answers."""

    health_path = "/"
    access_key = ROOT_USER
    secret_key = ROOT_PASSWORD
    host = "127.0.0.1"  # or an address inside a network namespace we created
    wrapper: tuple[str, ...] = ()  # e.g. ("ip", "netns", "exec", NAME) to start it in there

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None
        self._own_dir: Path | None = None  # a throwaway data directory: gone once stopped

    def _data_dir(self, given: Path | None, name: str) -> Path:
        """`given`, kept; or a throwaway directory, removed when the server stops (and made again
        if it starts again), so a test run leaves nothing in the temporary directory."""
        if given is not None:
            return given
        self._own_dir = Path(tempfile.mkdtemp(prefix=f"s3bulk-{name}-"))
        return self._own_dir

    scheme = "http"

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, timeout: float = 60.0) -> Server:
        for _attempt in range(3):  # a port taken between free_port() and bind: pick another
            self._launch(free_port())
            if self._wait_ready(timeout):
                return self
            self.stop()
        raise RuntimeError(f"{type(self).__name__} did not start:\n{self.log_tail()}")

    def _launch(self, port: int) -> None:
        self.port = port
        if self._own_dir is not None:
            self._own_dir.mkdir(parents=True, exist_ok=True)
        if self._log is None:  # the log lives as long as the server, so no context manager
            self._log = tempfile.NamedTemporaryFile(prefix=f"s3bulk-{type(self).__name__}-", suffix=".log")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*self.wrapper, *self.command()],
            env=self.environment(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def restart(self, pause: float = 0.0, timeout: float = 60.0) -> None:
        """Stop the server (SIGKILL, as a crash) and start it again on the same port, after
        `pause` seconds: clients see an outage of the pause plus the start-up."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        time.sleep(pause)
        self._launch(self.port)
        if not self._wait_ready(timeout):
            raise RuntimeError(f"{type(self).__name__} did not come back:\n{self.log_tail()}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            try:
                # a TLS test server's certificate is its own, made up: readiness does not check it
                unverified = ssl._create_unverified_context() if self.scheme == "https" else None
                with urllib.request.urlopen(
                    self.endpoint + self.health_path, timeout=2, context=unverified
                ) as reply:
                    if reply.status < 500:
                        return True
            except urllib.error.HTTPError as err:
                if err.code < 500:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def log_tail(self, lines: int = 30) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        text = Path(self._log.name).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def client_env(self) -> dict[str, str]:
        """The standard AWS variables a client needs to talk to this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class MinioServer(Server):
    """MinIO in single-drive mode over a throwaway data directory; with `tls`, over HTTPS with a
    self-signed certificate (MinIO takes SSE-C keys only over TLS), which clients cannot verify."""

    health_path = "/minio/health/ready"

    def __init__(
        self, data_dir: Path | None = None, public_metrics: bool = False, tls: bool = False, region: str = ""
    ) -> None:
        super().__init__()
        self.region = region  # the server's own region (MINIO_SITE_REGION): requests must be signed for it
        self.public_metrics = public_metrics  # benchmarks count every tool's requests server-side
        self.data_dir = self._data_dir(data_dir, "minio")
        self.scheme = "https" if tls else "http"
        self.certs_dir = _self_signed_certificate(self.host) if tls else None

    def command(self) -> list[str]:
        certs = ["--certs-dir", str(self.certs_dir)] if self.certs_dir else []
        return [
            str(find_tool("minio")),
            "server",
            str(self.data_dir),
            "--address",
            f"{self.host}:{self.port}",
            *certs,
            "--quiet",
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            MINIO_ROOT_USER=self.access_key,
            MINIO_ROOT_PASSWORD=self.secret_key,
            MINIO_BROWSER="off",
            MINIO_UPDATE="off",
            MINIO_CI_CD="1",  # skip the root-disk check: test data lives on the root disk
            # the background scanner crawls every object; on a data set of 100,000 keys it
            # competes for the same two cores and disk as the clients being measured
            MINIO_SCANNER_SPEED="slowest",
            # a built-in key, so SSE-S3 and SSE-KMS (key id "s3bulk-test-key") work as on AWS
            MINIO_KMS_SECRET_KEY=f"{KMS_KEY_ID}:{base64.b64encode(bytes(range(32))).decode()}",
        )
        if self.public_metrics:
            env["MINIO_PROMETHEUS_AUTH_TYPE"] = "public"
        if self.region:
            env["MINIO_SITE_REGION"] = self.region
        return env

    def stop(self) -> None:
        super().stop()
        if self.certs_dir:  # restart() keeps it; a stopped server has no use for it
            shutil.rmtree(self.certs_dir, ignore_errors=True)


class VersityServer(Server):
    """Versity's S3 gateway (versitygw) over a POSIX directory: buckets are directories, objects
    files, attributes extended attributes; a second real S3 implementation, independent of
    MinIO's code, for the compatibility matrix."""

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__()
        self.data_dir = self._data_dir(data_dir, "versitygw")

    def command(self) -> list[str]:
        return [
            str(find_tool("versitygw")),
            "--access",
            self.access_key,
            "--secret",
            self.secret_key,
            "--port",
            f"{self.host}:{self.port}",
            "--quiet",
            "posix",
            str(self.data_dir),
        ]


class GarageServer(Server):
    """Garage (Deuxfleurs' distributed object store) as one node over a throwaway directory. Its
    metadata is an ordered key-value database, so a StartAfter is a seek, as on S3: the server
    where parallel key ranges can show their speed. Keys must look like Garage's own ("GK" and
    24 hex digits, a 64-hex secret); the node gets a one-node layout and the key may create
    buckets, so tests create theirs over S3 as anywhere else."""

    access_key = "GK" + "5a3b" * 6
    secret_key = "5ec7e7" * 10 + "5ec7"

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__()
        self.data_dir = self._data_dir(data_dir, "garage")
        self.config = self.data_dir / "garage.toml"
        # layout and key live in its metadata: a restart(), or a server over a kept directory,
        # finds them there
        self._configured = (self.data_dir / "meta").exists()

    def command(self) -> list[str]:
        rpc = free_port()
        self.config.write_text(
            f'metadata_dir = "{self.data_dir / "meta"}"\n'
            f'data_dir = "{self.data_dir / "data"}"\n'
            'db_engine = "lmdb"\n'
            "replication_factor = 1\n"
            f'rpc_bind_addr = "{self.host}:{rpc}"\n'
            f'rpc_public_addr = "{self.host}:{rpc}"\n'
            f'rpc_secret = "{"0f" * 32}"\n'
            "[s3_api]\n"
            's3_region = "us-east-1"\n'
            f'api_bind_addr = "{self.host}:{self.port}"\n'
        )
        return [str(find_tool("garage")), "-c", str(self.config), "server"]

    def _cli(self, *args: str) -> str:
        done = subprocess.run(
            [str(find_tool("garage")), "-c", str(self.config), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode:
            raise RuntimeError(f"garage {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def _wait_ready(self, timeout: float) -> bool:
        """Up, then given its layout and the test key (an unconfigured node answers 503)."""
        deadline = time.monotonic() + timeout
        if not self._configured:
            node = self._node_id(deadline)
            if node is None:
                return False
            self._cli("layout", "assign", "-z", "dc1", "-c", "1G", node[:16])
            self._cli("layout", "apply", "--version", "1")
            self._cli("key", "import", "--yes", "-n", "s3bulk", self.access_key, self.secret_key)
            self._cli("key", "allow", "--create-bucket", self.access_key)
            self._configured = True
        return super()._wait_ready(max(1.0, deadline - time.monotonic()))

    def _node_id(self, deadline: float) -> str | None:
        """The node's id once its RPC answers (None: it died or the deadline passed first)."""
        while self.process is not None and self.process.poll() is None:
            try:
                return self._cli("node", "id", "-q").strip().split("@")[0]
            except RuntimeError:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.1)
        return None

    def stop(self) -> None:
        super().stop()
        if self._own_dir is not None:  # its layout and key went with the directory
            self._configured = False


class MotoServer(Server):
    """moto's standalone server: a permissive S3 (and S3 Vectors) protocol peer."""

    access_key = "testing"
    secret_key = "testing-secret"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    @property
    def health_path(self) -> str:  # type: ignore[override]
        return "/moto-api/"


def _self_signed_certificate(host: str) -> Path:
    """A directory with MinIO's public.crt and private.key for `host`, valid for a day."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    directory = Path(tempfile.mkdtemp(prefix="s3bulk-minio-certs-"))
    (directory / "public.crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (directory / "private.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return directory
