"""How a put read its source, remembered per index beside the jobs (`_vectors/columns.py`): what
the user names wins, what they leave out is the last put's, indexes loaded in other ways are
named, and a record that cannot be read counts as none (the listing's check still holds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from s3bulk._config import AwsSettings
from s3bulk._errors import UsageError
from s3bulk._vectors.columns import OPTIONS, recalled, remember

LEFT_OUT = dict.fromkeys(OPTIONS)


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AwsSettings:
    monkeypatch.setenv("S3BULK_STATE_DIR", str(tmp_path / "state"))
    return AwsSettings.from_env(vectors_endpoint_url="http://127.0.0.1:1", region="us-east-1")


def test_what_is_left_out_is_read_as_the_last_put_did(settings: AwsSettings) -> None:
    put = LEFT_OUT | {"metadata_columns": ("genre", "year"), "key_column": "id"}
    remember(put, settings, "b", ("docs",), "job-1")

    filled, note = recalled(LEFT_OUT, settings, "b", ("docs",))
    named, _ = recalled(LEFT_OUT | {"metadata_columns": ("genre",)}, settings, "b", ("docs",))
    elsewhere, nothing = recalled(LEFT_OUT, settings, "b", ("other",))

    assert filled["metadata_columns"] == ("genre", "year") and filled["key_column"] == "id"
    assert "job job-1" in note and "--metadata-columns genre,year" in note and "--key-column id" in note
    assert named["metadata_columns"] == ("genre",) and named["key_column"] == "id"  # the user's wins
    assert elsewhere == LEFT_OUT and nothing == ""
    other_endpoint = AwsSettings.from_env(vectors_endpoint_url="http://127.0.0.1:2", region="us-east-1")
    assert recalled(LEFT_OUT, other_endpoint, "b", ("docs",)) == (LEFT_OUT, "")


def test_indexes_loaded_in_other_ways_are_named_and_a_broken_record_is_none(
    settings: AwsSettings, tmp_path: Path
) -> None:
    remember(LEFT_OUT | {"metadata_columns": ("genre",)}, settings, "b", ("a",), "job-1")
    remember(LEFT_OUT | {"metadata_columns": ("year",)}, settings, "b", ("b",), "job-2")
    with pytest.raises(UsageError, match="name --metadata-columns"):
        recalled(LEFT_OUT, settings, "b", ("a", "b"))
    assert recalled(LEFT_OUT | {"metadata_columns": ("genre",)}, settings, "b", ("a", "b"))[1] == ""
    for record in (tmp_path / "state" / "vectors").glob("*.json"):
        record.write_text("{not json")
    assert recalled(LEFT_OUT, settings, "b", ("a",)) == (LEFT_OUT, "")
