"""Parsing locations, mapping keys to local paths, sizes and filters: pure functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from s3bulk.cli.options import parse_size
from s3bulk.errors import UsageError
from s3bulk.plan.filters import Filters
from s3bulk.urls import LocalLocation, S3Location, local_target, parse_location, relative_key


def test_s3_urls_parse_bucket_and_key() -> None:
    assert parse_location("s3://my-bucket/a/b/") == S3Location("my-bucket", "a/b/")
    assert parse_location("s3://my-bucket") == S3Location("my-bucket", "")
    assert parse_location("S3://my-bucket/k") == S3Location("my-bucket", "k")
    assert parse_location("s3://my-bucket/a/b/").is_prefix
    assert not parse_location("s3://my-bucket/a/b").is_prefix


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("s3://", "missing bucket"),
        ("s3:///key", "missing bucket"),
        ("s3:/bucket/key", "malformed S3 URL"),
        ("s3://Bad_Bucket/key", "invalid bucket name"),
        ("s3://ab/key", "invalid bucket name"),
        ("gs://bucket/key", "unsupported URL scheme 'gs://'"),
        ("", "empty location"),
        ("s3://bucket/a\x00b", "NUL byte"),
    ],
)
def test_malformed_locations_name_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        parse_location(text)


def test_local_paths_keep_the_trailing_slash(tmp_path: Path) -> None:
    location = parse_location(f"{tmp_path}/")
    assert isinstance(location, LocalLocation)
    assert location.trailing_slash and location.is_prefix


@pytest.mark.parametrize(
    "key", ["../evil", "a/../../evil", "/etc/passwd", "a//b", "./a", "a/./b", "a\x00b", "x" * 300]
)
def test_hostile_keys_never_map_outside_the_destination(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError):
        local_target(tmp_path, key)


def test_ordinary_keys_map_below_the_destination(tmp_path: Path) -> None:
    assert local_target(tmp_path, "a/b c/é.txt") == tmp_path / "a" / "b c" / "é.txt"


def test_symlinked_directory_pointing_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="outside"):
        local_target(root, "link/file")


def test_relative_key_strips_the_listed_prefix() -> None:
    assert relative_key("data/x/y", "data/") == "x/y"
    assert relative_key("data/x/y", "") == "data/x/y"
    assert relative_key("data/x/y", "data/x") == "x/y"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8MiB", 8 * 1024**2),
        ("64MB", 64 * 10**6),
        ("5GiB", 5 * 1024**3),
        ("1048576", 1048576),
        ("1.5KiB", 1536),
    ],
)
def test_sizes(text: str, value: int) -> None:
    assert parse_size(text, "--part-size") == value


def test_bad_size_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--part-size: cannot read size"):
        parse_size("eight", "--part-size")


def test_filters_include_then_exclude() -> None:
    filters = Filters(include=("*.txt",), exclude=("tmp/*",))
    assert filters.accepts("a/b.txt")
    assert not filters.accepts("a/b.bin")
    assert not filters.accepts("tmp/c.txt")
    assert Filters().accepts("anything")
