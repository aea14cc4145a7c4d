"""Jinja2 prompt templates and guard expressions: data only, strict, bounded, compiled once.

Templates read plain data only (:mod:`reactor._agents.sandbox`): a path that leaves
the data (to a module, a function, a class, a store) is a
:class:`~reactor.TemplateSecurityError`, at definition when it can be seen there,
else when it renders. Undefined values are strict, so a missing variable is an error
naming it, never an empty string. Templates are also bounded: a rendered text longer
than ``REACTOR_MAX_TEMPLATE_CHARS`` (4,000,000 by default), a string or list repeated
past that size, a huge power, or a template that recurses without end fails the
activation with a :class:`~reactor.TemplateError` instead of eating the memory.

A template that names ``objects`` (``{{ objects.get("q_1").data.price }}``) reads the
database, so it renders asynchronously (:func:`render_async`); a ``when`` expression
is evaluated on every signal and may not query it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import jinja2
import jinja2.meta
import jinja2.nodes
import pydantic
import pydantic_core

from reactor._agents.compiled import compile_fast, compile_fast_template
from reactor._agents.sandbox import DataEnvironment, Refused, data_getattr, refused_path
from reactor._signals.settings import settings
from reactor._signals.signal import json_fallback
from reactor.exceptions import AgentConfigError, TemplateError, TemplateSecurityError

__all__ = [
    "CONTEXT_NAMES",
    "Template",
    "compile_expression",
    "compile_template",
    "compiled",
    "render",
    "render_async",
    "state_references",
    "to_json",
    "top_level_names",
]

CONTEXT_NAMES = ("state", "input", "signal", "agent", "run_id")
"""The names a template or string guard can read."""

Expression: TypeAlias = Callable[[Mapping[str, Any]], Any]
"""A compiled guard: evaluates over the names templates see."""


def max_chars() -> int:
    """The longest text a template may render (``REACTOR_MAX_TEMPLATE_CHARS``)."""
    return settings().max_template_chars


_MAX_EXPONENT = 10_000
_MISSING_NAME = re.compile(r"'([^']+)' is undefined")
_MISSING_ATTR = re.compile(r"has no (?:attribute|element) '?([^']+?)'?$")


def to_json(value: Any, indent: int | None = None) -> str:
    """JSON for prompts: models, state views and dates serialize; nothing is escaped."""
    return pydantic_core.to_json(value, indent=indent, fallback=json_fallback).decode()


class _Undefined(jinja2.StrictUndefined):
    """Strict, and names the type a user knows (a state view shows as its model)."""

    @property
    def _undefined_message(self) -> str:
        obj = self._undefined_obj
        if self._undefined_hint or obj is jinja2.utils.missing:
            return super()._undefined_message
        kind = _kind(obj)
        how = "attribute" if isinstance(self._undefined_name, str) else "element"
        return f"{kind} has no {how} {self._undefined_name!r}"


def _kind(value: Any) -> str:
    """A value's type as users know it: the model, ``dict`` or ``list`` behind a view."""
    if isinstance(value, pydantic.BaseModel):  # a view of a model passes for it
        return value.__class__.__name__
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "list"
    return type(value).__name__


class _Environment(DataEnvironment):
    """The data-only sandbox, with repetition and powers bounded."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        if operator == "**" and isinstance(right, int) and abs(right) > _MAX_EXPONENT:
            raise jinja2.exceptions.SecurityError(
                f"the power {right} is too large (at most {_MAX_EXPONENT})"
            )
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if (
                    isinstance(sequence, str | list | tuple)
                    and isinstance(times, int)
                    and len(sequence) * times > max_chars()
                ):
                    raise jinja2.exceptions.SecurityError(
                        f"repeating a value {times:,} times would make "
                        f"{len(sequence) * times:,} items, over the limit of {max_chars():,}"
                    )
        return super().call_binop(context, operator, left, right)


@jinja2.pass_environment
def _attr(env: jinja2.Environment, obj: Any, name: str) -> Any:
    """The ``attr`` filter, reading as ``obj.name`` does (data only)."""
    return data_getattr(env, obj, str(name))


def _environment(*, enable_async: bool) -> _Environment:
    env = _Environment(
        undefined=_Undefined,
        autoescape=False,
        keep_trailing_newline=True,
        enable_async=enable_async,
    )
    for name in ("cycler", "joiner", "lipsum"):  # objects and functions, not data
        del env.globals[name]
    env.filters["tojson"] = to_json
    env.filters["attr"] = _attr
    return env


_ENV = _environment(enable_async=False)
_ASYNC_ENV = _environment(enable_async=True)
"""Templates that name ``objects`` await its reads while they render."""


class Template:
    """A compiled prompt template: closures for the common case, else Jinja2 itself.

    Attributes:
        source: The template's text.
        needs_await: It names ``objects``: it renders with :func:`render_async` only.
    """

    __slots__ = ("_fast", "_jinja", "needs_await", "source")

    def __init__(self, source: str, jinja: jinja2.Template, *, needs_await: bool = False) -> None:
        self.source = source
        self._jinja = jinja
        self.needs_await = needs_await
        self._fast = None if needs_await else compile_fast_template(source, _ENV)

    def render(self, context: Mapping[str, Any]) -> str:
        """Render with ``context`` (errors as Jinja2 raises them; see :func:`render`)."""
        if self._fast is None:
            return _bounded(self._jinja.generate(context))
        text: str = self._fast(context)
        if len(text) > max_chars():
            raise _TooLong
        return text

    async def render_async(self, context: Mapping[str, Any]) -> str:
        """Render with ``context``, awaiting what the template reads (``objects``)."""
        parts: list[str] = []
        size, limit = 0, max_chars()
        async for piece in self._jinja.generate_async(context):
            size += len(piece)
            if size > limit:
                raise _TooLong
            parts.append(piece)
        return "".join(parts)


class _TooLong(Exception):
    """A template rendered more than :func:`max_chars`."""


def compile_template(source: str, *, agent: str | None, field: str) -> Template:
    """Compile a template at definition time.

    Raises:
        AgentConfigError: The template has a syntax error (names the agent and line).
        TemplateSecurityError: It reaches for something that is not data (named).
    """
    try:
        tree = _ENV.parse(source)
        _refuse_seen(tree, agent, field)
        if "objects" in jinja2.meta.find_undeclared_variables(tree):
            return Template(source, _ASYNC_ENV.from_string(source), needs_await=True)
        return Template(source, _ENV.from_string(source))
    except jinja2.TemplateSyntaxError as exc:
        raise AgentConfigError(
            f"Agent {agent or '(unnamed)'!r}: the {field} template has a syntax error on "
            f"line {exc.lineno}: {_reason(exc)}. Fix the template; it is Jinja2 "
            "(variables: " + ", ".join(CONTEXT_NAMES) + ").",
            agent=agent,
        ) from exc


@functools.lru_cache(maxsize=1024)
def compiled(source: str, agent: str | None) -> Template:
    """:func:`compile_template` for templates met while running (``ctx.ask``), once each."""
    return compile_template(source, agent=agent, field="ask")


def compile_expression(source: str, *, agent: str | None) -> Expression:
    """Compile a string guard (``"state.confidence > 0.8"``) at definition time.

    The common subset compiles to Python closures over the same sandbox
    (:mod:`reactor._guards`); the rest is evaluated by Jinja2.

    Raises:
        AgentConfigError: The expression has a syntax error.
        TemplateSecurityError: It reaches for something that is not data, or queries
            ``objects`` (a guard runs on every signal: query in the prompt, or read the
            ``object`` that changed).
    """
    try:
        tree = _ENV.parse(f"{{{{ {source} }}}}")
        _refuse_seen(tree, agent, "when expression")
        if "objects" in jinja2.meta.find_undeclared_variables(tree):
            raise TemplateSecurityError(
                f"Agent {agent or '(unnamed)'!r}: the `when` expression {source!r} queries "
                "`objects`; a guard is evaluated on every signal and may not read the "
                "database. Read `object` (what changed), or query `objects` in the prompt.",
                agent=agent or "(unnamed)",
                path="objects",
            )
        slow = _ENV.compile_expression(source, undefined_to_none=False)
    except jinja2.TemplateSyntaxError as exc:
        raise AgentConfigError(
            f"Agent {agent or '(unnamed)'!r}: the `when` expression {source!r} has a syntax "
            f"error: {_reason(exc)}. Write a Jinja2 expression over "
            + ", ".join(CONTEXT_NAMES)
            + ', e.g. when="state.confidence > 0.8".',
            agent=agent,
        ) from exc
    fast = compile_fast(source, _ENV)
    return fast if fast is not None else lambda context: slow(**context)


def _refuse_seen(tree: jinja2.nodes.Template, agent: str | None, field: str) -> None:
    """Refuse a path that leaves the data where the template shows it already."""
    refused = refused_path(tree)
    if refused is not None:
        raise _security_error(refused, agent or "(unnamed)", field)


def _security_error(refused: Refused, agent: str, field: str) -> TemplateSecurityError:
    return TemplateSecurityError(
        f"Agent {agent!r}: the {field} reaches for {refused.path!r}, which is not data "
        f"({refused.why}). Templates read only {', '.join(CONTEXT_NAMES)}, object and "
        "objects (get, find, list) and the run's scope, as plain data.",
        agent=agent,
        path=refused.path,
    )


def _reason(exc: jinja2.TemplateSyntaxError) -> str:
    return (exc.message or "invalid syntax").rstrip(".")


def state_references(source: str, *, expression: bool = False) -> list[str]:
    """The top-level state keys a template (or expression) reads: ``state.<key>``.

    Only direct reads count (``state.analysis``, ``state["analysis"]``); a key chosen
    at run time (``state[name]``) cannot be known here.
    """
    text = f"{{{{ {source} }}}}" if expression else source
    try:
        tree = _ENV.parse(text)
    except jinja2.TemplateSyntaxError:
        return []
    found: list[str] = []
    for node in tree.find_all((jinja2.nodes.Getattr, jinja2.nodes.Getitem)):
        assert isinstance(node, jinja2.nodes.Getattr | jinja2.nodes.Getitem)
        target = node.node
        if not (isinstance(target, jinja2.nodes.Name) and target.name == "state"):
            continue
        if isinstance(node, jinja2.nodes.Getattr):
            found.append(node.attr)
        elif isinstance(node.arg, jinja2.nodes.Const) and isinstance(node.arg.value, str):
            found.append(node.arg.value)
    return list(dict.fromkeys(found))


def top_level_names(source: str, *, expression: bool = False) -> list[str]:
    """The names a template (or expression) reads that it does not define itself.

    Jinja's own globals (``range``, ``loop`` ...) and names the template sets are not
    counted; what is left must come from the context (``input``, ``state`` ...) or a
    run's ``scope``.
    """
    text = f"{{{{ {source} }}}}" if expression else source
    try:
        tree = _ENV.parse(text)
    except jinja2.TemplateSyntaxError:
        return []
    names = jinja2.meta.find_undeclared_variables(tree) - set(_ENV.globals)
    return sorted(names)


def render(
    template: Template | Expression,
    context: Mapping[str, Any],
    *,
    agent: str,
    field: str,
) -> Any:
    """Render a template, or evaluate an expression to a truth value, with ``context``.

    Raises:
        TemplateSecurityError: The template reached for something that is not data.
        TemplateError: A variable or attribute is missing (named in the message), the
            sandbox refused an operation, the output is too long, the template queries
            ``objects`` where nothing can wait for it, or the template failed in
            another way. Never a raw Jinja error.
        ServiceConfigError: A ``REACTOR_*`` variable is bad (read here the first time).
    """
    max_chars()  # a bad setting is raised as itself, not as the template's failure
    try:
        if isinstance(template, Template):
            if template.needs_await:
                raise TemplateError(
                    f"Agent {agent!r}: the {field} queries `objects`, which only an "
                    "agent's activation can wait for; read `object` here instead.",
                    agent=agent,
                )
            return template.render(context)
        return bool(template(context))
    except Exception as exc:
        error = _template_error(exc, agent, field)
        if error is exc:
            raise
        raise error from _cause(exc)


async def render_async(
    template: Template, context: Mapping[str, Any], *, agent: str, field: str
) -> str:
    """Render a template, awaiting what it reads (``objects``) when it needs to.

    Raises:
        TemplateSecurityError, TemplateError: As :func:`render`.
    """
    if not template.needs_await:
        return str(render(template, context, agent=agent, field=field))
    max_chars()
    try:
        return await template.render_async(context)
    except Exception as exc:
        error = _template_error(exc, agent, field)
        if error is exc:
            raise
        raise error from _cause(exc)


def _cause(exc: Exception) -> Exception | None:
    """What a template error is raised from: only an error Jinja did not explain."""
    explained = (_TooLong, jinja2.UndefinedError, jinja2.exceptions.SecurityError, RecursionError)
    return None if isinstance(exc, explained) else exc


def _template_error(exc: Exception, agent: str, field: str) -> Exception:
    """The error a template's failure is raised as (an unexpected one as itself)."""
    if isinstance(exc, TemplateError):
        return exc
    if isinstance(exc, Refused):
        return _security_error(exc, agent, field)
    if isinstance(exc, _TooLong):
        return TemplateError(
            f"Agent {agent!r}: the {field} rendered more than {max_chars():,} characters; "
            "shorten what it includes, or raise REACTOR_MAX_TEMPLATE_CHARS.",
            agent=agent,
        )
    if isinstance(exc, jinja2.UndefinedError):
        message = str(exc)
        found = _MISSING_NAME.search(message) or _MISSING_ATTR.search(message)
        variable = found.group(1) if found else None
        return TemplateError(
            f"Agent {agent!r}: the {field} uses {variable!r}, which is not defined "
            f"({message}). Available: {', '.join(CONTEXT_NAMES)}; guard optional values "
            "with `is defined` or the `default` filter.",
            agent=agent,
            variable=variable,
        )
    if isinstance(exc, jinja2.exceptions.SecurityError):
        return TemplateError(
            f"Agent {agent!r}: the {field} did something the template sandbox does not "
            f"allow: {str(exc).rstrip('.')}.",
            agent=agent,
        )
    if isinstance(exc, RecursionError):
        return TemplateError(
            f"Agent {agent!r}: the {field} recursed too deeply (a macro calling itself "
            "without end?).",
            agent=agent,
        )
    if isinstance(exc, jinja2.TemplateError | TypeError | ValueError | ArithmeticError):
        return TemplateError(
            f"Agent {agent!r}: the {field} failed to render: {type(exc).__name__}: "
            f"{str(exc).rstrip('.')}.",
            agent=agent,
        )
    return exc


def _bounded(pieces: Iterable[str]) -> str:
    parts: list[str] = []
    size, limit = 0, max_chars()
    for piece in pieces:
        size += len(piece)
        if size > limit:
            raise _TooLong
        parts.append(piece)
    return "".join(parts)
