"""A module imported on first use. obstore costs ~6 MiB of RSS and ~30 ms to import, and most
jobs never call it (downloads, listings and copies go through the native client): its users
name it as usual for mypy and get this stand-in at run time.

    if TYPE_CHECKING:
        import obstore
    else:
        obstore = lazy_module("obstore")
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name`, loaded when one of its attributes is first read (importlib's LazyLoader)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
