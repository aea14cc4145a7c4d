"""harness_to_reactive(): an edge-based flow as a reactive graph."""

from __future__ import annotations

import warnings
from typing import Any

from migration._edge.edge import check_types
from migration._nodes.registry import RegistrySource, registry_of
from migration._reactive.flow import Flow
from migration._reactive.phase import FLOW_AGENT
from migration._spec.spec import FlowSource, FlowSpec
from reactor import CycleWarning, Reactive, reactive
from reactor._signals.diagnostics import log
from reactor.typing import Provider

__all__ = ["harness_to_reactive"]


def harness_to_reactive(
    spec: FlowSource,
    *,
    registry: RegistrySource | None = None,
    provider: Provider | None = None,
) -> Reactive:
    """Turn an edge-based flow into an equivalent reactive graph.

    The flow runs as a phase (``Run Flow``, the ``flow`` agent's) and each node as an
    agent whose every resolution is a task (``node:<id>``), as the old kernel showed
    them. Each node's agent activates on its predecessors' ``node:<id>:done``
    signals, behind a join guard that lets it run exactly once per resolution, even
    when predecessors finish concurrently; independent branches run concurrently.
    Node outputs (and skip and failure markers) are in the run's state under
    ``outputs.<node_id>``; ``result.state["outputs"]`` holds them all, and
    ``result.state["state"]`` the flow's ``state``. A ``control.foreach`` node runs
    its body inside its own activation, once per item. A node failure that stops the
    flow fails the run with a :class:`~migration.FlowRunError` in ``result.error``.

    Args:
        spec: A FlowSpec (path, YAML text, mapping or model) or an edge-based Python
            definition ``{"agents": {name: agent(...)}, "edges": [...]}``.
        registry: Node types: a :class:`~migration.NodeRegistry`, or a function
            building one (called once, for this graph). Default:
            :meth:`NodeRegistry.discover`, the built-ins and the installed packs.
        provider: The default provider of the graph's runs (LLM nodes and prompt
            agents); a run's ``provider=`` overrides it.

    Reads that only the edge-based executor's one-node-at-a-time order made safe
    (see :meth:`FlowSpec.order_warnings`) are logged as warnings.

    Raises:
        FlowSpecError: The flow is invalid (every problem listed), or declares a node
            pack the registry does not have.
        UnknownNodeTypeError: A node's type is not in the registry.
    """
    flow_spec = FlowSpec.load(spec)
    types = registry_of(registry)
    check_types(flow_spec, types)
    for warning in flow_spec.order_warnings():
        log("migration", "warning", "unordered read", flow=flow_spec.name, hint=warning)
    flow = Flow.from_spec(flow_spec, registry=types)
    agents = {FLOW_AGENT: flow.phase()}
    agented = set(flow_spec.scopes.members(None))  # the rest run inside another's step
    for node in flow_spec.nodes:
        work = node.agent if node.agent is not None else node.type
        step: dict[str, Any] = {
            "input": node.input,
            "config": node.config,
            "when": node.when,
            "policy": node.policy,
        }
        if node.id in agented:
            agents[node.id] = flow.agent(node.id, work, **step)
        else:  # run by its foreach node, or by the head of its forEach edge's part
            flow.step(node.id, work, **step)
    limits = flow.limits()
    with warnings.catch_warnings():
        # Loop edges are cycles on purpose; maxIterations bounds them.
        warnings.simplefilter("ignore", CycleWarning)
        return reactive(
            agents,
            state=flow.state,
            name=flow_spec.name,
            input=dict(flow_spec.input),
            provider=provider,
            fail_fast=True,
            max_depth=limits["max_depth"],
            max_activations=limits["max_activations"],
        )
