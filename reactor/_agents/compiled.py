"""Guards and prompts, evaluated fast: Jinja2 expressions compiled to Python closures.

A guard such as ``when="state.a is not none and state.b is not none"`` runs on every
signal that triggers its agent, and a prompt is rendered on every activation, so their
cost is paid per signal and per activation of every run. Jinja2 builds a template
context for each evaluation, which costs far more than the expression itself. This
module compiles the common subset (names, constants, attribute and item access,
comparisons, ``and`` / ``or`` / ``not``, ``is`` tests, arithmetic, conditional
expressions, list and tuple literals, plain filters, and templates made of text and
``{{ ... }}`` outputs) straight to closures that read as the sandbox does (attributes
and items through :mod:`reactor._agents.sandbox`'s data-only reads, the bounded
operators through the environment, so what a template may not reach is refused here
too) and with the same strict undefined values. Anything else (statements, calls,
filters that need the context, ...) falls back to Jinja2's own evaluation.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import jinja2
import jinja2.nodes as nodes
from jinja2.sandbox import SandboxedEnvironment

from reactor._agents.sandbox import data_getattr

__all__ = ["compile_fast", "compile_fast_template"]

Evaluate = Callable[[Mapping[str, Any]], Any]

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "lteq": operator.le,
    "gt": operator.gt,
    "gteq": operator.ge,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}
_ARITHMETIC: dict[type[nodes.Expr], tuple[str, Callable[[Any, Any], Any]]] = {
    nodes.Add: ("+", operator.add),
    nodes.Sub: ("-", operator.sub),
    nodes.Mul: ("*", operator.mul),
    nodes.Div: ("/", operator.truediv),
    nodes.FloorDiv: ("//", operator.floordiv),
    nodes.Mod: ("%", operator.mod),
    nodes.Pow: ("**", operator.pow),
}


class _Unsupported(Exception):
    """The expression uses something only Jinja2 itself evaluates."""


def compile_fast(source: str, env: SandboxedEnvironment) -> Evaluate | None:
    """Closures evaluating ``source`` over a context mapping, or ``None`` to use Jinja2."""
    try:
        tree = env.parse(f"{{{{ ({source}) }}}}")
        [output] = tree.body
        assert isinstance(output, nodes.Output)
        [expression] = output.nodes
        return _compile(expression, env)
    except (_Unsupported, jinja2.TemplateSyntaxError, ValueError, AssertionError):
        return None


def compile_fast_template(source: str, env: SandboxedEnvironment) -> Evaluate | None:
    """Closures rendering a template made of text and outputs, or ``None`` to use Jinja2."""
    try:
        tree = env.parse(source)
    except jinja2.TemplateSyntaxError:
        return None
    parts: list[str | Evaluate] = []
    for statement in tree.body:
        if not isinstance(statement, nodes.Output):
            return None  # {% if %}, {% for %}, macros...: Jinja2 renders those
        for piece in statement.nodes:
            if isinstance(piece, nodes.TemplateData):
                parts.append(piece.data)
                continue
            try:
                parts.append(_compile(piece, env))
            except _Unsupported:
                return None
    if all(isinstance(part, str) for part in parts):
        text = "".join(part for part in parts if isinstance(part, str))
        return lambda context: text
    pieces = tuple(parts)

    def render(context: Mapping[str, Any]) -> str:
        return "".join(part if isinstance(part, str) else str(part(context)) for part in pieces)

    return render


def _compile(node: nodes.Node, env: SandboxedEnvironment) -> Evaluate:
    compile_node = _COMPILERS.get(type(node))
    if compile_node is None:
        raise _Unsupported
    return compile_node(node, env)


def _const(node: nodes.Const, env: SandboxedEnvironment) -> Evaluate:
    value = node.value
    return lambda context: value


def _name(node: nodes.Name, env: SandboxedEnvironment) -> Evaluate:
    name, undefined = node.name, env.undefined

    def lookup(context: Mapping[str, Any]) -> Any:
        try:
            return context[name]
        except KeyError:
            if name in env.globals:  # range, dict, namespace, as Jinja reads them
                return env.globals[name]
            return undefined(name=name)

    return lookup


def _getattr(node: nodes.Getattr, env: SandboxedEnvironment) -> Evaluate:
    if node.attr.startswith("_"):
        raise _Unsupported  # Jinja's sandbox explains the refusal itself
    target, attr = _compile(node.node, env), node.attr
    return lambda context: data_getattr(env, target(context), attr)


def _getitem(node: nodes.Getitem, env: SandboxedEnvironment) -> Evaluate:
    target, key = _compile(node.node, env), _compile(node.arg, env)
    return lambda context: env.getitem(target(context), key(context))


def _compare(node: nodes.Compare, env: SandboxedEnvironment) -> Evaluate:
    first = _compile(node.expr, env)
    steps = [(_COMPARE[op.op], _compile(op.expr, env)) for op in node.ops]

    def compare(context: Mapping[str, Any]) -> Any:
        left = first(context)
        for test, right_of in steps:
            right = right_of(context)
            if not test(left, right):
                return False
            left = right
        return True

    return compare


def _and(node: nodes.And, env: SandboxedEnvironment) -> Evaluate:
    left, right = _compile(node.left, env), _compile(node.right, env)
    return lambda context: left(context) and right(context)


def _or(node: nodes.Or, env: SandboxedEnvironment) -> Evaluate:
    left, right = _compile(node.left, env), _compile(node.right, env)
    return lambda context: left(context) or right(context)


def _not(node: nodes.Not, env: SandboxedEnvironment) -> Evaluate:
    inner = _compile(node.node, env)
    return lambda context: not inner(context)


def _neg(node: nodes.Neg, env: SandboxedEnvironment) -> Evaluate:
    inner = _compile(node.node, env)
    return lambda context: -inner(context)


def _pos(node: nodes.Pos, env: SandboxedEnvironment) -> Evaluate:
    inner = _compile(node.node, env)
    return lambda context: +inner(context)


def _test(node: nodes.Test, env: SandboxedEnvironment) -> Evaluate:
    if node.kwargs or node.dyn_args or node.dyn_kwargs or node.name not in env.tests:
        raise _Unsupported
    test: Callable[..., Any] = env.tests[node.name]  # type: ignore[assignment]
    subject = _compile(node.node, env)
    arguments = [_compile(arg, env) for arg in node.args]
    return lambda context: test(subject(context), *(a(context) for a in arguments))


def _conditional(node: nodes.CondExpr, env: SandboxedEnvironment) -> Evaluate:
    test_of = _compile(node.test, env)
    then = _compile(node.expr1, env)
    if node.expr2 is None:
        raise _Unsupported
    otherwise = _compile(node.expr2, env)
    return lambda context: then(context) if test_of(context) else otherwise(context)


def _sequence(node: nodes.List | nodes.Tuple, env: SandboxedEnvironment) -> Evaluate:
    items = [_compile(item, env) for item in node.items]
    kind = list if isinstance(node, nodes.List) else tuple
    return lambda context: kind(item(context) for item in items)


def _filter(node: nodes.Filter, env: SandboxedEnvironment) -> Evaluate:
    function = env.filters.get(node.name)
    if (
        function is None
        or node.kwargs
        or node.dyn_args
        or node.dyn_kwargs
        or jinja2.utils._PassArg.from_obj(function) is not None
        or node.node is None
    ):
        raise _Unsupported
    subject = _compile(node.node, env)
    arguments = [_compile(arg, env) for arg in node.args]
    return lambda context: function(subject(context), *(a(context) for a in arguments))


def _arithmetic(node: nodes.BinExpr, env: SandboxedEnvironment) -> Evaluate:
    symbol, apply = _ARITHMETIC[type(node)]
    left, right = _compile(node.left, env), _compile(node.right, env)
    if symbol in env.intercepted_binops:
        return lambda context: env.call_binop(None, symbol, left(context), right(context))  # type: ignore[arg-type]
    return lambda context: apply(left(context), right(context))


_COMPILERS: dict[type[nodes.Node], Callable[[Any, SandboxedEnvironment], Evaluate]] = {
    nodes.Const: _const,
    nodes.Name: _name,
    nodes.Getattr: _getattr,
    nodes.Getitem: _getitem,
    nodes.Compare: _compare,
    nodes.And: _and,
    nodes.Or: _or,
    nodes.Not: _not,
    nodes.Neg: _neg,
    nodes.Pos: _pos,
    nodes.Test: _test,
    nodes.CondExpr: _conditional,
    nodes.List: _sequence,
    nodes.Tuple: _sequence,
    nodes.Filter: _filter,
    **dict.fromkeys(_ARITHMETIC, _arithmetic),
}
"""How each kind of node the fast path knows is compiled (looked up by exact type:
Jinja2 subclasses none of them); any other node is left to Jinja2."""
