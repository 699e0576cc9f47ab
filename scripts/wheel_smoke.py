"""An installed wheel on a machine it was not built on (scripts/test-wheel-aarch64.sh runs it
with an emulated aarch64 Python, from a directory outside the repository): the native part's
checksums against values known independently of it, `s3bulk --version`, and a cp/ls/sync/check
round trip against a local MinIO, every byte compared.

The native part's code paths differ per architecture (crc-fast's carry-less multiplies, MD5's
lanes), so its checksums are checked against the standard check values, a plain-Python CRC and
hashlib; uploads send their CRC64NVME, which MinIO recomputes and refuses on a mismatch, and
downloads are checked against the ETag (MD5) by the native part: a wrong checksum either way
fails the copy.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import zlib
from pathlib import Path

BIN = Path(sys.executable).parent


def reflected_crc(data: bytes, poly: int, width: int) -> int:
    """A CRC (reflected, all-ones start and final XOR, as CRC32C and CRC64NVME are) bit by bit:
    slow, short, and sharing nothing with the native code."""
    mask = (1 << width) - 1
    crc = mask
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc ^ mask


def crc32c(data: bytes) -> bytes:
    return reflected_crc(data, 0x82F63B78, 32).to_bytes(4, "big")


def crc64nvme(data: bytes) -> bytes:
    return reflected_crc(data, 0x9A6C9329AC4BC9B5, 64).to_bytes(8, "big")


def check_native() -> None:
    import s3bulk_native as native

    check = b"123456789"  # each CRC's published check value
    assert native.checksum("CRC32", check).hex() == "cbf43926"
    assert native.checksum("CRC32C", check).hex() == "e3069283" == crc32c(check).hex()
    assert native.checksum("CRC64NVME", check).hex() == "ae8b14860a799888" == crc64nvme(check).hex()
    # long and unaligned enough for the SIMD paths, with an odd tail
    data = os.urandom(10_007)
    view = memoryview(data)[3:]
    body = bytes(view)
    assert native.checksum("CRC32", view) == zlib.crc32(body).to_bytes(4, "big")
    assert native.checksum("CRC32C", view) == crc32c(body)
    assert native.checksum("CRC64NVME", view) == crc64nvme(body)
    assert native.checksum("SHA256", view) == hashlib.sha256(body).digest()
    assert native.checksum("SHA1", view) == hashlib.sha1(body).digest()
    head, tail = body[:4096], body[4096:]
    for algorithm in ("CRC32", "CRC32C", "CRC64NVME"):
        combined = native.crc_combine(
            algorithm, native.checksum(algorithm, head), native.checksum(algorithm, tail), len(tail)
        )
        assert combined == native.checksum(algorithm, body), algorithm
    buffers = [os.urandom(size) for size in (0, 1, 55, 64, 1000, 65_537)]
    assert native.md5_many(buffers) == [hashlib.md5(buffer).digest() for buffer in buffers]
    print(f"native checksums on {platform.machine()}: CRC32, CRC32C, CRC64NVME, SHA, MD5 lanes ok")


def run(env: dict[str, str], *words: str) -> subprocess.CompletedProcess[str]:
    words = ("--no-progress", *words)
    done = subprocess.run([str(BIN / "s3bulk"), *words], env=env, capture_output=True, text=True)
    print(f"$ s3bulk {' '.join(words)}  -> {done.returncode}\n{done.stdout}{done.stderr}".rstrip())
    assert done.returncode == 0, f"s3bulk {' '.join(words)} exited {done.returncode}"
    return done


def digests(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in root.rglob("*")
        if path.is_file()
    }


def make_tree(root: Path) -> None:
    for n in range(40):
        path = root / f"d{n % 4}" / f"f{n:02d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(1000 + n * 997))
    (root / "big.bin").write_bytes(os.urandom(20 * 1024**2 + 12_345))  # multipart at 8 MiB parts


def main() -> None:
    import s3bulk
    from s3bulk.testing import MinioServer

    where = s3bulk.__file__ or ""
    assert Path(where).is_relative_to(sys.prefix), f"not the installed s3bulk: {where}"
    check_native()
    with MinioServer() as server:
        env = os.environ | server.client_env()
        version = run(env, "--version").stdout.strip()
        assert version == f"s3bulk {s3bulk.__version__} (native part {s3bulk.__version__})", version
        run(env, "mb", "s3://smoke")
        up = Path("up")
        make_tree(up)
        expected = digests(up)
        run(env, "cp", "--multipart-threshold", "8MiB", "up/", "s3://smoke/up/")
        listed = run(env, "ls", "-r", "s3://smoke/up/").stdout
        assert all(f"up/{name}" in listed for name in expected), listed
        assert len(listed.splitlines()) == len(expected), listed
        run(env, "sync", "up/", "s3://smoke/synced/")
        (up / "d1" / "f01.bin").write_bytes(os.urandom(5000))  # changed, and a new one
        (up / "d3" / "new.bin").write_bytes(os.urandom(3000))
        expected = digests(up)
        run(env, "sync", "up/", "s3://smoke/synced/")
        run(env, "check", "up/", "s3://smoke/synced/")  # exit 1 if anything differs
        run(env, "cp", "s3://smoke/synced/", "down/")
        assert digests(Path("down")) == expected, "downloaded bytes differ from the uploaded ones"
        os.environ.update(server.client_env())
        report = s3bulk.copy("s3://smoke/synced/", "again/")
        assert report.objects_done == len(expected), report
        assert digests(Path("again")) == expected
    size = sum(path.stat().st_size for path in up.rglob("*") if path.is_file())
    print(f"wheel smoke on {platform.machine()} ({len(expected)} files, {size:,} bytes): ok")


if __name__ == "__main__":
    main()
