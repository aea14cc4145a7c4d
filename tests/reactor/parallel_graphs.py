"""Graphs of parallel agents built from plain data, for the replay property tests.

The test copies this file beside the modules it generates, so that ``reactor replay``
imports the very graphs that were recorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reactor import AgentContext, ScriptedProvider, agent, reactive


def build(spec: Sequence[Mapping[str, Any]]) -> Any:
    """One agent per item: ``kind`` (llm, async, sync), ``latency``, ``after`` (an index).

    An agent activates at the start (``after`` is ``None``) or when the agent it comes
    after writes its key; each writes its own key ``k<index>``.
    """
    agents = {}
    for index, item in enumerate(spec):
        after = item["after"]
        trigger = "harness:start" if after is None else f"state:k{after}:changed"
        options: dict[str, Any] = {"activate_on": trigger, "updates": f"k{index}"}
        if item["kind"] == "llm":
            agents[f"a{index}"] = agent(prompt=f"Step {index} of {{{{ input }}}}", **options)
        elif item["kind"] == "async":
            agents[f"a{index}"] = agent(run=_async_handler(index, item["latency"]), **options)
        else:
            agents[f"a{index}"] = agent(run=_sync_handler(index, item["latency"]), **options)
    return reactive(agents, state={f"k{index}": None for index in range(len(spec))})


def provider(spec: Sequence[Mapping[str, Any]]) -> ScriptedProvider:
    """Answers every model call, each agent after its own latency."""
    latencies = {f"a{index}": float(item["latency"]) for index, item in enumerate(spec)}
    return ScriptedProvider(default="ok", latency=lambda request: latencies[request.agent])


def _async_handler(index: int, latency: float) -> Callable[[AgentContext], Any]:
    async def handle(ctx: AgentContext) -> str:
        await asyncio.sleep(latency)
        return f"async {index}"

    return handle


def _sync_handler(index: int, latency: float) -> Callable[[AgentContext], Any]:
    def handle(ctx: AgentContext) -> str:
        time.sleep(latency)
        return f"sync {index}"

    return handle
