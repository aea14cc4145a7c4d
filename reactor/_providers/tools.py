"""Python callables as tools an LLM can call: name, description and JSON schema."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import re
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any, overload

import pydantic

from reactor._signals.threads import Share, call_code
from reactor.exceptions import AgentConfigError

__all__ = [
    "Tool",
    "ToolContext",
    "ToolKeys",
    "as_tool",
    "current_tool_keys",
    "set_tool_keys",
    "tool",
]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclasses.dataclass(frozen=True)
class ToolContext:
    """What a tool is told of the call it serves: give it a parameter of this type.

    ::

        @tool
        def place_order(symbol: str, quantity: int, call: ToolContext) -> str:
            # (a docstring here describes the tool to the model)
            return broker.buy(symbol, quantity, client_order_id=call.idempotency_key)

    The parameter is not part of the tool's schema: the model never sees it.

    Attributes:
        tool: The tool's name.
        call_id: The model's id of this call.
        run_id: The run the call is made in (``None`` outside a run).
        agent: The agent that made it (``None`` outside a run).
        idempotency_key: The same every time this call is made again by the same
            activation (after a crash, its nth call of this tool has the same key), and
            different for every other call: what brokers' ``client_order_id`` and
            payment APIs' idempotency headers are for.
    """

    tool: str
    call_id: str
    run_id: str | None
    agent: str | None
    idempotency_key: str


class ToolKeys:
    """Where the tool calls of an activation get their keys (the activation sets it)."""

    __slots__ = ()

    @property
    def run_id(self) -> str | None:
        """The run the calls are made in."""
        return None

    @property
    def agent(self) -> str | None:
        """The agent making them."""
        return None

    @property
    def share(self) -> Share | None:
        """The run's share of the handler threads, which its plain-function tools use."""
        return None

    def next_key(self, tool: str) -> str:
        """The key of the next call of ``tool`` (outside a run: a fresh one each time)."""
        return uuid.uuid4().hex

    def context(self, tool: str, call_id: str) -> ToolContext:
        """The context of the next call of ``tool``."""
        return ToolContext(tool, call_id, self.run_id, self.agent, self.next_key(tool))


_KEYS: contextvars.ContextVar[ToolKeys | None] = contextvars.ContextVar(
    "reactor_tool_keys", default=None
)


set_tool_keys = _KEYS.set
"""Give the tool calls made in this context (an activation's task) their keys.

(The variable's own ``set``: no Python frame per activation.)
"""


def current_tool_keys() -> ToolKeys:
    """The keys of tool calls made here (outside an activation: fresh ones)."""
    return _KEYS.get() or ToolKeys()


@dataclasses.dataclass(frozen=True)
class Tool:
    """A function the model may call.

    Build one with :func:`tool` (or pass a plain function in ``agent(tools=[...])``):
    the name is the function's, the description its docstring, and the input schema
    comes from its type hints through pydantic.

    Attributes:
        name: What the model calls it (letters, digits, ``_`` and ``-``; 64 at most).
        description: What it does and when to use it, for the model.
        input_schema: JSON schema of its keyword arguments.
        fn: The function (sync or async).
        context_param: The parameter that receives the :class:`ToolContext`, if any.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any] = dataclasses.field(repr=False)
    arguments: type[pydantic.BaseModel] = dataclasses.field(repr=False, compare=False)
    context_param: str | None = None

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it: ``{name, description, input_schema}``."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        """Validate ``arguments`` against the schema and call the function.

        An ``async`` function is awaited. A plain function runs in a thread of the
        handlers' pool (``REACTOR_HANDLER_THREADS``, in the run's share of it, as a
        synchronous handler does), so a slow or blocking tool never stalls the event
        loop: other agents go on, several calls of one turn run at once, and a run's
        ``timeout`` or ``abort()`` returns at once. A thread cannot be stopped, though: a
        blocking tool abandoned that way finishes in the background, is counted by
        :func:`reactor.abandoned_threads`, and a warning says so.

        Raises:
            pydantic.ValidationError: The arguments do not match the schema.
        """
        parsed = self.arguments.model_validate(dict(arguments))
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = context or current_tool_keys().context(self.name, "")
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        # In a thread of the handlers' pool, in the run's share of it (see
        # reactor._signals.threads); it sees the caller's context (reactor.getenv).
        keys = current_tool_keys()
        return await call_code(
            functools.partial(self.fn, **kwargs),
            agent=keys.agent or "-",
            what=f"tool {self.name!r}",
            share=keys.share or Share(keys.run_id or "-"),
        )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a :class:`Tool`; usable bare (``@tool``) or with options.

    Args:
        fn: The function; its parameters must be named and preferably annotated.
        name: Overrides the function's name.
        description: Overrides the docstring.

    Raises:
        AgentConfigError: The name is not a valid tool name, or the function takes
            ``*args`` / ``**kwargs``, or a type hint has no JSON schema.
    """

    def build(function: Callable[..., Any]) -> Tool:
        return _from_function(function, name=name, description=description)

    return build(fn) if fn is not None else build


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """Return ``value`` if it is a :class:`Tool`, else build one from the function."""
    if isinstance(value, Tool):
        return value
    if not callable(value):
        raise AgentConfigError(f"A tool is a function or a Tool, got {value!r}.")
    return _from_function(value, name=None, description=None)


def _from_function(fn: Callable[..., Any], *, name: str | None, description: str | None) -> Tool:
    tool_name: str = name or getattr(fn, "__name__", None) or ""
    if not _NAME.match(tool_name):
        raise AgentConfigError(
            f"Tool name {tool_name!r} is invalid: use 1-64 letters, digits, '_' or '-' "
            "(pass tool(fn, name=...) to choose one)."
        )
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to no hints
        hints = {}
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        if hints.get(param.name) is ToolContext:
            context_param = param.name  # given by reactor, not by the model
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise AgentConfigError(
                f"Tool {tool_name!r} takes *{param.name}; tools take named parameters only, "
                "so that the model can be given a schema for them."
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (
            hints.get(param.name, Any),
            pydantic.Field(default, description=arg_docs.get(param.name)),
        )
    try:
        arguments = pydantic.create_model(f"{tool_name}_arguments", **fields)
        schema = arguments.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
        raise AgentConfigError(
            f"Tool {tool_name!r} has a parameter type with no JSON schema ({exc}). "
            "Annotate parameters with JSON-friendly types or pydantic models."
        ) from exc
    schema.pop("title", None)
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        input_schema=schema,
        fn=fn,
        arguments=arguments,
        context_param=context_param,
    )


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and ``Args:`` entries."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if indent == 0 and stripped.endswith(":") and stripped[:-1].replace(" ", "").isalpha():
            section, current = stripped[:-1].lower(), None
        elif section is None:
            summary.append(line)
        elif section in ("args", "arguments", "parameters"):
            match = _ARG_LINE.match(stripped)
            if match and 0 < indent <= 4:
                current = match.group(1).lstrip("*")
                args[current] = match.group(2).strip()
            elif current and stripped:
                args[current] += " " + stripped
    return "\n".join(summary).strip(), args


def tools_of(values: Any) -> tuple[Tool, ...]:
    """Normalize an agent's ``tools=`` to a tuple of :class:`Tool`."""
    return tuple(as_tool(value) for value in values or ())
