"""S3 Inventory as a source (issue 67): `--inventory s3://inv/…/manifest.json` (or the
destination prefix of an inventory configuration: its newest manifest) in place of a listing.

Listing a billion keys is a million LIST requests before the first copy; S3 Inventory writes
the same keys, once a day, into a few hundred CSV (gzip), ORC or Parquet files that a
`manifest.json` names with each file's MD5. A job reads the manifest in the driver (checked
against `manifest.checksum`, the MD5 AWS writes beside it) and hands each data file on as one
work descriptor (`InventoryFile`), so workers, or a Ray cluster's nodes, each read their own
files and no driver reads them all. A worker checks the file's MD5 before it reads a row.

Rows become the `ObjectInfo` a listing gives (key, size, LastModified, ETag, storage class), so
filters, the size and time window and the planning of each item are a listing's, with no HEAD.
Rows of a version inventory that are not the latest version, or are delete markers, are left
out: a listing of the bucket would not show them either. CSV keys are URL-encoded (AWS's
documented form); ORC and Parquet keys are as stored.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote_plus

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError, UsageError, require_extra
from s3bulk._stores.s3xml import ListPage, ObjectInfo
from s3bulk._urls import parse_s3

KINDS = ("CSV", "ORC", "Parquet")
PAGE = 1000  # rows handed on at a time, as one listing page
# CSV's fileSchema names -> the column names ORC and Parquet inventories use
CSV_COLUMNS = {
    "Bucket": "bucket",
    "Key": "key",
    "VersionId": "version_id",
    "IsLatest": "is_latest",
    "IsDeleteMarker": "is_delete_marker",
    "Size": "size",
    "LastModifiedDate": "last_modified_date",
    "ETag": "e_tag",
    "StorageClass": "storage_class",
    "ChecksumAlgorithm": "checksum_algorithm",
}
READ = (
    "key",
    "is_latest",
    "is_delete_marker",
    "size",
    "last_modified_date",
    "e_tag",
    "storage_class",
    "checksum_algorithm",
)


class Store(Protocol):
    """What reading an inventory needs of a store (`_stores.storage.Storage`)."""

    async def get_object(self, bucket: str, key: str, *, if_match: str = "") -> bytes: ...

    async def list_objects_v2(
        self,
        bucket: str,
        prefix: str = "",
        *,
        start_after: str | None = None,
        continuation_token: str | None = None,
        delimiter: str | None = None,
        max_keys: int = 1000,
    ) -> ListPage: ...


@dataclass(frozen=True)
class InventoryFile:
    """A work descriptor: one data file of an inventory, read whole by the worker that takes it."""

    bucket: str
    key: str
    md5: str
    kind: str  # CSV, ORC or Parquet
    columns: tuple[str, ...] = ()  # a CSV file's columns, in order (ORC and Parquet name theirs)

    def __str__(self) -> str:
        return f"inventory file s3://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class Manifest:
    """An inventory's manifest.json, checked: the bucket it lists and its data files."""

    url: str
    source_bucket: str
    kind: str
    files: tuple[InventoryFile, ...]


def check_inventory(
    inventory: str | None, source: str, files_from: str | None = None, flag: str = "--inventory"
) -> None:
    """An inventory stands for a listing of an s3:// prefix, and for nothing else."""
    if inventory is None:
        return
    if not isinstance(inventory, str) or not inventory.startswith("s3://"):
        raise UsageError(f"{flag} {inventory!r}: give the s3:// URL of its manifest.json or of its prefix")
    parse_s3(inventory)
    if not isinstance(source, str) or not source.startswith("s3://") or not source.endswith("/"):
        raise UsageError(
            f"{flag} lists objects under an s3:// prefix: give one ending in '/', not {source!r}"
        )
    if files_from is not None:
        raise UsageError(f"{flag} and --files-from each name the objects: pick one")


def inventoried_bucket(manifest: Manifest, bucket: str) -> Manifest:
    """The manifest, if it lists `bucket`; one line if it lists another."""
    if manifest.source_bucket != bucket:
        raise UsageError(
            f"--inventory {manifest.url} lists bucket {manifest.source_bucket!r}, not {bucket!r}: "
            "give that bucket's inventory"
        )
    return manifest


async def find_manifest(store: Store, url: str) -> str:
    """The manifest's key: the URL's own when it names a manifest.json, else the newest under
    the prefix of an inventory configuration (`…/YYYY-MM-DDTHH-MMZ/manifest.json`: the dated
    folders sort by time)."""
    location = parse_s3(url)
    if location.key.endswith("manifest.json"):
        return location.key
    prefix = location.key if not location.key or location.key.endswith("/") else location.key + "/"
    newest = ""
    token: str | None = None
    while True:
        page = await store.list_objects_v2(location.bucket, prefix, continuation_token=token)
        for info in page.objects:
            if info.key.endswith("/manifest.json") and info.key > newest:
                newest = info.key
        if not page.is_truncated:
            break
        token = page.next_token
    if not newest:
        raise UsageError(
            f"--inventory {url}: no manifest.json under it (give an inventory's manifest.json, or the "
            "destination prefix of its configuration)"
        )
    return newest


async def read_manifest(store: Store, url: str) -> Manifest:
    """The manifest, its MD5 checked against `manifest.checksum`; one line where it is not an
    inventory s3bulk reads."""
    bucket = parse_s3(url).bucket
    key = await find_manifest(store, url)
    where = f"s3://{bucket}/{key}"
    try:
        body = await store.get_object(bucket, key)
        checksum = (await store.get_object(bucket, key[: -len(".json")] + ".checksum")).decode().strip()
    except ItemError as exc:
        raise UsageError(f"--inventory {where}: cannot read it and its manifest.checksum: {exc}") from None
    if hashlib.md5(body, usedforsecurity=False).hexdigest() != checksum.lower():
        raise UsageError(f"--inventory {where}: its MD5 is not the one manifest.checksum holds: not taken")
    try:
        document = json.loads(body)
        kind = document["fileFormat"]
        source = document["sourceBucket"]
        schema = document.get("fileSchema", "")
        entries = document["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--inventory {where}: not an S3 Inventory manifest ({exc})") from None
    if kind not in KINDS:
        raise UsageError(f"--inventory {where}: fileFormat {kind!r}: s3bulk reads CSV, ORC and Parquet")
    if kind != "CSV":
        require_extra("parquet", f"an {kind} inventory")
    columns = tuple(CSV_COLUMNS.get(name.strip(), name.strip().lower()) for name in schema.split(","))
    if kind == "CSV" and "key" not in columns:
        raise UsageError(f"--inventory {where}: its fileSchema {schema!r} has no Key")
    files = tuple(
        InventoryFile(
            bucket, entry["key"], entry["MD5checksum"].lower(), kind, columns if kind == "CSV" else ()
        )
        for entry in entries
    )
    return Manifest(f"s3://{bucket}/{key}", source, kind, files)


async def read_inventory(store: Store, url: str, bucket: str) -> Manifest:
    """--inventory's manifest for a job over `bucket`, read and checked in the driver (its files
    become the work, or one side of a merge): one line if it lists another bucket."""
    return inventoried_bucket(await read_manifest(store, url), bucket)


async def load_inventory(settings: AwsSettings, url: str, bucket: str) -> Manifest:
    """`read_inventory` on a store of its own, opened and closed here (a job's build)."""
    from s3bulk._stores.storage import Storage

    storage = Storage(settings, connections=2)
    try:
        return await read_inventory(storage, url, bucket)
    finally:
        await storage.close()


async def file_pages(store: Store, file: InventoryFile, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
    """One data file's objects under `prefix`, a page at a time, as a listing gives them: what a
    worker does with the descriptor `InventoryFile`."""
    for objects in pages(file, await read_file(store, file), prefix):
        yield objects


async def inventory_pages(store: Store, manifest: Manifest, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
    """Every object the inventory lists under `prefix`, its files read one after another, in
    the inventory's order (ls, du, and one side of sync and check before it is sorted)."""
    for file in manifest.files:
        async for objects in file_pages(store, file, prefix):
            yield objects


def checked_body(file: InventoryFile, body: bytes) -> bytes:
    """The file's bytes, once its MD5 is the manifest's (a retryable ItemError else)."""
    if hashlib.md5(body, usedforsecurity=False).hexdigest() != file.md5:
        raise ItemError(f"{file}: its MD5 is not the one the manifest names", retryable=True)
    return body


async def read_file(store: Store, file: InventoryFile) -> bytes:
    """The data file's bytes, its MD5 checked against the manifest's (`pages` reads them)."""
    return checked_body(file, await store.get_object(file.bucket, file.key))


def pages(file: InventoryFile, body: bytes, prefix: str) -> Iterator[list[ObjectInfo]]:
    """The rows of a checked file as pages of ObjectInfo (see the module's docstring)."""
    if file.kind == "CSV":
        yield from _csv_pages(file, body, prefix)
    else:
        yield from _arrow_pages(file, body, prefix)


def _csv_pages(file: InventoryFile, body: bytes, prefix: str) -> Iterator[list[ObjectInfo]]:
    at = {name: index for index, name in enumerate(file.columns)}
    text = io.TextIOWrapper(gzip.GzipFile(fileobj=io.BytesIO(body)), encoding="utf-8", newline="")
    page: list[ObjectInfo] = []
    for row in csv.reader(text):
        info = _row(
            {name: row[index] if index < len(row) else "" for name, index in at.items() if name in READ},
            prefix,
        )
        if info is not None:
            page.append(info)
            if len(page) >= PAGE:
                yield page
                page = []
    if page:
        yield page


def _row(fields: dict[str, str], prefix: str) -> ObjectInfo | None:
    """A CSV row as the object it names (None: not the latest version, a delete marker, or a key
    outside `prefix`)."""
    if (
        fields.get("is_latest", "true").lower() == "false"
        or fields.get("is_delete_marker", "").lower() == "true"
    ):
        return None
    key = unquote_plus(fields["key"])
    if not key.startswith(prefix):
        return None
    size = fields.get("size") or "0"
    return ObjectInfo(
        key,
        int(size) if size.isdigit() else -1,  # no size: `listing_problem` refuses the entry by name
        fields.get("last_modified_date", ""),
        fields.get("e_tag", ""),
        fields.get("storage_class", ""),
        fields.get("checksum_algorithm", ""),
    )


def _arrow_pages(file: InventoryFile, body: bytes, prefix: str) -> Iterator[list[ObjectInfo]]:
    for batch in _batches(file, body):
        yield from _batch_pages(batch, prefix)


def _batches(file: InventoryFile, body: bytes) -> Iterator[Any]:
    if file.kind == "Parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(io.BytesIO(body))
        wanted = [name for name in READ if name in parquet.schema_arrow.names]
        yield from parquet.iter_batches(batch_size=64 * PAGE, columns=wanted)
        return
    import pyarrow.orc as orc

    found = orc.ORCFile(io.BytesIO(body))
    wanted = [name for name in READ if name in found.schema.names]
    for stripe in range(found.nstripes):
        yield found.read_stripe(stripe, columns=wanted)


def _batch_pages(batch: Any, prefix: str) -> Iterator[list[ObjectInfo]]:
    """An ORC or Parquet batch as pages: the latest versions under `prefix` only."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    keep = pc.starts_with(batch.column("key"), prefix) if prefix else pa.scalar(True)
    if "is_latest" in names:
        keep = pc.and_kleene(keep, pc.fill_null(batch.column("is_latest"), True))
    if "is_delete_marker" in names:
        keep = pc.and_kleene(keep, pc.invert(pc.fill_null(batch.column("is_delete_marker"), False)))
    if prefix or "is_latest" in names or "is_delete_marker" in names:
        batch = batch.filter(keep)
    rows = batch.num_rows
    keys = batch.column("key").to_pylist()
    sizes = pc.fill_null(batch.column("size"), -1).to_pylist() if "size" in names else [-1] * rows
    times = _iso_times(batch.column("last_modified_date")) if "last_modified_date" in names else [""] * rows
    etags = _texts(batch, "e_tag", rows)
    classes = _texts(batch, "storage_class", rows)
    checksums = _texts(batch, "checksum_algorithm", rows)
    objects = list(map(ObjectInfo, keys, sizes, times, etags, classes, checksums))
    for start in range(0, rows, PAGE):
        yield objects[start : start + PAGE]


def _texts(batch: Any, name: str, rows: int) -> list[str]:
    import pyarrow.compute as pc

    if name not in batch.schema.names:
        return [""] * rows
    return pc.fill_null(batch.column(name).cast("string"), "").to_pylist()  # type: ignore[no-any-return]


def _iso_times(column: Any) -> list[str]:
    """Timestamps as the ISO 8601 text a listing gives (`2026-11-28T18:35:12.123Z`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_timestamp(column.type):
        millis = column.cast(pa.timestamp("ms", tz="UTC"))
        return pc.fill_null(pc.strftime(millis, "%Y-%m-%dT%H:%M:%SZ"), "").to_pylist()  # type: ignore[no-any-return]
    return pc.fill_null(column.cast("string"), "").to_pylist()  # type: ignore[no-any-return]
