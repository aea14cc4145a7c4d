"""Nodes that are reactor agents (from an edge-based Python definition).

In the reactive graph the agent's code runs inside the node's activation, with the
run's context (:func:`agent_work`). The edge-based executor runs each agent on its
own, as an edge-based harness would call it: a one-agent run whose state holds the
outputs so far (:func:`isolated_agent_work`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import jinja2

from migration._expressions.values import RESERVED_ROOTS
from migration._nodes.context import Writes
from migration._nodes.llm import ask
from migration._nodes.node import Skip, Work
from reactor import Agent, AgentContext, NoProviderError, TemplateError, run_reactive
from reactor.typing import Provider

__all__ = ["agent_work", "isolated_agent_work"]


def agent_work(node_agent: Agent, name: str, ctx: AgentContext) -> Work:
    """The work of an agent node inside a reactive run: guard, then run or prompt."""

    async def work(attempt: int, bindings: Mapping[str, Any]) -> tuple[Any, Writes]:
        if node_agent.when is not None and not _guard(node_agent, name, ctx):
            raise Skip
        if node_agent.run is not None:
            output = node_agent.run(ctx)
            if inspect.isawaitable(output):
                output = await output
            if node_agent.output is not None and not isinstance(output, node_agent.output):
                output = node_agent.output.model_validate(output)
        else:
            output = await _prompt(node_agent, name, ctx)
        if node_agent.on_output is not None:
            done = node_agent.on_output(ctx, output)
            if inspect.isawaitable(done):
                await done
        return output, []

    return work


def _context(name: str, ctx: AgentContext) -> dict[str, Any]:
    return {
        "state": ctx.state,
        "input": ctx.input,
        "signal": ctx.signal,
        "agent": name,
        "run_id": ctx.run_id,
    }


def _guard(node_agent: Agent, name: str, ctx: AgentContext) -> bool:
    if node_agent.when_expression is not None:
        try:
            return bool(node_agent.when_expression(_context(name, ctx)))
        except jinja2.UndefinedError as exc:
            raise TemplateError(
                f"Agent {name!r}: the when expression failed: {exc}.", agent=name
            ) from exc
    assert callable(node_agent.when)
    return bool(node_agent.when(ctx))


async def _prompt(node_agent: Agent, name: str, ctx: AgentContext) -> Any:
    provider = node_agent.provider or ctx.provider
    if provider is None:
        raise NoProviderError(
            f"Agent {name!r} has no provider: pass provider= to harness_to_reactive() or to "
            "the graph's run(), or give the agent one.",
            agent=name,
        )
    context = _context(name, ctx)
    assert node_agent.prompt_template is not None
    try:
        prompt = node_agent.prompt_template.render(context)
        system = (
            node_agent.system_template.render(context)
            if node_agent.system_template is not None
            else None
        )
    except jinja2.UndefinedError as exc:
        raise TemplateError(
            f"Agent {name!r}: the prompt uses a missing variable: {exc}.", agent=name
        ) from exc
    reply = await ask(
        provider,
        agent=name,
        prompt=prompt,
        system=system,
        output=node_agent.output,
        output_retries=node_agent.output_retries if node_agent.output is not None else 0,
        options=node_agent.options,
        tools=node_agent.tools,
        before_tool=node_agent.before_tool,
        after_tool=node_agent.after_tool,
    )
    return reply.output


def isolated_agent_work(
    node_agent: Agent,
    name: str,
    *,
    flow_input: Mapping[str, Any],
    provider: Provider | None,
) -> Work:
    """The work of an agent node in the edge-based executor: a one-agent run.

    Its state holds the outputs so far under ``outputs``, as in the reactive graph.
    """

    async def work(attempt: int, bindings: Mapping[str, Any]) -> tuple[Any, Writes]:
        outputs = {k: v for k, v in bindings.items() if k not in RESERVED_ROOTS}
        result = await run_reactive(
            node_agent.named(name),
            state={"outputs": dict(outputs)},
            input=dict(flow_input),
            provider=provider,
        )
        if result.error is not None:
            raise result.error
        if result.metrics.activations_by_agent.get(name, 0) == 0:
            raise Skip
        return result.output, []

    return work
