"""Jinja2 prompt templates and guard expressions: sandboxed, strict, compiled once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import jinja2
import pydantic_core
from jinja2.sandbox import SandboxedEnvironment

from reactor._signal import json_fallback
from reactor.exceptions import AgentConfigError, TemplateError

__all__ = ["CONTEXT_NAMES", "compile_expression", "compile_template", "render", "to_json"]

CONTEXT_NAMES = ("state", "input", "signal", "agent", "run_id")
"""The names a template or string guard can read."""

_MISSING_NAME = re.compile(r"'([^']+)' is undefined")
_MISSING_ATTR = re.compile(r"has no attribute '([^']+)'")


def to_json(value: Any, indent: int | None = None) -> str:
    """JSON for prompts: models, state views and dates serialize; nothing is escaped."""
    return pydantic_core.to_json(value, indent=indent, fallback=json_fallback).decode()


_ENV = SandboxedEnvironment(
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
)
_ENV.filters["tojson"] = to_json


def compile_template(source: str, *, agent: str | None, field: str) -> jinja2.Template:
    """Compile a template at definition time.

    Raises:
        AgentConfigError: The template has a syntax error (names the agent and line).
    """
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise AgentConfigError(
            f"Agent {agent or '(unnamed)'!r}: the {field} template has a syntax error on "
            f"line {exc.lineno}: {exc.message}. Fix the template; it is Jinja2 "
            "(variables: " + ", ".join(CONTEXT_NAMES) + ").",
            agent=agent,
        ) from exc


def compile_expression(source: str, *, agent: str | None) -> Callable[..., Any]:
    """Compile a string guard (``"state.confidence > 0.8"``) at definition time.

    Raises:
        AgentConfigError: The expression has a syntax error.
    """
    try:
        return _ENV.compile_expression(source, undefined_to_none=False)
    except jinja2.TemplateSyntaxError as exc:
        raise AgentConfigError(
            f"Agent {agent or '(unnamed)'!r}: the `when` expression {source!r} has a syntax "
            f"error: {exc.message}. Write a Jinja2 expression over "
            + ", ".join(CONTEXT_NAMES)
            + ', e.g. when="state.confidence > 0.8".',
            agent=agent,
        ) from exc


def render(
    template: jinja2.Template | Callable[..., Any],
    context: Mapping[str, Any],
    *,
    agent: str,
    field: str,
) -> Any:
    """Render a template (or evaluate an expression) with ``context``.

    Raises:
        TemplateError: A variable or attribute is missing (named in the message), or
            the template failed in another way.
    """
    try:
        if isinstance(template, jinja2.Template):
            return template.render(context)
        return template(**context)
    except jinja2.UndefinedError as exc:
        message = str(exc)
        found = _MISSING_NAME.search(message) or _MISSING_ATTR.search(message)
        variable = found.group(1) if found else None
        raise TemplateError(
            f"Agent {agent!r}: the {field} uses {variable!r}, which is not defined "
            f"({message}). Available: {', '.join(CONTEXT_NAMES)}; guard optional values "
            "with `is defined` or the `default` filter.",
            agent=agent,
            variable=variable,
        ) from exc
    except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError) as exc:
        raise TemplateError(
            f"Agent {agent!r}: the {field} failed to render: {type(exc).__name__}: {exc}.",
            agent=agent,
        ) from exc
