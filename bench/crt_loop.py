"""The AWS CRT's S3 client (awscrt, "crt-python" in the seed articles) as a bench peer: files up to
a prefix, or the same names down from one, as fast as the CRT goes, with nothing around it.

    python bench/crt_loop.py upload DIR s3://bucket/prefix/ [--checksum crc64nvme|none]
    python bench/crt_loop.py download s3://bucket/prefix/ DIR --names-from SRCDIR [--checksum ...]

As the seeds measured it, the caller gives the object list (no listing) and the CRT moves the
bytes on its own threads, at most `--in-flight` objects at once. With `--checksum crc64nvme`
(the default, what the AWS SDKs send since December 2024) each upload carries a CRC64NVME as a
trailer, which the service checks, and each download is checked against the checksum the service
keeps. The endpoint and keys come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path

from awscrt.auth import AwsCredentialsProvider
from awscrt.http import HttpHeaders, HttpRequest
from awscrt.io import ClientBootstrap, DefaultHostResolver, EventLoopGroup
from awscrt.s3 import (
    S3ChecksumAlgorithm,
    S3ChecksumConfig,
    S3ChecksumLocation,
    S3Client,
    S3RequestTlsMode,
    S3RequestType,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("verb", choices=["upload", "download"])
    parser.add_argument("source")
    parser.add_argument("destination")
    parser.add_argument(
        "--names-from", default="", help="download: the object names, as this directory's files"
    )
    parser.add_argument("--checksum", default="crc64nvme", choices=["crc64nvme", "none"])
    parser.add_argument("--in-flight", type=int, default=500)
    args = parser.parse_args()
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    scheme, _, host = endpoint.partition("://")
    event_loops = EventLoopGroup()
    client = S3Client(
        bootstrap=ClientBootstrap(event_loops, DefaultHostResolver(event_loops)),
        region=os.environ.get("AWS_REGION", "us-east-1"),
        credential_provider=AwsCredentialsProvider.new_static(
            os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
        ),
        tls_mode=S3RequestTlsMode.ENABLED if scheme == "https" else S3RequestTlsMode.DISABLED,
    )
    checked = args.checksum != "none"
    if args.verb == "upload":
        source = Path(args.source)
        bucket, prefix = split(args.destination)
        jobs = [(file, f"/{bucket}/{prefix}{file.name}") for file in sorted(source.iterdir())]
    else:
        bucket, prefix = split(args.source)
        target = Path(args.destination)
        target.mkdir(parents=True, exist_ok=True)
        jobs = [
            (target / name.name, f"/{bucket}/{prefix}{name.name}")
            for name in sorted(Path(args.names_from).iterdir())
        ]
    slots = threading.Semaphore(args.in_flight)
    failures: list[str] = []
    requests = []
    for path, url in jobs:
        slots.acquire()

        def done(error: BaseException | None = None, url: str = url, **_: object) -> None:
            if error is not None:
                failures.append(f"{url}: {error}")
            slots.release()

        if args.verb == "upload":
            headers = HttpHeaders([("Host", host), ("Content-Length", str(path.stat().st_size))])
            config = (
                S3ChecksumConfig(S3ChecksumAlgorithm.CRC64NVME, S3ChecksumLocation.TRAILER)
                if checked
                else None
            )
            request = client.make_request(
                type=S3RequestType.PUT_OBJECT,
                request=HttpRequest("PUT", url, headers),
                send_filepath=str(path),
                checksum_config=config,
                on_done=done,
            )
        else:
            config = S3ChecksumConfig(validate_response=True) if checked else None
            request = client.make_request(
                type=S3RequestType.GET_OBJECT,
                request=HttpRequest("GET", url, HttpHeaders([("Host", host)])),
                recv_filepath=str(path),
                checksum_config=config,
                on_done=done,
            )
        requests.append(request)
    for request in requests:
        request.finished_future.exception()
    if failures:
        raise SystemExit(f"{len(failures)} failed, the first: {failures[0]}")


def split(url: str) -> tuple[str, str]:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return bucket, prefix


if __name__ == "__main__":
    main()
