"""run_edge_harness(): the edge-based semantics, executed one node at a time.

This is the oracle the reactive graphs are checked against: the old kernel's
scheduler (:func:`~migration._edge.scheduler.run_scope`) over the top level of the flow,
each node's work coming from the registry (or, for a Python definition, from its
agent, run on its own as an edge-based harness would call it).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from migration._edge.scheduler import ScopeRun, body_runner, run_scope
from migration._expressions.values import binding_context
from migration._nodes.agents import isolated_agent_work
from migration._nodes.node import Work, registry_work
from migration._nodes.registry import NodeRegistry, RegistrySource, registry_of
from migration._spec.models import NodeSpec
from migration._spec.spec import FlowSource, FlowSpec
from reactor.typing import Provider

__all__ = ["check_types", "execute", "run_edge_harness", "run_edge_harness_sync"]


async def run_edge_harness(
    spec: FlowSource,
    input: Mapping[str, Any] | None = None,
    registry: RegistrySource | None = None,
    provider: Provider | None = None,
) -> dict[str, Any]:
    """Run an edge-based flow sequentially, with the old semantics; return node outputs.

    Args:
        spec: A FlowSpec (path, YAML text, mapping or model) or an edge-based Python
            definition (see :meth:`FlowSpec.load`).
        input: Overrides of the flow's default ``input`` (merged key by key).
        registry: Node types: a :class:`NodeRegistry`, or a function building one
            (called once for this run). Default: :meth:`NodeRegistry.discover`, the
            built-ins and the installed packs.
        provider: The provider LLM nodes and prompt agents run on.

    Returns:
        ``{node_id: output}`` as JSON data, in the order nodes settled; a skipped
        node's output is ``{"skipped": True, "reason": "when" | "edges"}``, a failed
        one's (``continueOnError`` or ``failFast: false``) is ``{"failed": True,
        "error": {"message": ...}, "attempts": n}``. Nodes in a ``control.foreach``
        body have no output of their own: theirs are in the foreach node's.

    Raises:
        FlowSpecError: The flow is invalid (every problem listed), or declares a node
            pack the registry does not have.
        UnknownNodeTypeError: A node's type is not in the registry.
        FlowRunError: A node failed under ``failFast`` (``.node``, ``.outputs`` so far,
            ``.state``, the node's error as ``__cause__``).
        FlowLoopError: A loop edge wanted more than ``maxIterations`` re-runs.
    """
    flow = FlowSpec.load(spec)
    return (await execute(flow, input, registry_of(registry), provider)).outputs


async def execute(
    flow: FlowSpec,
    input: Mapping[str, Any] | None,
    registry: NodeRegistry,
    provider: Provider | None,
) -> ScopeRun:
    """Run a loaded flow with the old semantics; return its outputs and final state."""
    check_types(flow, registry)
    flow_input = {**flow.input, **(input or {})}
    executor = _Executor(flow, registry, flow_input, provider)
    state = dict(flow.state.initial)
    return await run_scope(
        flow, flow.topology, executor, base=binding_context(flow_input, {}, state), state=state
    )


@dataclasses.dataclass
class _Executor:
    flow: FlowSpec
    registry: NodeRegistry
    flow_input: dict[str, Any]
    provider: Provider | None

    @property
    def fail_fast(self) -> bool:
        return self.flow.policy.fail_fast

    def node(self, node_id: str) -> NodeSpec:
        return self.flow.node(node_id)

    def work(self, node: NodeSpec) -> Work:
        if node.agent is not None:
            return isolated_agent_work(
                node.agent, node.id, flow_input=self.flow_input, provider=self.provider
            )
        body = None
        if node.id in self.flow.scopes.bodies:

            def body(bindings: Mapping[str, Any]) -> Any:
                return body_runner(self.flow, node.id, self, bindings)

        return registry_work(
            node, self.registry, flow_input=self.flow_input, provider=self.provider, body=body
        )


def check_types(flow: FlowSpec, registry: NodeRegistry) -> None:
    """Check that every node's type is registered and every declared pack is available.

    Raises:
        UnknownNodeTypeError: Naming the unknown types and the known ones.
        FlowSpecError: A pack of ``nodePacks`` is not available.
    """
    registry.require({node.id: node.type for node in flow.nodes if node.agent is None})
    registry.require_packs(flow.node_packs, flow=flow.name)


def run_edge_harness_sync(
    spec: FlowSource,
    input: Mapping[str, Any] | None = None,
    registry: RegistrySource | None = None,
    provider: Provider | None = None,
) -> dict[str, Any]:
    """:func:`run_edge_harness` for synchronous code (scripts, the CLI).

    Raises:
        RuntimeError: Called while an event loop is running (await
            ``run_edge_harness`` there).
    """
    _no_running_loop("run_edge_harness")
    return asyncio.run(run_edge_harness(spec, input, registry, provider))


def _no_running_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        f"{name}_sync() cannot be used inside a running event loop; await {name}(...) there."
    )
