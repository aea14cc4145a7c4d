"""The stores package's shape: no import cycles, only the bus layer of reactor below it."""

from __future__ import annotations

import ast
from pathlib import Path

import stores

PACKAGE = Path(stores.__file__).parent

# stores sits above the bus layer and below everything else in the engine.
ALLOWED_FROM_REACTOR = {
    "reactor._bus",
    "reactor._diagnostics",
    "reactor._patterns",
    "reactor._signal",
    "reactor._stream",
    "reactor.exceptions",
}


def module_name(path: Path) -> str:
    return "stores" if path.stem == "__init__" else f"stores.{path.stem}"


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (``TYPE_CHECKING`` blocks included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in {"stores", "reactor"}}


def graph() -> dict[str, set[str]]:
    return {module_name(path): imports_of(path) for path in sorted(PACKAGE.glob("*.py"))}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """Return one import cycle among ``edges``' modules, or ``None`` (iterative DFS)."""
    done: set[str] = set()
    for root in sorted(edges):
        if root in done:
            continue
        path = [root]
        pending = [iter(sorted(edges[root] & edges.keys()))]
        while pending:
            nxt = next(pending[-1], None)
            if nxt is None:
                pending.pop()
                done.add(path.pop())
            elif nxt in path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done:
                path.append(nxt)
                pending.append(iter(sorted(edges[nxt] & edges.keys())))
    return None


def test_the_package_has_no_import_cycles() -> None:
    assert find_cycle(graph()) is None


def test_the_cycle_check_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(edges) == ["a", "b", "c", "a"]


def test_only_the_bus_layer_of_reactor_is_imported() -> None:
    used = {
        (module, name)
        for module, names in graph().items()
        for name in names
        if name.startswith("reactor") and name not in ALLOWED_FROM_REACTOR
    }
    assert used == set()


def test_modules_stay_short() -> None:
    lengths = {path.name: len(path.read_text().splitlines()) for path in PACKAGE.glob("*.py")}
    assert {name: n for name, n in lengths.items() if n > 450} == {}
