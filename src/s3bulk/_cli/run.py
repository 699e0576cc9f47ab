"""`s3bulk run FILE|-`: a file of cp/mv/rm commands, one object per line, run as one job."""

from __future__ import annotations

from typing import Any

import typer

from s3bulk._cli.jobrun import (
    DryRunOption,
    JsonOption,
    QuietOption,
    ResumeOption,
    RetryFailedOption,
    StatsOption,
    continuation,
    run_job,
)
from s3bulk._cli.options import (
    ConcurrencyOption,
    EndpointOption,
    EngineOption,
    NoSignOption,
    NoVerifyOption,
    PartSizeOption,
    ProfileOption,
    RegionOption,
    RequestPayerOption,
    WorkersOption,
    manifest_path,
    settings_from,
)
from s3bulk._config import parse_size
from s3bulk._engine.spec import EngineSpec
from s3bulk._engine.strategies import DEFAULT_ENGINE


def run_command(
    commands: str | None = typer.Argument(
        None,
        help="A file of commands, one per line (cp SRC DST, mv SRC DST, rm URL), or - for stdin.",
        show_default=False,
    ),
    dry_run: bool = DryRunOption,
    as_json: bool = JsonOption,
    quiet: bool = QuietOption,
    stats: bool = StatsOption,
    engine: str | None = EngineOption,
    workers: int | None = WorkersOption,
    concurrency: int = ConcurrencyOption,
    part_size: str = PartSizeOption,
    resume: str | None = ResumeOption,
    retry_failed: str | None = RetryFailedOption,
    endpoint_url: str | None = EndpointOption,
    profile: str | None = ProfileOption,
    region: str | None = RegionOption,
    no_verify_ssl: bool = NoVerifyOption,
    no_sign_request: bool = NoSignOption,
    request_payer: str | None = RequestPayerOption,
) -> int:
    """Run a file of commands (like s5cmd run) as one job: the lines in flight together, one
    journal (--resume skips the lines that were done) and one report."""
    start = continuation("run", resume, retry_failed, [commands], {"engine": engine, "workers": workers})
    if start is None:
        from s3bulk._api.base import run_async
        from s3bulk._commands.run import RunSpec

        settings = settings_from(
            endpoint_url, profile, region, no_verify_ssl, no_sign_request, request_payer=request_payer
        )
        assert commands is not None
        path = manifest_path(commands)
        assert path is not None
        chosen = EngineSpec(engine=engine or DEFAULT_ENGINE, workers=workers, concurrency=concurrency)
        spec = RunSpec(
            commands_file=path, part_size=parse_size(part_size, "--part-size"), dry_run=dry_run, engine=chosen
        )

        def start(on_progress: Any, on_records: Any) -> Any:
            return run_async(spec, settings=settings, on_progress=on_progress, on_records=on_records)

    return run_job(start, verb="run", as_json=as_json, dry_run=dry_run, quiet=quiet, stats=stats)


COMMANDS = {"run": run_command}  # found by s3bulk._cli: the commands this module adds
