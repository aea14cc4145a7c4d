"""Bindings: ``{{ ... }}`` in the strings of node inputs, as FlowSpec had them.

A binding reads the binding context: ``flow.input.<key>`` (alias
``workflow.input.<key>``), ``state.<key>``, ``<nodeId>.<key>`` (a node's output), and
the item of a ``forEach`` by its ``as`` name. The A3 forms read one dotted path:

* ``{{path}}``: strict, a missing value fails the node with :class:`BindingError`;
* ``{{?path}}``: optional, a missing value renders as ``""``;
* ``{{path | default:<json>}}``: a missing value is the JSON literal instead.

A path that leads nowhere, or to ``null``, is missing; a step over a list applies to
each element, as in JSONata (``{{ plan.tasks.title }}`` is the list of titles), when
the list has no element of that index. Anything else between the
braces is an expression of the kernel's later dialect (``{{ reviewer.score >= 0.5
}}``, see :mod:`migration._expressions.expr`), parsed once; an expression that is undefined
renders as ``""`` (``null`` when it is the whole string).

A string that is exactly one binding keeps the value's type (``"{{facts.value}}"`` is
the dict); otherwise each binding is rendered into the string (strings as they are,
anything else as JSON). Only strings are templated, recursively through dicts and
lists.

A string may also hold Jinja's blocks around its bindings, ``{% if cond %}`` and
``{% for x in list %}`` (see :mod:`migration._expressions.blocks`): a binding in a
branch that is not taken is never read, so a strict one there cannot fail. A string
with blocks renders to a string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from migration._expressions.errors import BindingError
from migration._expressions.expr import Path, evaluate, roots, truthy
from migration._expressions.template import (
    Binding,
    Choice,
    Each,
    Part,
    has_blocks,
    parse_template,
)
from migration._expressions.values import MISSING, lookup, step

__all__ = ["bound_nodes", "check_bindings", "resolve", "strings"]


def check_bindings(value: Any, where: str, *, key: str = "") -> list[str]:
    """Every malformed binding or block in the strings of ``value``, as problems.

    Each names ``where``; a block's also the key holding its string (``key``, the
    key of ``value`` itself: ``Node 'a' input.prompt: line 3: ...``).
    """
    problems: list[str] = []
    for place, text in _keyed_strings(value, key):
        try:
            parse_template(text)
        except ValueError as exc:
            inside = f" {place}" if place and has_blocks(text) else ""
            problems.append(f"{where}{inside}: {exc}.")
    return problems


def _keyed_strings(value: Any, root: str) -> list[tuple[str, str]]:
    """Every string in ``value`` with its dotted key (``input.options.system``)."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [(root, value)]
    while stack:
        key, item = stack.pop()
        if isinstance(item, str):
            found.append((key, item))
        elif isinstance(item, Mapping):
            stack.extend(reversed([(f"{key}.{k}".lstrip("."), v) for k, v in item.items()]))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(f"{key}[{i}]", v) for i, v in enumerate(item)]))
    return found


def bound_nodes(value: Any) -> set[str]:
    """The first path segments the bindings in the strings of ``value`` read.

    Malformed bindings are left out (:func:`check_bindings` reports them).
    """
    found: set[str] = set()
    for text in strings(value):
        try:
            template = parse_template(text)
        except ValueError:
            continue
        found |= _read(template.parts)
    return found


def _read(parts: tuple[Part, ...]) -> set[str]:
    """The first path segments ``parts`` read (a loop's own name left out of its body)."""
    found: set[str] = set()
    for part in parts:
        if isinstance(part, Binding):
            found |= roots(part.expr) if part.expr else {part.path.split(".")[0]}
        elif isinstance(part, Choice):
            for condition, branch in part.branches:
                found |= (roots(condition) if condition is not None else set()) | _read(branch)
        elif isinstance(part, Each):
            found |= roots(part.items) | (_read(part.body) - {part.name, "loop"})
            found |= _read(part.empty)
    return found


def strings(value: Any) -> list[str]:
    """Every string in ``value``, through dicts and lists (iteratively)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return found


def resolve(value: Any, context: Mapping[str, Any], *, node: str | None = None) -> Any:
    """Resolve every binding in the strings of ``value`` (recursively).

    Raises:
        BindingError: A strict binding has no value.
    """
    if isinstance(value, str):
        return _render(value, context, node)
    if isinstance(value, Mapping):
        return {key: resolve(item, context, node=node) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [resolve(item, context, node=node) for item in value]
    return value


def _render(text: str, context: Mapping[str, Any], node: str | None) -> Any:
    template = parse_template(text)
    if template.single:
        binding = next(p for p in template.parts if isinstance(p, Binding))
        return _value(binding, context, node, whole=True)
    pieces: list[str] = []
    _pieces(template.parts, context, node, pieces)
    return "".join(pieces)


def _pieces(
    parts: tuple[Part, ...], context: Mapping[str, Any], node: str | None, pieces: list[str]
) -> None:
    """Render ``parts`` into ``pieces``: text, bindings, the branch taken, each item."""
    for part in parts:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, Binding):
            pieces.append(_text(_value(part, context, node, whole=False)))
        elif isinstance(part, Choice):
            _pieces(_taken(part, context), context, node, pieces)
        else:
            items = _items(evaluate(part.items, context))
            for index, item in enumerate(items):
                scope = {**context, part.name: item, "loop": _loop(index, len(items))}
                _pieces(part.body, scope, node, pieces)
            if not items:
                _pieces(part.empty, context, node, pieces)


def _taken(choice: Choice, context: Mapping[str, Any]) -> tuple[Part, ...]:
    """The first branch of an ``{% if %}`` whose condition holds (or its ``else``)."""
    for condition, branch in choice.branches:
        if condition is None or truthy(evaluate(condition, context)):
            return branch
    return ()


def _loop(index: int, length: int) -> dict[str, Any]:
    """``loop`` in a ``{% for %}``'s body, as Jinja has it."""
    return {
        "index": index + 1,
        "index0": index,
        "first": index == 0,
        "last": index == length - 1,
        "length": length,
    }


def _items(value: Any) -> list[Any]:
    """What a ``{% for %}`` goes through: a list's items; nothing for undefined or null."""
    if value is MISSING or value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _value(binding: Binding, context: Mapping[str, Any], node: str | None, *, whole: bool) -> Any:
    if binding.expr is not None:
        value = evaluate(binding.expr, context)
        if value is MISSING or value is None:
            return None if whole else ""
        return value
    value = lookup(context, binding.path)
    if value is MISSING:  # a step over a list maps over it, as in the later dialect
        value = evaluate(Path(tuple(binding.path.split("."))), context)
        value = MISSING if value is None else value
    if value is not MISSING:
        return value
    if binding.has_default:
        return binding.default
    if binding.optional:
        return None if whole else ""
    where = f"Node {node!r}: the" if node else "The"
    raise BindingError(
        f"{where} binding {binding.source} has no value ({_why(context, binding.path)}). "
        f"Make it optional with {{{{?{binding.path}}}}}, give it a default with "
        f"{{{{{binding.path} | default:<json>}}}}, or check the path.",
        path=binding.path,
        node=node,
    )


def _why(context: Mapping[str, Any], path: str) -> str:
    segments = path.split(".")
    current: Any = context
    for index, segment in enumerate(segments):
        current = step(current, segment)
        if current is MISSING:
            if index == 0:
                return f"there is no node or input named {segment!r} yet"
            return f"{'.'.join(segments[:index])} has no {segment!r}"
        if current is None:
            return f"{'.'.join(segments[: index + 1])} is null"
    return "it is null"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
