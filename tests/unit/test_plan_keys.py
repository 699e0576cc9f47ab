"""Where a transfer's objects land (`_plan/keys.py`), without a server: keys under a prefix, a
single object, many objects into a key without '/', keys that would leave the destination
directory, "directory markers", filters and a listing's bad entries."""

from __future__ import annotations

from pathlib import Path

from s3bulk._plan.filters import Filters
from s3bulk._plan.keys import Refused, TransferItem, destination_key, plan_objects
from s3bulk._stores.s3xml import ObjectInfo
from s3bulk._urls import parse_location

WHEN = "2026-11-27T10:00:00.000Z"


def listed(key: str, size: int = 3) -> ObjectInfo:
    return ObjectInfo(key, size, WHEN, '"etag"')


def test_objects_under_a_prefix_land_under_a_directory_and_a_hostile_key_is_refused(tmp_path: Path) -> None:
    source = parse_location("s3://bkt/p/")
    objects = [
        listed("p/a.txt"),
        listed("p/d/b.txt"),
        listed("p/../up.txt"),
        listed("p/d/", 0),
        listed("p/m/", 5),
    ]
    items, refused = plan_objects(objects, source, parse_location(f"{tmp_path}/"), Filters(), many=True)
    assert [(item.source, item.destination) for item in items] == [
        ("p/a.txt", f"{tmp_path}/a.txt"),
        ("p/d/b.txt", f"{tmp_path}/d/b.txt"),
    ]
    assert items[0].mtime > 0 and items[0].etag == '"etag"'
    assert refused[0].url == "s3://bkt/p/../up.txt" and refused[0].reason.startswith("refused key:")
    assert refused[1] == Refused("s3://bkt/p/m/", refused[1].reason, skipped=True)  # a marker holding data
    assert "holds 5 bytes" in refused[1].reason
    assert len(refused) == 2  # the empty marker is a directory: nothing to say


def test_keys_in_s3_keep_their_names_below_the_destination() -> None:
    source = parse_location("s3://bkt/p/")
    objects = [listed("p/a.txt"), listed("p/d/b.txt")]
    for destination, many, expected in (
        ("s3://cat/q/", True, ["q/a.txt", "q/d/b.txt"]),
        ("s3://cat/q", True, ["q/a.txt", "q/d/b.txt"]),  # many never collapse onto one key
    ):
        items, refused = plan_objects(objects, source, parse_location(destination), Filters(), many=many)
        assert [item.destination for item in items] == expected and not refused
    one = parse_location("s3://cat/q")
    assert destination_key(one, "a.txt", many=False) == "q"  # one object, named as the user said
    items, _ = plan_objects(
        [listed("p/a.txt")], parse_location("s3://bkt/p/a.txt"), one, Filters(), many=False
    )
    assert items == [TransferItem("p/a.txt", "q", 3, items[0].mtime, '"etag"')]


def test_a_single_object_lands_as_the_file_named(tmp_path: Path) -> None:
    source = parse_location("s3://bkt/p/a.txt")
    target = parse_location(f"{tmp_path}/renamed.txt")
    items, _ = plan_objects([listed("p/a.txt")], source, target, Filters(), many=False)
    assert [item.destination for item in items] == [f"{tmp_path}/renamed.txt"]
    into = parse_location(f"{tmp_path}/")
    items, _ = plan_objects([listed("p/a.txt")], source, into, Filters(), many=False)
    assert [item.destination for item in items] == [f"{tmp_path}/a.txt"]


def test_filters_choose_by_name_and_size_and_a_bad_entry_is_a_failure(tmp_path: Path) -> None:
    source = parse_location("s3://bkt/p/")
    objects = [
        listed("p/a.txt", 10),
        listed("p/b.log", 10),
        listed("p/c.txt", 1000),
        ObjectInfo("p/x", -1, "", ""),
    ]
    filters = Filters(include=("*.txt",), max_size=100)
    items, refused = plan_objects(objects, source, parse_location(f"{tmp_path}/"), filters, many=True)
    assert [item.source for item in items] == ["p/a.txt"]
    assert [(each.url, each.item_id, each.skipped) for each in refused] == [("s3://bkt/p/x", "p/x", False)]


def test_walked_files_get_keys_and_those_that_cannot_go_are_named() -> None:
    """A file that could not be read is a failure journaled by name (--retry-failed tries it
    again); one whose name is not UTF-8 is one named by path alone (never journaled); a skipped
    one (a dangling link) is a skip."""
    from s3bulk._plan.keys import plan_files
    from s3bulk._text import NOT_UTF8

    entries = [
        ("a.txt", 3, "", False),
        ("d/b.log", 4, "", False),
        ("locked", 0, "permission denied", True),
        ("bad\udcff", 0, NOT_UTF8, True),
        ("link", 0, "dangling symlink", False),
    ]
    items, refused = plan_files(
        entries, "/root", parse_location("s3://bkt/q/"), Filters(exclude=("*.log",)), many=True
    )
    assert items == [TransferItem("/root/a.txt", "q/a.txt", 3)]
    assert [(each.url, each.item_id, each.skipped) for each in refused] == [
        ("/root/locked", "locked", False),
        ("/root/bad\udcff", "", False),
        ("/root/link", "", True),
    ]
    items, _ = plan_files(entries[:1], "/root", parse_location("s3://bkt/q"), Filters(), many=True)
    assert [item.destination for item in items] == ["q/a.txt"]  # many files: below q/, not onto q
