"""Checking an agent's definition: every problem collected, then reported at once."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Self, TypeVar

import pydantic

from reactor._agents.templates import Expression, compile_expression
from reactor.exceptions import AgentConfigError

__all__ = [
    "Checked",
    "Checks",
    "check_name",
    "compile_guard",
    "config_error",
    "definition_error",
    "given",
]

_NAME = re.compile(r"^[^\s:*]+$")
_LABEL = re.compile(r"^Agent '[^']*': ")
_T = TypeVar("_T")


class Checks:
    """Collects an agent's definition problems, to report them all at once.

    A named agent's problems raise at once; an unnamed one's wait until the agent is
    named (by its key in ``reactive({...})``), so the error can say which agent it is.
    """

    def __init__(self, name: str | None) -> None:
        self.agent = name
        self.problems: list[str] = []

    def add(self, problem: str) -> None:
        """Note a problem."""
        self.problems.append(problem)

    def name(self, name: str) -> None:
        """Check the agent's name."""
        try:
            check_name(name)
        except AgentConfigError as exc:
            self.add(str(exc))

    def attempt(
        self,
        make: Callable[[], _T],
        errors: type[Exception] | tuple[type[Exception], ...],
        prefix: str,
    ) -> _T | None:
        """``make()``, or ``None`` after noting the error it raised (one of ``errors``)."""
        try:
            return make()
        except errors as exc:
            self.add(prefix + _strip_label(str(exc)))
            return None

    def raise_if_named(self) -> None:
        """Raise the problems of a named agent (an unnamed one waits to be named)."""
        if self.problems and self.agent is not None:
            raise definition_error(self.agent, self.problems)


def given(value: object) -> object:
    """An argument as what it may really be: users' code is not always type-checked."""
    return value


def definition_error(name: str, problems: Sequence[str]) -> AgentConfigError:
    """The error of an agent's definition problems, naming it."""
    if len(problems) == 1:
        return AgentConfigError(f"Agent {name!r}: {problems[0]}", agent=name)
    listed = "\n".join(f"  - {problem}" for problem in problems)
    return AgentConfigError(f"Agent {name!r} has {len(problems)} problems:\n{listed}", agent=name)


def _strip_label(message: str) -> str:
    """Drop a leading ``Agent '...': `` from a message made before the name was known."""
    return _LABEL.sub("", message, count=1)


def compile_guard(when: Any, name: str | None) -> Expression | None:
    """A string guard compiled (``None`` for a function), after checking it."""
    if when is None:
        return None
    if isinstance(when, str):
        return compile_expression(when, agent=name)
    if not callable(when):
        raise AgentConfigError(
            f"when must be a function fn(ctx) or an expression string, got {when!r}."
        )
    if inspect.iscoroutinefunction(when):
        raise AgentConfigError(
            "when must be synchronous: guards run while the trigger is dispatched. Read "
            "what you need from ctx.state, or move the check into the agent."
        )
    return None


def check_name(name: object) -> None:
    """Check an agent name (it appears in signal names).

    Raises:
        AgentConfigError: It is not a string without ``:``, ``*`` or whitespace.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise AgentConfigError(
            f"Agent name {name!r} is invalid: names appear in signal names "
            "(agent:<name>:completed), so use no ':', '*' or whitespace.",
            agent=name if isinstance(name, str) else None,
        )


class Checked(pydantic.BaseModel):
    """A value made by users: a bad field is an ``AgentConfigError`` naming the fix.

    ``CHOICES`` names, for a field whose value is one of a few words, the thing it
    names and the words (``{"events": ("event", "created, updated or deleted")}``), so
    that a wrong one is said in those words.
    """

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    CHOICES: ClassVar[Mapping[str, tuple[str, str]]] = {}

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise config_error(type(self).__name__, exc, self.CHOICES) from None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """Build one from stored JSON (a database row), with the same clear errors."""
        if not isinstance(config, Mapping):
            raise AgentConfigError(
                f"{cls.__name__} config must be a JSON object, got {type(config).__name__}."
            )
        fields: dict[str, Any] = dict(config)
        return cls(**fields)


def config_error(
    model: str, exc: pydantic.ValidationError, choices: Mapping[str, tuple[str, str]]
) -> AgentConfigError:
    """One sentence per bad field of ``model``, each saying what to write instead."""
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"][:1]) or "?"
        value = error.get("input")
        kind = error["type"]
        if kind == "literal_error" and field in choices:
            noun, words = choices[field]
            problems.append(f"unknown {noun} {value!r} in {model}({field}=...); use {words}")
        elif kind == "extra_forbidden":
            problems.append(f"{model} has no option {field!r}")
        elif kind == "value_error":
            message = str(error.get("ctx", {}).get("error", error["msg"]))
            problems.append(f"{model}({field}=...): {message}")
        else:
            problems.append(f"{model}({field}=...): {error['msg']} (got {value!r})")
    return AgentConfigError(f"Invalid {model}: {'; '.join(problems)}.")
