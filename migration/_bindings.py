"""Bindings (``{{path}}`` in node inputs) and ``WhenExpr`` conditions, as FlowSpec had them.

A binding reads a dotted path from the binding context: ``flow.input.<key>`` (alias
``workflow.input.<key>``) or ``<nodeId>.<key>`` (a node's output). Three forms:

* ``{{path}}``: strict, a missing value fails the node with :class:`BindingError`;
* ``{{?path}}``: optional, a missing value renders as ``""``;
* ``{{path | default:<json>}}``: a missing value is the JSON literal instead.

A path that leads nowhere, or to ``null``, is missing. A string that is exactly one
binding keeps the value's type (``"{{facts.value}}"`` is the dict); otherwise each
binding is rendered into the string (strings as they are, anything else as JSON).
Only strings are templated, recursively through dicts and lists.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from migration._errors import BindingError

__all__ = [
    "binding_context",
    "bound_nodes",
    "check_bindings",
    "check_when",
    "evaluate_when",
    "json_equal",
    "lookup",
    "resolve",
]

_BINDING = re.compile(r"\{\{(.*?)\}\}(?!\})", re.DOTALL)
_PATH = re.compile(r"^[^\s.|?{}]+(?:\.[^\s.|?{}]+)*$")
_DEFAULT = re.compile(r"^default\s*:\s*(.*)$", re.DOTALL)
_MISSING: Any = object()


@dataclasses.dataclass(frozen=True, slots=True)
class _Binding:
    path: str
    optional: bool
    has_default: bool
    default: Any

    @property
    def source(self) -> str:
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
    if not _PATH.match(path):
        raise ValueError(
            f"{{{{{raw}}}}} is not a binding: write {{{{path}}}}, {{{{?path}}}} or "
            "{{path | default:<json>}}, with a dotted path such as flow.input.name or "
            "node.key"
        )
    if not bar:
        return _Binding(path, optional, False, None)
    found = _DEFAULT.match(rest.strip())
    if found is None:
        raise ValueError(
            f"{{{{{raw}}}}} uses an unknown filter {rest.strip()!r}: the only filter is "
            'default:<json>, e.g. {{path | default:"none"}}'
        )
    literal = found.group(1).strip()
    try:
        default = json.loads(literal)
    except json.JSONDecodeError:
        raise ValueError(
            f"{{{{{raw}}}}} has a default that is not JSON: {literal!r}; quote strings "
            'as in default:"text", or use a number, true, false, null, [...] or {...}'
        ) from None
    return _Binding(path, optional, True, default)


def check_bindings(value: Any, where: str) -> list[str]:
    """Every malformed binding in the strings of ``value``, as problems naming ``where``."""
    problems: list[str] = []
    for text in _strings(value):
        try:
            _parse(text)
        except ValueError as exc:
            problems.append(f"{where}: {exc}.")
    return problems


def bound_nodes(value: Any = None, when: Mapping[str, Any] | None = None) -> set[str]:
    """The first path segments the bindings in ``value`` and the vars of ``when`` read.

    Malformed bindings are left out (:func:`check_bindings` reports them).
    """
    roots: set[str] = set()
    for text in _strings(value):
        try:
            template = _parse(text)
        except ValueError:
            continue
        roots.update(p.path.split(".")[0] for p in template.parts if isinstance(p, _Binding))
    if when is not None:
        roots.update(_when_vars(when))
    return roots


def _when_vars(expr: Any) -> set[str]:
    if not isinstance(expr, Mapping) or len(expr) != 1:
        return set()
    ((kind, body),) = expr.items()
    if kind == "equals" and isinstance(body, Mapping) and isinstance(body.get("var"), str):
        return {body["var"].split(".")[0]}
    if kind == "not":
        return _when_vars(body)
    if kind in ("and", "or") and isinstance(body, list):
        return set().union(*(_when_vars(item) for item in body))
    return set()


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def binding_context(flow_input: Mapping[str, Any], outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The names bindings and ``when`` read: node outputs, ``flow.input``, ``workflow.input``."""
    return {**outputs, "flow": {"input": flow_input}, "workflow": {"input": flow_input}}


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path``, or ``None`` when it is missing."""
    value = _lookup(context, path)
    return None if value is _MISSING else value


def _lookup(context: Mapping[str, Any], path: str) -> Any:
    current: Any = context
    for segment in path.split("."):
        current = _step(current, segment)
        if current is _MISSING:
            return _MISSING
    return _MISSING if current is None else current


def _step(current: Any, segment: str) -> Any:
    if isinstance(current, Mapping):
        return current.get(segment, _MISSING)
    if isinstance(current, Sequence) and not isinstance(current, str) and segment.isdigit():
        index = int(segment)
        return current[index] if index < len(current) else _MISSING
    return _MISSING


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
    value = _lookup(context, binding.path)
    if value is not _MISSING:
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
        current = _step(current, segment)
        if current is _MISSING:
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


# -- WhenExpr -------------------------------------------------------------------------

_WHEN_FORMS = "{equals: {var, value}}, {not: expr}, {and: [...]} or {or: [...]}"


def check_when(expr: Any, where: str) -> list[str]:
    """Every problem of a ``WhenExpr``, as sentences naming ``where``."""
    if not isinstance(expr, Mapping) or len(expr) != 1:
        return [f"{where}: a condition must be one of {_WHEN_FORMS}, got {expr!r}."]
    ((kind, body),) = expr.items()
    if kind == "equals":
        if not isinstance(body, Mapping) or not isinstance(body.get("var"), str):
            return [f"{where}: equals needs {{var: <dotted path>, value: <json>}}, got {body!r}."]
        extra = set(body) - {"var", "value"}
        if extra:
            return [f"{where}: equals takes only var and value, not {', '.join(sorted(extra))}."]
        if not _PATH.match(body["var"]):
            return [f"{where}: equals.var must be a dotted path, got {body['var']!r}."]
        return []
    if kind == "not":
        return check_when(body, f"{where} (not)")
    if kind in ("and", "or"):
        if not isinstance(body, list) or not body:
            return [f"{where}: {kind} needs a non-empty list of conditions, got {body!r}."]
        return [
            p for i, item in enumerate(body) for p in check_when(item, f"{where} ({kind}[{i}])")
        ]
    return [f"{where}: unknown condition {kind!r}; use {_WHEN_FORMS}."]


def evaluate_when(expr: Mapping[str, Any] | None, context: Mapping[str, Any]) -> bool:
    """Evaluate a (checked) ``WhenExpr``; ``None`` is true. A missing ``var`` is ``null``."""
    if expr is None:
        return True
    ((kind, body),) = expr.items()
    if kind == "equals":
        return json_equal(lookup(context, body["var"]), body.get("value"))
    if kind == "not":
        return not evaluate_when(body, context)
    if kind == "and":
        return all(evaluate_when(item, context) for item in body)
    return any(evaluate_when(item, context) for item in body)


def json_equal(left: Any, right: Any) -> bool:
    """Compare as JSON values: ``true`` is not ``1``, ``1`` is ``1.0``, lists are arrays."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if type(left) is not type(right) and not (isinstance(left, str) and isinstance(right, str)):
        return False
    return bool(left == right)
