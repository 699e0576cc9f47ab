"""An S3 Inventory writer for tests and benchmarks: what AWS writes once a day for a bucket,
written for a bucket on a local server (MinIO has no inventory of its own).

    write_inventory(client, "photos", "inventories", kind="Parquet")
    # -> "s3://inventories/photos/all/2026-11-28T00-00Z/manifest.json"

The layout and the files are AWS's (docs: "Configuring Amazon S3 Inventory", "Locating your
inventory list"): under `PREFIX/SOURCE-BUCKET/CONFIG-ID/`, data files in `data/` (CSV gzip, ORC or
Parquet), and a dated folder holding `manifest.json` (source bucket, destination bucket ARN,
fileFormat, fileSchema, each file's key, size and MD5checksum) and `manifest.checksum`, the
manifest's MD5. CSV has no header and URL-encodes keys; ORC and Parquet name their columns
(bucket, key, size, last_modified_date, e_tag, storage_class, ...) and hold keys as they are.

`client` is a boto3 S3 client (what `Endpoint.client()` gives); the rows come from listing the
bucket with it, or from `rows` (key, size, LastModified as ISO 8601 text, ETag) for an inventory
of keys no bucket holds (bench/). This module imports pyarrow only for ORC and Parquet.
"""

from __future__ import annotations

import csv
import datetime
import gzip
import hashlib
import io
import json
import uuid
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote_plus

Row = tuple[str, int, str, str]  # key, size, LastModified (ISO 8601), ETag

CSV_SCHEMA = "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass"
PARQUET_SCHEMA = (
    "message s3.inventory { required binary bucket (STRING); required binary key (STRING); "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); "
    "optional binary e_tag (STRING); optional binary storage_class (STRING);}"
)
ORC_SCHEMA = (
    "struct<bucket:string,key:string,size:bigint,last_modified_date:timestamp,e_tag:string,"
    "storage_class:string>"
)
SUFFIX = {"CSV": ".csv.gz", "ORC": ".orc", "Parquet": ".parquet"}


def listed_rows(client: Any, bucket: str, prefix: str = "") -> Iterator[Row]:
    """The bucket's objects as rows, listed with `client` (a boto3 S3 client)."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for entry in page.get("Contents", []):
            modified = entry["LastModified"].astimezone(datetime.UTC)
            yield entry["Key"], entry["Size"], _iso(modified), entry["ETag"].strip('"')


def _iso(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def write_inventory(
    client: Any,
    source_bucket: str,
    destination_bucket: str,
    *,
    kind: str = "CSV",
    prefix: str = "",
    config_id: str = "all",
    rows: Iterable[Row] | None = None,
    rows_per_file: int = 250_000,
    when: datetime.datetime | None = None,
) -> str:
    """Write an inventory of `source_bucket` into `destination_bucket` (CSV, ORC or Parquet) and
    return its manifest's s3:// URL."""
    if kind not in SUFFIX:
        raise ValueError(f"kind {kind!r}: CSV, ORC or Parquet")
    when = when or datetime.datetime.now(datetime.UTC)
    base = f"{prefix.rstrip('/') + '/' if prefix else ''}{source_bucket}/{config_id}"
    files = []
    for chunk in _chunks(rows if rows is not None else listed_rows(client, source_bucket), rows_per_file):
        body = _file_body(kind, source_bucket, chunk)
        key = f"{base}/data/{uuid.uuid4()}{SUFFIX[kind]}"
        client.put_object(Bucket=destination_bucket, Key=key, Body=body)
        files.append({"key": key, "size": len(body), "MD5checksum": hashlib.md5(body).hexdigest()})
    manifest = {
        "sourceBucket": source_bucket,
        "destinationBucket": f"arn:aws:s3:::{destination_bucket}",
        "version": "2016-11-30",
        "creationTimestamp": str(int(when.timestamp() * 1000)),
        "fileFormat": kind,
        "fileSchema": {"CSV": CSV_SCHEMA, "ORC": ORC_SCHEMA, "Parquet": PARQUET_SCHEMA}[kind],
        "files": files,
    }
    text = json.dumps(manifest, indent=4).encode()
    folder = f"{base}/{when.strftime('%Y-%m-%dT%H-%MZ')}"
    client.put_object(Bucket=destination_bucket, Key=f"{folder}/manifest.json", Body=text)
    client.put_object(
        Bucket=destination_bucket,
        Key=f"{folder}/manifest.checksum",
        Body=hashlib.md5(text).hexdigest().encode(),
    )
    return f"s3://{destination_bucket}/{folder}/manifest.json"


def _chunks(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _file_body(kind: str, bucket: str, rows: list[Row]) -> bytes:
    if kind == "CSV":
        text = io.StringIO()
        out = csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for key, size, modified, etag in rows:
            out.writerow([bucket, quote_plus(key, safe="/"), size, modified, etag, "STANDARD"])
        return gzip.compress(text.getvalue().encode(), mtime=0)
    import pyarrow as pa

    table = pa.table(
        {
            "bucket": pa.array([bucket] * len(rows), pa.string()),
            "key": pa.array([row[0] for row in rows], pa.string()),
            "size": pa.array([row[1] for row in rows], pa.int64()),
            "last_modified_date": pa.array([row[2] for row in rows], pa.string())
            .cast(pa.timestamp("ns", tz="UTC"))
            .cast(pa.timestamp("ms", tz="UTC"), safe=False),
            "e_tag": pa.array([row[3] for row in rows], pa.string()),
            "storage_class": pa.array(["STANDARD"] * len(rows), pa.string()),
        }
    )
    written = io.BytesIO()
    if kind == "Parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, written, compression="snappy")
    else:
        import pyarrow.orc as orc

        orc.write_table(table, written, compression="zlib")
    return written.getvalue()
