"""One agent activation, start to finish.

An activation runs the agent (its ``run`` handler, or its prompt through a provider),
then, in this order: ``updates`` writes the output into the store, ``on_output`` runs,
each declared ``emits`` not already emitted through ``ctx.emit`` is emitted with the
output, and ``agent:<name>:completed`` closes it. A failure emits
``agent:<name>:failed``, a cancellation ``agent:<name>:cancelled``.

The activator knows nothing of the run engine beyond :class:`RunServices`: the few
things an activation needs of the run it belongs to.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

from reactor._activation.agentrun import Activation, AgentRun
from reactor._activation.keys import ActivationKeys, idempotency_key
from reactor._activation.threads import Turn, handled
from reactor._activation.timers import Timers
from reactor._agents.asking import Asking
from reactor._agents.context import AgentContext
from reactor._agents.output import OutputSpec, check_output
from reactor._agents.spans import Span
from reactor._agents.templates import compiled, render, render_async
from reactor._prompts.modelcall import ModelCall, RunProvider
from reactor._prompts.prompting import enter_site
from reactor._prompts.session import session_output
from reactor._prompts.signalled import CallSite, since
from reactor._providers.env import set_env
from reactor._providers.hooks import NO_HOOKS
from reactor._providers.tools import set_tool_keys
from reactor._signals.bus import set_current_signal
from reactor._signals.diagnostics import log
from reactor._signals.door import check_payload
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import error_info
from reactor._signals.offloop import on_loop
from reactor._signals.sharedkeys import shared_keys
from reactor._signals.threads import Share, call_code
from stores import actor_context

if TYPE_CHECKING:
    from reactor._activation.resume import RecordedAnswers
    from reactor._agents.agent import Agent
    from reactor._providers.base import Provider
    from reactor._providers.mcp import MCPServer
    from reactor._providers.replay import ReplayProvider
    from reactor._providers.tools import Tool
    from reactor._signals.signal import Signal
    from stores import Store

__all__ = ["Activator", "RunServices", "Turn"]

_COMPLETED = shared_keys("AgentCompleted")
"""The payload of every completed activation (see ``reactor._signals.sharedkeys``)."""


class RunExtras(Protocol):
    """A run's MCP servers and child runs (``reactor._engine.subruns.RunExtras``)."""

    async def mcp_tools(
        self, servers: Sequence[MCPServer], env: Mapping[str, str]
    ) -> tuple[Tool, ...]:
        """The tools of ``servers``, each started once per run and closed when it ends."""
        ...

    async def spawn(self, graph: Any, input: Any, options: Mapping[str, Any]) -> Any:
        """Run ``graph`` as a child run (``ctx.spawn``) and return its result."""
        ...


class RunServices(CallSite, Protocol):
    """What an activation needs of the run it belongs to."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    @property
    def store(self) -> Store[Any]:
        """The run's state."""
        ...

    @property
    def input(self) -> Any:
        """The run's input."""
        ...

    @property
    def reason(self) -> str:
        """Why the run is stopping, once it is (the reason of cancellations)."""
        ...

    @property
    def scope(self) -> Mapping[str, Any]:
        """Named values the run gives its agents (``ctx.scope``)."""
        ...

    @property
    def template_scope(self) -> Mapping[str, Any]:
        """The scope as templates see it: plain data (``reactor._agents.sandbox``)."""
        ...

    @property
    def template_run_id(self) -> str:
        """The ``run_id`` templates see: the recorded run's during a replay."""
        ...

    @property
    def replay(self) -> ReplayProvider | None:
        """The provider answering every agent during a replay, if this is one."""
        ...

    @property
    def provider(self) -> Provider | None:
        """The run's default provider."""
        ...

    @property
    def asking(self) -> Asking:
        """The run's questions to people."""
        ...

    @property
    def timers(self) -> Timers:
        """The run's durable timers."""
        ...

    def release(self, activation: Activation) -> None:
        """Account for a finished activation."""
        ...

    def crashed(self, error: BaseException) -> None:
        """An activation raised what no agent's failure is: the run stops on it."""
        ...

    def failed(self, agent_run: AgentRun, exc: BaseException, signal: Signal) -> None:
        """Handle an agent's failure (``fail_fast`` stops the run)."""
        ...

    @property
    def extras(self) -> RunExtras:
        """What the run starts only when its agents ask: MCP servers, child runs."""
        ...


class Activator:
    """Runs the activations of one run, and builds what agents' code sees."""

    # One per run: slots (and a weak reference: its prompts reach it through a proxy).
    __slots__ = (
        "__weakref__",
        "_share",
        "_site",
        "calls",
        "services",
    )

    def __init__(self, services: RunServices) -> None:
        self.services = services
        self.calls = ModelCall(services)
        # What prompts in an activation reach the run through (a weak proxy: no cycle).
        self._site = cast("Activator", weakref.proxy(self))
        self._share: Share | None = None  # made when its first sync code runs

    @property
    def share(self) -> Share:
        """The run's share of the handler threads."""
        if self._share is None:
            self._share = Share(self.services.run_id)
        return self._share

    def provider_of(self, agent_run: AgentRun) -> Provider | None:
        """The provider an agent's calls go to: the replay's, its own, else the run's."""
        services = self.services
        return services.replay or agent_run.agent.provider or services.provider

    def context(
        self, agent_run: AgentRun, signal: Signal, activation: Activation | None = None
    ) -> AgentContext[Any]:
        """The context of an activation (or a guard) of ``agent_run`` on ``signal``."""
        services = self.services
        return AgentContext(
            agent_run.name,
            services.run_id,
            signal,
            services.input,
            services.store,
            self,
            activation or agent_run,
            services.scope,
            activation.batch if activation is not None else None,
        )

    def template_context(
        self, agent_run: AgentRun, signal: Signal, batch: Sequence[Signal] | None = None
    ) -> dict[str, Any]:
        """The names templates and string guards can read (``batch``: if one was delivered)."""
        services = self.services
        context = {
            **services.template_scope,
            "state": services.store.state,
            "input": services.input,
            "signal": signal,
            "agent": agent_run.name,
            "run_id": services.template_run_id,
        }
        if batch is not None:
            context["batch"] = list(batch)
        return context

    def allowed(self, agent_run: AgentRun, signal: Signal) -> bool:
        """Evaluate the agent's ``when`` guard for ``signal`` (it has one)."""
        agent = agent_run.agent
        if agent.when_expression is not None:
            context = self.template_context(agent_run, signal)
            return bool(
                render(
                    agent.when_expression, context, agent=agent_run.name, field="when expression"
                )
            )
        guard: Callable[[AgentContext[Any]], Any] = agent.when  # type: ignore[assignment]
        return bool(guard(self.context(agent_run, signal)))

    def task_context(self, activation: Activation) -> contextvars.Context:
        """The context an activation's task runs in.

        Everything the activation emits is caused by its ``agent:<name>:activated``,
        its store writes are the agent's, ``agent.prompt()`` calls in it stream through
        the run, and its tools see the agent's ``env``.
        """
        context = actor_context(activation.agent_run.actor)
        context.run(self._enter, activation)
        return context

    def _enter(self, activation: Activation) -> None:
        set_current_signal(activation.signal)
        agent_run = activation.agent_run
        agent = agent_run.agent
        set_env(agent.env)
        if not _runs_own_code(agent):
            return  # a plain prompt: no code of its own calls agent.prompt() or a tool
        if activation.answers is None:
            # Nothing here may refer to the activation, whose task holds this context (a
            # cycle would outlive the run). A pair per activation, not a table per run
            # of one per agent: it lives as long as the activation.
            enter_site((self._site, agent_run))
        else:
            enter_site((self._site, (agent_run, activation.answers)))
        # Its tool calls get the activation's keys.
        run_id = self.services.template_run_id
        seq = activation.trigger.seq
        set_tool_keys(ActivationKeys(run_id, agent_run.name, seq, self._site))

    # -- what agent.prompt() needs of the run (reactor._prompts.prompting.PromptSite) -------

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.services.run_id

    def prompt_provider(self, key: object, own: Provider | None) -> Provider | None:
        """A prompt's provider: the replay's, the prompted agent's, else the activation's."""
        return self.services.replay or own or self.provider_of(_owner(key)[0])

    def prompt_answers(self, key: object) -> RecordedAnswers | None:
        """A resumed activation's recorded answers."""
        return _owner(key)[1]

    async def mcp_tools(
        self, servers: Sequence[MCPServer], env: Mapping[str, str]
    ) -> tuple[Tool, ...]:
        """The tools of ``servers``, started once per run."""
        return await self.services.extras.mcp_tools(servers, env)

    async def activate(self, activation: Activation) -> None:
        """Run one activation (in its :meth:`task_context`); raises only cancellation.

        Its frame waits for as long as the activation does (thousands may be in
        flight): what it needs only now and then is found in helpers, not kept here.
        """
        activation.started = True
        agent_run = activation.agent_run
        services = self.services
        agent = agent_run.agent
        started = time.perf_counter()
        # A prompt agent's code (on_output) may never run: its context waits until it does.
        ctx: AgentContext[Any] | None = None
        try:
            if agent.run is not None:  # called here, not in a helper: a coroutine frame fewer
                ctx = self.context(agent_run, activation.trigger, activation)
                output = await self._handler(activation, ctx)
                output = _handler_output(agent, output, agent_run.name)
            else:
                output = await self._answer(activation)
            if agent.updates is not None:
                services.store.set(agent.updates, OutputSpec.state_value(output))
            if agent.on_output is not None:
                ctx = ctx or self.context(agent_run, activation.trigger, activation)
                await self._on_output(agent_run, ctx, output)
            self._complete(agent_run, ctx, output, started)
        except asyncio.CancelledError:
            self._cancelled(agent_run, started)
            raise
        except Exception as exc:
            self._failed(agent_run, exc, started)
        except BaseException as exc:  # not an agent's failure (an interrupt): the run stops
            services.crashed(exc)
            raise
        finally:
            services.release(activation)

    def _handler(self, activation: Activation, ctx: AgentContext[Any]) -> Awaitable[Any]:
        """The call of the agent's handler to await.

        An async handler's own coroutine (no frame between it and the activation's),
        unless a replay holds it to its recorded turn; a sync one runs in a thread.
        """
        agent_run = activation.agent_run
        run = agent_run.agent.run
        assert run is not None
        replay = self.services.replay  # a replayed handler finishes in its recorded turn
        turn = (
            replay.completion_turn(agent_run.name, activation.index) if replay is not None else None
        )
        if turn is None and agent_run.run_is_async():
            return run(ctx)  # type: ignore[no-any-return]  # a coroutine: checked just above
        return handled(run, ctx, turn, self.share)

    def _on_output(
        self, agent_run: AgentRun, ctx: AgentContext[Any], output: Any
    ) -> Awaitable[None]:
        """The call of the agent's ``on_output`` to await."""
        on_output = agent_run.agent.on_output
        assert on_output is not None
        return call_code(
            on_output, ctx, output, agent=agent_run.name, what="on_output", share=self.share
        )

    def _failed(self, agent_run: AgentRun, exc: Exception, started: float) -> None:
        """Signal the activation's failure; the run decides what follows."""
        name = agent_run.name
        services = self.services
        failure = services.bus.emit(
            agent_run.failed,
            {"agent": name, "error": error_info(exc), "duration_ms": since(started)},
            source=name,
        )
        services.failed(agent_run, exc, failure)

    def _answer(self, activation: Activation) -> Awaitable[Any]:
        """The output of an agent without a handler: a person's answer, or its model's.

        Returns the call to await, its templates rendered now. (Not a coroutine itself:
        thousands of calls may be in flight, and the template names are not kept while
        they wait.)
        """
        agent_run = activation.agent_run
        agent = agent_run.agent
        name = agent_run.name
        context = self.template_context(agent_run, activation.trigger, activation.batch)
        if agent.ask_template is not None:
            return self._ask_person(activation, context)
        provider = self.provider_of(agent_run)
        if agent.hooks is not NO_HOOKS or agent.mcps or agent.enable_reflection:
            services = self.services
            return session_output(
                self.calls,
                agent,
                name,
                provider,
                context,
                activation.answers,
                services.run_id,
                services.extras.mcp_tools,
            )
        return self.calls.call_model(agent, name, provider, context, activation.answers)

    async def _ask_person(self, activation: Activation, context: dict[str, Any]) -> Any:
        """The answer of a person to an agent's ``ask`` question, rendered over ``context``."""
        agent = activation.agent_run.agent
        assert agent.ask_template is not None
        name = activation.agent_run.name
        question = await render_async(agent.ask_template, context, agent=name, field="ask")
        return await self._ask(activation, question, agent.choices, agent.output)

    def _complete(
        self, agent_run: AgentRun, ctx: AgentContext[Any] | None, output: Any, started: float
    ) -> None:
        """Emit the declared ``emits`` the code did not emit itself, then ``completed``."""
        bus = self.services.bus
        name = agent_run.name
        emitted = ctx.emitted if ctx is not None else None
        for signal_name in agent_run.agent.emits:
            if emitted is None or signal_name not in emitted:
                bus.emit(signal_name, output, source=name)
        agent_run.last_output = output
        payload = _COMPLETED()
        payload["agent"] = name
        payload["output"] = output
        payload["duration_ms"] = since(started)
        bus.emit(agent_run.completed, payload, source=name)

    def _cancelled(self, agent_run: AgentRun, started: float) -> None:
        name = agent_run.name
        self.services.bus.emit(
            agent_run.cancelled,
            {
                "agent": name,
                "reason": self.services.reason or "cancelled",
                "duration_ms": since(started),
            },
            source=name,
        )

    def context_provider(self, ctx: AgentContext[Any], key: object) -> Provider | None:
        """A provider for handler code: calls stream through the run, as signals."""
        agent_run, answers = _owner(key)
        target = self.provider_of(agent_run)
        return None if target is None else RunProvider(self.calls, target, answers)

    async def context_spawn(
        self, ctx: AgentContext[Any], graph: Any, input: Any, options: Mapping[str, Any]
    ) -> Any:
        """Run a child graph (``ctx.spawn``)."""
        return await self.services.extras.spawn(graph, input, options)

    async def context_ask(
        self,
        ctx: AgentContext[Any],
        key: object,
        question: str,
        choices: Sequence[str] | None,
        output: Any,
        timeout: float | None,  # noqa: ASYNC109 - ctx.ask's
    ) -> Any:
        """``ctx.ask``: render the question over the state, ask, wait for the answer."""
        agent_run, _ = _owner(key)
        context = self.template_context(agent_run, ctx.signal)
        template = compiled(question, agent_run.name)
        text = await render_async(template, context, agent=ctx.agent, field="ask")
        activation = key if isinstance(key, Activation) else None
        return await self._ask(activation, text, choices, output, timeout, agent_run.name)

    async def _ask(
        self,
        activation: Activation | None,
        question: str,
        choices: Sequence[str] | None,
        output: Any,
        timeout: float | None = None,  # noqa: ASYNC109 - ctx.ask's
        agent: str | None = None,
    ) -> Any:
        answers = activation.answers if activation is not None else None
        name = agent or (activation.agent_run.name if activation is not None else "agent")
        return await self.services.asking.ask(
            name,
            question,
            choices=choices,
            output=output,
            timeout=timeout,
            recorded=answers.next_prompt() if answers is not None else None,
        )

    async def context_receive(
        self,
        ctx: AgentContext[Any],
        key: object,
        timeout: float | None,  # noqa: ASYNC109 - ctx.receive's
    ) -> Any:
        """``ctx.receive``: the next message in the agent's mailbox, waiting for one."""
        agent_run, _ = _owner(key)
        return await agent_run.mailbox().get(timeout)

    async def context_sleep(
        self, ctx: AgentContext[Any], key: object, until: datetime, nth: int
    ) -> None:
        """``ctx.sleep`` / ``ctx.sleep_until``: a durable timer (``reactor._activation.timers``)."""
        await self.services.timers.sleep(ctx.agent, ctx.signal.seq, nth, until)

    def context_key(self, ctx: AgentContext[Any], label: str) -> str:
        """``ctx.idempotency_key``: from the run, the agent, its trigger's seq, the label."""
        return idempotency_key(self.services.template_run_id, ctx.agent, ctx.signal.seq, label)

    def context_span(self, ctx: AgentContext[Any], kind: str, name: str) -> Span:
        """``ctx.phase`` / ``ctx.task``."""
        return Span(self.services.bus, "phase" if kind == "phase" else "task", name, ctx.agent)

    def context_emit(self, ctx: AgentContext[Any], key: object, name: str, payload: Any) -> Signal:
        """Emit from an agent's code (``ctx.emit``), noting names it did not declare."""
        off = on_loop()
        if off is not None:  # from a handler's worker thread: emit on the run's loop
            return off.call(self.context_emit, ctx, key, name, payload)
        agent_run, _ = _owner(key)
        if name in agent_run.agent.emits:
            if ctx.emitted is None:
                ctx.emitted = set()
            ctx.emitted.add(name)
        elif agent_run.undeclared is None or name not in agent_run.undeclared:
            if agent_run.undeclared is None:
                agent_run.undeclared = set()
            agent_run.undeclared.add(name)
            log(
                "reactor.run",
                "warning",
                "undeclared emit",
                agent=ctx.agent,
                signal=name,
                hint=f"add {name!r} to the agent's emits=[...] so the graph knows about it",
            )
        check_payload(payload, "payload")
        return self.services.bus.emit(name, freeze_payload(payload), source=ctx.agent)


def _handler_output(agent: Agent, output: Any, name: str) -> Any:
    """What a handler returned, as the log keeps it: a frozen copy, checked."""
    # What a handler returns is its own: the log gets a copy nobody can change.
    output = freeze_payload(output)
    check_payload(output, "output")
    if agent.output_spec is not None:
        output = check_output(agent.output_spec, output, name)
    return output


def _runs_own_code(agent: Agent) -> bool:
    """Whether code of the agent's own runs in its activations.

    A handler, ``on_output``, tools, hooks, MCP tools or reflection: any of them may
    call ``agent.prompt()`` or a tool, which read the activation's site and keys.
    """
    return (
        agent.run is not None
        or agent.on_output is not None
        or bool(agent.tools)
        or bool(agent.mcps)
        or agent.hooks is not NO_HOOKS
        or agent.enable_reflection
    )


def _owner(key: object) -> tuple[AgentRun, RecordedAnswers | None]:
    """The agent (and a resumed activation's recorded answers) behind a context's key."""
    if isinstance(key, Activation):
        return key.agent_run, key.answers
    if isinstance(key, tuple):
        return key  # (agent_run, answers) of a resumed activation
    assert isinstance(key, AgentRun)
    return key, None
