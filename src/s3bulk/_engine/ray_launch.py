"""The ray engine's workers: Ray tasks, one CPU each, anywhere in a Ray cluster.

Each task runs the same worker loop as a hybrid worker process (its own event loop, clients and
in-flight limit) and talks to the driver over one TCP connection it opens back to the driver,
authenticated with a key made for this job. So the driver's loop, its pull-based dispatch,
journal and report are those of every other engine: Ray only places the workers (and restarts
nothing; a lost worker's descriptors are redone by the others, see `worker.Redo`). Object data
never passes through the driver, nor through Ray's object store.

Why not Ray actors and `ray.get` for each descriptor: the pipe protocol already streams
descriptors, splits and progress both ways with backpressure, and a connection that breaks is
exactly how the driver learns that a worker is gone, on a cluster as on one machine.

Credentials are not sent: each worker resolves them where it runs (the node's role, profile or
the environment `ray start` was given), as worker processes do from their own environment.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from typing import Any

import ray

from s3bulk._engine.job import Job
from s3bulk._engine.launch import WorkerHandle
from s3bulk._engine.links import PipeLink, WorkerLink
from s3bulk._engine.messages import Hello
from s3bulk._engine.worker import EngineOptions, thread_main
from s3bulk._errors import UsageError

CONNECT_TIMEOUT = 300.0  # a cluster may have to start worker processes (or nodes) first


def connect(address: str | None) -> None:
    """Join the cluster at `address` (e.g. ray://host:10001 or host:6379), or start a local Ray
    instance with this machine's cores when there is none. Quiet: workers' output is not echoed
    to the driver's terminal, whose progress display it would break."""
    if ray.is_initialized():
        return
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address:
        host = _check_reachable(address)
        options["address"] = address
        if host.startswith("127.") or host == "localhost":  # a cluster of this machine: stay on loopback
            options["_node_ip_address"] = "127.0.0.1"
    else:  # this machine alone: everything on loopback
        options["include_dashboard"] = False
        options["_node_ip_address"] = "127.0.0.1"
    try:
        with _notices_filtered():
            ray.init(**options)
    except ConnectionError as exc:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {exc} (check --ray-address)") from exc


def _check_reachable(address: str) -> str:
    """Fail in seconds, with the address named, where ray.init would retry for minutes; returns
    the host."""
    if address == "auto":
        return ""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=10):
            pass
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot reach the Ray cluster at {address}: {exc} "
            "(check --ray-address: host:port of the head's GCS, or ray://host:10001)"
        ) from None
    return host


@contextlib.contextmanager
def _notices_filtered() -> Iterator[None]:
    """Ray's native core prints a notice that token authentication is on (it is: that is the
    default we want) straight to file descriptor 2; keep it off the user's terminal, and pass
    everything else through."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                if "Token authentication is enabled for this Ray cluster" not in line:
                    sys.stderr.write(line)


def cluster_cpus() -> int:
    """How many workers the ray engine runs by default: one per CPU of the cluster."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _driver_host() -> str:
    """The address workers reach the driver at: loopback when the whole cluster is this machine."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    here = ray.util.get_node_ip_address()
    if all(node.get("NodeManagerAddress") == here for node in nodes) or here.startswith("127."):
        return "127.0.0.1"
    return str(here)


def _run_worker(address: tuple[str, int], key: bytes, job: bytes, options: EngineOptions, index: int) -> int:
    """A Ray task: connect back to the driver and serve it until told to stop."""
    conn = Client(address, authkey=key)
    conn.send(Hello(index))
    thread_main(conn, job, options, index)  # closes the connection
    return index


class _RayWorker:
    def __init__(self, ref: ray.ObjectRef[int]) -> None:
        self.ref = ref

    def is_alive(self) -> bool:
        ready, _ = ray.wait([self.ref], timeout=0)
        return not ready

    @property
    def exitcode(self) -> int | None:
        if self.is_alive():
            return None
        try:
            ray.get(self.ref, timeout=0)
        except Exception:
            return 1
        return 0

    def terminate(self) -> None:
        with contextlib.suppress(Exception):
            ray.cancel(self.ref, force=True)

    kill = terminate

    def join(self, timeout: float | None = None) -> None:
        ray.wait([self.ref], timeout=timeout)


class RayLauncher:
    def __init__(self, address: str | None) -> None:
        connect(address)
        self.key = secrets.token_bytes(32)
        self.listener = socket.create_server((_driver_host(), 0), backlog=64)
        self.task = ray.remote(num_cpus=1, max_retries=0)(_run_worker)

    def launch(self, count: int, job: Job, options: EngineOptions) -> list[tuple[WorkerLink, WorkerHandle]]:
        address = self.listener.getsockname()[:2]
        pickled = pickle.dumps(job)
        refs = [self.task.remote(address, self.key, pickled, options, index) for index in range(count)]
        conns: dict[int, Connection] = {}
        deadline = time.monotonic() + CONNECT_TIMEOUT
        try:
            while len(conns) < count:
                self._check_started(refs, deadline)
                self.listener.settimeout(1.0)
                try:
                    sock, _ = self.listener.accept()
                except TimeoutError:
                    continue
                conn = self._authenticated(sock)
                if conn is not None:
                    hello: Hello = conn.recv()
                    conns[hello.worker] = conn
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            for conn in conns.values():
                conn.close()
            raise
        return [(PipeLink(conns[index]), _RayWorker(refs[index])) for index in range(count)]

    def _authenticated(self, sock: socket.socket) -> Connection | None:
        sock.setblocking(True)
        conn = Connection(sock.detach())
        try:
            deliver_challenge(conn, self.key)
            answer_challenge(conn, self.key)
        except Exception:  # not one of ours: whoever it is gets nothing
            conn.close()
            return None
        return conn

    def _check_started(self, refs: list[ray.ObjectRef[int]], deadline: float) -> None:
        ready, _ = ray.wait(refs, timeout=0)
        for ref in ready:  # a task that ended before connecting: say why
            try:
                ray.get(ref)
            except Exception as exc:
                raise RuntimeError(f"a Ray worker failed to start: {str(exc).splitlines()[0]}") from exc
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Ray workers did not connect within {CONNECT_TIMEOUT:.0f} s: does the cluster have "
                f"{len(refs)} free CPUs, and can its nodes reach this machine?"
            )

    def close(self) -> None:
        """Ends the listening socket (a local Ray instance stays up for later jobs of this
        process, and ends with it)."""
        with contextlib.suppress(OSError):
            self.listener.close()
