"""The signed client's requests go through the native part (object_store's signer on hyper's
client), every URL as it is written."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

from conftest import Endpoint, new_bucket, run_cli


def in_a_new_interpreter(
    endpoint: Endpoint, code: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`code` (given `args` as sys.argv[1:]) run by an interpreter of its own: what a command
    imports shows in that interpreter's `sys.modules`."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=endpoint.env, capture_output=True, text=True, cwd=cwd
    )


def test_ls_loads_neither_aiohttp_nor_botocores_signer_nor_other_commands(minio: Endpoint) -> None:
    """What keeps `ls` of one key at 0.15 s: the native requests, and only ls's own module."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="k.txt", Body=b"abc")  # type: ignore[attr-defined]
    heavy = ("aiohttp", "botocore.auth", "s3bulk._commands", "s3bulk._api")
    code = (
        "import sys; from s3bulk._cli import run; code = run(['ls', sys.argv[1]]); "
        f"print(code, sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    done = in_a_new_interpreter(minio, code, f"s3://{bucket}/k.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(" 3 k.txt")
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_download_loads_its_own_command_and_no_other(minio: Endpoint, tmp_path: Path) -> None:
    """Nothing is imported that the job does not use: `cp` loads the copy command and its API
    module and the parts it shares (the spec's fields and the mover, and the batched deleter
    `mv` shares with `rm` and sync), not sync's, check's, gather's or map's, nor
    the other verbs (each command ~1-3 ms of imports and dataclasses; 20 ms of a `cp` in all)."""
    bucket = new_bucket(minio)
    minio.client().put_object(Bucket=bucket, Key="k.txt", Body=b"abc")  # type: ignore[attr-defined]
    code = (
        "import sys; from s3bulk._cli import run; code = run(['cp', sys.argv[1], sys.argv[2]]); "
        "print(code, sorted(m for m in sys.modules if m.startswith(('s3bulk._commands', 's3bulk._api'))))"
    )
    done = in_a_new_interpreter(minio, code, f"s3://{bucket}/k.txt", f"{tmp_path}/")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.txt").read_bytes() == b"abc"
    own = [
        "_api",
        "_api.base",
        "_api.copy",
        "_commands",
        "_commands.base",
        "_commands.copy",
        "_commands.deletes",
        "_commands.mover",
        "_commands.transfer",
    ]
    assert done.stdout.splitlines()[-1] == f"0 {[f's3bulk.{name}' for name in own]}"


def test_a_download_and_a_listing_leave_obstore_unloaded(minio: Endpoint, tmp_path) -> None:
    """obstore is ~6 MiB of a download's peak RSS (3 x 100 MiB: 53 -> 49 MiB) that the native
    GETs and listings never call: it is loaded on first use (`s3bulk._lazy`)."""
    bucket = new_bucket(minio)
    for key in ("d/a.bin", "d/b.bin"):
        minio.client().put_object(Bucket=bucket, Key=key, Body=key.encode() * 1000)  # type: ignore[attr-defined]
    code = (
        "import sys; from s3bulk._cli import run; "
        "codes = [run(['ls', '-r', sys.argv[1]]), run(['cp', sys.argv[1], sys.argv[2]])]; "
        "print(codes, 'obstore._obstore' in sys.modules)"
    )
    done = in_a_new_interpreter(minio, code, f"s3://{bucket}/d/", f"{tmp_path}/out/", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[0, 0] False", done.stdout
    assert (tmp_path / "out" / "b.bin").read_bytes() == b"d/b.bin" * 1000


def test_keys_with_dot_segments_keep_their_names_without_aiohttp(moto: Endpoint, tmp_path: Path) -> None:
    """moto stores such keys (MinIO refuses them). Through a URL parser (reqwest's, aiohttp's
    default) "p/../up.txt" would be sent as "up.txt": another object. The native part sends them
    as named, all of them: server-side copies (in the URL path and the copy source), uploads (a
    large one in parts) and downloads, signed by botocore's signer, which signs the path as sent
    (object_store's would sign the resolved one: Garage refuses that, `test_servers.py`); aiohttp
    is never loaded."""
    client = moto.client()
    client.create_bucket(Bucket="dots")  # type: ignore[attr-defined]
    keys = {"p/../up.txt": b"up", "p/./here.txt": b"here", "p/plain.txt": b"plain"}
    for key, body in keys.items():
        client.put_object(Bucket="dots", Key=key, Body=body)  # type: ignore[attr-defined]
    client.put_object(Bucket="dots", Key="up.txt", Body=b"another object")  # type: ignore[attr-defined]
    data = bytes(range(256)) * (13 * 4096)  # 13 MiB
    (tmp_path / "big.bin").write_bytes(data)
    large = "--multipart-threshold\t6MiB\t--part-size\t5MiB"
    commands = [
        "cp\ts3://dots/p/\ts3://dots/q/",
        f"cp\t{large}\tbig.bin\ts3://dots/p/./big.bin",
        "cp\ts3://dots/p/../up.txt\tup.txt",
        f"cp\t{large}\ts3://dots/p/./big.bin\tback.bin",
    ]
    code = (
        "import sys; from s3bulk._cli import run; "
        "codes = [run(command.split('\\t')) for command in sys.argv[1:]]; "
        "print(codes, 'aiohttp' in sys.modules)"
    )
    done = in_a_new_interpreter(moto, code, *commands, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[0, 0, 0, 0] False", done.stdout + done.stderr
    copied = {
        entry["Key"]: client.get_object(Bucket="dots", Key=entry["Key"])["Body"].read()  # type: ignore[attr-defined]
        for entry in client.list_objects_v2(Bucket="dots", Prefix="q")["Contents"]  # type: ignore[attr-defined]
    }
    assert copied == {"q" + key[1:]: body for key, body in keys.items()}
    stored = client.get_object(Bucket="dots", Key="p/./big.bin")  # type: ignore[attr-defined]
    assert stored["ETag"].endswith('-3"') and stored["Body"].read() == data
    assert (tmp_path / "up.txt").read_bytes() == b"up"
    assert (tmp_path / "back.bin").read_bytes() == data


def test_an_endpoint_nobody_answers_stops_ls_once_with_one_line() -> None:
    """No connection at all: the native client says so, and the job stops with one line."""
    env = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_REGION": "us-east-1"}
    env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # discard: nothing listens
    done = run_cli(env, "ls", "s3://nobody-home/k")
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "127.0.0.1:9" in done.stderr or "reach" in done.stderr, done.stderr


class ForwardProxy:
    """A forward proxy on loopback, as a company's network has one: a plain request comes to it
    whole (absolute-form) and goes on; HTTPS comes as CONNECT and is tunnelled. It notes the
    first request line of each connection and the credentials it was sent (which it does not
    pass on)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.credentials: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        )
        self._server = started.result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readline()).decode()
        head = []
        while (header := await reader.readline()) not in (b"\r\n", b""):
            if header.lower().startswith(b"proxy-authorization:"):
                self.credentials.append(header.decode().split(":", 1)[1].strip())
            else:
                head.append(header)
        self.seen.append(line.strip())
        method, target, _ = line.split()
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream_reader, upstream = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            origin = urllib.parse.urlsplit(target)
            upstream_reader, upstream = await asyncio.open_connection(origin.hostname, origin.port)
            upstream.write(line.encode() + b"".join(head) + b"\r\n")  # absolute-form: servers take it
        await asyncio.gather(_pipe(reader, upstream), _pipe(upstream_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def test_requests_go_through_the_proxy_the_environment_names(
    minio: Endpoint, minio_tls: Endpoint, tmp_path: Path
) -> None:
    """HTTP_PROXY and HTTPS_PROXY are honoured, as reqwest (and so obstore) honours them: a plain
    request goes to the proxy whole, with the proxy's credentials from its URL; HTTPS through a
    CONNECT tunnel, TLS inside it. Listings, uploads and downloads all go that way."""
    for endpoint, variable in ((minio, "HTTP_PROXY"), (minio_tls, "HTTPS_PROXY")):
        bucket = new_bucket(endpoint)
        (tmp_path / "up.txt").write_bytes(b"through the proxy")
        with ForwardProxy() as proxy:
            env = endpoint.env | {variable: f"http://someone:secret@127.0.0.1:{proxy.port}", "NO_PROXY": ""}
            insecure = ["--no-verify-ssl"] if variable == "HTTPS_PROXY" else []
            up = run_cli(env, "cp", *insecure, str(tmp_path / "up.txt"), f"s3://{bucket}/k.txt")
            down = run_cli(env, "cp", *insecure, f"s3://{bucket}/k.txt", str(tmp_path / "down.txt"))
            listed = run_cli(env, "ls", *insecure, f"s3://{bucket}/")
        assert (up.returncode, down.returncode, listed.returncode) == (0, 0, 0), (
            up.stderr + down.stderr + listed.stderr
        )
        assert (tmp_path / "down.txt").read_bytes() == b"through the proxy"
        assert "k.txt" in listed.stdout
        host = endpoint.server.endpoint.split("://")[1]
        if variable == "HTTP_PROXY":
            assert proxy.seen and all(line.split()[1].startswith(f"http://{host}/") for line in proxy.seen), (
                proxy.seen
            )
        else:
            assert proxy.seen and all(line == f"CONNECT {host} HTTP/1.1" for line in proxy.seen), proxy.seen
        assert set(proxy.credentials) == {"Basic " + base64.b64encode(b"someone:secret").decode()}


def test_a_ca_bundle_named_by_the_profile_or_aws_ca_bundle_is_trusted_on_every_path(
    minio_tls: Endpoint, tmp_path: Path
) -> None:
    """MinIO over TLS with a certificate no platform trusts, reached with no AWS_* variable but
    the config file's (its default profile names the endpoint, the keys and `ca_bundle`), or
    with AWS_CA_BUNDLE, which comes first, as botocore has it. Listing, uploads and downloads
    (whole and in parts) and the object reader (obstore) all verify by the bundle; without it,
    they refuse the certificate."""
    from s3bulk.testing.servers import _self_signed_certificate

    trusted = minio_tls.server.certs_dir / "public.crt"
    other = _self_signed_certificate("127.0.0.1") / "public.crt"  # a certificate, but not the server's
    bucket = new_bucket(minio_tls)
    keys = minio_tls.server.client_env()
    plain = {name: value for name, value in minio_tls.env.items() if not name.startswith("AWS_")}

    def env(profile_bundle: Path | None, variable: Path | None = None) -> dict[str, str]:
        config = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}"
        config.write_text(
            f"[default]\nregion = us-east-1\nendpoint_url = {minio_tls.server.endpoint}\n"
            f"aws_access_key_id = {keys['AWS_ACCESS_KEY_ID']}\n"
            f"aws_secret_access_key = {keys['AWS_SECRET_ACCESS_KEY']}\n"
            + (f"ca_bundle = {profile_bundle}\n" if profile_bundle else "")
        )
        found = plain | {"AWS_CONFIG_FILE": str(config), "HOME": str(tmp_path)}
        return found | ({"AWS_CA_BUNDLE": str(variable)} if variable else {})

    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "small.txt").write_bytes(b"small")
    (tmp_path / "up" / "big.bin").write_bytes(b"b" * (6 * 1024**2))
    parts = ["--multipart-threshold", "5MiB", "--part-size", "5MiB"]
    read = "import s3bulk, sys; sys.stdout.write(s3bulk.open(sys.argv[1]).read().decode())"
    for name, settings in (
        ("profile", env(trusted)),
        ("AWS_CA_BUNDLE", env(None, trusted)),
        ("AWS_CA_BUNDLE first", env(other, trusted)),
    ):
        up = run_cli(settings, "cp", *parts, f"{tmp_path / 'up'}/", f"s3://{bucket}/p/")
        listed = run_cli(settings, "ls", "-r", f"s3://{bucket}/p/")
        down = run_cli(settings, "sync", *parts, f"s3://{bucket}/p/", f"{tmp_path / name}/")
        opened = subprocess.run(
            [sys.executable, "-c", read, f"s3://{bucket}/p/small.txt"],
            env=settings,
            capture_output=True,
            text=True,
        )
        assert [up.returncode, listed.returncode, down.returncode, opened.returncode] == [0] * 4, (
            name,
            up.stderr + listed.stderr + down.stderr + opened.stderr,
        )
        assert len(listed.stdout.splitlines()) == 2 and opened.stdout == "small"
        assert (tmp_path / name / "big.bin").read_bytes() == b"b" * (6 * 1024**2)
    for name, settings in (("none", env(None)), ("the wrong one", env(trusted, other))):
        refused = run_cli(settings, "ls", f"s3://{bucket}/p/", timeout=120)
        assert refused.returncode == 1 and "certificate" in refused.stderr.lower(), (name, refused.stderr)
        assert "trust its certificate authority with AWS_CA_BUNDLE" in refused.stderr, refused.stderr
    missing = run_cli(env(tmp_path / "no-such.pem"), "ls", f"s3://{bucket}/p/")
    assert missing.returncode == 2 and "is not a file" in missing.stderr, missing.stderr
