"""The API's typed signatures and the specs they build say the same (issues 50, 63): each keyword
of `copy_async`, `move_async`, `sync_async`, `check_async`, the vectors functions, `map` and
`gather_to_file_async` is a field of its command's spec or of the engine's (or an option of the
run itself), with the same default, and every field of a spec is reachable from Python. A field
added to a spec and not to its function, or a default changed on one side only, fails here."""

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
from s3bulk._api.map import MAP
from s3bulk._commands.check import CheckSpec
from s3bulk._commands.copy import CopySpec, MoveSpec
from s3bulk._commands.copy_vectors import ENGINE as COPY_VECTORS
from s3bulk._commands.copy_vectors import CopyVectorsSpec
from s3bulk._commands.delete_vectors import ENGINE as DELETE_VECTORS
from s3bulk._commands.delete_vectors import DeleteVectorsSpec
from s3bulk._commands.export_vectors import ENGINE as EXPORT_VECTORS
from s3bulk._commands.export_vectors import ExportVectorsSpec
from s3bulk._commands.gather import ENGINE as GATHER
from s3bulk._commands.gather import GatherSpec
from s3bulk._commands.map import MapSpec
from s3bulk._commands.put_vectors import ENGINE as PUT_VECTORS
from s3bulk._commands.put_vectors import PutVectorsSpec
from s3bulk._commands.query_vectors import ENGINE as QUERY_VECTORS
from s3bulk._commands.query_vectors import QueryVectorsSpec
from s3bulk._commands.sync import SyncSpec
from s3bulk._commands.sync_vectors import ENGINE as SYNC_VECTORS
from s3bulk._commands.sync_vectors import SyncVectorsSpec
from s3bulk._commands.vectorspecs import CountVectorsSpec, VerifyVectorsSpec
from s3bulk._engine.spec import EngineSpec

# the API's names for spec fields it names otherwise (`index`: one or several, `fn`: a function)
RENAMED = {"index": "indexes", "to_index": "to_indexes", "fn": "function"}
NO_DRY_RUN = frozenset({"dry_run"})  # export and query write nothing to an index
# (function, its spec, its engine's defaults (None: no job), spec fields it leaves out on purpose)
PAIRS: list[tuple[str, type[Any], EngineSpec | None, frozenset[str]]] = [
    ("copy_async", CopySpec, COPY, frozenset()),
    ("move_async", MoveSpec, COPY, frozenset()),
    # sync compares whole listings: the per-object guards of cp (-n, -s, -u) mean nothing there
    ("sync_async", SyncSpec, COPY, frozenset({"no_clobber", "if_size_differ", "if_newer"})),
    # check copies nothing: only what chooses the names compared is an option
    (
        "check_async",
        CheckSpec,
        COPY,
        frozenset(field.name for field in dataclasses.fields(CheckSpec))
        - {"source", "destination", "include", "exclude", "files_from"}
        - {"min_size", "max_size", "newer_than", "older_than"},
    ),
    ("put_vectors_async", PutVectorsSpec, PUT_VECTORS, frozenset()),
    ("sync_vectors_async", SyncVectorsSpec, SYNC_VECTORS, frozenset()),
    ("copy_vectors_async", CopyVectorsSpec, COPY_VECTORS, frozenset()),
    ("delete_vectors_async", DeleteVectorsSpec, DELETE_VECTORS, frozenset()),
    ("export_vectors_async", ExportVectorsSpec, EXPORT_VECTORS, NO_DRY_RUN),
    ("query_vectors_async", QueryVectorsSpec, QUERY_VECTORS, NO_DRY_RUN),
    ("verify_vectors_async", VerifyVectorsSpec, None, frozenset({"every_row"})),  # sample=None is --all
    ("count_vectors_async", CountVectorsSpec, None, frozenset()),
    # a map job is never a dry run; its results go to `to`/`output` or the caller
    ("map", MapSpec, MAP, frozenset({"dry_run"})),
    ("gather_to_file_async", GatherSpec, GATHER, frozenset({"dry_run"})),
]


def _defaults(kind: type[Any]) -> dict[str, Any]:
    found = {}
    for field in dataclasses.fields(kind):
        if field.default is not dataclasses.MISSING:
            found[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            found[field.name] = field.default_factory()
    return found


@pytest.mark.parametrize(("name", "spec", "engine_spec", "left_out"), PAIRS, ids=[pair[0] for pair in PAIRS])
def test_each_keyword_is_a_field_with_the_same_default(
    name: str, spec: type[Any], engine_spec: EngineSpec | None, left_out: frozenset[str]
) -> None:
    parameters = inspect.signature(getattr(s3bulk, name)).parameters
    fields, engine = _defaults(spec), _defaults(EngineSpec) if engine_spec else {}
    engine_defaults = dataclasses.asdict(engine_spec) if engine_spec else {}
    for parameter in parameters.values():
        if parameter.name in RUN_OPTIONS or parameter.default is inspect.Parameter.empty:
            continue
        if parameter.name in engine:
            assert parameter.default == engine_defaults[parameter.name], (name, parameter.name)
            continue
        field = _field(parameter.name, fields)
        assert field in fields, f"{name}({parameter.name}=...) is no field of {spec.__name__}"
        assert parameter.default == fields[field], (name, parameter.name)
    names = {field.name for field in dataclasses.fields(spec)}
    reachable = {_field(each, names) for each in parameters} | left_out | {"engine"}
    missing = names - reachable
    assert not missing, f"{spec.__name__}'s {sorted(missing)} cannot be given to s3bulk.{name}"


def _field(parameter: str, fields: dict[str, Any] | set[str]) -> str:
    """The spec field a keyword sets: its own name, or the spec's for it (`index`: `indexes`)."""
    return parameter if parameter in fields else RENAMED.get(parameter, parameter)


NAMED = [
    "copy_async",
    "move_async",
    "sync_async",
    "check_async",
    "remove_async",
    *(pair[0] for pair in PAIRS[4:]),
    "map_async",
    "gather_async",
]


@pytest.mark.parametrize("name", NAMED)
def test_each_keyword_is_passed_on_by_name(name: str) -> None:
    """The spec is built from the arguments named one by one (no `locals()`): a keyword added to
    a function and not to what it hands `run_spec` (or `spec_of`, `made`, or the function it is
    the twin of) would be dropped without a word."""
    function = getattr(s3bulk, name)
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(function))))
    assert not any(
        isinstance(node, ast.Call) and getattr(node.func, "id", "") == "locals" for node in ast.walk(tree)
    ), f"{name} builds its spec from locals()"
    parameters = set(inspect.signature(function).parameters) - set(RUN_OPTIONS)  # settings: the run's
    handed = [_handed(node) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    whole = [passed for passed in handed if parameters <= set(passed.values())]
    assert whole, f"{name} hands no call all its arguments by name: {handed}"
    wrong = {key: value for key, value in whole[0].items() if key not in (value, RENAMED.get(value))}
    assert not wrong, f"{name} passes another argument under these names: {wrong}"


def _handed(call: ast.Call) -> dict[str, str]:
    """{the name it goes by: the argument it is} for what a call hands on by name: the entries
    of a dict literal it is given, or its own keywords and positional names."""
    passed: dict[str, str] = {}
    for argument in call.args:
        if isinstance(argument, ast.Dict):
            for key, value in zip(argument.keys, argument.values, strict=True):
                if isinstance(key, ast.Constant) and (name := _name(value)):
                    passed[str(key.value)] = name
        elif name := _name(argument):
            passed[name] = name
    for keyword in call.keywords:
        if keyword.arg and (name := _name(keyword.value)):
            passed[keyword.arg] = name
    return passed


def _name(value: ast.expr) -> str:
    """The argument a value is: `x`, or `x` made into what the spec takes (`locations(x, ...)`)."""
    if isinstance(value, ast.Call) and value.args:
        value = value.args[0]
    return value.id if isinstance(value, ast.Name) else ""


def test_the_vectors_functions_take_paths_where_they_take_places(tmp_path: Any) -> None:
    """A `Path` (or several) for each place a vectors function names: the spec makes it the
    str the CLI would have given (the functions no longer convert before the spec)."""
    from s3bulk._api.base import spec_of

    put = {
        "sources": [tmp_path / "a"],
        "bucket": "b",
        "indexes": "i",
        "keys_file": tmp_path,
        "rejects": tmp_path,
    }
    query = {"sources": tmp_path / "q", "bucket": "b", "index": "i", "output": tmp_path / "o"}
    made = [
        spec_of(PutVectorsSpec, PUT_VECTORS, put)[0],
        spec_of(ExportVectorsSpec, EXPORT_VECTORS, {"bucket": "b", "indexes": "i", "destination": tmp_path})[
            0
        ],
        spec_of(DeleteVectorsSpec, DELETE_VECTORS, {"bucket": "b", "indexes": "i", "keys_from": tmp_path})[0],
        spec_of(QueryVectorsSpec, QUERY_VECTORS, query)[0],
    ]
    places = [value for spec in made for value in dataclasses.asdict(spec).values() if value]
    assert str(tmp_path) in " ".join(map(str, places))
    assert not [value for value in places if "Path" in type(value).__name__], places
    assert all(isinstance(each, str) for spec in made for each in getattr(spec, "sources", ()))
