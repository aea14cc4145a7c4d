"""Conditions: the ``when`` of nodes and edges, in either of the kernel's two forms.

* A mapping (``WhenExpr``, the first dialect): ``{equals: {var, value}}``,
  ``{not: expr}``, ``{and: [...]}``, ``{or: [...]}``; ``var`` is a dotted path into
  the binding context, and a missing ``var`` is ``null``.
* A string (the later dialect): an expression of the kernel's JSONata subset (see
  :mod:`migration._expressions.expr`), read as a boolean the way JSONata's ``$boolean`` does.
  Inside ``not``/``and``/``or`` a string stands for such an expression too.

Both are checked when the flow is loaded (:func:`check_when`) and evaluated against
the binding context when the source of an edge, or the node itself, settles.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from migration._expressions.expr import ExpressionError, evaluate, parse, roots, truthy
from migration._expressions.values import MISSING, clip, json_equal, lookup, shorten

__all__ = ["When", "check_when", "evaluate_when", "when_roots"]

When = Mapping[str, Any] | str
"""A condition: a ``WhenExpr`` mapping or an expression string."""

_FORMS = (
    "{equals: {var, value}}, {not: expr}, {and: [...]}, {or: [...]} or an expression "
    'string such as "node.value = true"'
)
_PATH = re.compile(r"^[\w-]+(?:\.[\w-]+)*$")


def check_when(expr: Any, where: str) -> list[str]:
    """Every problem of a condition, as sentences naming ``where`` (iteratively)."""
    problems: list[str] = []
    stack: list[tuple[Any, str]] = [(expr, where)]
    while stack:
        item, here = stack.pop()
        if isinstance(item, str):
            try:
                parse(item)
            except ExpressionError as exc:
                problems.append(f"{here}: {clip(item)!r} is not a valid condition: {exc}.")
            continue
        if not isinstance(item, Mapping) or len(item) != 1:
            problems.append(f"{here}: a condition must be one of {_FORMS}, got {shorten(item)}.")
            continue
        ((kind, body),) = item.items()
        if kind == "equals":
            problems.extend(_check_equals(body, here))
        elif kind == "not":
            stack.append((body, f"{here} (not)"))
        elif kind in ("and", "or"):
            if not isinstance(body, list) or not body:
                problems.append(
                    f"{here}: {kind} needs a non-empty list of conditions, got {shorten(body)}."
                )
                continue
            stack.extend(
                (sub, f"{here} ({kind}[{i}])") for i, sub in reversed(list(enumerate(body)))
            )
        else:
            problems.append(f"{here}: unknown condition {shorten(kind)}; use {_FORMS}.")
    return problems


def _check_equals(body: Any, where: str) -> list[str]:
    if not isinstance(body, Mapping) or not isinstance(body.get("var"), str):
        return [
            f"{where}: equals needs {{var: <dotted path>, value: <json>}}, got {shorten(body)}."
        ]
    extra = set(body) - {"var", "value"}
    if extra:
        return [f"{where}: equals takes only var and value, not {', '.join(sorted(extra))}."]
    if not _PATH.match(body["var"]):
        return [f"{where}: equals.var must be a dotted path, got {body['var']!r}."]
    return []


def evaluate_when(expr: When | None, context: Mapping[str, Any]) -> bool:
    """Evaluate a (checked) condition; ``None`` is true."""
    if expr is None:
        return True
    if isinstance(expr, str):
        return truthy(evaluate(parse(expr), context))
    ((kind, body),) = expr.items()
    if kind == "equals":
        value = lookup(context, body["var"])
        return json_equal(None if value is MISSING else value, body.get("value"))
    if kind == "not":
        return not evaluate_when(body, context)
    if kind == "and":
        return all(evaluate_when(item, context) for item in body)
    return any(evaluate_when(item, context) for item in body)


def when_roots(expr: Any) -> set[str]:
    """The first path segments a condition reads (malformed parts are left out)."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                found |= roots(parse(item))
            except ExpressionError:
                continue
        elif isinstance(item, Mapping) and len(item) == 1:
            ((kind, body),) = item.items()
            if kind == "equals" and isinstance(body, Mapping) and isinstance(body.get("var"), str):
                found.add(body["var"].split(".")[0])
            elif kind == "not":
                stack.append(body)
            elif kind in ("and", "or") and isinstance(body, list):
                stack.extend(body)
    return found
