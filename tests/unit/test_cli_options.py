"""Options declared on spec fields (`_commands/base.Flag`) become the commands' options
(`_cli/options.spec_options`): each reads its text into the field's value, says the field's
default, and a spec's options are exactly its flagged fields (issue 50: an option is one field)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from s3bulk._cli.cp import cp_command
from s3bulk._cli.options import spec_options
from s3bulk._cli.sync import sync_command
from s3bulk._commands.copy import CopySpec
from s3bulk._commands.sync import NOT_FOR_SYNC, SyncSpec


def _app(command: Any) -> typer.Typer:
    made = typer.Typer()
    made.command()(command)
    return made


def _given(spec: type[Any], *arguments: str, leaving_out: tuple[str, ...] = ()) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    @spec_options(spec, leaving_out=leaving_out)
    def command(given: dict[str, Any] | None = None) -> int:
        seen.update(given or {})
        return 0

    result = CliRunner().invoke(_app(command), list(arguments))
    assert result.exit_code == 0, result.output
    return seen


def test_the_defaults_read_back_as_the_spec_s_own() -> None:
    given = _given(SyncSpec, leaving_out=NOT_FOR_SYNC)
    fields = {field.name: field.default for field in dataclasses.fields(SyncSpec) if field.name in given}
    assert given == fields
    assert set(NOT_FOR_SYNC).isdisjoint(given)


def test_each_kind_of_option_reads_its_text_into_the_field_s_value() -> None:
    given = _given(
        CopySpec,
        "--part-size",
        "16MiB",
        "--list-ranges",
        "off",
        "--ignore-checksum",
        "--no-guess-mime-type",
        "--exclude",
        "*.log",
        "--exclude",
        "tmp/*",
        "-n",
    )
    assert given["part_size"] == 16 * 1024**2
    assert given["partitioned_listing"] is False
    assert given["verify"] is False and given["guess_mime_type"] is False
    assert given["exclude"] == ("*.log", "tmp/*")
    assert given["no_clobber"] is True and given["if_newer"] is False


def test_a_size_that_does_not_read_is_named_by_its_flag() -> None:
    result = CliRunner().invoke(_app(cp_command), ["--part-size", "8 parsecs", "a", "s3://b/"])
    assert result.exit_code != 0
    assert "--part-size: cannot read size '8 parsecs'" in str(result.exception)


@pytest.mark.parametrize(
    ("command", "spec", "leaving_out"),
    [(cp_command, CopySpec, ()), (sync_command, SyncSpec, NOT_FOR_SYNC)],
    ids=["cp", "sync"],
)
def test_a_command_offers_every_flagged_field_of_its_spec(
    command: Any, spec: type[Any], leaving_out: tuple[str, ...]
) -> None:
    shown = CliRunner().invoke(_app(command), ["--help"], terminal_width=200).output
    for field in dataclasses.fields(spec):
        if "option" in field.metadata and field.name not in leaving_out:
            assert field.metadata["option"].flags[0] in shown, (command, field.name)
