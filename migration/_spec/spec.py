"""FlowSpec: the edge-based flow format being migrated from, loaded and checked.

A FlowSpec file has a ``flow:`` header (alias ``workflow:``) with ``name``,
``version``, ``description``, ``input``, ``policy.failFast``, ``nodePacks`` and
``state.initial``, then ``nodes:`` and ``edges:``. :meth:`FlowSpec.load` reads it
from a path, YAML text or a mapping, and also accepts an edge-based Python
definition ``{"agents": {...}, "edges": [...]}``. Every problem is reported at once
in a :class:`~migration.FlowSpecError`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

import pydantic
from pydantic import Field

from migration._expressions.bindings import bound_nodes, check_bindings
from migration._expressions.errors import FlowSpecError
from migration._expressions.when import check_when, when_roots
from migration._spec.load import messages, parse_definition, parse_mapping, read_source
from migration._spec.models import (
    EdgeSpec,
    FlowPolicy,
    Model,
    NodeSpec,
    StateSpec,
)
from migration._spec.scopes import Scopes, check_scopes
from migration._spec.topology import Problem, Topology, check_topology, cycle_closers

__all__ = ["FlowSource", "FlowSpec"]


class FlowSpec(Model):
    """An edge-based flow: a header, nodes, and the edges between them.

    Build one with :meth:`load`, which checks everything and reports every problem at
    once; constructing it directly checks fields only.
    """

    name: str = "flow"
    version: int | float | str = 1
    description: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    policy: FlowPolicy = FlowPolicy()
    node_packs: tuple[str, ...] = Field(default=(), alias="nodePacks")
    state: StateSpec = StateSpec()
    nodes: tuple[NodeSpec, ...] = ()
    edges: tuple[EdgeSpec, ...] = ()

    @pydantic.field_validator("edges")
    @classmethod
    def _implied_loops(cls, edges: tuple[EdgeSpec, ...]) -> tuple[EdgeSpec, ...]:
        """An edge with ``maxIterations`` and no ``type`` that closes a cycle is a loop edge.

        The kernel's later executor knew loop edges by ``maxIterations`` alone (it had
        no ``type``), so flows written for it close their loops that way.
        """
        candidates = [
            e.type == "forward"
            and "type" not in e.model_fields_set
            and e.max_iterations is not None
            for e in edges
        ]
        if not any(candidates):
            return edges
        kept = [i for i, e in enumerate(edges) if e.type == "forward"]
        closing = {
            kept[i] for i in cycle_closers([(edges[i].source, edges[i].target) for i in kept])
        }
        return tuple(
            e.model_copy(update={"type": "loop"}) if candidates[i] and i in closing else e
            for i, e in enumerate(edges)
        )

    @functools.cached_property
    def scopes(self) -> Scopes:
        """Which nodes run at the top level and which in a ``control.foreach`` body."""
        return Scopes(self.nodes, self.edges)

    @functools.cached_property
    def topology(self) -> Topology[EdgeSpec]:
        """The order, joins and loop bodies of the top-level nodes (call :meth:`check` first)."""
        return self.scope_topology(None)

    def scope_topology(self, scope: str | None) -> Topology[EdgeSpec]:
        """The topology of a scope: the top level (``None``) or a foreach node's body.

        A ``forEach`` edge's per-item part is one node there, its head.
        """
        cache = self._topologies
        if scope not in cache:
            members, edges = self.scopes.members(scope), self.scopes.edges(scope)
            cache[scope] = Topology(members, edges, self.scopes.head)
        return cache[scope]

    def part_topology(self, head: str) -> Topology[EdgeSpec]:
        """The topology of the per-item part of the ``forEach`` edge into ``head``."""
        cache = self._parts
        if head not in cache:
            cache[head] = Topology(self.scopes.parts[head], self.scopes.part_edges(head))
        return cache[head]

    @functools.cached_property
    def _topologies(self) -> dict[str | None, Topology[EdgeSpec]]:
        return {}

    @functools.cached_property
    def _parts(self) -> dict[str, Topology[EdgeSpec]]:
        return {}

    @functools.cached_property
    def _by_id(self) -> dict[str, NodeSpec]:
        return {node.id: node for node in self.nodes}

    def node(self, node_id: str) -> NodeSpec:
        """The node with ``node_id``.

        Raises:
            KeyError: There is no such node.
        """
        return self._by_id[node_id]

    @property
    def has_loops(self) -> bool:
        """Whether the flow has loop edges."""
        return any(edge.type == "loop" for edge in self.edges)

    def order_warnings(self) -> list[str]:
        """Reads of node outputs that only the edge-based executor's order made safe.

        The edge-based executor ran one node at a time in topological order, so a
        node could read the output of a node it has no path from. The reactive graph
        runs independent branches concurrently, so such a read (in an input binding,
        a node's ``when``, or an edge's ``when`` about its source) may see the output
        or not. Each warning names the read and the edge that would order it. Nodes
        in a foreach body run one after another, so only their reads of nodes
        outside the body count, against the top-level foreach node around them.
        """
        found: list[str] = []
        each_reads: dict[str, set[str]] = {}  # a forEach's list is read by its target
        for edge in self.edges:
            if edge.for_each is not None:
                each_reads[edge.target] = bound_nodes(edge.for_each.items)
        for node in self.nodes:
            reads = bound_nodes(node.input) | when_roots(node.when) | each_reads.get(node.id, set())
            top, safe = self._reader(node.id)
            for read in sorted(r for r in reads & self._by_id.keys() if not self._safe(r, safe)):
                where = "it" if top == node.id else f"its foreach node {top!r}"
                found.append(
                    f"Node {node.id!r} reads {read!r}, which is not upstream of {where}: the "
                    f"reactive graph may run them in either order. Add an edge {read}->{top} "
                    f"if {node.id!r} needs that output."
                )
        for edge in self.edges:
            top, safe = self._reader(edge.source)
            roots = when_roots(edge.when) & self._by_id.keys()
            for read in sorted(r for r in roots if not self._safe(r, safe)):
                where = repr(edge.source) if top == edge.source else f"its foreach node {top!r}"
                found.append(
                    f"Edge {edge.key} decides on {read!r}, which is not upstream of {where}: "
                    "the reactive graph may settle them in either order. Add an edge "
                    f"{read}->{top} if the decision needs it."
                )
        return found

    def _safe(self, read: str, safe: set[str]) -> bool:
        """Whether reading ``read`` is ordered: it, or the head of its part, is safe."""
        return read in safe or self.scopes.unit_of(read) in safe

    def _reader(self, node: str) -> tuple[str, set[str]]:
        """The top-level node a read is made from, and the nodes it may safely read."""
        scopes = self.scopes
        enclosing = scopes.enclosing(node)
        top = scopes.unit_of(enclosing[-1] if enclosing else node)
        safe = set(self.topology.upstream(top)) | {top, node}
        safe |= set(scopes.parts.get(scopes.unit_of(node), ()))  # a part runs in order
        for owner in enclosing:  # and so do the bodies around it, and their parts
            safe |= set(scopes.bodies[owner]) | set(scopes.parts.get(scopes.unit_of(owner), ()))
        return top, safe

    def check(self) -> FlowSpec:
        """Check ids, bindings, conditions, edges and foreach bodies; return ``self``.

        Raises:
            FlowSpecError: Every problem found, each naming its node or edge.
        """
        raise_problems(self._problems(), self.name)
        return self

    def _problems(self) -> list[Problem]:
        problems = check_topology([n.id for n in self.nodes], self.edges)
        problems += check_scopes(self.nodes, self.edges)
        for node in self.nodes:
            where = f"Node {node.id!r}"
            problems.extend(
                (p, node.id, None) for p in check_bindings(node.input, where, key="input")
            )
            if node.when is not None:
                problems.extend((p, node.id, None) for p in check_when(node.when, f"{where} when"))
        for edge in self.edges:
            if edge.when is not None:
                found = check_when(edge.when, f"Edge {edge.key} when")
                problems.extend((p, None, edge.key) for p in found)
            if edge.for_each is not None:
                found = check_bindings(edge.for_each.items, f"Edge {edge.key} forEach.in")
                problems.extend((p, None, edge.key) for p in found)
        return problems

    @classmethod
    def load(cls, source: FlowSource) -> FlowSpec:
        """Load and check a flow.

        Args:
            source: A ``FlowSpec``; a path to a YAML file; YAML text; a mapping in
                the file's shape (``flow:``/``workflow:``, ``nodes:``, ``edges:``) or
                flat (``name``, ``nodes``, ``edges``, as :meth:`model_dump` gives);
                or an edge-based Python definition ``{"agents": {name: agent(...)},
                "edges": [...]}`` (optional ``name``, ``input``, ``policy`` and
                ``policies: {name: {...}}``). Files named by LLM nodes
                (``outputSchemaFile``, ``promptFile``) are read relative to the flow
                file (to the current folder for text and mappings).

        Raises:
            FlowSpecError: Every problem found (a file that is not UTF-8, or too
                large, too deep or alias-bombed YAML included).
            FileNotFoundError: ``source`` names a file that does not exist.
        """
        if isinstance(source, FlowSpec):
            return source.check()
        if not isinstance(source, Mapping | str | os.PathLike):
            raise TypeError(
                f"Cannot load a flow from {type(source).__name__}: give a path, YAML text, a "
                "mapping, a FlowSpec, or {'agents': {...}, 'edges': [...]}."
            )
        data, base = read_source(source)
        parsed = parse_definition(data) if "agents" in data else parse_mapping(data, base)
        try:
            spec = FlowSpec.model_validate(parsed.fields)
        except pydantic.ValidationError as exc:
            found = [(f"flow: {m}", None, None) for m in messages(exc)]
            raise_problems([*parsed.problems, *found], parsed.name)
            raise AssertionError("unreachable") from None  # pragma: no cover
        raise_problems([*parsed.problems, *spec._problems()], spec.name)
        return spec


FlowSource = FlowSpec | Mapping[str, Any] | str | os.PathLike[str]
"""What :meth:`FlowSpec.load` (and so every function of the package) accepts."""


def raise_problems(problems: list[Problem], flow: str | None) -> None:
    """Raise one :class:`FlowSpecError` listing ``problems``, if there are any."""
    if problems:
        _, node, edge = problems[0]
        raise FlowSpecError([p[0] for p in problems], node=node, edge=edge, flow=flow)
