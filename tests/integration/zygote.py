"""`python -m s3bulk` without the interpreter's start-up: a process that has imported the CLI once
forks a child per command, which runs the command as `python -m s3bulk` would.

Why: the integration tier runs the CLI ~500 times; each fresh interpreter spent ~0.5-1.3 s of CPU
importing typer, rich, the commands and their stores before doing the job a test is about. A
forked child is still a process of its own, as a user's command is (its own exit code, standard
streams, signals, memory, journals and workers; a crash cannot touch the test), but it starts in
milliseconds.

What a fork cannot give, a fresh interpreter still does (`run` falls back, `run_fresh` forces it):
an environment whose variables change how Python starts (PYTHON*, the locale), a command that is
run by a shell or measured as a process group, and the true end-to-end tests that start
`python -m s3bulk` on purpose. S3BULK_TEST_FRESH=1 runs every command fresh (the slow, literal
way; a difference between the two is a bug in this module).

The server (`python zygote.py SOCKET`) is single-threaded, so forking it loses nothing: it
imports, then loops on its socket and on its children's pidfds. A request carries the command's
stdin, stdout and stderr as file descriptors (SCM_RIGHTS), and its argv, environment and working
directory as JSON; the answer is the child's pid, then its wait status.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Variables read while Python starts (sys.flags, the locale, the standard streams' encoding, the
# hash seed) or while the preloaded modules are imported (typer's and rich's terminal settings,
# the engine's debug switch, progress's stats interval): a child forked from the server would
# keep the server's, so a command whose environment differs in any of them runs in a fresh
# interpreter instead. PYTHONPATH is not one: the child's sys.path is rebuilt from it.
_STARTUP = ("PYTHON", "LC_", "LANG", "LANGUAGE", "TZ", "TYPER_", "_TYPER_", "S3BULK_DEBUG")
_STARTUP_NAMES = ("TERMINAL_WIDTH", "GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS", "S3BULK_STATS_INTERVAL")
_NOT_STARTUP = ("PYTHONPATH",)

# Imported in the server beforehand, so that children inherit them: the CLI and what its commands
# import lazily when they run (none of them starts a Python thread at import: a fork keeps one
# thread; numpy's OpenBLAS pool, its one native thread, is stopped and restarted around a fork by
# OpenBLAS itself). The vectors commands' aiohttp, botocore's request classes and numpy were
# ~0.6 s of each vectors command's start (the docs' vectors example runs 28); the commands' own
# modules and uvloop ~50-100 ms of every command. pyarrow and pandas (ls --output .parquet) are
# left out: they start native threads of their own at import.
PRELOAD = (
    "s3bulk._cli",
    "s3bulk._cli.jobrun",
    "s3bulk._main",
    "s3bulk._runner",
    "s3bulk._commands.check",
    "s3bulk._commands.copy",
    "s3bulk._commands.copy_vectors",
    "s3bulk._commands.delete_vectors",
    "s3bulk._commands.export_vectors",
    "s3bulk._commands.head",
    "s3bulk._commands.put_vectors",
    "s3bulk._commands.query_vectors",
    "s3bulk._commands.remove",
    "s3bulk._commands.sides",
    "s3bulk._commands.sync",
    "s3bulk._commands.sync_vectors",
    "s3bulk._commands.transfer",
    "s3bulk._commands.vectorspecs",
    "s3bulk._engine.worker",
    "s3bulk._engine.driver",
    "s3bulk._engine.launch",
    "s3bulk._stores.s3",
    "s3bulk._stores.storage",
    "s3bulk._stores.vectors",
    "s3bulk._vectors.verify",
    "aiohttp",
    "botocore.awsrequest",
    "botocore.auth",
    "configparser",
    "numpy",
    "uvloop",
)


def startup_environment(env: dict[str, str]) -> dict[str, str]:
    return {
        name: value
        for name, value in env.items()
        if (name.startswith(_STARTUP) or name in _STARTUP_NAMES) and name not in _NOT_STARTUP
    }


# ---------------------------------------------------------------------------------------------
# The server


def _preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    """One request: a 4-byte length, then the JSON, the three descriptors riding on the first part."""
    fds = array.array("i")
    data, ancillary, _flags, _addr = conn.recvmsg(4, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    if len(data) < 4:
        raise ConnectionError("short request")
    (length,) = struct.unpack("!I", data)
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ConnectionError("short request")
        body += chunk
    return json.loads(body), list(fds)


def _base_path() -> list[str]:
    """The server's sys.path without what its own start-up put first (its script's directory)
    and what its PYTHONPATH added: what every child's path is built on."""
    added = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in sys.path[1:] if p not in added]


def _child(request: dict[str, object], fds: list[int], base_path: list[str], close: list[int]) -> None:
    """In the forked child: become `python -m s3bulk ARGS` run in `cwd` with `env`; never returns."""
    code = 1
    try:
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for each in (signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(each, signal.SIG_DFL if each != signal.SIGPIPE else signal.SIG_IGN)
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        cwd = request["cwd"]
        assert isinstance(cwd, str)
        os.chdir(cwd)
        # `python -m` puts the working directory first, then PYTHONPATH's entries
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [os.getcwd(), *[os.path.abspath(p) for p in extra], *base_path]
        args = request["args"]
        assert isinstance(args, list)
        sys.argv[:] = ["-m", *args]  # as `python -m` before runpy replaces argv[0]
        code = _run_module()
    except BaseException:  # nothing may escape a forked child
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _run_module() -> int:
    """runpy as `python -m s3bulk` runs it, with the exit code an interpreter would give."""
    import runpy

    try:
        runpy.run_module("s3bulk", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None:
            return 0
        if isinstance(stop.code, int):
            return stop.code
        print(stop.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        import traceback

        traceback.print_exc()
        return 130
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    return 0


def serve(path: str) -> None:
    """Fork a child per request until the socket is closed under us or stdin ends (the test
    session gone)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _preload()
    base_path = _base_path()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    waiting: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the requester's socket)
    loaded = sorted({name.partition(".")[0] for name in sys.modules})
    sys.stdout.write("ready " + json.dumps(loaded) + "\n")
    sys.stdout.flush()
    while True:
        for key, _events in selector.select():
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
            elif key.data == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                close = [listener.fileno(), sys.stdin.fileno(), conn.fileno(), selector_fd(selector)]
                close += [fd for fd in waiting] + [c.fileno() for _, c in waiting.values()]
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(request, fds, base_path, close)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                waiting[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
                with contextlib.suppress(OSError):
                    conn.sendall(struct.pack("!i", pid))
            else:
                pidfd = key.fd
                selector.unregister(pidfd)
                pid, conn = waiting.pop(pidfd)
                _, status = os.waitpid(pid, 0)
                os.close(pidfd)
                with contextlib.suppress(OSError):
                    conn.sendall(struct.pack("!i", status))
                conn.close()


def selector_fd(selector: selectors.BaseSelector) -> int:
    fileno = getattr(selector, "fileno", None)
    return fileno() if fileno is not None else -1


# ---------------------------------------------------------------------------------------------
# The client (in the test process)


class Zygote:
    """The server as a subprocess of the test session (of each xdist worker), stopped with it."""

    def __init__(self) -> None:
        self.startup = startup_environment(dict(os.environ))
        self.fresh = bool(os.environ.get("S3BULK_TEST_FRESH"))
        if self.fresh:
            return
        self.directory = tempfile.mkdtemp(prefix="s3bulk-zygote-")
        self.path = os.path.join(self.directory, "socket")
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # its own failures show in the test output
            env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(b"ready "):
            self.process.kill()
            raise RuntimeError(f"the CLI zygote did not start: {line!r}")
        self.loaded = frozenset(json.loads(line.removeprefix(b"ready ")))

    def close(self) -> None:
        if self.fresh:
            return
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a forked child would start as a fresh interpreter given `env` would."""
        return not self.fresh and serves(env, self.startup, self.loaded)

    def command(self) -> str:
        """A directory holding an `s3bulk` executable that runs its command through this server
        (`s3bulk` on a shell's PATH: forward() below), made once."""
        if self.fresh:
            return os.path.dirname(sys.executable)
        directory = os.path.join(self.directory, "bin")
        if not os.path.isdir(directory):
            os.mkdir(directory)
            with open(os.path.join(self.directory, "startup.json"), "w") as info:
                json.dump({"startup": self.startup, "loaded": sorted(self.loaded)}, info)
            script = os.path.join(directory, "s3bulk")
            with open(script, "w") as out:
                out.write(
                    f"#!{os.path.abspath(sys.executable)} -IS\n"
                    "import sys\n"
                    f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
                    "from zygote import forward\n"
                    f"forward({self.path!r}, {os.path.join(os.path.dirname(sys.executable), 's3bulk')!r})\n"
                )
            os.chmod(script, 0o755)
        return directory

    def run(
        self,
        args: list[str],
        env: dict[str, str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        input: bytes | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """subprocess.run([python, -m, s3bulk, *args], capture_output=True) with stdin from
        `input` (or /dev/null): the same result, forked from the server when it can be."""
        command = [sys.executable, "-m", "s3bulk", *args]
        if not self.serves(env):
            return subprocess.run(
                command,
                env=env,
                cwd=cwd,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if input is not None:
            in_r, in_w = os.pipe()
        else:
            in_r, in_w = os.open(os.devnull, os.O_RDONLY), -1
        request = json.dumps(
            {"args": list(args), "env": env, "cwd": os.path.abspath(cwd or os.getcwd())}
        ).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            conn.sendmsg(
                [struct.pack("!I", len(request))],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [in_r, out_w, err_w]))],
            )
            conn.sendall(request)
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        (pid,) = struct.unpack("!i", _exactly(conn, 4))
        deadline = None if timeout is None else time.monotonic() + timeout
        outputs = _Collector(out_r, err_r, in_w, input)
        try:
            if not outputs.wait(deadline):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                _exactly(conn, 4)  # reaped (what it left holding the outputs is not waited for)
                raise subprocess.TimeoutExpired(command, timeout or 0, outputs.stdout, outputs.stderr)
            (status,) = struct.unpack("!i", _exactly(conn, 4))
        finally:
            conn.close()
        return subprocess.CompletedProcess(
            command, os.waitstatus_to_exitcode(status), outputs.stdout, outputs.stderr
        )


def serves(env: dict[str, str], startup: dict[str, str], loaded: frozenset[str]) -> bool:
    """Whether a child forked from a server started with `startup` (and having imported
    `loaded`) would start as a fresh interpreter given `env` would."""
    if startup_environment(env) != startup:
        return False
    return not any(_shadows(entry, loaded) for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry)


def _shadows(entry: str, loaded: frozenset[str]) -> bool:
    """Whether a PYTHONPATH directory changes the start-up (a sitecustomize, a .pth) or holds
    a module the server imported already (a fresh interpreter would import this one)."""
    try:
        names = os.listdir(entry)
    except OSError:
        return False
    for name in names:
        stem = name.partition(".")[0]
        if stem in ("sitecustomize", "usercustomize") or name.endswith(".pth") or stem in loaded:
            return True
    return False


def forward(path: str, real: str) -> None:
    """The `s3bulk` of Zygote.command(): this process's command (argv, environment, working
    directory and standard streams) run by the server at `path`, and its exit status made this
    process's; SIGINT, SIGTERM and SIGHUP are passed on. The real `s3bulk` (exec'd) where a fork
    cannot be the same."""
    args = sys.argv[1:]
    env = dict(os.environ)
    with open(os.path.join(os.path.dirname(path), "startup.json")) as info:
        known = json.load(info)
    if not serves(env, known["startup"], frozenset(known["loaded"])):
        os.execv(real, [real, *args])
    request = json.dumps({"args": args, "env": env, "cwd": os.getcwd()}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    conn.sendmsg(
        [struct.pack("!I", len(request))],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))],
    )
    conn.sendall(request)
    (pid,) = struct.unpack("!i", _exactly(conn, 4))
    for each in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, lambda number, _frame: os.kill(pid, number))
    (status,) = struct.unpack("!i", _exactly(conn, 4))
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: so is this process, as the shell would see it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the CLI zygote went away")
        data += chunk
    return data


class _Collector:
    """Both outputs read to their end (and stdin written) by threads, as communicate() does: a
    pipe nobody reads would stall the command once full."""

    def __init__(self, out: int, err: int, stdin: int, data: bytes | None) -> None:
        self._parts: dict[int, list[bytes]] = {out: [], err: []}
        self._out, self._err = out, err
        self._threads = [threading.Thread(target=self._drain, args=(fd,), daemon=True) for fd in (out, err)]
        if stdin >= 0:
            self._threads.append(threading.Thread(target=self._feed, args=(stdin, data or b""), daemon=True))
        for thread in self._threads:
            thread.start()

    def _drain(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 1 << 16):
                self._parts[fd].append(chunk)
        finally:
            os.close(fd)

    @staticmethod
    def _feed(fd: int, data: bytes) -> None:
        try:
            with contextlib.suppress(BrokenPipeError):
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view[: 1 << 16]) :]
        finally:
            os.close(fd)

    def wait(self, deadline: float | None) -> bool:
        """Whether the outputs ended (the command, and whatever it left holding them, exited)."""
        for thread in self._threads[:2]:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return False
        return True

    @property
    def stdout(self) -> bytes:
        return b"".join(self._parts[self._out])

    @property
    def stderr(self) -> bytes:
        return b"".join(self._parts[self._err])


if __name__ == "__main__":
    serve(Path(sys.argv[1]).as_posix())
