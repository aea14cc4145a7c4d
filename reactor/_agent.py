"""Agents: what activates them, when they may run, what they do and produce."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

import pydantic

from reactor._names import HARNESS_START
from reactor._patterns import Pattern, normalize_patterns, validate_name
from reactor._providers.tools import Tool, tools_of
from reactor._templates import compile_expression, compile_template
from reactor.exceptions import AgentConfigError, PatternError, SignalNameError

if TYPE_CHECKING:
    import jinja2

    from reactor._context import AgentContext
    from reactor._providers.base import Provider
    from reactor._providers.toolrun import AfterTool, BeforeTool

__all__ = ["Agent", "Concurrency", "agent"]

Concurrency = Literal["parallel", "serial", "skip", "latest"]
_CONCURRENCY: tuple[str, ...] = get_args(Concurrency)
_NAME = re.compile(r"^[^\s:*]+$")


@dataclasses.dataclass(frozen=True, eq=False)
class Agent:
    """An agent definition; create one with :func:`agent`.

    Immutable: :meth:`named` returns a renamed copy (``reactive()`` uses it to name
    agents after their keys).
    """

    name: str | None
    prompt: str | None
    system: str | None
    run: Callable[[AgentContext[Any]], Any] | None
    activate_on: tuple[Pattern, ...]
    emits: tuple[str, ...]
    when: Callable[[AgentContext[Any]], Any] | str | None
    output: type[pydantic.BaseModel] | None
    output_retries: int
    updates: str | None
    on_output: Callable[[AgentContext[Any], Any], Any] | None
    provider: Provider | None
    tools: tuple[Tool, ...]
    concurrency: Concurrency
    max_activations: int | None
    options: Mapping[str, Any]
    before_tool: BeforeTool | None = None
    after_tool: AfterTool | None = None
    prompt_template: jinja2.Template | None = dataclasses.field(repr=False, default=None)
    system_template: jinja2.Template | None = dataclasses.field(repr=False, default=None)
    when_expression: Callable[..., Any] | None = dataclasses.field(repr=False, default=None)
    output_schema: dict[str, Any] | None = dataclasses.field(repr=False, default=None)

    @property
    def is_llm(self) -> bool:
        """Whether the agent runs a prompt through a provider (else it has ``run``)."""
        return self.prompt is not None

    def named(self, name: str) -> Agent:
        """Return this agent with ``name``."""
        _check_name(name)
        return dataclasses.replace(self, name=name)

    def __repr__(self) -> str:
        kind = "prompt" if self.is_llm else "run"
        return (
            f"<Agent {self.name or '(unnamed)'} {kind} activate_on={list(self.activate_on)!r}"
            f" emits={list(self.emits)!r}>"
        )


def agent(
    *,
    name: str | None = None,
    prompt: str | None = None,
    system: str | None = None,
    run: Callable[[AgentContext[Any]], Any] | None = None,
    activate_on: Pattern | Iterable[Pattern] = (HARNESS_START,),
    emits: str | Iterable[str] = (),
    when: Callable[[AgentContext[Any]], Any] | str | None = None,
    output: type[pydantic.BaseModel] | None = None,
    output_retries: int = 2,
    updates: str | None = None,
    on_output: Callable[[AgentContext[Any], Any], Any] | None = None,
    provider: Provider | None = None,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    concurrency: Concurrency = "parallel",
    max_activations: int | None = None,
    options: Mapping[str, Any] | None = None,
    before_tool: BeforeTool | None = None,
    after_tool: AfterTool | None = None,
) -> Agent:
    """Define an agent.

    An agent is either an LLM agent (``prompt``, run through a provider) or a handler
    agent (``run=fn(ctx)``, sync or async, deterministic, no provider).

    Args:
        name: Its name; defaults to its key in ``reactive(agents={...})``.
        prompt: Jinja2 template of the prompt (``state``, ``input``, ``signal``,
            ``agent``, ``run_id`` are available); compiled now, rendered strictly.
        system: Jinja2 template of the system prompt.
        run: A handler ``fn(ctx) -> output`` instead of a prompt.
        activate_on: Signal patterns that activate it (default ``harness:start``).
        emits: Signals it emits after each successful activation, with its output as
            payload (unless it emitted them itself through ``ctx.emit``). Also the
            declaration the graph is validated and drawn from.
        when: A guard evaluated when the triggering signal is dispatched: ``fn(ctx)``
            or a Jinja2 expression such as ``"state.confidence > 0.8"``.
        output: A pydantic model: the provider is asked for structured output and the
            answer is validated (or, for ``run``, the return value is).
        output_retries: How many times an invalid answer is sent back to the model
            with the validation error before the activation fails.
        updates: A state key the output is written to.
        on_output: ``fn(ctx, output)`` called after ``updates``, sync or async.
        provider: Overrides the run's provider for this agent.
        tools: Functions (or :class:`Tool`) the model may call.
        concurrency: What a trigger arriving while it runs does: ``parallel`` runs
            both, ``serial`` queues it, ``skip`` drops it, ``latest`` keeps only the
            newest queued one.
        max_activations: Activations allowed per run; later triggers are skipped with
            reason ``limit``.
        options: Model options for the provider (``model``, ``max_tokens``, ...).
        before_tool: ``before_tool(call)`` runs before each tool call the model makes;
            return the call (possibly changed) to run it, or ``None`` to block it.
        after_tool: ``after_tool(call, result)`` runs after each tool call; return a
            replacement result, or ``None`` to keep it.

    Raises:
        AgentConfigError: The definition is invalid; the message names the agent and
            says how to fix it.
    """
    label = name or "(unnamed)"

    def problem(message: str) -> AgentConfigError:
        return AgentConfigError(f"Agent {label!r}: {message}", agent=name)

    if name is not None:
        try:
            _check_name(name)
        except AgentConfigError as exc:
            raise problem(str(exc)) from None
    if (prompt is None) == (run is None):
        raise problem(
            "give exactly one of prompt= (an LLM agent) or run= (a handler function), "
            f"not {'both' if prompt is not None else 'neither'}."
        )
    if prompt is not None and not isinstance(prompt, str):
        raise problem(f"prompt must be a template string, got {type(prompt).__name__}.")
    if run is not None:
        if not callable(run):
            raise problem(f"run must be a function fn(ctx), got {run!r}.")
        for field, value in (
            ("system", system),
            ("provider", provider),
            ("tools", tools),
            ("before_tool", before_tool),
            ("after_tool", after_tool),
        ):
            if value:
                raise problem(f"{field}= is for prompt agents; a run= agent calls no model.")
    if system is not None and not isinstance(system, str):
        raise problem(f"system must be a template string, got {type(system).__name__}.")
    try:
        patterns = normalize_patterns(activate_on)
    except PatternError as exc:
        raise problem(f"bad activate_on pattern: {exc}") from None
    declared = (emits,) if isinstance(emits, str) else tuple(emits)
    for emitted in declared:
        try:
            validate_name(emitted)
        except SignalNameError as exc:
            raise problem(f"emits must list concrete signal names: {exc}") from None
    when_expression = _compile_guard(when, name, problem)
    if output is not None and not (
        isinstance(output, type) and issubclass(output, pydantic.BaseModel)
    ):
        raise problem(f"output must be a pydantic model class, got {output!r}.")
    if not isinstance(output_retries, int) or output_retries < 0:
        raise problem(f"output_retries must be an integer >= 0, got {output_retries!r}.")
    if updates is not None and (not isinstance(updates, str) or not _NAME.match(updates)):
        raise problem(f"updates must name a top-level state key, got {updates!r}.")
    for field, hook in (("before_tool", before_tool), ("after_tool", after_tool)):
        if hook is not None and not callable(hook):
            raise problem(f"{field} must be a function, got {hook!r}.")
    if on_output is not None and not callable(on_output):
        raise problem(f"on_output must be a function fn(ctx, output), got {on_output!r}.")
    if concurrency not in _CONCURRENCY:
        raise problem(f"unknown concurrency {concurrency!r}; use one of {', '.join(_CONCURRENCY)}.")
    if max_activations is not None and (
        not isinstance(max_activations, int) or max_activations < 1
    ):
        raise problem(f"max_activations must be None or an integer >= 1, got {max_activations!r}.")
    if provider is not None and not callable(getattr(provider, "stream", None)):
        raise problem(f"provider must have a stream(request) method, got {provider!r}.")
    try:
        tool_list = tools_of(tools)
    except AgentConfigError as exc:
        raise problem(str(exc)) from None
    return Agent(
        name=name,
        prompt=prompt,
        system=system,
        run=run,
        activate_on=patterns,
        emits=tuple(dict.fromkeys(declared)),
        when=when,
        output=output,
        output_retries=output_retries,
        updates=updates,
        on_output=on_output,
        provider=provider,
        tools=tool_list,
        concurrency=concurrency,
        max_activations=max_activations,
        options=dict(options or {}),
        before_tool=before_tool,
        after_tool=after_tool,
        prompt_template=compile_template(prompt, agent=name, field="prompt") if prompt else None,
        system_template=compile_template(system, agent=name, field="system") if system else None,
        when_expression=when_expression,
        output_schema=output.model_json_schema() if output is not None else None,
    )


def _compile_guard(
    when: Any, name: str | None, problem: Callable[[str], AgentConfigError]
) -> Callable[..., Any] | None:
    if when is None:
        return None
    if isinstance(when, str):
        return compile_expression(when, agent=name)
    if not callable(when):
        raise problem(f"when must be a function fn(ctx) or an expression string, got {when!r}.")
    if inspect.iscoroutinefunction(when):
        raise problem(
            "when must be synchronous: guards run while the trigger is dispatched. Read "
            "what you need from ctx.state, or move the check into the agent."
        )
    return None


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise AgentConfigError(
            f"Agent name {name!r} is invalid: names appear in signal names "
            "(agent:<name>:completed), so use no ':', '*' or whitespace.",
            agent=name if isinstance(name, str) else None,
        )
