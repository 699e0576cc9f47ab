"""Parsing locations, mapping keys to local paths, sizes and filters: pure functions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from s3bulk._cli.options import parse_size
from s3bulk._errors import UsageError
from s3bulk._plan.filters import Filters
from s3bulk._urls import LocalLocation, S3Location, local_target, parse_location, parse_s3, relative_key


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


# ---- properties (hypothesis): whatever the key, mapping never escapes, parsing round-trips ----

SEGMENT_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="/")
KEYS = st.lists(
    st.one_of(
        st.sampled_from(["..", ".", "", "a", "é", "\x00", "x" * 256]), st.text(SEGMENT_CHARS, max_size=12)
    ),
    min_size=1,
    max_size=6,
).map("/".join) | st.text(max_size=40)
BUCKETS = st.from_regex(r"[a-z0-9][a-z0-9-]{2,20}[a-z0-9]", fullmatch=True)


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=KEYS)
def test_any_key_maps_below_the_destination_or_is_refused(tmp_path: Path, key: str) -> None:
    """The downloader's safety property: a key lands inside the destination, at the path its
    segments spell, or is refused with ValueError; nothing else (no exception of another kind)."""
    try:
        target = local_target(tmp_path, key)
    except ValueError:
        return
    assert target.resolve().is_relative_to(tmp_path.resolve())
    assert target.relative_to(tmp_path).as_posix() == key


@given(bucket=BUCKETS, key=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))))
def test_s3_urls_round_trip(bucket: str, key: str) -> None:
    location = parse_s3(f"s3://{bucket}/{key}")
    assert (location.bucket, location.key) == (bucket, key)
    assert parse_s3(location.url) == location


@given(text=st.text(max_size=60))
@example(text="~0")  # an unknown user's home: Path.expanduser raised RuntimeError
def test_any_text_parses_or_is_refused_with_a_usage_error(text: str) -> None:
    try:
        parse_location(text)
    except UsageError as exc:
        assert str(exc) and "\n" not in str(exc)  # one line: the text is quoted with repr()


@given(prefix=st.text(max_size=20), rest=st.text(max_size=20))
def test_relative_key_is_the_part_below_the_listed_directory(prefix: str, rest: str) -> None:
    directory = prefix[: prefix.rfind("/") + 1]
    assert relative_key(prefix + rest, prefix) == (prefix + rest)[len(directory) :]
