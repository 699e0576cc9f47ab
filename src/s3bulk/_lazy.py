"""A module imported on first use. obstore costs ~6 MiB of RSS and ~30 ms to import, and most
jobs never call it (downloads, listings and large uploads go through the native client): its
users name it as usual for mypy and get this stand-in at run time.

    if TYPE_CHECKING:
        import obstore
    else:
        obstore = lazy_module("obstore")
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Lazy(ModuleType):
    """Imports its module when an attribute is first read, then holds the module's names, so
    later reads are plain lookups. Not in `sys.modules`: the import is the import system's own,
    under its locks, whichever thread reads first (importlib's LazyLoader is not thread-safe
    before Python 3.12)."""

    def __getattr__(self, name: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, name)


def lazy_module(name: str) -> ModuleType:
    """`name`, imported when one of its attributes is first read."""
    return _Lazy(name)
