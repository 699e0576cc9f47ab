"""Uploads carry the checksum S3 keeps (issue 49): CRC64NVME by default, full-object for multipart
uploads, the algorithm a user chooses otherwise; the service checks it, so a byte changed on the
way up is refused and sent again, also when the payload goes unsigned.

The expected values are computed here by other implementations than s3bulk's: the AWS CRT's
(CRC64NVME, CRC32C), zlib's and hashlib's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import zlib
from pathlib import Path

import awscrt.checksums
import pytest
from conftest import S3BULK, Endpoint, Hostile, run_cli

import s3bulk
from s3bulk.testing.hostile import FlipByte, FlipRequestByte
from s3bulk.testing.servers import KMS_KEY_ID

MiB = 1024 * 1024
ALGORITHMS = ["CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1"]


def expected(algorithm: str, data: bytes) -> str:
    """The value S3 keeps for `data` (base64), as other implementations compute it."""
    if algorithm == "CRC64NVME":
        raw = awscrt.checksums.crc64nvme(data).to_bytes(8, "big")
    elif algorithm == "CRC32C":
        raw = awscrt.checksums.crc32c(data).to_bytes(4, "big")
    elif algorithm == "CRC32":
        raw = zlib.crc32(data).to_bytes(4, "big")
    else:
        raw = hashlib.new(algorithm.lower(), data).digest()
    return base64.b64encode(raw).decode()


def composite(algorithm: str, data: bytes, part_size: int) -> str:
    """A SHA multipart upload's value: the SHA of its parts' SHAs, and their count."""
    parts = [
        hashlib.new(algorithm.lower(), data[at : at + part_size]).digest()
        for at in range(0, len(data), part_size)
    ]
    whole = hashlib.new(algorithm.lower(), b"".join(parts)).digest()
    return f"{base64.b64encode(whole).decode()}-{len(parts)}"


def kept(endpoint: Endpoint, bucket: str, key: str) -> dict[str, str]:
    """The checksum fields a HEAD in checksum mode shows (ChecksumCRC64NVME, ChecksumType, ...)."""
    head = endpoint.client().head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    return {name: value for name, value in head.items() if name.startswith("Checksum")}


# An SSE-KMS object's ETag is no MD5 of its bytes (a listing that said another ETag than the
# object's would now fail each GET's If-Match, and the download begin again from a HEAD).
SSE_KMS = ("--sse", "aws:kms", "--sse-kms-key-id", KMS_KEY_ID)


def upload(env: dict[str, str], path: Path, url: str, *options: str) -> None:
    result = run_cli(
        env, "cp", "--part-size", "5MiB", "--multipart-threshold", "8MiB", *options, str(path), url
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("algorithm", [None, *ALGORITHMS])
def test_each_algorithm_is_sent_and_kept_for_whole_and_multipart_uploads(
    minio: Endpoint, bucket: str, tmp_path: Path, algorithm: str | None
) -> None:
    small, large = os.urandom(100_000), os.urandom(13 * MiB + 7)  # 3 parts of 5 MiB
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "small").write_bytes(small)
    (tmp_path / "up" / "large").write_bytes(large)
    chosen = algorithm or "CRC64NVME"  # the default, as AWS's since December 2024
    options = ["--checksum-algorithm", algorithm.lower()] if algorithm else []
    upload(minio.env, tmp_path / "up", f"s3://{bucket}/", "--recursive", *options)

    assert kept(minio, bucket, "small") == {
        f"Checksum{chosen}": expected(chosen, small),
        "ChecksumType": "FULL_OBJECT",
    }
    if chosen.startswith("CRC"):  # a CRC's parts combine into the whole object's
        whole = {f"Checksum{chosen}": expected(chosen, large), "ChecksumType": "FULL_OBJECT"}
    else:
        whole = {f"Checksum{chosen}": composite(chosen, large, 5 * MiB), "ChecksumType": "COMPOSITE"}
    assert kept(minio, bucket, "large") == whole


@pytest.mark.parametrize("algorithm", ["MD5", "none"])
def test_md5_or_none_sends_no_checksum(minio: Endpoint, bucket: str, tmp_path: Path, algorithm: str) -> None:
    (tmp_path / "f").write_bytes(os.urandom(13 * MiB))
    upload(minio.env, tmp_path / "f", f"s3://{bucket}/f", "--checksum-algorithm", algorithm)
    assert kept(minio, bucket, "f") == {}


@pytest.mark.parametrize("payload", ["--unsigned-payload", "--signed-payload"])
@pytest.mark.parametrize("size", [100_000, 13 * MiB], ids=["whole", "multipart"])
def test_a_byte_changed_on_the_way_up_is_refused_and_sent_again(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path, payload: str, size: int
) -> None:
    """Every PutObject and UploadPart reaches the service with a byte flipped once: with the
    payload unsigned (over HTTP by choice) only the checksum tells; the service refuses it, the
    request is sent again, and what is stored is the file."""
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    unsigned = payload == "--unsigned-payload"

    def as_chosen(exchange: object) -> bool:
        sha256 = exchange.request.headers.get("x-amz-content-sha256", "")  # type: ignore[attr-defined]
        return (sha256 == "UNSIGNED-PAYLOAD") == unsigned

    for operation in ("PutObject", "UploadPart"):
        hostile.misbehave(FlipRequestByte(), operation=operation, bucket=bucket, times=1, when=as_chosen)
    upload(hostile.env, tmp_path / "f", f"s3://{bucket}/f", payload)

    flipped = sum(hostile.server.log.count(op, faulted=True) for op in ("PutObject", "UploadPart"))
    assert flipped == 1  # the rule saw the payload signed or not, as chosen
    stored = minio.client().get_object(Bucket=bucket, Key="f")["Body"].read()
    assert stored == data
    assert kept(minio, bucket, "f")["ChecksumCRC64NVME"] == expected("CRC64NVME", data)


def test_a_stream_carries_the_checksum_and_a_server_side_copy_keeps_its_source_s(
    minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    data = os.urandom(11 * MiB)
    piped = subprocess.run(
        [*S3BULK, "pipe", "--part-size", "5MiB", f"s3://{bucket}/piped"],
        env=minio.env,
        input=data,
        capture_output=True,
    )
    assert piped.returncode == 0, piped.stderr
    assert kept(minio, bucket, "piped") == {
        "ChecksumCRC64NVME": expected("CRC64NVME", data),
        "ChecksumType": "FULL_OBJECT",
    }

    (tmp_path / "f").write_bytes(data[:100_000])
    upload(minio.env, tmp_path / "f", f"s3://{bucket}/crc32c", "--checksum-algorithm", "CRC32C")
    copied = run_cli(minio.env, "cp", f"s3://{bucket}/crc32c", f"s3://{bucket}/copied")
    assert copied.returncode == 0, copied.stderr
    assert kept(minio, bucket, "copied") == kept(minio, bucket, "crc32c")
    chosen = run_cli(
        minio.env, "cp", "--checksum-algorithm", "SHA1", f"s3://{bucket}/crc32c", f"s3://{bucket}/sha1"
    )
    assert chosen.returncode == 0, chosen.stderr
    assert kept(minio, bucket, "sha1")["ChecksumSHA1"] == expected("SHA1", data[:100_000])


def test_a_choice_that_is_no_algorithm_is_one_line(minio: Endpoint, bucket: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    result = run_cli(minio.env, "cp", "--checksum-algorithm", "md6", str(tmp_path / "f"), f"s3://{bucket}/f")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --checksum-algorithm 'md6': one of CRC64NVME, CRC32C, CRC32, SHA256, SHA1, MD5 or none"
    )
    with pytest.raises(s3bulk.UsageError, match="checksum_algorithm 'md6'"):
        s3bulk.AwsSettings.from_env(checksum_algorithm="md6")


def test_the_api_chooses_by_its_settings(minio: Endpoint, bucket: str, tmp_path: Path, aws_env: dict) -> None:
    data = os.urandom(50_000)
    (tmp_path / "f").write_bytes(data)
    settings = s3bulk.AwsSettings.from_env(checksum_algorithm="crc32c")
    report = s3bulk.copy(str(tmp_path / "f"), f"s3://{bucket}/f", settings=settings)
    assert (report.objects_done, report.objects_failed) == (1, 0)
    assert kept(minio, bucket, "f")["ChecksumCRC32C"] == expected("CRC32C", data)


def test_a_download_whose_etag_is_no_md5_is_checked_by_the_crc64nvme_kept(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """An SSE-C or SSE-KMS object's ETag looks like an MD5 and is none: the checksum the
    service keeps (sent by s3bulk's upload) decides, also for a multipart object, read from the
    GET itself (checksum mode), with no HEAD; a byte flipped on the way down fails that check and
    is fetched again."""
    files = {"whole": os.urandom(300_000), "parts": os.urandom(13 * MiB)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        upload(minio.env, tmp_path / name, f"s3://{bucket}/p/{name}", *SSE_KMS)
    hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket, key="p/whole", times=1)
    result = run_cli(hostile.env, "cp", "--json", f"s3://{bucket}/p/", f"{tmp_path}/down/")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[-1]["summary"]["objects_unverified"] == 0
    assert all(record.get("verified", True) for record in records[:-1])
    assert records[-1]["summary"]["retries"] >= 1  # the flipped body was fetched again
    assert hostile.server.log.count("HeadObject") == 0
    assert hostile.server.log.count("GetObject") == 3
    for name, data in files.items():
        assert (tmp_path / "down" / name).read_bytes() == data


@pytest.mark.parametrize(
    ("chosen", "endpoint", "signed"),
    [
        (None, "https://s3.us-east-1.amazonaws.com", False),  # as the AWS SDKs: TLS guards the bytes
        (None, "http://127.0.0.1:9000", True),  # a CRC catches corruption, not a rewrite
        (True, "http://127.0.0.1:9000", False),
        (False, "https://s3.us-east-1.amazonaws.com", True),
    ],
)
def test_a_body_with_its_checksum_goes_unsigned_over_https_and_signed_over_http(
    chosen: bool | None, endpoint: str, signed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3bulk._stores.s3 import S3Client

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    settings = s3bulk.AwsSettings.from_env(endpoint_url=endpoint, region="us-east-1", unsigned_payload=chosen)
    client = S3Client(settings)
    url = client.url("b", "k")
    assert client._payload_signed(url, checked=True) is signed
    assert client._payload_signed(url, checked=False) is True  # nothing else would check it


def test_a_download_in_ranges_is_checked_by_their_crcs_combined(
    hostile: Hostile, minio: Endpoint, bucket: str, tmp_path: Path
) -> None:
    """Above the multipart threshold an object comes in ranges: a HEAD asks for its full-object
    CRC once, each range's CRC is found as it is written, and together they must make it. A byte
    flipped in one range fails that check, and the object is fetched again; a multipart object
    whose ETag no part size explains (as an SSE-KMS one's) is checked all the same, with no HEAD
    of its parts."""
    data = os.urandom(21 * MiB + 3)
    (tmp_path / "big").write_bytes(data)
    upload(minio.env, tmp_path / "big", f"s3://{bucket}/r/big", *SSE_KMS)  # parts of 5 MiB
    hostile.misbehave(FlipByte(), operation="GetObject", bucket=bucket, key="r/big", times=1)
    result = run_cli(
        hostile.env,
        "cp",
        "--json",
        "--part-size",
        "6MiB",
        "--multipart-threshold",
        "8MiB",
        f"s3://{bucket}/r/",
        f"{tmp_path}/down/",
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[-1]["summary"]["objects_unverified"] == 0
    assert records[-1]["summary"]["retries"] == 1  # the flipped range: the object fetched again
    assert (tmp_path / "down" / "big").read_bytes() == data
    assert hostile.server.log.count("HeadObject") == 2  # once per attempt, none per part
    assert hostile.server.log.count("GetObject") == 2 * 4  # 4 ranges of up to 6 MiB, twice


@pytest.mark.parametrize("algorithm", ["SHA256", "SHA1"])
def test_a_composite_checksum_checks_a_file_by_its_parts(algorithm: str, tmp_path: Path) -> None:
    """A value kept per part ("…-N") checks a file cut into the parts the service tells: a
    changed byte, or another cut, does not match."""
    from s3bulk._stores.checksums import composite as kept_per_part
    from s3bulk._stores.checksums import file_matches_parts

    data = os.urandom(11 * 1024 * 1024 + 3)
    path = tmp_path / "f"
    path.write_bytes(data)
    value = composite(algorithm, data, 5 * 1024 * 1024)
    sizes = [5 * 1024 * 1024, 5 * 1024 * 1024, 1024 * 1024 + 3]
    assert kept_per_part({f"x-amz-checksum-{algorithm.lower()}": value}) == (algorithm, value, 3)
    assert kept_per_part({f"x-amz-checksum-{algorithm.lower()}": expected(algorithm, data)}) is None
    assert file_matches_parts(str(path), algorithm, value, sizes)
    assert not file_matches_parts(str(path), algorithm, value, [6 * 1024 * 1024, 4 * 1024 * 1024, sizes[2]])
    changed = bytearray(data)
    changed[7 * 1024 * 1024] ^= 1
    path.write_bytes(bytes(changed))
    assert not file_matches_parts(str(path), algorithm, value, sizes)
