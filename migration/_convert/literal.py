"""Values as Python source for generated code, formatted as ruff formats them.

A value is written on one line when it fits the width; otherwise a mapping or a list
puts an item per line, and a string of several lines (a prompt) is written as its
lines, one quoted line each, in parentheses: the same string, readable. A
:class:`Code` is written as it is (an expression of the generated module, such as a
call reading a schema file).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = ["WIDTH", "Code", "literal", "quoted"]

WIDTH = 88
"""ruff's and black's default line length, for pasting anywhere."""


@dataclasses.dataclass(frozen=True)
class Code:
    """A call written in place of a value: ``function("argument")``."""

    function: str
    argument: str

    @property
    def text(self) -> str:
        """The call on one line."""
        return f"{self.function}({quoted(self.argument)})"


def quoted(text: str) -> str:
    """A double-quoted Python string literal (JSON string syntax is valid Python)."""
    return json.dumps(text, ensure_ascii=False)


def _inline(value: Any) -> str:
    if isinstance(value, Code):
        return value.text
    if isinstance(value, str):
        return quoted(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_inline(k)}: {_inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    return repr(value)


def literal(value: Any, indent: int, prefix: str = "") -> str:
    """``value`` as Python, on one line when ``indent + prefix + value,`` fits the width."""
    inline = _inline(value)
    if indent + len(prefix) + len(inline) + 1 <= WIDTH:
        return inline
    inner = " " * (indent + 4)
    if isinstance(value, Code):
        return f"{value.function}(\n{inner}{quoted(value.argument)}\n{' ' * indent})"
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        lines = [f"{inner}{quoted(line)}" for line in value.splitlines(keepends=True)]
        return "(\n" + "\n".join(lines) + "\n" + " " * indent + ")"
    if not (isinstance(value, dict | list | tuple) and value):
        return inline
    if isinstance(value, dict):
        items = [
            f"{inner}{quoted(str(k))}: {literal(v, indent + 4, quoted(str(k)) + ': ')},"
            for k, v in value.items()
        ]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{inner}{literal(item, indent + 4)}," for item in value]
    return "[\n" + "\n".join(items) + "\n" + " " * indent + "]"
