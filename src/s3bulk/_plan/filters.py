"""--include / --exclude globs, matched against the key (or path) relative to the source.

Like s5cmd: with any --include, a key must match one of them; a key matching any --exclude is
left out (exclude wins). `*` matches across `/`, so `*.txt` selects text files at any depth.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Filters:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    _include_re: re.Pattern[str] | None = field(default=None, init=False, compare=False, repr=False)
    _exclude_re: re.Pattern[str] | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        def compile_all(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
            if not patterns:
                return None
            return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns), re.DOTALL)

        object.__setattr__(self, "_include_re", compile_all(self.include))
        object.__setattr__(self, "_exclude_re", compile_all(self.exclude))

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)

    def accepts(self, relative: str) -> bool:
        if self._include_re is not None and not self._include_re.match(relative):
            return False
        return not (self._exclude_re is not None and self._exclude_re.match(relative))

    def __getstate__(self) -> dict[str, tuple[str, ...]]:
        return {"include": self.include, "exclude": self.exclude}

    def __setstate__(self, state: dict[str, tuple[str, ...]]) -> None:
        object.__setattr__(self, "include", state["include"])
        object.__setattr__(self, "exclude", state["exclude"])
        self.__post_init__()
