"""check (`s3bulk check`): two trees compared, nothing copied."""

from __future__ import annotations

from s3bulk._api.base import Location, Patterns, Progress, run_spec, sync_twin
from s3bulk._api.copy import COPY
from s3bulk._commands.check import CheckSpec
from s3bulk._config import AwsSettings
from s3bulk._report import Report


async def check_async(
    source: Location,
    destination: Location,
    *,
    include: Patterns = (),
    exclude: Patterns = (),
    settings: AwsSettings | None = None,
    on_progress: Progress = None,
) -> Report:
    """Compare two trees (prefixes or directories) without copying: the report's failures name
    each difference ("missing: ...", "extra: ...", "differs: ...") and `objects_unchanged` counts
    what is the same; `report.ok` is True when they hold the same."""
    return await run_spec(
        CheckSpec,
        COPY,
        {
            "source": source,
            "destination": destination,
            "include": include,
            "exclude": exclude,
            "settings": settings,
            "on_progress": on_progress,
            "journal": False,
        },
    )


check = sync_twin(check_async)
