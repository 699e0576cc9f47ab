"""How a put read its source (the format, the key, vector and metadata columns, the keys file or
template), remembered for each index it wrote, beside the jobs (never in the vectors), so that a
later `vectors sync` or `vectors verify` of the same index reads the source the same way when
those options are left out.

Without it, a sync after `put --metadata-columns genre,year` that leaves the option out reads
rows without metadata: every vector differs, and would be put again stripped of what the index
holds; a verify says "0 of 100 rows match". What the user names always wins; what a put into
the index used fills the rest, and the plan says so.

One small JSON file per index, named by a digest of the endpoint, the bucket and the index, in
`state_dir()/vectors/`: written whole, then renamed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from s3bulk._config import AwsSettings
from s3bulk._errors import UsageError
from s3bulk._journal.local import private_directory, state_dir

# what is remembered, and the option that names each
OPTIONS = {
    "format": "--format",
    "key_column": "--key-column",
    "vector_column": "--vector-column",
    "metadata_columns": "--metadata-columns",
    "keys_file": "--keys-file",
    "key_template": "--key-template",
}


def _path(settings: AwsSettings, bucket: str, index: str) -> Path:
    where = "\0".join((settings.resolved_vectors_endpoint, bucket, index))
    return state_dir() / "vectors" / f"{hashlib.sha256(where.encode()).hexdigest()[:32]}.json"


def remember(
    read: dict[str, Any], settings: AwsSettings, bucket: str, indexes: tuple[str, ...], job_id: str
) -> None:
    """Keep how a put read its source (`read`: OPTIONS' names, as the user named them; None:
    left to the defaults, which find the same columns again) for each index it writes to."""
    columns = {name: read.get(name) for name in OPTIONS}
    columns["metadata_columns"] = list(columns["metadata_columns"] or ())
    for index in indexes:
        path = _path(settings, bucket, index)
        private_directory(path.parent)
        record = {
            "endpoint": settings.resolved_vectors_endpoint,
            "bucket": bucket,
            "index": index,
            "job": job_id,
            "columns": columns,
        }
        temporary = path.with_name(f"{path.name}.{os.getpid()}.partial")
        temporary.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(temporary, path)


def recalled(
    named: dict[str, Any], settings: AwsSettings, bucket: str, indexes: tuple[str, ...]
) -> tuple[dict[str, Any], str]:
    """`named` (OPTIONS' names; None: left out) with what was left out as the last put into
    these indexes read it, and a note that says what was taken (or "")."""
    records = [_read(_path(settings, bucket, index)) for index in indexes]
    found = [record for record in records if record is not None]
    if not found:
        return named, ""
    left_out = [name for name in OPTIONS if named.get(name) is None]
    taken = {name: found[0]["columns"].get(name) for name in left_out}
    for record in found[1:]:
        other = {name: record["columns"].get(name) for name in left_out}
        if other != taken:
            differing = [OPTIONS[name] for name in left_out if other[name] != taken[name]]
            raise UsageError(
                f"the indexes were loaded reading the source in other ways: name {', '.join(differing)}"
            )
    if isinstance(taken.get("metadata_columns"), list):
        taken["metadata_columns"] = tuple(taken["metadata_columns"])
    filled = named | {name: value for name, value in taken.items() if value is not None}
    said = [_shown(name, value) for name, value in taken.items() if value]
    job = found[0].get("job") or "without a journal"
    note = (
        f"reading the source as the put into {bucket}/{','.join(indexes)} did (job {job}): {' '.join(said)}"
        if said
        else ""
    )
    return filled, note


KEY_OPTIONS = ("key_column", "keys_file", "key_template")  # what makes each row's key


def loaded_keys(settings: AwsSettings, bucket: str, indexes: tuple[str, ...]) -> dict[str, Any] | None:
    """How the last put into these indexes made its keys (`KEY_OPTIONS`; None: left to the
    defaults), where a put remembered it and every index's agrees (None otherwise: nothing to
    hold a sync to)."""
    records = [_read(_path(settings, bucket, index)) for index in indexes]
    found = [{name: record["columns"].get(name) for name in KEY_OPTIONS} for record in records if record]
    if not found or any(each != found[0] for each in found[1:]):
        return None
    return found[0]


def _shown(name: str, value: Any) -> str:
    text = ",".join(value) if isinstance(value, list | tuple) else str(value)
    return f"{OPTIONS[name]} {text}"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):  # none, or unreadable: nothing remembered (the listing's check holds)
        return None
    return record if isinstance(record, dict) and isinstance(record.get("columns"), dict) else None
