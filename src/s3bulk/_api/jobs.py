"""A journaled job continued (`--resume`) or its failures run again (`--retry-failed`)."""

from __future__ import annotations

from s3bulk._api.base import Progress, Records, sync_twin
from s3bulk._report import Report


async def resume_async(
    job_id: str,
    *,
    engine: str | None = None,
    workers: int | None = None,
    max_memory: int | None = None,
    ray_address: str | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Continue a journaled job (killed, interrupted or failed), skipping every finished item.
    `engine`, `workers`, `max_memory` and `ray_address` replace the job's own when given."""
    from s3bulk._runner import continue_job

    overrides = {"engine": engine, "workers": workers, "max_memory": max_memory, "ray_address": ray_address}
    return await continue_job(
        job_id, "resume", overrides=overrides, on_progress=on_progress, on_records=on_records
    )


async def retry_failed_async(
    job_id: str,
    *,
    engine: str | None = None,
    workers: int | None = None,
    max_memory: int | None = None,
    ray_address: str | None = None,
    on_progress: Progress = None,
    on_records: Records = None,
) -> Report:
    """Run only the items (and listings) that failed in a journaled job (options as `resume_async`)."""
    from s3bulk._runner import continue_job

    overrides = {"engine": engine, "workers": workers, "max_memory": max_memory, "ray_address": ray_address}
    return await continue_job(
        job_id, "retry-failed", overrides=overrides, on_progress=on_progress, on_records=on_records
    )


resume = sync_twin(resume_async)


retry_failed = sync_twin(retry_failed_async)
