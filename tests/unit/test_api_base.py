"""The API's functions without a server: typed signatures, and blocking twins that take what their
async twins take."""

from __future__ import annotations

import asyncio
import functools
import inspect

import pytest

import s3bulk
from s3bulk._api.base import called_as, sync_twin

_CHECKED = called_as("any")(lambda: None).__code__  # the wrapper called_as puts around a function


def _layers(function: object) -> tuple[list[object], object]:
    """The code of each wrapper around a function (functools.wraps' `__wrapped__`), and the
    function they wrap."""
    codes = []
    while hasattr(function, "__wrapped__"):
        codes.append(function.__code__)  # type: ignore[attr-defined]
        function = function.__wrapped__
    return codes, function


FUNCTIONS = sorted(name for name in s3bulk.__all__ if inspect.isfunction(getattr(s3bulk, name)))


def assert_takes_what_its_twin_takes(blocking: object, twin: object) -> None:
    """A sync function takes what its async twin takes: it is `sync_twin(twin)`, or its own
    signature (not the one functools.wraps lends it: `inspect.signature` follows `__wrapped__`,
    so a `*args, **kwargs` wrapper would be compared with its twin's and pass) is the twin's."""
    if _layers(blocking) == (_layers(sync_twin(twin))[0], twin):  # type: ignore[arg-type]
        return
    own = blocking
    while getattr(own, "__code__", None) is _CHECKED and getattr(own, "__wrapped__", twin) is not twin:
        own = own.__wrapped__  # type: ignore[attr-defined]  # called_as takes what it wraps takes
    mine = inspect.signature(own, follow_wrapped=False)  # type: ignore[arg-type]
    assert mine.parameters == inspect.signature(twin, follow_wrapped=False).parameters  # type: ignore[arg-type]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_public_function_has_a_typed_signature(name: str) -> None:
    signature = inspect.signature(getattr(s3bulk, name))
    for parameter in signature.parameters.values():
        assert parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL), f"{name}: {parameter}"
        assert parameter.annotation is not parameter.empty, f"{name}: {parameter.name} has no type"
    assert signature.return_annotation is not signature.empty, name
    twin = getattr(s3bulk, f"{name}_async", None)
    if twin is not None:
        assert_takes_what_its_twin_takes(getattr(s3bulk, name), twin)


def test_a_twin_that_takes_anything_is_caught() -> None:
    """The check above fails on a hand-written twin that only looks like its async one."""

    @functools.wraps(s3bulk.copy_async)
    def copy(*args: object, **kwargs: object) -> object:
        return asyncio.run(s3bulk.copy_async(*args, **kwargs))  # type: ignore[arg-type]

    with pytest.raises(AssertionError):
        assert_takes_what_its_twin_takes(copy, s3bulk.copy_async)
    assert_takes_what_its_twin_takes(s3bulk.copy, s3bulk.copy_async)
