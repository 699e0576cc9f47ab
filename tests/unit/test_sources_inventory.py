"""_sources/inventory.py: an S3 Inventory's manifest and files (as s3bulk.testing writes them, in
AWS's format) read back as the objects a listing gives, checked by their MD5s."""

from __future__ import annotations

import asyncio
import hashlib
import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from s3bulk._errors import ItemError, UsageError
from s3bulk._sources.inventory import InventoryFile, pages, read_file, read_manifest
from s3bulk._stores.s3xml import ListPage, ObjectInfo, epoch_seconds
from s3bulk.testing.inventory import _file_body, write_inventory

ROWS = [
    ("a/plain.txt", 5, "2026-11-28T18:35:12.123Z", "d41d8cd98f00b204e9800998ecf8427e"),
    ("a/with space+plus%25.txt", 0, "2026-11-28T18:35:13.000Z", "e1"),
    ('a/new\nline,"quoted"', 7, "2026-11-28T18:35:14.500Z", "e2"),
    ("a/日本.txt", 1, "2026-11-27T00:00:00.000Z", "e3-2"),
    ("b/outside", 9, "2026-11-28T18:35:12.000Z", "e4"),
]


class Bucket:
    """An in-memory bucket with what reading an inventory asks of a store, and a boto3-shaped
    put_object for the writer."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.lists: list[str] = []

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> None:
        self.objects[Bucket, Key] = Body

    async def get_object(self, bucket: str, key: str, *, if_match: str = "") -> bytes:
        try:
            return self.objects[bucket, key]
        except KeyError:
            raise ItemError(f"no such object: s3://{bucket}/{key}", retryable=False) from None

    async def list_objects_v2(self, bucket: str, prefix: str = "", **_: Any) -> ListPage:
        self.lists.append(bucket)
        keys = sorted(key for (where, key) in self.objects if where == bucket and key.startswith(prefix))
        return ListPage([ObjectInfo(key, 0, "", "") for key in keys], [], False, None)


def _read(file: InventoryFile, body: bytes, prefix: str = "a/") -> list[ObjectInfo]:
    return [info for page in pages(file, body, prefix) for info in page]


@pytest.mark.parametrize("kind", ["CSV", "ORC", "Parquet"])
def test_each_kind_reads_back_as_the_objects_it_holds(kind: str) -> None:
    body = _file_body(kind, "src", ROWS)
    named = ("bucket", "key", "size", "last_modified_date", "e_tag", "storage_class")
    columns = named if kind == "CSV" else ()
    file = InventoryFile("inv", "f", hashlib.md5(body).hexdigest(), kind, columns)
    found = _read(file, body)
    assert [info.key for info in found] == [row[0] for row in ROWS[:4]]
    assert [info.size for info in found] == [row[1] for row in ROWS[:4]]
    assert [info.etag for info in found] == [row[3] for row in ROWS[:4]]
    assert [epoch_seconds(info.modified) for info in found] == [epoch_seconds(row[2]) for row in ROWS[:4]]
    assert found[0].storage_class == "STANDARD"


def test_rows_of_old_versions_and_delete_markers_are_left_out() -> None:
    table = pa.table(
        {
            "bucket": ["src"] * 3,
            "key": ["a/k", "a/k", "a/gone"],
            "version_id": ["v2", "v1", "v3"],
            "is_latest": [True, False, True],
            "is_delete_marker": [False, False, True],
            "size": pa.array([2, 1, None], pa.int64()),
            "last_modified_date": pa.array([0, 0, 0], pa.timestamp("ms", tz="UTC")),
            "e_tag": ["new", "old", None],
        }
    )
    written = io.BytesIO()
    pq.write_table(table, written)
    body = written.getvalue()
    found = _read(InventoryFile("inv", "f", hashlib.md5(body).hexdigest(), "Parquet"), body)
    assert [(info.key, info.etag) for info in found] == [("a/k", "new")]


def test_a_file_whose_md5_is_not_the_manifests_is_refused() -> None:
    store = Bucket()
    store.objects["inv", "f"] = _file_body("CSV", "src", ROWS)
    file = InventoryFile("inv", "f", "0" * 32, "CSV", ("bucket", "key"))
    with pytest.raises(ItemError, match="MD5"):
        asyncio.run(read_file(store, file))


def test_the_newest_manifest_of_a_configuration_is_read_and_checked() -> None:
    import datetime

    store = Bucket()
    day = datetime.datetime(2026, 11, 27, tzinfo=datetime.UTC)
    write_inventory(store, "src", "inv", kind="CSV", prefix="p", rows=ROWS[:1], when=day)
    newest = write_inventory(
        store, "src", "inv", kind="Parquet", prefix="p", rows=ROWS, when=day + datetime.timedelta(days=1)
    )
    manifest = asyncio.run(read_manifest(store, "s3://inv/p/src/all/"))
    assert manifest.url == newest
    assert (manifest.kind, manifest.source_bucket, len(manifest.files)) == ("Parquet", "src", 1)
    assert asyncio.run(read_manifest(store, newest)) == manifest
    key = newest.removeprefix("s3://inv/")
    store.objects["inv", key] = store.objects["inv", key].replace(b'"src"', b'"other"')
    with pytest.raises(UsageError, match=r"manifest\.checksum"):
        asyncio.run(read_manifest(store, newest))


def test_a_prefix_without_an_inventory_says_so_in_one_line() -> None:
    with pytest.raises(UsageError, match=r"no manifest\.json under it"):
        asyncio.run(read_manifest(Bucket(), "s3://inv/nothing/"))
