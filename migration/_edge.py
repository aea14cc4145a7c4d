"""run_edge_harness(): the edge-based semantics, executed one node at a time.

This is the oracle the reactive graphs are checked against, so it is written to be
read: repeatedly take the first node in topological order whose incoming edges are
all resolved, settle it (run, skip or fail), resolve its outgoing edges, and apply
the loop edges whose body has settled.

Loops: when a loop edge's ``when`` holds after its source settles, the edge asks to
re-run its target. The request waits until every node of its body (the target and
everything downstream of it) has settled in the current pass; then the body is
re-opened (its nodes and their outgoing edges become unresolved again) and the target
runs again, as if a fired edge pointed at it. Requests are applied in the order they
were made, and a request fails the run with :class:`~migration.FlowLoopError` when its
edge has already fired ``maxIterations`` times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from migration._agents import isolated_agent_work
from migration._bindings import binding_context
from migration._errors import FlowRunError
from migration._node import Outcome, Work, registry_work, resolve_edges, settle
from migration._registry import NodeRegistry
from migration._spec import EdgeSpec, FlowSource, FlowSpec, NodeSpec
from reactor.typing import Provider

__all__ = ["check_types", "failure_message", "run_edge_harness", "run_edge_harness_sync"]


async def run_edge_harness(
    spec: FlowSource,
    input: Mapping[str, Any] | None = None,
    registry: NodeRegistry | None = None,
    provider: Provider | None = None,
) -> dict[str, Any]:
    """Run an edge-based flow sequentially, with the old semantics; return node outputs.

    Args:
        spec: A FlowSpec (path, YAML text, mapping or model) or an edge-based Python
            definition (see :meth:`FlowSpec.load`).
        input: Overrides of the flow's default ``input`` (merged key by key).
        registry: Node types (default: a new :class:`NodeRegistry`, the built-ins).
        provider: The provider LLM nodes and prompt agents run on.

    Returns:
        ``{node_id: output}`` as JSON data, in the order nodes settled; a skipped
        node's output is ``{"skipped": True, "reason": "when" | "edges"}``, a failed
        one's (``continueOnError`` or ``failFast: false``) is ``{"failed": True,
        "error": {"message": ...}, "attempts": n}``.

    Raises:
        FlowSpecError: The flow is invalid (every problem listed).
        UnknownNodeTypeError: A node's type is not in the registry.
        FlowRunError: A node failed under ``failFast`` (``.node``, ``.outputs`` so far,
            the node's error as ``__cause__``).
        FlowLoopError: A loop edge wanted more than ``maxIterations`` re-runs.
    """
    flow = FlowSpec.load(spec)
    registry = registry if registry is not None else NodeRegistry()
    check_types(flow, registry)
    topology = flow.topology
    flow_input = {**flow.input, **(input or {})}
    outputs: dict[str, Any] = {}
    done: set[str] = set()
    edges: dict[str, bool] = {}  # forward edges resolved in the current pass: fired?
    reopened: set[str] = set()  # loop targets whose body was re-opened
    counts: dict[str, int] = {}  # how often each loop edge fired
    requests: list[EdgeSpec] = []  # loop edges waiting for their body to settle
    while True:
        node_id = next(
            (
                n
                for n in topology.order
                if n not in done and all(e.key in edges for e in topology.incoming[n])
            ),
            None,
        )
        if node_id is None:
            return outputs
        node = flow.node(node_id)
        incoming = topology.incoming[node_id]
        fired = node_id in reopened or not incoming or any(edges[e.key] for e in incoming)
        reopened.discard(node_id)
        bindings = binding_context(flow_input, outputs)
        outcome = await settle(
            node,
            fired=fired,
            bindings=bindings,
            work=_work(node, registry, flow_input, bindings, outputs, provider),
            fail_fast=flow.policy.fail_fast,
        )
        outputs[node_id] = outcome.output
        if outcome.stop:
            raise FlowRunError(
                failure_message(node, outcome), node=node_id, outputs=outputs
            ) from outcome.error
        done.add(node_id)
        after = binding_context(flow_input, outputs)
        fired_edges, loops = resolve_edges(node_id, topology, after, counts, outputs)
        edges.update(fired_edges)
        for edge in loops:
            counts[edge.key] = counts.get(edge.key, 0) + 1
            requests.append(edge)
        _apply_settled(flow, requests, done, edges, reopened)


def _apply_settled(
    flow: FlowSpec,
    requests: list[EdgeSpec],
    done: set[str],
    edges: dict[str, bool],
    reopened: set[str],
) -> None:
    """Re-open the body of each loop request whose body has settled, in order."""
    body_of = flow.topology.body
    applied = True
    while applied:
        applied = False
        for request in requests:
            body = body_of[request.target]
            if body <= done:
                requests[:] = [r for r in requests if r.target != request.target]
                done.difference_update(body)
                for edge in flow.edges:
                    if edge.type == "forward" and edge.source in body:
                        edges.pop(edge.key, None)
                reopened.add(request.target)
                applied = True
                break


def _work(
    node: NodeSpec,
    registry: NodeRegistry,
    flow_input: Mapping[str, Any],
    bindings: Mapping[str, Any],
    outputs: Mapping[str, Any],
    provider: Provider | None,
) -> Work:
    if node.agent is not None:
        return isolated_agent_work(
            node.agent, node.id, flow_input=flow_input, outputs=outputs, provider=provider
        )
    return registry_work(
        node, registry, flow_input=flow_input, bindings=bindings, provider=provider
    )


def check_types(flow: FlowSpec, registry: NodeRegistry) -> None:
    """Check that every node's type is registered (agent nodes need none).

    Raises:
        UnknownNodeTypeError: Naming the unknown types and the known ones.
    """
    registry.require({node.id: node.type for node in flow.nodes if node.agent is None})


def failure_message(node: NodeSpec, outcome: Outcome) -> str:
    """Why the flow stopped at ``node``, and how to let it continue."""
    error = outcome.error
    attempts = outcome.output.get("attempts", 1) if isinstance(outcome.output, dict) else 1
    plural = "s" if attempts != 1 else ""
    reason = f"{type(error).__name__}: {str(error).rstrip('.')}"
    return (
        f"Node {node.id!r} ({node.type}) failed after {attempts} attempt{plural}: {reason}. "
        "The flow stopped (policy.failFast); set policy.continueOnError on the node, or "
        "failFast: false on the flow, to record the failure and go on."
    )


def run_edge_harness_sync(
    spec: FlowSource,
    input: Mapping[str, Any] | None = None,
    registry: NodeRegistry | None = None,
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
