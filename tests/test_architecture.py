"""The shape of the code: no import cycles, one signal vocabulary, rooms of a readable size.

Functions are kept small by ruff's complexity budget (C901 at 12, PLR0915), not files
by a line count: a file is split where its meaning splits.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("reactor", "stores", "migration")
SYSTEM_NAME = re.compile(
    r"^(harness|agent|state|provider|text|thinking|tool|bus|session|prompt|reflection|mcp|spawn):\S+$"
)
NAMESPACE = re.compile(
    r"^(harness|agent|state|provider|text|thinking|tool|bus|session|prompt|reflection|mcp|spawn):$"
)


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_no_module_imports_itself_back() -> None:
    graph = grimp.build_graph(*PACKAGES)  # TYPE_CHECKING imports included
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain is not None:
                cycles.add(" -> ".join((module, *chain)))
    assert not sorted(cycles)


def _spelled_names(path: Path) -> list[str]:
    """Signal names written as string literals, docstrings aside."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and SYSTEM_NAME.match(node.value):
                found.append(f"{path.name}:{node.lineno}: {node.value}")
        elif isinstance(node, ast.JoinedStr) and node.values:
            # f"agent:{name}:completed" builds a signal name; f"agent:{name}" an actor.
            head, *rest = node.values
            builds = any(
                isinstance(part, ast.Constant) and str(part.value).startswith(":") for part in rest
            )
            if isinstance(head, ast.Constant) and NAMESPACE.match(str(head.value)) and builds:
                found.append(f"{path.name}:{node.lineno}: f{head.value!r}...")
    return found


def test_signal_names_are_spelled_only_in_the_vocabulary_module() -> None:
    spelled = [
        name
        for package in ("reactor", "stores")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "reactor/_signals/names.py"
        for name in _spelled_names(path)
    ]
    assert not spelled


PUBLIC_MODULES = {"__init__.py", "__main__.py", "eval.py", "logging.py", "typing.py", "otel.py"}
MAX_ROOM_MODULES = 15


@pytest.mark.parametrize("package", ["reactor", "reactor/service", "migration"])
def test_packages_hold_rooms_not_loose_private_modules(package: Path) -> None:
    loose = sorted(
        path.name
        for path in (ROOT / package).glob("*.py")
        if path.name.startswith("_") and path.name not in PUBLIC_MODULES
    )
    assert not loose, f"{package}/ holds private modules outside a room: {loose}"


def _rooms() -> list[Path]:
    return sorted(
        path.parent
        for package in PACKAGES
        for path in (ROOT / package).rglob("__init__.py")
        if path.parent != ROOT / package
    )


@pytest.mark.parametrize("room", _rooms(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_room_holds_more_than_fifteen_modules(room: Path) -> None:
    modules = [path for path in room.glob("*.py") if path.name != "__init__.py"]
    assert len(modules) <= MAX_ROOM_MODULES, f"{room.relative_to(ROOT)} has {len(modules)}"


@pytest.mark.parametrize(
    "room",
    [room for room in _rooms() if room.name.startswith("_")],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_each_room_says_what_it_holds_and_what_it_may_use(room: Path) -> None:
    docstring = ast.get_docstring(ast.parse((room / "__init__.py").read_text()))
    assert docstring, f"{room.relative_to(ROOT)}/__init__.py has no docstring"
    assert "May use" in docstring, f"{room.relative_to(ROOT)} does not say what it may use"


def test_architecture_map_names_every_room() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    missing = [
        str(room.relative_to(ROOT))
        for room in _rooms()
        if room.name.startswith("_")
        and room.parent.name in {"reactor", "service", "migration"}
        and f"{room.relative_to(ROOT)}/__init__.py" not in text
    ]
    assert not missing, f"ARCHITECTURE.md does not link these rooms: {missing}"


def test_architecture_map_lists_every_module() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    missing = [
        str(path.relative_to(ROOT))
        for path in _modules()
        if path.name != "__init__.py"
        and "migrations" not in path.parts
        and f"]({path.relative_to(ROOT).as_posix()})" not in text
    ]
    assert not missing, f"ARCHITECTURE.md does not list these modules: {missing}"
