"""Where a graph came from: the ``module:attribute`` a recorded run can be replayed from.

A run records its graph's *target* (``package.module:graph``, or
``path/to/script.py:graph`` for a script run as ``__main__``) and the SHA-256 of that
file, so that ``reactor replay`` and ``reactor resume`` can import the same graph later
and refuse to import a file that changed, or one a database merely names.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["Origin", "file_hash", "target_file"]


def file_hash(path: str | Path) -> str | None:
    """SHA-256 of a file's bytes, or ``None`` if it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def target_file(target: str) -> Path | None:
    """The source file of ``module:attr`` (an imported module) or ``path.py:attr``."""
    where = target.rpartition(":")[0] or target
    if where.endswith(".py"):
        return Path(where)
    module = sys.modules.get(where)
    file = getattr(module, "__file__", None)
    return Path(file) if file else None


class Origin:
    """The module a graph was built in, to name it as a target once it is assigned."""

    def __init__(self, module: str | None, file: str | None) -> None:
        self.module = module
        self.file = file
        self._found: tuple[str, str | None] | None = None
        self._given: dict[str, str | None] = {}  # target -> its file's hash, read once
        self._missed = -1  # how many names the module had when the graph was not one

    @classmethod
    def of_caller(cls) -> Origin:
        """The module that called the function calling this (``reactive()``'s caller)."""
        frame = sys._getframe(2)
        return cls(frame.f_globals.get("__name__"), frame.f_globals.get("__file__"))

    def describe(self, graph: object, target: str | None = None) -> tuple[str | None, str | None]:
        """``(target, file hash)`` for ``graph``: the given target, else discovered."""
        if target is not None:
            if target not in self._given:
                file = target_file(target)
                self._given[target] = file_hash(file) if file is not None else None
            return target, self._given[target]
        if self._found is None:
            found = self._discover(graph)
            if found is None:
                return None, None
            self._found = found
        return self._found

    def _discover(self, graph: object) -> tuple[str, str | None] | None:
        module: ModuleType | None = sys.modules.get(self.module or "")
        if module is None:
            return None
        names = vars(module)
        if len(names) == self._missed:
            return None  # looked before, and the module has no new name since
        name = next((key for key, value in names.items() if value is graph), None)
        if name is None:
            self._missed = len(names)
            return None
        if self.module == "__main__" or self.module is None:
            if not self.file:
                return None
            where = str(Path(self.file).resolve())
        else:
            where = self.module
        return f"{where}:{name}", file_hash(self.file) if self.file else None
