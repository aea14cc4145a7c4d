"""A graph as data: agents, the signals between them, and edges of each kind.

:meth:`reactor.Reactive.shape` returns a :class:`GraphShape`, drawn as Mermaid
(``to_mermaid``), Graphviz (``to_dot``) or JSON (``to_json``). Edges come from the
declarations (``activate_on``, ``emits``, ``updates``, ``writes``) and, when given, from
what recorded runs observed (state keys each agent actually wrote).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from reactor._agents.agent import Agent
from reactor._graph.validate import Declarations, written_keys
from reactor._signals.names import AGENT_EVENTS, SYSTEM_SIGNALS, agent_event, state_event
from reactor._signals.patterns import Pattern

__all__ = ["Edge", "EdgeKind", "GraphShape", "shape_of"]

EdgeKind = Literal["activates", "emits", "updates", "writes", "observed", "lifecycle"]


@dataclasses.dataclass(frozen=True)
class Edge:
    """One arrow: from an agent to a signal it emits, or from a signal to an agent.

    Attributes:
        source: ``agent:<name>`` or ``signal:<name>``.
        target: The same forms.
        kind: ``activates`` (signal to agent), ``emits``, ``updates`` and ``writes``
            (declared), ``observed`` (a write seen in a recorded run but not declared),
            ``lifecycle`` (an agent's own ``agent:<name>:*`` signal another agent uses).
    """

    source: str
    target: str
    kind: EdgeKind


@dataclasses.dataclass(frozen=True)
class GraphShape:
    """Agents, signals and edges of a graph, in drawing order."""

    agents: tuple[str, ...]
    signals: tuple[str, ...]
    edges: tuple[Edge, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"agents": [...], "signals": [...], "edges": [{source, target, kind}]}``."""
        return {
            "agents": list(self.agents),
            "signals": list(self.signals),
            "edges": [dataclasses.asdict(edge) for edge in self.edges],
        }

    def to_mermaid(self) -> str:
        """A Mermaid flowchart: agents as boxes, signals rounded, writes dotted."""
        lines = ["flowchart LR"]
        lines.extend(f'  {_agent_id(name)}["{name}"]' for name in self.agents)
        ids: dict[str, str] = {}
        for edge in self.edges:
            for end in (edge.source, edge.target):
                kind, _, name = end.partition(":")
                if kind == "signal" and name not in ids:
                    ids[name] = f"s{len(ids)}"
                    lines.append(f'  {ids[name]}(["{name}"])')
            lines.append(
                f"  {_mermaid_node(edge.source, ids)}{_ARROWS[edge.kind]}"
                f"{_mermaid_node(edge.target, ids)}"
            )
        return "\n".join(dict.fromkeys(lines))

    def to_dot(self) -> str:
        """A Graphviz digraph: agents as boxes, signals as ellipses, writes dashed."""
        lines = ["digraph reactor {", "  rankdir=LR;"]
        lines.extend(
            f"  {json.dumps('agent:' + n)} [label={json.dumps(n)}, shape=box];" for n in self.agents
        )
        lines.extend(
            f"  {json.dumps('signal:' + n)} [label={json.dumps(n)}, shape=ellipse];"
            for n in self.signals
        )
        for edge in self.edges:
            style = (
                ""
                if edge.kind in ("activates", "emits", "lifecycle")
                else (f' [style=dashed, label="{edge.kind}"]')
            )
            lines.append(f"  {json.dumps(edge.source)} -> {json.dumps(edge.target)}{style};")
        lines.append("}")
        return "\n".join(lines)


_ARROWS: Mapping[str, str] = {
    "activates": " --> ",
    "emits": " --> ",
    "lifecycle": " --> ",
    "updates": " -. updates .-> ",
    "writes": " -. writes .-> ",
    "observed": " -. observed .-> ",
}


def _agent_id(name: str) -> str:
    return "a_" + re.sub(r"\W", "_", name)


def _mermaid_node(end: str, ids: Mapping[str, str]) -> str:
    kind, _, name = end.partition(":")
    return _agent_id(name) if kind == "agent" else ids[name]


def shape_of(decl: Declarations, observed: Mapping[str, Iterable[str]] | None = None) -> GraphShape:
    """The shape of a graph; ``observed`` maps agents to state keys seen written."""
    edges = _Edges()
    for name, agent in decl.agents.items():
        for pattern in agent.activate_on:
            sources = [s for s in decl.matching(pattern) if not _is_noise(s, pattern)]
            for source in sources or [str(getattr(pattern, "pattern", pattern))]:
                edges.add(f"signal:{source}", f"agent:{name}", "activates")
    for name, agent in decl.agents.items():
        _add_outputs(edges, decl, name, agent, (observed or {}).get(name, ()))
    signals = tuple(
        dict.fromkeys(
            e[7:]
            for edge in edges.edges
            for e in (edge.source, edge.target)
            if e.startswith("signal:")
        )
    )
    return GraphShape(tuple(decl.agents), signals, tuple(edges.edges))


class _Edges:
    """The edges drawn so far, each once, and the signals they reach."""

    def __init__(self) -> None:
        self.edges: list[Edge] = []
        self.seen: set[Edge] = set()
        self.drawn: set[str] = set()

    def add(self, source: str, target: str, kind: EdgeKind) -> None:
        edge = Edge(source, target, kind)
        if edge not in self.seen:
            self.seen.add(edge)
            self.edges.append(edge)
            for end in (source, target):
                if end.startswith("signal:"):
                    self.drawn.add(end[7:])


def _add_outputs(
    edges: _Edges, decl: Declarations, name: str, agent: Agent, observed: Iterable[str]
) -> None:
    """An agent's arrows out: what it emits, writes or was seen writing, its lifecycle."""
    for emitted in agent.emits:
        if emitted in edges.drawn or decl.listeners(emitted):
            edges.add(f"agent:{name}", f"signal:{emitted}", "emits")
    declared = written_keys(agent)
    for key in declared:
        kind: EdgeKind = "updates" if key == agent.updates else "writes"
        edges.add(f"agent:{name}", f"signal:{state_event(key, 'changed')}", kind)
    for key in observed:
        if key not in declared:
            edges.add(f"agent:{name}", f"signal:{state_event(key, 'changed')}", "observed")
    for event in AGENT_EVENTS:
        lifecycle = agent_event(name, event)
        if lifecycle in edges.drawn:
            edges.add(f"agent:{name}", f"signal:{lifecycle}", "lifecycle")


def _is_noise(signal: str, pattern: Pattern) -> bool:
    """Wide patterns (``**``) would connect everything; draw only declared signals."""
    return isinstance(pattern, str) and "*" in pattern and signal in SYSTEM_SIGNALS
