"""The migration package's shape: no import cycles (type-only imports count), short modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "migration"
MODULES = sorted(PACKAGE.glob("_*.py"))


def imports(path: Path) -> set[str]:
    """The package's modules ``path`` imports, anywhere in it (TYPE_CHECKING blocks too)."""
    found: set[str] = set()
    for statement in ast.walk(ast.parse(path.read_text())):
        if isinstance(statement, ast.Import):
            names = [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.module:
            names = [statement.module]
            if statement.module == "migration":
                names = [f"migration.{alias.name}" for alias in statement.names]
        else:
            continue
        found |= {name.split(".")[1] for name in names if name.startswith("migration._")}
    return found


def test_modules_import_each_other_without_cycles() -> None:
    graph = {path.stem: imports(path) - {path.stem} for path in MODULES}
    state: dict[str, int] = {}
    for start in graph:
        if start in state:
            continue
        path, cursors = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while cursors:
            nxt = next(cursors[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                cursors.pop()
                continue
            assert state.get(nxt) != 1, (
                f"import cycle: {' -> '.join(path[path.index(nxt) :])} -> {nxt}"
            )
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                cursors.append(iter(sorted(graph[nxt])))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_every_module_is_short(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 450


def test_the_cycle_check_sees_type_only_imports(tmp_path: Path) -> None:
    module = tmp_path / "_a.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from migration._spec import X\n"
    )
    assert imports(module) == {"_spec"}
