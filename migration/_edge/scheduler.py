"""The old kernel's scheduler: the nodes of one scope, settled one at a time.

It is written to be read, because it is the reference the reactive graphs are
checked against: repeatedly take the first node in topological order whose incoming
edges are all resolved, settle it (run, skip or fail), resolve its outgoing edges,
and apply the loop edges whose body has settled.

Loops: when a loop edge's ``when`` holds after its source settles, the edge asks to
re-run its target. The request waits until every node of its body (the target and
everything downstream of it) has settled in the current pass; then the body is
re-opened (its nodes and their outgoing edges become unresolved again) and the target
runs again, as if a fired edge pointed at it. Requests are applied in the order they
were made, and a request fails with :class:`~migration.FlowLoopError` when its edge
has already fired ``maxIterations`` times.

:func:`run_scope` runs the top level of a flow (the edge-based executor), and, once
per item (in both executors), the body of a ``control.foreach`` node and the per-item
part of a ``forEach`` edge: there, the part is one node, its head, whose resolution
runs the part's nodes per item (:func:`~migration._nodes.each.settle_part`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from migration._expressions.values import apply_writes
from migration._nodes.context import BodyRun, BodyRunner, Writes
from migration._nodes.each import settle_part
from migration._nodes.node import Outcome, Work, resolve_edges, settle, stop_error
from migration._spec.models import EdgeSpec, NodeSpec
from migration._spec.spec import FlowSpec
from migration._spec.topology import Topology

__all__ = ["Executor", "ScopeRun", "body_runner", "part_runner", "run_scope", "settle_unit"]


class Executor(Protocol):
    """What running a scope needs from the executor around it."""

    @property
    def fail_fast(self) -> bool:
        """The flow's ``policy.failFast``."""

    def node(self, node_id: str) -> NodeSpec:
        """The node with ``node_id``."""

    def work(self, node: NodeSpec) -> Work:
        """The work of ``node`` (its ``control.foreach`` body wired in, if it has one)."""


@dataclasses.dataclass
class ScopeRun:
    """What a scope's run left: its nodes' outputs, the state, the writes made."""

    outputs: dict[str, Any]
    state: dict[str, Any]
    writes: Writes


async def run_scope(
    flow: FlowSpec,
    topology: Topology[EdgeSpec],
    executor: Executor,
    *,
    base: Mapping[str, Any],
    state: Mapping[str, Any],
    variables: Mapping[str, Any] | None = None,
) -> ScopeRun:
    """Settle the nodes of a scope one at a time, with the old semantics.

    Args:
        flow: The (checked) flow, for its structure (the executor gives the nodes).
        topology: The scope's: the top level's, a foreach node's body's, or a
            ``forEach`` edge's per-item part's.
        executor: Gives each node's work.
        base: The binding context around the scope (``flow.input``, and for a body
            the outputs around its foreach node).
        state: The flow's state when the scope starts.
        variables: Names bound for the scope (a foreach item, by its ``as`` name).

    Raises:
        FlowRunError: A node failed under ``failFast`` (``.node``, ``.outputs`` of
            the scope so far, ``.state``; the node's error as ``__cause__``).
        FlowLoopError: A loop edge wanted more than ``maxIterations`` re-runs.
    """
    outputs: dict[str, Any] = {}
    current = dict(state)
    writes: Writes = []
    done: set[str] = set()
    edges: dict[str, bool] = {}  # forward edges resolved in the current pass: fired?
    reopened: set[str] = set()  # loop targets whose body was re-opened
    counts: dict[str, int] = {}  # how often each loop edge fired
    requests: list[EdgeSpec] = []  # loop edges waiting for their body to settle

    def context() -> dict[str, Any]:
        return {**base, **outputs, **(variables or {}), "state": current}

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
            return ScopeRun(outputs, current, writes)
        node = executor.node(node_id)
        incoming = topology.incoming[node_id]
        fired = node_id in reopened or not incoming or any(edges[e.key] for e in incoming)
        reopened.discard(node_id)
        outcome = await settle_unit(flow, node, topology, executor, fired=fired, bindings=context())
        outputs.update(outcome.recorded(node_id))
        current = apply_writes(current, outcome.writes)
        writes += outcome.writes
        if outcome.stop:
            error, cause = stop_error(node, outcome, outputs, current)
            raise error from cause
        done.add(node_id)
        fired_edges, loops = resolve_edges(node_id, topology, context(), counts, outputs)
        edges.update(fired_edges)
        for edge in loops:
            counts[edge.key] = counts.get(edge.key, 0) + 1
            requests.append(edge)
        _apply_settled(topology, requests, done, edges, reopened)


def _apply_settled(
    topology: Topology[EdgeSpec],
    requests: list[EdgeSpec],
    done: set[str],
    edges: dict[str, bool],
    reopened: set[str],
) -> None:
    """Re-open the body of each loop request whose body has settled, in order."""
    applied = True
    while applied:
        applied = False
        for request in requests:
            body = topology.body[request.target]
            if body <= done:
                requests[:] = [r for r in requests if r.target != request.target]
                done.difference_update(body)
                for member in body:
                    for edge in topology.outgoing[member]:
                        edges.pop(edge.key, None)
                reopened.add(request.target)
                applied = True
                break


async def settle_unit(
    flow: FlowSpec,
    node: NodeSpec,
    topology: Topology[EdgeSpec],
    executor: Executor,
    *,
    fired: bool,
    bindings: Mapping[str, Any],
) -> Outcome:
    """Settle a node of a scope: itself, or, for a ``forEach`` edge's head, its part."""
    each = next((e.for_each for e in topology.incoming[node.id] if e.for_each is not None), None)
    if each is None:
        work = executor.work(node)
        return await settle(
            node, fired=fired, bindings=bindings, work=work, fail_fast=executor.fail_fast
        )
    return await settle_part(
        node,
        flow.scopes.parts[node.id],
        fired=fired,
        bindings=bindings,
        each=each,
        run=part_runner(flow, node.id, executor, bindings),
        fail_fast=executor.fail_fast,
    )


def body_runner(
    flow: FlowSpec, container: str, executor: Executor, bindings: Mapping[str, Any]
) -> BodyRunner:
    """The runner of ``container``'s body, for a node running with ``bindings``."""
    return _runner(flow, flow.scope_topology(container), executor, bindings)


def part_runner(
    flow: FlowSpec, head: str, executor: Executor, bindings: Mapping[str, Any]
) -> BodyRunner:
    """The runner of the per-item part of the ``forEach`` edge into ``head``."""
    return _runner(flow, flow.part_topology(head), executor, bindings)


def _runner(
    flow: FlowSpec,
    topology: Topology[EdgeSpec],
    executor: Executor,
    bindings: Mapping[str, Any],
) -> BodyRunner:
    base = {key: value for key, value in bindings.items() if key != "state"}

    async def run(variables: Mapping[str, Any], state: Mapping[str, Any]) -> BodyRun:
        result = await run_scope(
            flow, topology, executor, base=base, state=state, variables=variables
        )
        return BodyRun(result.outputs, result.writes)

    return run
