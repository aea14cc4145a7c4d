"""One agent activation, start to finish, and the LLM call inside it.

For an LLM agent: render ``system`` and ``prompt``, build a :class:`ProviderRequest`,
stream the provider's events onto the bus as signals, take the output from the
``End`` event, validate it against the agent's ``output`` model (sending the model its
validation error and asking again, up to ``output_retries`` times). Then, for every
agent: ``updates``, ``on_output``, the declared ``emits``, ``agent:<name>:completed``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from typing import TYPE_CHECKING, Any

import pydantic

from reactor._bus import _CURRENT
from reactor._provider import (
    End,
    Message,
    ProviderRequest,
    TextComplete,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolResult,
)
from reactor._templates import render, to_json
from reactor.exceptions import NoProviderError, OutputValidationError, ProviderError
from stores._actor import _ACTOR

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from reactor._agentrun import Activation, AgentRun
    from reactor._context import AgentContext
    from reactor._provider import ProviderEvent
    from reactor._runtime import Run
    from reactor._signal import Signal
    from reactor.typing import Provider

__all__ = ["Activator", "validate_output"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


class Activator:
    """Runs activations for a :class:`~reactor._runtime.Run`."""

    def __init__(self, run: Run) -> None:
        self.run = run

    def provider_of(self, agent_run: AgentRun) -> Provider | None:
        """The provider an agent's calls go to: the replay's, its own, else the run's."""
        run = self.run
        return run.replay or agent_run.agent.provider or run.provider

    def bound(self, agent_run: AgentRun) -> Provider | None:
        """A provider for handler code: calls stream through the run, as signals."""
        target = self.provider_of(agent_run)
        return None if target is None else _RunProvider(self, target)

    def template_context(self, agent_run: AgentRun, signal: Signal) -> dict[str, Any]:
        """The names templates and string guards can read."""
        run = self.run
        return {
            "state": run.store.state,
            "input": run.options.input,
            "signal": signal,
            "agent": agent_run.name,
            "run_id": run.run_id,
        }

    def evaluate(self, agent_run: AgentRun, expression: Callable[..., Any], signal: Signal) -> bool:
        """Evaluate a string guard."""
        context = self.template_context(agent_run, signal)
        return bool(render(expression, context, agent=agent_run.name, field="when expression"))

    async def activate(self, activation: Activation) -> None:
        """Run one activation; never raises except to propagate cancellation."""
        activation.started = True
        # The activation's signal is the cause of everything it emits, and its store
        # writes are the agent's (the task has its own copy of the context).
        _CURRENT.set(activation.signal)
        _ACTOR.set(activation.agent_run.actor)
        run = self.run
        bus = run.bus
        agent_run = activation.agent_run
        agent = agent_run.agent
        name = agent_run.name
        started = time.perf_counter()
        ctx = run._context(agent_run, activation.trigger)
        try:
            if agent.run is not None:
                output = agent.run(ctx)
                if inspect.isawaitable(output):
                    output = await output
                if agent.output is not None:
                    output = validate_output(agent.output, output, name)
            else:
                output = await self.call_model(agent_run, ctx)
            if agent.updates is not None:
                run.store.set(agent.updates, output)
            if agent.on_output is not None:
                result = agent.on_output(ctx, output)
                if inspect.isawaitable(result):
                    await result
            emitted = ctx.emitted
            for signal_name in agent.emits:
                if emitted is None or signal_name not in emitted:
                    bus.emit(signal_name, output, source=name)
            agent_run.last_output = output
            bus.emit(
                agent_run.completed,
                {"agent": name, "output": output, "duration_ms": _since(started)},
                source=name,
            )
        except asyncio.CancelledError:
            bus.emit(
                agent_run.cancelled,
                {
                    "agent": name,
                    "reason": run.reason or "cancelled",
                    "duration_ms": _since(started),
                },
                source=name,
            )
            raise
        except Exception as exc:
            bus.emit(
                agent_run.failed,
                {
                    "agent": name,
                    "error": {"type": type(exc).__name__, "message": str(exc)},
                    "duration_ms": _since(started),
                },
                source=name,
            )
            run.failed(agent_run, exc)
        finally:
            run.release(activation)

    async def call_model(self, agent_run: AgentRun, ctx: AgentContext) -> Any:
        """Render, call the provider, validate; retry invalid outputs with feedback."""
        agent = agent_run.agent
        name = agent_run.name
        provider = self.provider_of(agent_run)
        if provider is None:
            raise NoProviderError(
                f"Agent {name!r} has no provider: it has a prompt, so it needs a model to run "
                "on. Pass provider= to run()/run_reactive() (e.g. "
                "ScriptedProvider({...}) offline, AnthropicProvider() for Claude), or to "
                "agent(...) for this agent only.",
                agent=name,
            )
        context = self.template_context(agent_run, ctx.signal)
        system = (
            render(agent.system_template, context, agent=name, field="system prompt")
            if agent.system_template is not None
            else None
        )
        assert agent.prompt_template is not None
        prompt = render(agent.prompt_template, context, agent=name, field="prompt")
        messages = [Message("user", prompt)]
        attempts = agent.output_retries + 1 if agent.output is not None else 1
        for attempt in range(1, attempts + 1):
            request = ProviderRequest.build(
                agent=name,
                system=system,
                prompt=prompt,
                messages=messages,
                output_schema=agent.output_schema,
                tools=agent.tools,
                options=agent.options,
                before_tool=agent.before_tool,
                after_tool=agent.after_tool,
            )
            raw = await self.stream(provider, request, name)
            if agent.output is None:
                return raw
            try:
                return validate_output(agent.output, raw, name, final=False)
            except pydantic.ValidationError as exc:
                if attempt == attempts:
                    raise OutputValidationError(
                        f"Agent {name!r}: the output did not match {agent.output.__name__} after "
                        f"{attempts} attempt{'s' if attempts > 1 else ''}: "
                        f"{_summarize(exc)}. Make the prompt clearer about the format, or "
                        "raise output_retries.",
                        agent=name,
                        output=raw,
                        errors=[dict(e) for e in exc.errors(include_url=False)],
                    ) from exc
                messages = [
                    *messages,
                    Message("assistant", raw if isinstance(raw, str) else to_json(raw)),
                    Message("user", _feedback(exc)),
                ]
        raise AssertionError("unreachable")  # pragma: no cover

    async def stream(self, provider: Provider, request: ProviderRequest, name: str) -> Any:
        """Call the provider, its events becoming signals; return the output."""
        output: Any = None
        async for event in self.relay(provider, request, name):
            if isinstance(event, End):
                output = event.output
        return output

    async def relay(
        self, provider: Provider, request: ProviderRequest, name: str
    ) -> AsyncIterator[ProviderEvent]:
        """Stream the provider's events to the caller, each one also emitted as a signal.

        ``provider:start`` comes first, ``provider:end`` (with the usage, the cost and
        the duration, which the run's metrics add up) or ``provider:error`` last.
        """
        run = self.run
        emit = run.bus.emit
        run.record_request(request)
        model_for = getattr(provider, "model_for", None)
        model = (
            model_for(request)
            if model_for is not None
            else request.options.get("model") or getattr(provider, "model", None)
        )
        emit(
            "provider:start",
            {"agent": name, "model": model, "request_hash": request.request_hash},
            source=name,
        )
        started = time.perf_counter()
        ended = False
        events = provider.stream(request)
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    emit("text:delta", {"agent": name, "content": event.content}, source=name)
                elif isinstance(event, ThinkingDelta):
                    emit("thinking:delta", {"agent": name, "content": event.content}, source=name)
                elif isinstance(event, TextComplete):
                    emit("text:complete", {"agent": name, "content": event.content}, source=name)
                elif isinstance(event, ToolCall):
                    payload = {"agent": name, "id": event.id, "name": event.name}
                    emit("tool:call", {**payload, "input": event.input}, source=name)
                elif isinstance(event, ToolResult):
                    payload = {"agent": name, "id": event.id, "name": event.name}
                    emit(
                        "tool:result",
                        {**payload, "result": event.result, "error": event.error},
                        source=name,
                    )
                elif isinstance(event, End):
                    ended = True
                    self._ended(event, name, started)
                else:
                    raise ProviderError(
                        f"Provider {type(provider).__name__} yielded {event!r}, which is not a "
                        "provider event (TextDelta, ThinkingDelta, TextComplete, ToolCall, "
                        "ToolResult or End).",
                        agent=name,
                    )
                yield event
            if not ended:
                raise ProviderError(
                    f"Provider {type(provider).__name__} finished without an End event for "
                    f"agent {name!r}; a stream must end with End(output=...).",
                    agent=name,
                )
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:
            emit(
                "provider:error",
                {
                    "agent": name,
                    "error": {"type": type(exc).__name__, "message": str(exc)},
                    "retryable": bool(getattr(exc, "retryable", False)),
                },
                source=name,
            )
            raise
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    def _ended(self, end: End, name: str, started: float) -> None:
        run = self.run
        usage = end.usage
        run.input_tokens += usage.input_tokens
        run.output_tokens += usage.output_tokens
        if end.cost_usd:
            run.cost_usd += end.cost_usd
        run.bus.emit(
            "provider:end",
            {
                "agent": name,
                "output": end.output,
                "usage": usage.to_dict(),
                "cost_usd": end.cost_usd,
                "stop_reason": end.stop_reason,
                "duration_ms": _since(started),
            },
            source=name,
        )


def validate_output(
    model: type[pydantic.BaseModel], raw: Any, agent: str, *, final: bool = True
) -> Any:
    """Validate ``raw`` (a model, a dict, or JSON text) into ``model``.

    Raises:
        pydantic.ValidationError: When ``final`` is false, to let the caller retry.
        OutputValidationError: When ``final`` is true.
    """
    if isinstance(raw, model):
        return raw
    try:
        if isinstance(raw, str | bytes):
            text = raw.decode() if isinstance(raw, bytes) else raw
            fenced = _FENCE.match(text)
            return model.model_validate_json(fenced.group(1) if fenced else text)
        return model.model_validate(raw)
    except pydantic.ValidationError as exc:
        if not final:
            raise
        raise OutputValidationError(
            f"Agent {agent!r}: the output does not match {model.__name__}: {_summarize(exc)}.",
            agent=agent,
            output=raw,
            errors=[dict(e) for e in exc.errors(include_url=False)],
        ) from exc


def _summarize(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:3]:
        loc = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"{loc}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _feedback(exc: pydantic.ValidationError) -> str:
    lines = [
        f"- {'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    ]
    return (
        "Your answer did not match the required JSON schema:\n"
        + "\n".join(lines)
        + "\nReply again with only the corrected JSON object."
    )


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


class _RunProvider:
    """The provider ``ctx.provider`` gives handler code.

    It calls the agent's provider through the run, so each call is signalled
    (``provider:start`` ... ``provider:end``, caused by the activation), counted in the
    run's metrics, recorded, and answered from the recording during a replay.
    """

    def __init__(self, activator: Activator, target: Provider) -> None:
        self._activator = activator
        self.target = target

    @property
    def model(self) -> str | None:
        """The model of the provider behind it."""
        return getattr(self.target, "model", None)

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream ``request`` through the run."""
        return self._activator.relay(self.target, request, request.agent)

    def __repr__(self) -> str:
        return f"<provider {self.target!r} through the run>"
