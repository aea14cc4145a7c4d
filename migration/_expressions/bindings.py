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
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from migration._expressions.errors import BindingError
from migration._expressions.expr import Expr, ExpressionError, Path, evaluate, parse, roots
from migration._expressions.values import MISSING, clip, lookup, step

__all__ = ["bound_nodes", "check_bindings", "resolve", "strings"]

_BINDING = re.compile(r"\{\{(.*?)\}\}(?!\})", re.DOTALL)
_PATH = re.compile(r"^[A-Za-z_][\w-]*(?:\.[\w-]+)*$")
_LITERALS = ("true", "false", "null")
_DEFAULT = re.compile(r"^default\s*:\s*(.*)$", re.DOTALL)


@dataclasses.dataclass(frozen=True, slots=True)
class _Binding:
    path: str
    optional: bool = False
    has_default: bool = False
    default: Any = None
    expr: Expr | None = None  # an expression binding (then ``path`` is its text)

    @property
    def source(self) -> str:
        if self.expr is not None:
            return f"{{{{ {self.path} }}}}"
        if self.has_default:
            return f"{{{{{self.path} | default:{json.dumps(self.default)}}}}}"
        return f"{{{{{'?' if self.optional else ''}{self.path}}}}}"


@dataclasses.dataclass(frozen=True, slots=True)
class _Template:
    parts: tuple[str | _Binding, ...]
    single: bool  # the whole (stripped) string is one binding


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> _Template:
    """Parse a string into text and bindings; raise ``ValueError`` on a bad binding."""
    parts: list[str | _Binding] = []
    last = 0
    for match in _BINDING.finditer(text):
        if match.start() > last:
            parts.append(text[last : match.start()])
        parts.append(_parse_binding(match.group(1)))
        last = match.end()
    if last < len(text):
        parts.append(text[last:])
    bindings = [p for p in parts if isinstance(p, _Binding)]
    single = len(bindings) == 1 and all(isinstance(p, _Binding) or not p.strip() for p in parts)
    return _Template(tuple(parts), single)


def _parse_binding(raw: str) -> _Binding:
    path, bar, rest = raw.partition("|")
    path = path.strip()
    optional = path.startswith("?")
    if optional:
        path = path[1:].strip()
    if not bar and not optional and (not _PATH.match(path) or path in _LITERALS):
        return _expression(raw)
    if not _PATH.match(path):
        raise ValueError(
            f"{{{{{clip(raw)}}}}} is not a binding: write {{{{path}}}}, {{{{?path}}}} or "
            "{{path | default:<json>}}, with a dotted path such as flow.input.name or "
            "node.key"
        )
    if not bar:
        return _Binding(path, optional)
    found = _DEFAULT.match(rest.strip())
    if found is None:
        raise ValueError(
            f"{{{{{clip(raw)}}}}} uses an unknown filter {rest.strip()!r}: the only filter is "
            'default:<json>, e.g. {{path | default:"none"}}'
        )
    literal = found.group(1).strip()
    try:
        default = json.loads(literal)
    except json.JSONDecodeError:
        raise ValueError(
            f"{{{{{clip(raw)}}}}} has a default that is not JSON: {literal!r}; quote strings "
            'as in default:"text", or use a number, true, false, null, [...] or {...}'
        ) from None
    return _Binding(path, optional, True, default)


def _expression(raw: str) -> _Binding:
    text = raw.strip()
    try:
        expr = parse(text)
    except ExpressionError as exc:
        raise ValueError(
            f"{{{{{clip(raw)}}}}} is neither a path nor an expression: {exc}. Write {{{{path}}}}, "
            "{{?path}}, {{path | default:<json>}}, or an expression such as "
            "{{ node.score >= 0.5 }}"
        ) from None
    return _Binding(text, expr=expr)


def check_bindings(value: Any, where: str) -> list[str]:
    """Every malformed binding in the strings of ``value``, as problems naming ``where``."""
    problems: list[str] = []
    for text in strings(value):
        try:
            _parse(text)
        except ValueError as exc:
            problems.append(f"{where}: {exc}.")
    return problems


def bound_nodes(value: Any) -> set[str]:
    """The first path segments the bindings in the strings of ``value`` read.

    Malformed bindings are left out (:func:`check_bindings` reports them).
    """
    found: set[str] = set()
    for text in strings(value):
        try:
            template = _parse(text)
        except ValueError:
            continue
        for part in template.parts:
            if isinstance(part, _Binding):
                found |= roots(part.expr) if part.expr else {part.path.split(".")[0]}
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
    template = _parse(text)
    if template.single:
        binding = next(p for p in template.parts if isinstance(p, _Binding))
        return _value(binding, context, node, whole=True)
    pieces = []
    for part in template.parts:
        if isinstance(part, str):
            pieces.append(part)
        else:
            pieces.append(_text(_value(part, context, node, whole=False)))
    return "".join(pieces)


def _value(binding: _Binding, context: Mapping[str, Any], node: str | None, *, whole: bool) -> Any:
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
