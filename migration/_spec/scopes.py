"""Scopes: which nodes run at the top of a flow, and which inside a ``control.foreach``.

A ``control.foreach`` node lists its ``body`` (node ids) in its input. Those nodes do
not run on their own: the foreach node runs them, once per item, as a small flow of
their own with the edges between them (loop edges included). So every node belongs
to one *scope*: the top level (``None``) or the body of one foreach node, and edges
join nodes of the same scope. Bodies may nest, up to :data:`MAX_NESTING` levels.

A ``forEach`` edge repeats, per item of its list, its target and everything
downstream of it up to the join: its *per-item part* is the target (its *head*) and
every node of the scope whose forward edges all come from the part (the nodes the
head dominates), a node with a ``forEach`` edge of its own excepted (it starts its own
part). The first node with an edge from outside the part is the join: it runs once,
after every item. In its scope the part stands as one node, its head: the edges out
of the part leave from the head there, and its nodes run inside the head's
resolution, once per item, as a small flow of their own (the edges between them, loop
edges included, a loop counting per item).

:func:`check_scopes` reports every problem of bodies and ``forEach`` edges;
:class:`Scopes` answers which nodes and edges make up each scope and each part.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Mapping, Sequence
from typing import Any

from migration._expressions.values import shorten
from migration._spec.models import FOREACH_TYPE, EdgeSpec, NodeSpec
from migration._spec.topology import RESERVED, Problem

__all__ = ["MAX_NESTING", "Scopes", "body_of", "check_scopes"]

MAX_NESTING = 8
"""How deep ``control.foreach`` bodies may nest."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def body_of(node: NodeSpec) -> tuple[str, ...]:
    """The body of a ``control.foreach`` node (its well-formed ids), else ``()``."""
    if node.type != FOREACH_TYPE:
        return ()
    body = node.input.get("body")
    if not isinstance(body, list):
        return ()
    return tuple(item for item in body if isinstance(item, str))


class Scopes:
    """The scopes of a flow whose bodies are well formed (see :func:`check_scopes`).

    Attributes:
        bodies: Each foreach node's body, in the order the body lists it.
        parent: Each body node's foreach node.
        parts: Each ``forEach`` edge's per-item part, by its head (the edge's
            target): the head, then the other nodes in declaration order.
        head: Each node of a per-item part but its head, and the head.
    """

    def __init__(self, nodes: Sequence[NodeSpec], edges: Sequence[EdgeSpec]) -> None:
        ids = {node.id for node in nodes}
        self.bodies = {
            node.id: tuple(i for i in body_of(node) if i in ids and i != node.id)
            for node in nodes
            if node.type == FOREACH_TYPE
        }
        self.parent = {member: owner for owner, body in self.bodies.items() for member in body}
        self._nodes = [node.id for node in nodes]
        self._edges = list(edges)
        self.parts: dict[str, tuple[str, ...]] = {}
        for scope in [None, *self.bodies]:
            self.parts.update(self._parts(scope))
        self.head = {m: head for head, part in self.parts.items() for m in part if m != head}

    def _parts(self, scope: str | None) -> dict[str, tuple[str, ...]]:
        """The per-item parts of the ``forEach`` edges of one scope."""
        members = [node for node in self._nodes if self.parent.get(node) == scope]
        inside = set(members)
        heads = {e.target for e in self._edges if e.for_each is not None and e.target in inside}
        predecessors: dict[str, set[str]] = {node: set() for node in members}
        for edge in self._edges:
            if edge.type == "forward" and edge.source in inside and edge.target in inside:
                predecessors[edge.target].add(edge.source)
        order = _sorted(members, predecessors)
        declared = {node: index for index, node in enumerate(members)}
        parts: dict[str, tuple[str, ...]] = {}
        for head in (node for node in order if node in heads):
            part = {head}
            for node in order[order.index(head) + 1 :]:
                if node not in heads and predecessors[node] and predecessors[node] <= part:
                    part.add(node)
            parts[head] = (head, *sorted(part - {head}, key=declared.__getitem__))
        return parts

    def scope_of(self, node: str) -> str | None:
        """The foreach node whose body ``node`` is in, or ``None`` at the top level."""
        return self.parent.get(node)

    def unit_of(self, node: str) -> str:
        """The node that stands for ``node`` in its scope: its part's head, or itself."""
        return self.head.get(node, node)

    def members(self, scope: str | None) -> list[str]:
        """The nodes that stand in a scope, in declaration order (a part by its head)."""
        return [n for n in self._nodes if self.parent.get(n) == scope and n not in self.head]

    def edges(self, scope: str | None) -> list[EdgeSpec]:
        """The edges of a scope, but those inside a per-item part."""
        return [
            e for e in self._edges if self.parent.get(e.source) == scope and not self._inside(e)
        ]

    def part_edges(self, head: str) -> list[EdgeSpec]:
        """The edges between the nodes of ``head``'s per-item part."""
        return [e for e in self._edges if self._inside(e) and self.unit_of(e.source) == head]

    def _inside(self, edge: EdgeSpec) -> bool:
        unit = self.unit_of(edge.source)
        return unit in self.parts and unit == self.unit_of(edge.target)

    def enclosing(self, node: str) -> list[str]:
        """The foreach nodes around ``node``, innermost first."""
        found: list[str] = []
        here = self.parent.get(node)
        while here is not None and len(found) <= MAX_NESTING:
            found.append(here)
            here = self.parent.get(here)
        return found


def _sorted(members: list[str], predecessors: Mapping[str, set[str]]) -> list[str]:
    """``members`` in topological order (a node in a cycle, which is an error, left out)."""
    waiting = {node: len(predecessors[node]) for node in members}
    successors: dict[str, list[str]] = {node: [] for node in members}
    for node in members:
        for source in predecessors[node]:
            successors[source].append(node)
    ready = collections.deque(node for node in members if not waiting[node])
    order: list[str] = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for target in successors[node]:
            waiting[target] -= 1
            if not waiting[target]:
                ready.append(target)
    return order


def _where(scopes: Scopes, node: str) -> str:
    owner = scopes.scope_of(node)
    return "the top level" if owner is None else f"the body of {owner!r}"


def check_scopes(nodes: Sequence[NodeSpec], edges: Sequence[EdgeSpec]) -> list[Problem]:
    """Every problem of foreach bodies and ``forEach`` edges (ids and edges checked first)."""
    problems: list[Problem] = []
    ids = {node.id for node in nodes}
    owners: dict[str, str] = {}
    for node in nodes:
        if node.type == FOREACH_TYPE:
            problems += _check_foreach(node, ids, owners)
    scopes = Scopes(nodes, edges)
    for node in nodes:
        if len(scopes.enclosing(node.id)) > MAX_NESTING:
            chain = " in ".join(repr(n) for n in [node.id, *scopes.enclosing(node.id)][:4])
            problems.append(
                (
                    f"Node {node.id!r}: foreach bodies nest more than {MAX_NESTING} deep, or "
                    f"contain each other ({chain}, ...); untangle the body: lists.",
                    node.id,
                    None,
                )
            )
            return problems
    incoming_each: dict[str, str] = {}
    for edge in edges:
        if scopes.scope_of(edge.source) != scopes.scope_of(edge.target):
            problems.append(
                (
                    f"Edge {edge.key} joins {edge.source!r} ({_where(scopes, edge.source)}) "
                    f"and {edge.target!r} ({_where(scopes, edge.target)}); edges join nodes "
                    "of the same foreach body (or two top-level nodes). Move the edge, or "
                    "the node into the body.",
                    None,
                    edge.key,
                )
            )
        if edge.for_each is None:
            continue
        if edge.type == "loop":
            problems.append(
                (f"Edge {edge.key}: forEach goes on forward edges, not loop edges.", None, edge.key)
            )
        if edge.target in incoming_each:
            problems.append(
                (
                    f"Edge {edge.key}: {edge.target!r} already runs per item of edge "
                    f"{incoming_each[edge.target]}; a node takes one forEach edge.",
                    None,
                    edge.key,
                )
            )
        incoming_each[edge.target] = edge.key
        problems += [
            (f"Edge {edge.key} forEach: {p}.", None, edge.key)
            for p in _check_name(edge.for_each.name, ids)
        ]
    return problems + _check_parts(scopes, edges, incoming_each)


def _check_parts(
    scopes: Scopes, edges: Sequence[EdgeSpec], each_edge: Mapping[str, str]
) -> list[Problem]:
    """Edges that enter a per-item part elsewhere than at its head."""
    problems: list[Problem] = []
    for edge in edges:
        head = scopes.head.get(edge.target)
        if head is None or scopes.unit_of(edge.source) == head:
            continue
        problems.append(
            (
                f"Edge {edge.key}: {edge.target!r} runs once per item, in the part of the flow "
                f"that forEach edge {each_edge.get(head, head)} repeats; an edge from outside "
                f"that part enters it at {head!r} only (which re-runs it all). Point the edge "
                f"at {head!r}, or start it inside the part.",
                None,
                edge.key,
            )
        )
    return problems


def _check_foreach(node: NodeSpec, ids: set[str], owners: dict[str, str]) -> list[Problem]:
    where = f"Node {node.id!r} ({FOREACH_TYPE})"
    data: Mapping[str, Any] = node.input
    found: list[str] = []
    body = data.get("body")
    if not isinstance(body, list) or not body or not all(isinstance(i, str) for i in body):
        found.append(
            f"input.body must list the ids of the nodes to run per item, e.g. body: "
            f"[draft, review]; got {shorten(body)}"
        )
        body = []
    for member in body:
        if member == node.id:
            found.append("its body lists the node itself; a foreach node cannot run itself")
        elif member not in ids:
            found.append(f"its body names {member!r}, which is not a node")
        elif member in owners:
            found.append(f"its body takes {member!r}, already in the body of {owners[member]!r}")
        else:
            owners[member] = node.id
    if "items" not in data and "list" not in data:
        found.append(
            'input.items is missing: the list to run the body for, e.g. items: "{{ plan.tasks }}"'
        )
    concurrency = data.get("concurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        found.append(f"input.concurrency must be a whole number >= 1, got {shorten(concurrency)}")
    name = data.get("as", "item")
    found += (
        _check_name(name, ids)
        if isinstance(name, str)
        else [f"as must be a name, got {shorten(name)}"]
    )
    return [(f"{where}: {p}.", node.id, None) for p in found]


def _check_name(name: str, ids: set[str]) -> list[str]:
    if not _NAME.match(name):
        return [f"as: {name!r} must be a name (letters, digits and '_') that bindings can read"]
    if name in ids or name in RESERVED:
        return [f"as: {name!r} is also a node id or reserved name; pick another one"]
    return []
