"""Agents as objects: :class:`Prompt` values and ``agent.prompt()``.

``agent.prompt(prompt, **overrides)`` asks the agent's model one question and returns
the typed answer. Its settings merge with a fixed precedence: the prompt's own fields
win over the call's overrides, which win over the agent's configuration. The call runs
the tool loop (Python tools, MCP servers' tools, hooks), validates the answer against
the response format (sending the errors back, like graph agents), and may ask the model
to check its answer (reflection).

Inside a run (in a ``run=`` handler, or code it calls) the call streams through the run:
its signals are caused by the activation, recorded, replayed and counted in the run's
metrics. Outside a run it calls the provider directly, and a :func:`reactor.trace`
block collects its signals.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from reactor._agents.output import OutputSpec
from reactor._agents.skills import system_with_skills
from reactor._agents.spans import caused_by
from reactor._agents.templates import compile_template, render, to_json
from reactor._prompts.modelcall import ModelCall, no_provider
from reactor._prompts.prompt import Prompt, PromptingAgent, skills_of
from reactor._prompts.trace import Standalone, current_trace
from reactor._providers.base import End, Message, Usage
from reactor._providers.env import env_overlay
from reactor._providers.hooks import Hooks, SessionInfo, call_hook
from reactor._providers.mcp import MCPServer, connect_servers
from reactor._providers.tools import Tool, tools_of
from reactor._signals.names import (
    PROMPT_END,
    PROMPT_START,
    REFLECTION_END,
    REFLECTION_START,
    error_info,
)
from reactor.exceptions import OutputValidationError

if TYPE_CHECKING:
    from reactor._prompts.modelcall import Answers
    from reactor._providers.base import Provider
    from reactor._signals.bus import SignalBus

__all__ = ["OVERRIDES", "PromptSite", "enter_site", "reflect", "run_prompt"]

OVERRIDES = (
    "system",
    "tools",
    "mcps",
    "skills",
    "hooks",
    "temperature",
    "max_tokens",
    "stop",
    "model",
    "disable_cache",
    "enable_reflection",
    "max_reflections",
    "env",
)
"""What ``agent.prompt(..., **overrides)`` may override."""
_PROMPT_FIELDS = ("system", "tools", "mcps", "skills", "hooks", "enable_reflection")
_OPTIONS = {"temperature": "temperature", "max_tokens": "max_tokens", "model": "model"}
_REFLECT = (
    "Check your answer above against my request{schema}. If it is right, give it again "
    "unchanged; if it is not, give the corrected answer. Reply with the answer only."
)


class PromptSite(Protocol):
    """The activation a prompt is made in (the activation layer provides it)."""

    @property
    def calls(self) -> ModelCall:
        """The run's model calls: its bus, its recording, its metrics."""
        ...

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    def prompt_provider(self, key: object, own: Provider | None) -> Provider | None:
        """The provider: the replay's, else the prompted agent's, else the activation's."""
        ...

    def prompt_answers(self, key: object) -> Answers | None:
        """A resumed activation's recorded answers."""
        ...

    async def mcp_tools(
        self, servers: Sequence[MCPServer], env: Mapping[str, str]
    ) -> tuple[Tool, ...]:
        """The tools of ``servers``, started once per run."""
        ...


_SITE: contextvars.ContextVar[tuple[PromptSite, object] | None] = contextvars.ContextVar(
    "reactor_prompt_site", default=None
)


def enter_site(entry: tuple[PromptSite, object]) -> None:
    """Make prompts in this context part of a run: ``(site, key)``, set per activation."""
    _SITE.set(entry)


class _Totals:
    __slots__ = ("cost", "usage")

    def __init__(self) -> None:
        self.usage = Usage()
        self.cost: float | None = None

    def add(self, end: End) -> None:
        used, more = self.usage, end.usage
        self.usage = Usage(
            used.input_tokens + more.input_tokens,
            used.output_tokens + more.output_tokens,
            used.cache_creation_input_tokens + more.cache_creation_input_tokens,
            used.cache_read_input_tokens + more.cache_read_input_tokens,
        )
        if end.cost_usd is not None:
            self.cost = (self.cost or 0.0) + end.cost_usd


async def run_prompt(
    agent: PromptingAgent,
    given: Prompt | str,
    overrides: Mapping[str, Any],
    *,
    force_reflection: bool = False,
) -> Any:
    """``agent.prompt(given, **overrides)``: see the module docstring."""
    name = agent.name or "agent"
    prompt = _prompt_of(given, name)
    settings = _settings(agent, prompt, overrides, name)
    entry = _SITE.get()
    if entry is not None:
        site: PromptSite | None = entry[0]
        calls = entry[0].calls
        provider = entry[0].prompt_provider(entry[1], agent.provider)
        answers = entry[0].prompt_answers(entry[1])
        run_id: str | None = entry[0].run_id
    else:
        site, answers, run_id = None, None, None
        calls = ModelCall(current_trace() or Standalone())
        provider = agent.provider
    if provider is None:
        raise no_provider(name)
    context = {"agent": name, **prompt.data}
    user = prompt.render(agent=name)
    system = settings["system"]
    if system is agent.system and agent.system_template is not None:
        system = render(agent.system_template, context, agent=name, field="system prompt")
    elif isinstance(system, str):
        system = render(
            compile_template(system, agent=name, field="system"),
            context,
            agent=name,
            field="system prompt",
        )
    system = system_with_skills(system, settings["skills"])
    bus: SignalBus = calls.site.bus
    hooks: Hooks = settings["hooks"]
    info = SessionInfo(name, run_id, user)
    totals = _Totals()
    started = time.perf_counter()
    reflections = (
        settings["max_reflections"] if force_reflection or settings["enable_reflection"] else 0
    )
    with env_overlay(settings["env"]):
        start = bus.emit(PROMPT_START, {"agent": name, "prompt": user}, source=name)
        with caused_by(start):
            for hook in hooks.session_start:
                await call_hook(hook, info)
            try:
                async with _servers(
                    site, settings["mcps"], settings["env"], bus, name
                ) as mcp_tools:
                    ask = {
                        "name": name,
                        "system": system,
                        "spec": settings["spec"],
                        "retries": agent.output_retries,
                        "tools": (*settings["tools"], *mcp_tools),
                        "options": settings["options"],
                        "hooks": hooks,
                        "answers": answers,
                        "on_end": totals.add,
                    }
                    output = await calls.converse(provider, messages=[Message("user", user)], **ask)
                    if reflections:
                        output = await reflect(calls, provider, user, output, reflections, ask)
            except Exception as exc:
                _end(bus, name, None, exc, totals, started)
                for end_hook in hooks.session_end:
                    await call_hook(end_hook, info, exc)
                raise
            _end(bus, name, output, None, totals, started)
            for end_hook in hooks.session_end:
                await call_hook(end_hook, info, output)
    return output


def _end(
    bus: SignalBus, name: str, output: Any, exc: Exception | None, totals: _Totals, started: float
) -> None:
    bus.emit(
        PROMPT_END,
        {
            "agent": name,
            "output": output,
            "error": None if exc is None else error_info(exc),
            "usage": totals.usage.to_dict(),
            "cost_usd": totals.cost,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        },
        source=name,
    )


async def reflect(
    calls: ModelCall,
    provider: Provider,
    user: str,
    output: Any,
    times: int,
    ask: Mapping[str, Any],
) -> Any:
    """Ask the model to check ``output`` against ``user`` (and the schema), ``times`` at most.

    Each round sends the request, the answer, and the request to check it; a changed
    answer is checked again, an unchanged one ends the rounds. A corrected answer
    that does not validate is dropped (``reflection:end`` with ``success: false``) and
    the previous answer kept.
    """
    bus: SignalBus = calls.site.bus
    name = ask["name"]
    spec: OutputSpec | None = ask["spec"]
    check = _REFLECT.format(schema=f" and the JSON schema of {spec.name}" if spec else "")
    for attempt in range(1, times + 1):
        start = bus.emit(REFLECTION_START, {"agent": name, "attempt": attempt}, source=name)
        end = {"agent": name, "attempt": attempt, "success": False, "changed": False}
        with caused_by(start):
            answer = output if isinstance(output, str) else to_json(output)
            turns = [Message("user", user), Message("assistant", answer), Message("user", check)]
            try:
                revised = await calls.converse(provider, messages=turns, **ask)
            except OutputValidationError:
                bus.emit(REFLECTION_END, end, source=name)
                return output
            except Exception:
                bus.emit(REFLECTION_END, end, source=name)
                raise
            changed = revised != output
            bus.emit(REFLECTION_END, {**end, "success": True, "changed": changed}, source=name)
        output = revised
        if not changed:
            break
    return output


@contextlib.asynccontextmanager
async def _servers(
    site: PromptSite | None,
    servers: Sequence[MCPServer],
    env: Mapping[str, str],
    bus: SignalBus,
    name: str,
) -> AsyncIterator[tuple[Tool, ...]]:
    if not servers:
        yield ()
    elif site is not None:
        yield await site.mcp_tools(servers, env)
    else:

        def emit(signal: str, payload: Any) -> object:
            return bus.emit(signal, payload, source=name)

        async with connect_servers(servers, env=env, emit=emit) as tools:
            yield tools


def _prompt_of(given: Any, name: str) -> Prompt:
    if isinstance(given, Prompt):
        return given
    if isinstance(given, str):
        return Prompt(user=given)
    raise TypeError(
        f"Agent {name!r}: prompt() takes a Prompt or a string (the user message), got "
        f"{type(given).__name__}."
    )


def _settings(
    agent: PromptingAgent, prompt: Prompt, overrides: Mapping[str, Any], name: str
) -> dict[str, Any]:
    """Every setting of one call: prompt fields > call overrides > agent config."""
    unknown = [key for key in overrides if key not in OVERRIDES]
    if unknown:
        close = difflib.get_close_matches(unknown[0], OVERRIDES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(
            f"Agent {name!r}: prompt() got unknown override {unknown[0]!r}{hint}; it takes "
            f"{', '.join(OVERRIDES)}."
        )
    config: dict[str, Any] = {
        "system": agent.system,
        "tools": agent.tools,
        "mcps": agent.mcps,
        "skills": agent.skills,
        "hooks": agent.hooks,
        "enable_reflection": agent.enable_reflection,
        "max_reflections": agent.max_reflections,
        "env": agent.env,
    }
    for key, value in overrides.items():
        config[key] = _override(agent, key, value, name)
    for key in _PROMPT_FIELDS:
        value = getattr(prompt, key)
        if value is not None:
            config[key] = value
    config["options"] = _options(agent, overrides)
    config["spec"] = prompt.spec if prompt.spec is not None else agent.output_spec
    return config


def _override(agent: PromptingAgent, key: str, value: Any, name: str) -> Any:
    """A call's override as the agent's own setting of that name holds it."""
    if key == "tools":
        return tools_of(value)
    if key == "skills":
        return skills_of(value)
    if key == "mcps":
        return tuple(value or ())
    if key == "hooks" and not isinstance(value, Hooks):
        raise TypeError(f"Agent {name!r}: hooks= takes a Hooks(...), got {value!r}.")
    if key == "env":
        return {**agent.env, **value}
    return value


def _options(agent: PromptingAgent, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The provider options of one call: the agent's, with the call's overrides of them."""
    options = dict(agent.options)
    for key, option in _OPTIONS.items():
        if overrides.get(key) is not None:
            options[option] = overrides[key]
    if overrides.get("stop") is not None:
        stop = overrides["stop"]
        options["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if agent.enable_cache and not overrides.get("disable_cache"):
        options["cache_system"] = True
    elif overrides.get("disable_cache"):
        options.pop("cache_system", None)
    return options
