"""An LLM activation with the settings of agents as objects: hooks, MCP tools, reflection.

An activation of an agent without them takes the short path
(:meth:`~reactor._prompts.modelcall.ModelCall.call_model` alone); one with ``hooks``, ``mcps``
or ``enable_reflection`` goes through :func:`session_output`, so the others never pay
for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactor._agents.agent import Agent
from reactor._agents.skills import system_with_skills
from reactor._agents.templates import render_async
from reactor._prompts.modelcall import Answers, ModelCall
from reactor._prompts.prompting import reflect
from reactor._providers.hooks import SessionInfo, call_hook

if TYPE_CHECKING:
    from reactor._providers.base import Provider
    from reactor._providers.mcp import MCPServer
    from reactor._providers.tools import Tool

__all__ = ["session_output"]

McpTools = Callable[[Sequence["MCPServer"], Mapping[str, str]], Awaitable[tuple["Tool", ...]]]


async def session_output(
    calls: ModelCall,
    agent: Agent,
    name: str,
    provider: Provider | None,
    context: Mapping[str, Any],
    answers: Answers | None,
    run_id: str,
    mcp_tools: McpTools,
) -> Any:
    """An LLM agent's output: session hooks around its MCP tools, call and reflection."""
    hooks = agent.hooks
    info = SessionInfo(name, run_id, "")
    if hooks.session_start:
        prompt = agent.prompt_template
        text = await render_async(prompt, context, agent=name, field="prompt") if prompt else ""
        info = SessionInfo(name, run_id, text)
        for hook in hooks.session_start:
            await call_hook(hook, info)
    try:
        tools = await mcp_tools(agent.mcps, agent.env) if agent.mcps else ()
        output = await calls.call_model(agent, name, provider, context, answers, tools)
        if agent.enable_reflection and provider is not None:
            output = await _reflect(calls, agent, name, provider, context, answers, output, tools)
    except Exception as exc:
        for end_hook in hooks.session_end:
            await call_hook(end_hook, info, exc)
        raise
    for end_hook in hooks.session_end:
        await call_hook(end_hook, info, output)
    return output


async def _reflect(
    calls: ModelCall,
    agent: Agent,
    name: str,
    provider: Provider,
    context: Mapping[str, Any],
    answers: Answers | None,
    output: Any,
    tools: tuple[Tool, ...],
) -> Any:
    """Ask the model to check an LLM agent's answer (``enable_reflection``)."""
    assert agent.prompt_template is not None
    template = agent.system_template
    system = None
    if template is not None:
        system = await render_async(template, context, agent=name, field="system prompt")
    ask = {
        "name": name,
        "system": system_with_skills(system, agent.skills),
        "spec": agent.output_spec,
        "retries": agent.output_retries,
        "tools": (*agent.tools, *tools),
        "options": agent.options,
        "hooks": agent.hooks,
        "answers": answers,
    }
    user = await render_async(agent.prompt_template, context, agent=name, field="prompt")
    return await reflect(calls, provider, user, output, agent.max_reflections, ask)
