"""The shape of an edge-based flow: checks, topological order, joins and loop bodies.

Forward edges must form a DAG; loop edges (``type: loop``) may point back. The
*body* of a loop edge into ``target`` is every node reachable from ``target`` along
forward edges (``target`` included): the nodes a loop re-opens when it fires.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from migration._spec import EdgeSpec

__all__ = ["Problem", "Topology", "check_topology"]

_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
RESERVED = ("flow", "workflow")

Problem = tuple[str, str | None, str | None]
"""A problem: the sentence, the node it is about, the edge it is about."""


def check_topology(nodes: Sequence[str], edges: Sequence[EdgeSpec]) -> list[Problem]:
    """Every problem of node ids and edges, each naming its node or edge and the fix."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for position, node in enumerate(nodes, start=1):
        if not isinstance(node, str) or not _ID.match(node):
            problems.append(
                (
                    f"Node {node!r} (node #{position}): ids start with a letter or '_' and "
                    "use only letters, digits, '_' and '-' (bindings read them as "
                    "{{id.key}}); rename it.",
                    str(node),
                    None,
                )
            )
            continue
        if node in RESERVED:
            problems.append(
                (
                    f"Node {node!r}: the id is reserved for flow inputs "
                    f"({{{{{node}.input.*}}}}); rename the node.",
                    node,
                    None,
                )
            )
        if node in seen:
            problems.append(
                (
                    f"Node {node!r} is defined twice (nodes #{seen[node]} and "
                    f"#{position}); give each node its own id.",
                    node,
                    None,
                )
            )
        else:
            seen[node] = position
    ids = list(seen)
    pairs: set[tuple[str, str]] = set()
    for edge in edges:
        for end, label in ((edge.source, "from"), (edge.target, "to")):
            if end not in seen:
                close = difflib.get_close_matches(end, ids, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                problems.append(
                    (
                        f"Edge {edge.key}: {label} {end!r} is not a node ({hint}nodes: "
                        f"{', '.join(ids) or 'none'}); fix the id or add the node.",
                        None,
                        edge.key,
                    )
                )
        if (edge.source, edge.target) in pairs:
            problems.append(
                (
                    f"Edge {edge.key} is declared twice; keep one (combine the conditions "
                    "with or: [...]).",
                    None,
                    edge.key,
                )
            )
        pairs.add((edge.source, edge.target))
        if edge.type == "loop" and edge.max_iterations is None:
            problems.append(
                (
                    f"Edge {edge.key} is a loop edge without maxIterations; add "
                    f"maxIterations: <n> to bound how many times it re-runs {edge.target!r}.",
                    None,
                    edge.key,
                )
            )
    if not problems:
        cycle = _find_cycle(ids, [e for e in edges if e.type == "forward"])
        if cycle:
            back = f"{cycle[-2]}->{cycle[-1]}"
            problems.append(
                (
                    f"Forward edges form a cycle: {' -> '.join(cycle)}. Forward edges must "
                    f"not loop back; make edge {back} a loop edge (type: loop, with "
                    "maxIterations and usually a when), or remove it.",
                    None,
                    back,
                )
            )
    return problems


def _find_cycle(ids: list[str], edges: Sequence[EdgeSpec]) -> list[str]:
    successors: dict[str, list[str]] = {node: [] for node in ids}
    for edge in edges:
        successors[edge.source].append(edge.target)
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in successors[node]:
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for node in ids:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


class Topology:
    """Derived structure of a checked flow (see :func:`check_topology`).

    Attributes:
        order: Node ids in topological order of the forward edges (ties keep the
            order the nodes were declared in).
        incoming: Forward edges into each node.
        outgoing: Forward edges out of each node.
        loops_out: Loop edges out of each node.
        loops_in: Loop edges into each node.
        body: For each loop target, the nodes a loop into it re-opens.
    """

    def __init__(self, nodes: Sequence[str], edges: Sequence[EdgeSpec]) -> None:
        ids = list(nodes)
        self.incoming: dict[str, tuple[EdgeSpec, ...]] = {}
        self.outgoing: dict[str, tuple[EdgeSpec, ...]] = {}
        self.loops_out: dict[str, tuple[EdgeSpec, ...]] = {}
        self.loops_in: dict[str, tuple[EdgeSpec, ...]] = {}
        for node in ids:
            self.incoming[node] = tuple(
                e for e in edges if e.type == "forward" and e.target == node
            )
            self.outgoing[node] = tuple(
                e for e in edges if e.type == "forward" and e.source == node
            )
            self.loops_out[node] = tuple(e for e in edges if e.type == "loop" and e.source == node)
            self.loops_in[node] = tuple(e for e in edges if e.type == "loop" and e.target == node)
        self.order = self._sort(ids)
        self.body = {node: self._reach(node) for node in ids if self.loops_in[node]}

    def _sort(self, ids: list[str]) -> tuple[str, ...]:
        waiting = {node: len(self.incoming[node]) for node in ids}
        order: list[str] = []
        ready = [node for node in ids if waiting[node] == 0]
        while ready:
            node = ready.pop(0)
            order.append(node)
            for edge in self.outgoing[node]:
                waiting[edge.target] -= 1
                if waiting[edge.target] == 0:
                    ready.append(edge.target)
            ready.sort(key=ids.index)
        return tuple(order)

    def _reach(self, start: str) -> frozenset[str]:
        """``start`` and every node downstream of it."""
        return frozenset({start} | self._walk(start, downstream=True))

    def upstream(self, node: str) -> frozenset[str]:
        """Every node with a path of forward edges to ``node`` (not ``node`` itself)."""
        return frozenset(self._walk(node, downstream=False))

    def _walk(self, start: str, *, downstream: bool) -> set[str]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            here = stack.pop()
            edges = self.outgoing[here] if downstream else self.incoming[here]
            for edge in edges:
                there = edge.target if downstream else edge.source
                if there not in seen:
                    seen.add(there)
                    stack.append(there)
        return seen

    def predecessors(self, node: str) -> tuple[str, ...]:
        """Sources of the forward edges into ``node``, without repeats."""
        return tuple(dict.fromkeys(edge.source for edge in self.incoming[node]))

    def loop_sources(self, node: str) -> tuple[str, ...]:
        """Sources of the loop edges into ``node``."""
        return tuple(dict.fromkeys(edge.source for edge in self.loops_in[node]))

    def bound(self) -> int:
        """How many node resolutions a run can make at most (loops fully used)."""
        iterations = sum(
            (e.max_iterations or 0) * len(self.body[e.target])
            for edges in self.loops_in.values()
            for e in edges
        )
        return len(self.order) + iterations
