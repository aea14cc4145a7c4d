"""An LLM call on a bus: render, ask the provider, stream, validate, retry.

For an LLM agent: render ``system`` and ``prompt``, build a :class:`ProviderRequest`,
stream the provider's events onto the bus as signals (each checked first: see
:mod:`reactor._prompts.signalled`), take the output from the
``End`` event, and validate it against the agent's ``output`` model, sending the model
its validation error and asking again, up to ``output_retries`` times. Handler code
calls models the same way through ``ctx.provider`` (:class:`RunProvider`), and
``agent.prompt()`` through :meth:`ModelCall.converse`, in a run or on a bus of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

import pydantic

from reactor._agents.output import OutputSpec, feedback, summarize_errors
from reactor._agents.skills import Skill, system_with_skills
from reactor._agents.templates import Template, render, render_async, to_json
from reactor._prompts.signalled import CallSite, SignalledCall
from reactor._providers.base import (
    End,
    Message,
    Provider,
    ProviderEvent,
    ProviderRequest,
    as_provider,
)
from reactor._providers.hooks import NO_HOOKS, Hooks
from reactor._providers.tools import Tool
from reactor.exceptions import NoProviderError, OutputValidationError

__all__ = ["Answers", "ModelAgent", "ModelCall", "RunProvider", "no_provider"]


class Answers(Protocol):
    """A resumed activation's recorded answers (``reactor._activation.resume.RecordedAnswers``)."""

    def answer(self, request: ProviderRequest) -> End | None:
        """The recorded answer to ``request``, if it was answered before the stop."""
        ...

    def tools(self, tools: Sequence[Tool]) -> tuple[Tool, ...]:
        """``tools`` whose recorded calls return their recorded results."""
        ...


class ModelAgent(Protocol):
    """What a model call reads of an agent (:class:`reactor.Agent`)."""

    @property
    def system_template(self) -> Template | None:
        """Its system prompt, compiled."""
        ...

    @property
    def prompt_template(self) -> Template | None:
        """Its prompt, compiled."""
        ...

    @property
    def output_spec(self) -> OutputSpec | None:
        """What its output must be."""
        ...

    @property
    def output_retries(self) -> int:
        """How often an invalid answer is sent back."""
        ...

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Its Python tools."""
        ...

    @property
    def options(self) -> Mapping[str, Any]:
        """Model options."""
        ...

    @property
    def hooks(self) -> Hooks:
        """Its hooks (``before_tool`` / ``after_tool`` included)."""
        ...

    @property
    def skills(self) -> tuple[Skill, ...]:
        """Skills added to its system prompt."""
        ...


class ModelCall:
    """Runs agents' prompts on providers, each event becoming a signal of the run."""

    def __init__(self, site: CallSite) -> None:
        self.site = site

    def call_model(
        self,
        agent: ModelAgent,
        name: str,
        provider: Provider | None,
        context: Mapping[str, Any],
        answers: Answers | None = None,
        extra_tools: tuple[Tool, ...] = (),
    ) -> Coroutine[Any, Any, Any]:
        """Render now; return the call to await: ask, validate, retry with feedback.

        ``answers`` (a resumed activation's) answers the requests that were answered
        before, without calling the provider or signalling the call again. (Not a
        coroutine itself: one frame fewer for every call in flight.)
        """
        if provider is None:
            raise no_provider(name)
        template = agent.prompt_template
        assert template is not None
        if template.needs_await or (agent.system_template and agent.system_template.needs_await):
            return self._render_then_call(agent, name, provider, context, answers, extra_tools)
        system = (
            render(agent.system_template, context, agent=name, field="system prompt")
            if agent.system_template is not None
            else None
        )
        prompt = render(template, context, agent=name, field="prompt")
        return self._call(agent, name, provider, system, prompt, answers, extra_tools)

    async def _render_then_call(
        self,
        agent: ModelAgent,
        name: str,
        provider: Provider,
        context: Mapping[str, Any],
        answers: Answers | None,
        extra_tools: tuple[Tool, ...],
    ) -> Any:
        """:meth:`call_model` of templates that read ``objects``: rendered awaiting them."""
        system = None
        if agent.system_template is not None:
            system = await render_async(
                agent.system_template, context, agent=name, field="system prompt"
            )
        assert agent.prompt_template is not None
        prompt = await render_async(agent.prompt_template, context, agent=name, field="prompt")
        return await self._call(agent, name, provider, system, prompt, answers, extra_tools)

    def _call(
        self,
        agent: ModelAgent,
        name: str,
        provider: Provider,
        system: str | None,
        prompt: str,
        answers: Answers | None,
        extra_tools: tuple[Tool, ...],
    ) -> Coroutine[Any, Any, Any]:
        return self.converse(
            provider,
            name=name,
            system=system_with_skills(system, agent.skills),
            messages=(Message("user", prompt),),
            spec=agent.output_spec,
            retries=agent.output_retries,
            tools=(*agent.tools, *extra_tools) if extra_tools else agent.tools,
            options=agent.options,
            hooks=agent.hooks,
            answers=answers,
        )

    def converse(
        self,
        provider: Provider,
        *,
        name: str,
        system: str | None,
        messages: Sequence[Message],
        spec: OutputSpec | None,
        retries: int,
        tools: Sequence[Tool] = (),
        options: Mapping[str, Any],
        hooks: Hooks = NO_HOOKS,
        answers: Answers | None = None,
        on_end: Callable[[End], object] | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Ask until the answer validates against ``spec``, at most ``retries + 1`` times.

        Each invalid answer goes back to the model with the validation errors. Returns
        the call to await. (Not a coroutine itself: a call with no output model, no
        recorded answers and no ``on_end`` is one request, asked in a smaller frame;
        thousands of calls may be in flight.)

        ``provider`` may be any object with a ``stream`` method: one that is no
        :class:`Provider` subclass gets the defaults of one.

        Raises:
            OutputValidationError: The last answer did not validate either.
        """
        provider = as_provider(provider)
        if spec is None and answers is None and on_end is None:
            turns = tuple(messages)
            request = ProviderRequest.build(
                agent=name,
                system=system,
                prompt=turns[0].content,
                messages=turns,
                tools=tools,
                options=options,
                pre_tool_use=hooks.pre_tool_use,
                post_tool_use=hooks.post_tool_use,
            )
            return self._ask(provider, request, name, whole=False)
        return self._converse(
            provider,
            name=name,
            system=system,
            messages=messages,
            spec=spec,
            retries=retries,
            tools=tools,
            options=options,
            hooks=hooks,
            answers=answers,
            on_end=on_end,
        )

    async def _converse(
        self,
        provider: Provider,
        *,
        name: str,
        system: str | None,
        messages: Sequence[Message],
        spec: OutputSpec | None,
        retries: int,
        tools: Sequence[Tool],
        options: Mapping[str, Any],
        hooks: Hooks,
        answers: Answers | None,
        on_end: Callable[[End], object] | None,
    ) -> Any:
        turns = tuple(messages)
        prompt = turns[0].content
        attempts = retries + 1 if spec is not None else 1
        for attempt in range(1, attempts + 1):
            request = ProviderRequest.build(
                agent=name,
                system=system,
                prompt=prompt,
                messages=turns,
                output_schema=spec.schema if spec is not None else None,
                tools=tools if answers is None else answers.tools(tools),
                options=options,
                pre_tool_use=hooks.pre_tool_use,
                post_tool_use=hooks.post_tool_use,
            )
            end = answers.answer(request) if answers is not None else None
            if end is None:
                end = await self._ask(provider, request, name, whole=True)
            if on_end is not None:
                on_end(end)
            raw = end.output
            if spec is None:
                return raw
            try:
                return spec.validate(raw)
            except pydantic.ValidationError as exc:
                if attempt == attempts:
                    raise OutputValidationError(
                        f"Agent {name!r}: the output did not match {spec.name} after "
                        f"{attempts} attempt{'s' if attempts > 1 else ''}: "
                        f"{summarize_errors(exc)}. Make the prompt clearer about the format, or "
                        "raise output_retries.",
                        agent=name,
                        output=raw,
                        errors=[dict(e) for e in exc.errors(include_url=False)],
                    ) from exc
                turns = (
                    *turns,
                    Message("assistant", raw if isinstance(raw, str) else to_json(raw)),
                    Message("user", feedback(exc)),
                )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ask(
        self, provider: Provider, request: ProviderRequest, name: str, *, whole: bool
    ) -> Any:
        """One call, each event signalled (see SignalledCall): its ``End``, or its output."""
        self.site.check_budget(name, provider, request)
        await provider.turn_to_start(request)  # a replay's recorded turn
        call = SignalledCall(self.site, provider, request, name)
        try:
            async for event in call.events:
                call.event(event)
        except BaseException as exc:
            await call.aborted(exc)
            raise
        await call.close()
        end = call.ended()
        return end if whole else end.output

    async def relay(
        self, provider: Provider, request: ProviderRequest, name: str
    ) -> AsyncIterator[ProviderEvent]:
        """One call, each event signalled and streamed to the caller as it comes."""
        provider = as_provider(provider)
        self.site.check_budget(name, provider, request)
        await provider.turn_to_start(request)
        call = SignalledCall(self.site, provider, request, name)
        async with call as events:
            async for event in events:
                call.event(event)
                yield event
            call.ended()


class RunProvider(Provider):
    """The provider ``ctx.provider`` gives handler code.

    It calls the agent's provider through the run, so each call is signalled
    (``provider:start`` ... ``provider:end``, caused by the activation), counted in the
    run's metrics, recorded, and answered from the recording during a replay.

    Attributes:
        target: The agent's provider, which answers.
        model: The model of the provider behind it.
    """

    def __init__(self, calls: ModelCall, target: Provider, answers: Answers | None = None) -> None:
        self._calls = calls
        self.target = as_provider(target)
        self.model = self.target.model
        self._answers = answers

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream ``request`` through the run (a call answered before a resume, from the log)."""
        recorded = self._answers.answer(request) if self._answers is not None else None
        if recorded is not None:
            yield recorded
            return
        async for event in self._calls.relay(self.target, request, request.agent):
            yield event

    def __repr__(self) -> str:
        return f"<provider {self.target!r} through the run>"


def no_provider(name: str) -> NoProviderError:
    """The error of an agent that has a prompt but no provider anywhere."""
    return NoProviderError(
        f"Agent {name!r} has no provider: it has a prompt, so it needs a model to run "
        "on. Pass provider= to run()/run_reactive() (e.g. "
        "ScriptedProvider({...}) offline, AnthropicProvider() for Claude), or to "
        "agent(...) for this agent only.",
        agent=name,
    )
