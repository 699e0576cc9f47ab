"""The API's typed signatures and the specs they build say the same (issue 50): each keyword of
`copy_async`, `move_async`, `sync_async` and `check_async` is a field of its command's spec or of
the engine's (or an option of the run itself), with the same default, and every field of a spec
is reachable from Python. A field added to a spec and not to its function, or a default changed
on one side only, fails here."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any

import pytest

import s3bulk
from s3bulk._api.base import RUN_OPTIONS
from s3bulk._api.copy import COPY
from s3bulk._commands.check import CheckSpec
from s3bulk._commands.copy import CopySpec, MoveSpec
from s3bulk._commands.sync import SyncSpec
from s3bulk._engine.spec import EngineSpec

# (function, its spec, spec fields it leaves out on purpose, and why)
PAIRS: list[tuple[str, type[Any], frozenset[str]]] = [
    ("copy_async", CopySpec, frozenset()),
    ("move_async", MoveSpec, frozenset()),
    # sync compares whole listings: the per-object guards of cp (-n, -s, -u) mean nothing there
    ("sync_async", SyncSpec, frozenset({"no_clobber", "if_size_differ", "if_newer"})),
    # check copies nothing: only what chooses the names compared is an option
    (
        "check_async",
        CheckSpec,
        frozenset(field.name for field in dataclasses.fields(CheckSpec))
        - {"source", "destination", "include", "exclude", "files_from"}
        - {"min_size", "max_size", "newer_than", "older_than"},
    ),
]


def _defaults(kind: type[Any]) -> dict[str, Any]:
    found = {}
    for field in dataclasses.fields(kind):
        if field.default is not dataclasses.MISSING:
            found[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            found[field.name] = field.default_factory()
    return found


@pytest.mark.parametrize(("name", "spec", "left_out"), PAIRS, ids=[pair[0] for pair in PAIRS])
def test_each_keyword_is_a_field_with_the_same_default(
    name: str, spec: type[Any], left_out: frozenset[str]
) -> None:
    parameters = inspect.signature(getattr(s3bulk, name)).parameters
    fields, engine = _defaults(spec), _defaults(EngineSpec)
    engine_defaults = dataclasses.asdict(COPY)
    for parameter in parameters.values():
        if parameter.name in RUN_OPTIONS or parameter.default is inspect.Parameter.empty:
            continue
        if parameter.name in engine:
            assert parameter.default == engine_defaults[parameter.name], (name, parameter.name)
            continue
        assert parameter.name in fields, f"{name}({parameter.name}=...) is no field of {spec.__name__}"
        assert parameter.default == fields[parameter.name], (name, parameter.name)
    reachable = set(parameters) | left_out | {"engine"}
    missing = {field.name for field in dataclasses.fields(spec)} - reachable
    assert not missing, f"{spec.__name__}'s {sorted(missing)} cannot be given to s3bulk.{name}"


@pytest.mark.parametrize("name", ["copy_async", "move_async", "sync_async", "check_async", "remove_async"])
def test_each_keyword_is_passed_on_to_the_spec_by_name(name: str) -> None:
    """The spec is built from the arguments named one by one (no `locals()`): a keyword added to
    a function and not to what it hands `run_spec` would be dropped without a word."""
    function = getattr(s3bulk, name)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "run_spec"
    ]
    assert len(calls) == 1, f"{name} builds its spec once, with run_spec"
    arguments = calls[0].args[2]
    assert isinstance(arguments, ast.Dict), f"{name} names its arguments in a dict literal"
    passed = {
        key.value: value.id
        for key, value in zip(arguments.keys, arguments.values, strict=True)
        if isinstance(key, ast.Constant) and isinstance(value, ast.Name)
    }
    parameters = set(inspect.signature(function).parameters)
    assert parameters <= set(passed), f"{name} drops {sorted(parameters - set(passed))}"
    wrong = {key: value for key, value in passed.items() if key in parameters and key != value}
    assert not wrong, f"{name} passes another argument under these names: {wrong}"
