"""Expressions: the old kernel's subset of JSONata, parsed once at load, then evaluated.

The kernel's later flows write conditions and bindings as JSONata. This module knows
the part of it those flows use::

    reviewer.structuredOutput.passed = true
    $not($exists(state.done)) and flow.input.retries < 3
    `my-node`.score >= 0.5 or (kind != "draft" and count > 2)

* **Paths**: names joined by dots (a name with other characters goes in backticks).
  They read the binding context: node outputs by id, ``flow.input``, ``state``, and
  the item of a ``forEach``. As in JSONata, a step applied to a list applies to each
  element (``tasks.title`` is the list of titles); a path that leads nowhere is
  *undefined*, which is not ``null``.
* **Literals**: strings in double or single quotes, numbers, ``true``, ``false``,
  ``null``.
* **Comparisons** ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``; ``and``, ``or``;
  parentheses; ``$not(x)`` and ``$exists(x)``.

Semantics follow JSONata: ``=`` and ``!=`` are false when either side is undefined
and compare JSON values deeply (``1 = 1.0``, but ``true != 1``); an ordering
comparison needs two numbers or two strings (anything else is false, where JSONata
would raise) and is undefined when a side is; ``and``, ``or`` and ``$not`` read their
operands as JSONata's ``$boolean`` does (empty strings, ``0``, ``null``, undefined,
empty mappings and lists are false).

Parse errors name the column. Expressions are at most :data:`MAX_LENGTH` characters
and nest at most :data:`MAX_NESTING` parentheses deep, so that evaluating one stays a
shallow walk.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Mapping
from typing import Any

import lark

from migration._expressions.values import MISSING, json_equal

__all__ = [
    "MAX_LENGTH",
    "MAX_NESTING",
    "Expr",
    "ExpressionError",
    "evaluate",
    "parse",
    "roots",
    "truthy",
]

MAX_LENGTH = 2000
"""The longest expression accepted, in characters."""

MAX_NESTING = 32
"""The deepest nesting of parentheses in an expression."""

FUNCTIONS = ("$exists", "$not")

_GRAMMAR = r"""
?start: disjunction
?disjunction: conjunction ("or" conjunction)*
?conjunction: comparison ("and" comparison)*
?comparison: operand (COMPARATOR operand)?
?operand: literal | path | call | "(" disjunction ")"
call: FUNCTION "(" [disjunction ("," disjunction)*] ")"
path: name ("." name)*
?name: NAME | QUOTED_NAME
literal: STRING | NUMBER | TRUE | FALSE | NULL
TRUE: "true"
FALSE: "false"
NULL: "null"
COMPARATOR: "<=" | ">=" | "!=" | "=" | "<" | ">"
FUNCTION: /\$[A-Za-z_][A-Za-z0-9_]*/
NAME: /[A-Za-z_][A-Za-z0-9_]*/
QUOTED_NAME: /`[^`]+`/
STRING: /"(?:[^"\\]|\\.)*"/ | /'(?:[^'\\]|\\.)*'/
NUMBER: /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/
%ignore /\s+/
"""


class ExpressionError(ValueError):
    """An expression that does not parse; ``column`` is 1-based."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column


@dataclasses.dataclass(frozen=True, slots=True)
class Literal:
    """A string, number, boolean or ``null``."""

    value: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Path:
    """Names joined by dots, read from the binding context."""

    names: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """``$not(x)`` or ``$exists(x)``."""

    name: str
    args: tuple[Expr, ...]
    column: int


@dataclasses.dataclass(frozen=True, slots=True)
class Compare:
    """``left <op> right``."""

    op: str
    left: Expr
    right: Expr


@dataclasses.dataclass(frozen=True, slots=True)
class Junction:
    """``a and b and ...`` or ``a or b or ...`` (kept flat, however long)."""

    op: str
    items: tuple[Expr, ...]


Expr = Literal | Path | Call | Compare | Junction
"""A parsed expression."""

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\"}


def _string(token: lark.Token) -> str:
    text, out, index = str(token)[1:-1], [], 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        code = text[index + 1]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
        elif code in "\"'":
            out.append(code)
        elif code == "u" and len(text) >= index + 6:
            try:
                out.append(chr(int(text[index + 2 : index + 6], 16)))
            except ValueError:
                column = (token.column or 1) + index + 1
                raise ExpressionError("a \\u escape needs four hex digits", column) from None
            index += 4
        else:
            column = (token.column or 1) + index + 1
            raise ExpressionError(f"unknown escape \\{code} in a string", column)
        index += 2
    return "".join(out)


class _Build(lark.Transformer[lark.Token, Expr]):
    """Builds the expression while the LALR parser reduces (no recursion over a tree)."""

    def literal(self, children: list[lark.Token]) -> Literal:
        (token,) = children
        if token.type == "STRING":
            return Literal(_string(token))
        if token.type == "NUMBER":
            text = str(token)
            return Literal(float(text) if any(c in text for c in ".eE") else int(text))
        return Literal({"TRUE": True, "FALSE": False, "NULL": None}[token.type])

    def path(self, children: list[lark.Token]) -> Path:
        return Path(tuple(str(n)[1:-1] if n.type == "QUOTED_NAME" else str(n) for n in children))

    def call(self, children: list[Any]) -> Call:
        name, *args = children
        return Call(str(name), tuple(args), name.column or 1)

    def comparison(self, children: list[Any]) -> Compare:
        left, op, right = children
        return Compare(str(op), left, right)

    def conjunction(self, children: list[Expr]) -> Junction:
        return Junction("and", tuple(children))

    def disjunction(self, children: list[Expr]) -> Junction:
        return Junction("or", tuple(children))


@functools.cache
def _parser() -> lark.Lark:
    return lark.Lark(
        _GRAMMAR, parser="lalr", lexer="basic", transformer=_Build(), maybe_placeholders=False
    )


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Expr:
    """Parse an expression (cached: a flow's expressions are parsed once).

    Raises:
        ExpressionError: It does not parse, is too long or too deeply nested, or calls
            an unknown function; the message says what and where.
    """
    if not text.strip():
        raise ExpressionError("the expression is empty", 1)
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            f"the expression is {len(text):,} characters long; the limit is {MAX_LENGTH:,}", 1
        )
    _check_nesting(text)
    try:
        tree: Expr = _parser().parse(text)  # type: ignore[assignment]  # built by _Build
    except lark.UnexpectedCharacters as exc:
        position = exc.pos_in_stream or 0
        raise ExpressionError(
            f"unexpected character {text[position]!r} at column {exc.column}", exc.column
        ) from None
    except lark.UnexpectedToken as exc:
        if exc.token.type == "$END":
            column = len(text.rstrip()) + 1
            raise ExpressionError(
                f"the expression ends too early (column {column})", column
            ) from None
        column = exc.column if isinstance(exc.column, int) else 1
        raise ExpressionError(f"unexpected {str(exc.token)!r} at column {column}", column) from None
    except lark.UnexpectedInput as exc:  # pragma: no cover - the two above cover LALR
        raise ExpressionError(f"the expression does not parse: {exc}", 1) from None
    _check_calls(tree)
    return tree


def _check_nesting(text: str) -> None:
    depth, quote = 0, ""
    escaped = False
    for index, char in enumerate(text, start=1):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        elif char == "(":
            depth += 1
            if depth > MAX_NESTING:
                raise ExpressionError(
                    f"parentheses nest more than {MAX_NESTING} deep (column {index})", index
                )
        elif char == ")":
            depth -= 1


def _check_calls(tree: Expr) -> None:
    stack: list[Expr] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Call):
            if node.name not in FUNCTIONS:
                raise ExpressionError(
                    f"unknown function {node.name} at column {node.column}; conditions "
                    "know $not(...) and $exists(...)",
                    node.column,
                )
            if len(node.args) != 1:
                raise ExpressionError(
                    f"{node.name} takes one argument, got {len(node.args)} (column {node.column})",
                    node.column,
                )
            stack.extend(node.args)
        elif isinstance(node, Compare):
            stack += [node.left, node.right]
        elif isinstance(node, Junction):
            stack.extend(node.items)


def roots(tree: Expr) -> set[str]:
    """The first name of every path in the expression (what it reads)."""
    found: set[str] = set()
    stack: list[Expr] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Path):
            found.add(node.names[0])
        elif isinstance(node, Call):
            stack.extend(node.args)
        elif isinstance(node, Compare):
            stack += [node.left, node.right]
        elif isinstance(node, Junction):
            stack.extend(node.items)
    return found


def evaluate(tree: Expr, context: Mapping[str, Any]) -> Any:
    """The value of the expression against ``context``; ``MISSING`` when undefined."""
    if isinstance(tree, Literal):
        return tree.value
    if isinstance(tree, Path):
        return _read(tree, context)
    if isinstance(tree, Junction):
        items = (truthy(evaluate(item, context)) for item in tree.items)
        return all(items) if tree.op == "and" else any(items)
    if isinstance(tree, Call):
        value = evaluate(tree.args[0], context)
        if tree.name == "$exists":
            return value is not MISSING
        return MISSING if value is MISSING else not truthy(value)
    return _compare(tree.op, evaluate(tree.left, context), evaluate(tree.right, context))


def _read(path: Path, context: Mapping[str, Any]) -> Any:
    value: Any = context
    for name in path.names:
        value = _step(value, name)
        if value is MISSING:
            break
    return value


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _compare(op: str, left: Any, right: Any) -> Any:
    """A comparison as JSONata makes it (false or ``MISSING`` where JSONata would raise)."""
    if op in ("=", "!="):
        if left is MISSING or right is MISSING:
            return False
        return json_equal(left, right) is (op == "=")
    if left is MISSING or right is MISSING:
        return MISSING
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
    if not numbers and not (isinstance(left, str) and isinstance(right, str)):
        return False
    return bool(_ORDER[op](left, right))


def _step(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name, MISSING)
    if isinstance(value, list | tuple):
        found: list[Any] = []
        for item in value:
            result = _step(item, name) if isinstance(item, Mapping) else MISSING
            if result is MISSING:
                continue
            if isinstance(result, list | tuple):
                found.extend(result)
            else:
                found.append(result)
        if not found:
            return MISSING
        return found[0] if len(found) == 1 else found
    return MISSING


def truthy(value: Any) -> bool:
    """JSONata's ``$boolean``: how ``and``, ``or``, ``$not`` and conditions read a value."""
    if value is MISSING or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value != ""
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, list | tuple):
        return any(truthy(item) for item in value)
    if isinstance(value, Mapping):
        return len(value) > 0
    return True
