"""`make demo`: the main job end to end on a throwaway local MinIO.

Generates 10,000 x 4 KiB and 200 x 1 MiB files, uploads them, lists them, copies them server-side
to another bucket, downloads the copy, verifies every checksum, prints a table, stops MinIO.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

import s3bulk
from s3bulk._report import Report, human_bytes
from s3bulk._stores.s3 import S3Client
from s3bulk.testing import MinioServer


def generate(root: Path) -> None:
    seed = os.urandom(1024**2 + 4096)
    for index in range(10_000):
        path = root / "small" / f"{index % 100:02d}" / f"file{index:05d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(seed[index : index + 4096])
    for index in range(200):
        path = root / "large" / f"blob{index:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(seed[index : index + 1024**2])


def digests(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in root.rglob("*")
        if path.is_file()
    }


def main() -> int:
    console = Console(width=max(Console().width, 110))
    work = Path(tempfile.mkdtemp(prefix="s3bulk-demo-"))
    rows: list[tuple[str, Report]] = []
    try:
        with console.status("starting MinIO and generating 10,200 files..."), MinioServer() as minio:
            os.environ.update(minio.client_env())
            settings = s3bulk.AwsSettings.from_env()

            async def make_buckets() -> None:
                client = S3Client(settings)
                for bucket in ("demo-source", "demo-copy"):
                    await client.request("PUT", "PUT", bucket)
                await client.close()

            import asyncio

            asyncio.run(make_buckets())
            generate(work / "data")
            console.print(f"MinIO at {minio.endpoint}; data in {work / 'data'}")
            steps = [
                ("upload", lambda: s3bulk.copy(f"{work}/data/", "s3://demo-source/data/")),
                ("copy (server-side)", lambda: s3bulk.copy("s3://demo-source/data/", "s3://demo-copy/data/")),
                ("download", lambda: s3bulk.copy("s3://demo-copy/data/", f"{work}/back/")),
            ]
            for name, step in steps:
                report = step()
                rows.append((name, report))
                if not report.ok:
                    for failure in report.failures[:10]:
                        console.print(f"[red]failed[/red] {failure.source}: {failure.reason}")
                    return 1
            rows.insert(1, ("list", s3bulk.ls("s3://demo-copy/data/").report))
        same = digests(work / "data") == digests(work / "back")
        table = Table(title="s3bulk demo (local MinIO, this machine)")
        for column in ("step", "objects", "bytes", "seconds", "objects/s", "Gb/s", "requests", "failed"):
            table.add_column(column, justify="right" if column != "step" else "left")
        for name, report in rows:
            requests = ", ".join(f"{k} {v:,}" for k, v in sorted(report.requests.items()))
            table.add_row(
                name,
                f"{report.objects_done:,}",
                human_bytes(report.bytes_done),
                f"{report.wall_seconds:.2f}",
                f"{report.objects_per_second:,.0f}",
                "-" if report.command == "ls" else f"{report.gigabits_per_second:.2f}",
                requests,
                str(report.objects_failed),
            )
        console.print(table)
        verdict = "[green]all 10,200 checksums match[/green]" if same else "[red]checksum mismatch[/red]"
        console.print(verdict)
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
