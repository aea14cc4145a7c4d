"""The shape of an edge-based flow: checks, topological order, joins and loop bodies.

Forward edges must form a DAG; loop edges (``type: loop``) may point back. The
*body* of a loop edge into ``target`` is every node reachable from ``target`` along
forward edges (``target`` included): the nodes a loop re-opens when it fires.

Every walk here is iterative and every index is built in one pass over the edges,
so a flow of thousands of nodes (a long chain included) is checked in linear time.
The module knows edges only through the small :class:`Edge` protocol.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections.abc import Mapping, Sequence
from typing import Generic, Protocol, TypeVar

__all__ = ["Edge", "Problem", "Topology", "check_topology", "cycle_closers"]

_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
RESERVED = ("flow", "workflow", "state")

Problem = tuple[str, str | None, str | None]
"""A problem: the sentence, the node it is about, the edge it is about."""


class Edge(Protocol):
    """What the topology needs to know of an edge."""

    @property
    def source(self) -> str:
        """The node the edge leaves."""

    @property
    def target(self) -> str:
        """The node the edge enters."""

    @property
    def type(self) -> str:
        """``forward`` or ``loop``."""

    @property
    def max_iterations(self) -> int | None:
        """How often a loop edge may fire."""

    @property
    def key(self) -> str:
        """``"from->to"``."""


E = TypeVar("E", bound=Edge)


def check_topology(nodes: Sequence[str], edges: Sequence[Edge]) -> list[Problem]:
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
            what = (
                "flow state ({{state.*}})"
                if node == "state"
                else f"flow inputs ({{{{{node}.input.*}}}})"
            )
            problems.append(
                (f"Node {node!r}: the id is reserved for {what}; rename the node.", node, None)
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
                listed = ", ".join(ids[:20]) + (
                    f", ... ({len(ids) - 20} more)" if len(ids) > 20 else ""
                )
                problems.append(
                    (
                        f"Edge {edge.key}: {label} {end!r} is not a node ({hint}nodes: "
                        f"{listed or 'none'}); fix the id or add the node.",
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
        cycle = find_cycle(ids, [e for e in edges if e.type == "forward"])
        if cycle:
            back = f"{cycle[-2]}->{cycle[-1]}"
            problems.append(
                (
                    f"Forward edges form a cycle: {_spell(cycle)}. Forward edges must "
                    f"not loop back; make edge {back} a loop edge (type: loop, with "
                    "maxIterations and usually a when), or remove it.",
                    None,
                    back,
                )
            )
    return problems


def _spell(cycle: list[str]) -> str:
    """``a -> b -> c -> a``, with the middle of a long cycle left out."""
    if len(cycle) <= 12:
        return " -> ".join(cycle)
    hidden = len(cycle) - 10
    return f"{' -> '.join(cycle[:5])} -> ... ({hidden} more) ... -> {' -> '.join(cycle[-5:])}"


def find_cycle(ids: Sequence[str], edges: Sequence[Edge]) -> list[str]:
    """A cycle of ``edges`` as ``[a, b, ..., a]``, or ``[]`` (iterative depth-first search)."""
    successors: dict[str, list[str]] = {node: [] for node in ids}
    for edge in edges:
        successors[edge.source].append(edge.target)
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in ids:
        if start in state:
            continue
        path = [start]
        state[start] = 1
        cursors = [iter(successors[start])]
        while cursors:
            nxt = next(cursors[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                cursors.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                cursors.append(iter(successors[nxt]))
    return []


def cycle_closers(pairs: Sequence[tuple[str, str]]) -> set[int]:
    """The positions of the pairs ``(source, target)`` that close a cycle of the pairs.

    A pair closes a cycle when its target leads back to its source along the pairs:
    both ends are then in one strongly connected component (a path from the target
    to the source never needs the pair itself). Kosaraju's two passes, iterative.
    """
    ids = list(dict.fromkeys(end for pair in pairs for end in pair))
    forward: dict[str, list[str]] = {node: [] for node in ids}
    backward: dict[str, list[str]] = {node: [] for node in ids}
    for source, target in pairs:
        forward[source].append(target)
        backward[target].append(source)
    finished: list[str] = []  # in the order their depth-first walk finished
    seen: set[str] = set()
    for start in ids:
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(forward[start]))]
        while stack:
            here, nexts = stack[-1]
            there = next((n for n in nexts if n not in seen), None)
            if there is None:
                finished.append(here)
                stack.pop()
            else:
                seen.add(there)
                stack.append((there, iter(forward[there])))
    component: dict[str, int] = {}  # node -> its strongly connected component
    for label, start in enumerate(reversed(finished)):
        if start in component:
            continue
        component[start] = label
        pending = [start]
        while pending:
            for there in backward[pending.pop()]:
                if there not in component:
                    component[there] = label
                    pending.append(there)
    return {i for i, (source, target) in enumerate(pairs) if component[source] == component[target]}


class Topology(Generic[E]):
    """Derived structure of a checked set of nodes and the edges between them.

    Attributes:
        order: Node ids in topological order of the forward edges (ties keep the
            order the nodes were declared in).
        incoming: Forward edges into each node.
        outgoing: Forward edges out of each node.
        loops_out: Loop edges out of each node.
        loops_in: Loop edges into each node.
        body: For each loop target, the nodes a loop into it re-opens.

    ``units`` maps the nodes of a ``forEach`` edge's per-item part (but its head) to
    the head, which stands for the part among ``nodes``: an edge out of the part
    leaves from the head here (:meth:`source_of`), and keeps its own ``key``.
    """

    def __init__(
        self, nodes: Sequence[str], edges: Sequence[E], units: Mapping[str, str] | None = None
    ) -> None:
        ids = list(nodes)
        self.units = dict(units or {})
        incoming: dict[str, list[E]] = {node: [] for node in ids}
        outgoing: dict[str, list[E]] = {node: [] for node in ids}
        loops_out: dict[str, list[E]] = {node: [] for node in ids}
        loops_in: dict[str, list[E]] = {node: [] for node in ids}
        for edge in edges:
            source = self.source_of(edge)
            if edge.type == "forward":
                incoming[edge.target].append(edge)
                outgoing[source].append(edge)
            else:
                loops_out[source].append(edge)
                loops_in[edge.target].append(edge)
        self.incoming = {node: tuple(found) for node, found in incoming.items()}
        self.outgoing = {node: tuple(found) for node, found in outgoing.items()}
        self.loops_out = {node: tuple(found) for node, found in loops_out.items()}
        self.loops_in = {node: tuple(found) for node, found in loops_in.items()}
        self.order = self._sort(ids)
        self.position = {node: index for index, node in enumerate(self.order)}
        self.body = {node: self._reach(node) for node in ids if self.loops_in[node]}

    def source_of(self, edge: Edge) -> str:
        """The node an edge leaves here: its source, or the head of the part it leaves."""
        return self.units.get(edge.source, edge.source)

    def _sort(self, ids: list[str]) -> tuple[str, ...]:
        declared = {node: index for index, node in enumerate(ids)}
        waiting = {node: len(self.incoming[node]) for node in ids}
        ready = [(declared[node], node) for node in ids if waiting[node] == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            _, node = heapq.heappop(ready)
            order.append(node)
            for edge in self.outgoing[node]:
                waiting[edge.target] -= 1
                if waiting[edge.target] == 0:
                    heapq.heappush(ready, (declared[edge.target], edge.target))
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
                there = edge.target if downstream else self.source_of(edge)
                if there not in seen:
                    seen.add(there)
                    stack.append(there)
        return seen

    def predecessors(self, node: str) -> tuple[str, ...]:
        """Sources of the forward edges into ``node``, without repeats."""
        return tuple(dict.fromkeys(self.source_of(edge) for edge in self.incoming[node]))

    def loop_sources(self, node: str) -> tuple[str, ...]:
        """Sources of the loop edges into ``node``."""
        return tuple(dict.fromkeys(self.source_of(edge) for edge in self.loops_in[node]))

    def bound(self) -> int:
        """How many node resolutions a run can make at most (loops fully used)."""
        iterations = sum(
            (e.max_iterations or 0) * len(self.body[e.target])
            for edges in self.loops_in.values()
            for e in edges
        )
        return len(self.order) + iterations
