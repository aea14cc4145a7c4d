"""Reading flow files that may be hostile: bounded size, depth and alias expansion.

A flow file comes from outside the program, so reading it must end quickly with a
clear :class:`~migration.FlowSpecError`, whatever it holds:

* bytes that are not UTF-8 say where the first bad byte is;
* a document larger than :data:`MAX_BYTES`, nested deeper than :data:`MAX_DEPTH`, or
  holding more than :data:`MAX_NODES` values once YAML aliases are expanded (a
  "billion laughs" file of a few hundred bytes) is refused before it is built.

The YAML is checked as a stream of parser events first (an iterative parser, so deep
nesting cannot exhaust the stack), then loaded. Mappings given from Python go
through the same depth and size check (:func:`check_shape`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from migration._expressions.errors import FlowSpecError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "check_shape", "load_yaml", "read_text"]

MAX_BYTES = 4_000_000
"""The largest flow (or schema) file read, in bytes (characters for YAML text)."""

MAX_DEPTH = 64
"""The deepest nesting of mappings and lists in a flow."""

MAX_NODES = 200_000
"""The most values (mappings, lists and scalars) a flow may hold, aliases expanded."""

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOOL = "tag:yaml.org,2002:bool"


class _Loader(_SafeLoader):  # type: ignore[misc,valid-type]  # PyYAML ships no types for it
    """The safe loader, reading booleans as YAML 1.2 does: ``true`` and ``false`` only.

    YAML 1.1 also reads ``on``, ``off``, ``yes``, ``no``, ``y`` and ``n`` as booleans,
    so a key ``on:`` became ``True`` and was refused as a field named ``True``; here
    they are the words written (a boolean field still takes ``yes``: pydantic reads it).
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _BOOL]
    for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def read_text(path: Path, what: str = "flow file") -> str:
    """The text of ``path``, which must be UTF-8 and at most :data:`MAX_BYTES` long.

    Raises:
        FileNotFoundError: There is no such file.
        FlowSpecError: The file is too large or is not UTF-8.
    """
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise FlowSpecError(
            f"The {what} {str(path)!r} is {size:,} bytes; the limit is {MAX_BYTES:,}. "
            "Split it, or check that it is the file you meant."
        )
    data = path.read_bytes()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise FlowSpecError(
            f"The {what} {str(path)!r} is not UTF-8 text: byte 0x{data[exc.start]:02x} at "
            f"line {line}, column {column} cannot be decoded. Save the file as UTF-8."
        ) from None


def load_yaml(text: str, what: str = "flow") -> Any:
    """Parse YAML ``text`` into data, within the size, depth and alias limits.

    Raises:
        FlowSpecError: The text is not valid YAML, or is too large, too deep, or
            expands to too many values.
    """
    if len(text) > MAX_BYTES:
        raise FlowSpecError(
            f"The {what} is {len(text):,} characters long; the limit is {MAX_BYTES:,}."
        )
    try:
        _check_events(text, what)
        return yaml.load(text, Loader=_Loader)  # a safe loader (CSafeLoader or SafeLoader)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        if len(detail) > 300:
            detail = detail[:297] + "..."
        raise FlowSpecError(f"The {what} is not valid YAML: {detail}") from None


def _check_events(text: str, what: str) -> None:
    """Walk the parser events: depth, and the size of the document with aliases expanded."""
    sizes: dict[str, int] = {}  # anchor -> how many values the anchored node expands to
    stack: list[tuple[str | None, int]] = []  # open collections: (anchor, values so far)
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                mark = event.start_mark
                where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
                raise FlowSpecError(
                    f"The {what} nests mappings and lists more than {MAX_DEPTH} levels "
                    f"deep{where}; flatten it."
                )
            stack.append((event.anchor, 1))
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, count = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, count = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            anchor, count = None, sizes.get(str(event.anchor), 1)
        else:
            continue
        if anchor is not None:
            sizes[anchor] = count
        if stack:  # the parent grows by this value, expanded
            parent, so_far = stack[-1]
            count = so_far + count
            stack[-1] = (parent, count)
        if count > MAX_NODES:
            raise FlowSpecError(
                f"The {what} expands to more than {MAX_NODES:,} values (YAML aliases "
                "repeat what they point to); write it out without nested aliases."
            )


def check_shape(data: Any, what: str = "flow") -> None:
    """Check Python data against the same depth and size limits as a YAML flow.

    Shared sub-structures count each time they appear, as an expanded YAML alias
    would; the walk is iterative and stops at the first limit reached.

    Raises:
        FlowSpecError: ``data`` is nested too deep or holds too many values.
    """
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise FlowSpecError(
                f"The {what} holds more than {MAX_NODES:,} values (shared values count each "
                "time they appear); make it smaller."
            )
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > MAX_DEPTH:
            raise FlowSpecError(
                f"The {what} nests mappings and lists more than {MAX_DEPTH} levels deep; "
                "flatten it."
            )
        stack.extend((child, depth + 1) for child in children)
