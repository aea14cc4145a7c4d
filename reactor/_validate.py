"""Build-time checks of a graph, cycle detection, and the static Mermaid drawing.

The graph is read from declarations only: ``activate_on``, ``emits``, ``updates``,
the state's keys and ``external``. Every problem is collected, each with a hint.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from reactor._agent import Agent
from reactor._names import (
    AGENT_EVENTS,
    STATE_EVENTS,
    STATE_PREFIX,
    SYSTEM_SIGNALS,
    agent_event,
    state_event,
)
from reactor._patterns import Pattern, compile_pattern, is_exact
from stores import Store

__all__ = ["Declarations", "find_cycles", "mermaid", "problems", "state_keys"]


@dataclass(frozen=True)
class Declarations:
    """What a graph declares it can emit, by whom."""

    agents: Mapping[str, Agent]
    state_keys: tuple[str, ...] | None  # None: keys are open (dict state, extra fields)
    external: tuple[Pattern, ...]
    model_name: str

    def emitted_by(self, name: str, *, normal_only: bool = False) -> list[str]:
        """Concrete signal names agent ``name`` can emit.

        With ``normal_only``, leave out what only happens when something goes wrong
        (failed, skipped, cancelled): cycle detection follows the normal flow.
        """
        agent = self.agents[name]
        events = ("activated", "completed") if normal_only else AGENT_EVENTS
        names = [agent_event(name, event) for event in events]
        names.extend(agent.emits)
        if agent.updates is not None:
            names.extend(state_event(agent.updates, event) for event in STATE_EVENTS)
        return names

    def known_names(self) -> dict[str, str]:
        """Every concrete name something can emit, with who emits it."""
        known = dict.fromkeys(SYSTEM_SIGNALS, "the runtime")
        for key in self.state_keys or ():
            for event in STATE_EVENTS:
                known[state_event(key, event)] = "the store"
        for agent in self.agents:
            for name in self.emitted_by(agent):
                known.setdefault(name, agent)
        return known


def state_keys(store: Store[object]) -> tuple[str, ...] | None:
    """The state's keys, or ``None`` when new keys may appear at run time."""
    model = store.model_type
    if model is not None:
        return None if model.model_config.get("extra") == "allow" else store.keys()
    return None


def problems(decl: Declarations) -> list[str]:
    """Every problem of the declarations, each with a hint."""
    found: list[str] = []
    known = decl.known_names()
    for name, agent in decl.agents.items():
        for pattern in agent.activate_on:
            if not _satisfiable(pattern, known, decl):
                found.append(_unreachable(name, pattern, known))
        keys = decl.state_keys
        if agent.updates is not None and keys is not None and agent.updates not in keys:
            close = difflib.get_close_matches(agent.updates, keys, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            found.append(
                f"Agent {name!r} updates {agent.updates!r}, which {decl.model_name} does not "
                f"have (keys: {', '.join(keys)}). Hint: {hint}add the field to the state "
                "model, or change updates=."
            )
    return found


def _satisfiable(pattern: Pattern, known: Mapping[str, str], decl: Declarations) -> bool:
    if not isinstance(pattern, str):
        return True  # a regular expression: cannot be checked statically
    matcher = compile_pattern(pattern)
    if any(matcher(name) for name in known):
        return True
    if decl.state_keys is None and pattern.startswith((STATE_PREFIX, "*")):
        return True
    return any(_overlap(pattern, external) for external in decl.external)


def _overlap(a: Pattern, b: Pattern) -> bool:
    """Whether some name matches both patterns (checked on sample names of each)."""
    if not isinstance(a, str) or not isinstance(b, str):
        return True
    match_a, match_b = compile_pattern(a), compile_pattern(b)
    return any(match_a(s) for s in _samples(b)) or any(match_b(s) for s in _samples(a))


def _samples(pattern: str) -> list[str]:
    names = [""]
    for segment in pattern.split(":"):
        options = ["", "x"] if segment == "**" else [segment.replace("*", "x")]
        names = [f"{n}:{o}" if n and o else n or o for n in names for o in options]
    return [n for n in names if n]


def _unreachable(agent: str, pattern: Pattern, known: Mapping[str, str]) -> str:
    exact = is_exact(pattern) and isinstance(pattern, str)
    close = difflib.get_close_matches(str(pattern), list(known), n=1) if exact else []
    guess = f"did you mean {close[0]!r} (emitted by {known[close[0]]})? " if close else ""
    return (
        f"Agent {agent!r} activates on {pattern!r}, which nothing in the graph emits. "
        f"Hint: {guess}declare it in the emitting agent's emits=[...], or in "
        "reactive(external=[...]) if it comes from outside the graph (handle.send())."
    )


def _edges(decl: Declarations) -> dict[str, dict[str, str]]:
    """``edges[a][b] = signal``: agent ``a`` can emit ``signal``, which activates ``b``."""
    edges: dict[str, dict[str, str]] = {name: {} for name in decl.agents}
    matchers = {
        name: [compile_pattern(p) for p in agent.activate_on] for name, agent in decl.agents.items()
    }
    for source in decl.agents:
        for signal in decl.emitted_by(source, normal_only=True):
            for target, patterns in matchers.items():
                if target not in edges[source] and any(m(signal) for m in patterns):
                    edges[source][target] = signal
    return edges


def find_cycles(decl: Declarations) -> list[list[str]]:
    """One cycle per strongly connected group of agents, as ``agent, signal, ...``."""
    edges = _edges(decl)
    cycles: list[list[str]] = []
    for group in _components(edges):
        start = group[0]
        path = _cycle_from(start, set(group), edges)
        if path:
            cycles.append(path)
    return cycles


def _components(edges: Mapping[str, Mapping[str, str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan) that contain a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in edges[node]:
                found.append(sorted(group, key=list(edges).index))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def _cycle_from(start: str, group: set[str], edges: Mapping[str, Mapping[str, str]]) -> list[str]:
    """A shortest cycle through ``start`` within ``group``: ``start, sig, ..., sig, start``."""
    parents: dict[str, tuple[str, str]] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt, signal in edges[node].items():
                if nxt == start:
                    return [*_path(start, node, parents), signal, start]
                if nxt in group and nxt not in parents:
                    parents[nxt] = (node, signal)
                    following.append(nxt)
        frontier = following
    return []


def _path(start: str, end: str, parents: Mapping[str, tuple[str, str]]) -> list[str]:
    """``start, sig, node, ..., sig, end`` along the recorded BFS parents."""
    path = [end]
    while path[0] != start:
        parent, via = parents[path[0]]
        path[:0] = [parent, via]
    return path


def mermaid(decl: Declarations) -> str:
    """Draw agents (boxes) and the signals between them (rounded) as a flowchart."""
    known = decl.known_names()
    lines = ["flowchart LR"]
    signals: dict[str, str] = {}

    def node(signal: str) -> str:
        if signal not in signals:
            signals[signal] = f"s{len(signals)}"
            lines.append(f'  {signals[signal]}(["{signal}"])')
        return signals[signal]

    for name in decl.agents:
        lines.append(f'  {_id(name)}["{name}"]')
    for name, agent in decl.agents.items():
        for pattern in agent.activate_on:
            matcher = compile_pattern(pattern)
            sources = [s for s in known if matcher(s) and not _is_noise(s, pattern)]
            for source in sources or [str(getattr(pattern, "pattern", pattern))]:
                lines.append(f"  {node(source)} --> {_id(name)}")
    for name, agent in decl.agents.items():
        for emitted in agent.emits:
            if emitted in signals or any(
                compile_pattern(p)(emitted) for a in decl.agents.values() for p in a.activate_on
            ):
                lines.append(f"  {_id(name)} --> {node(emitted)}")
        if agent.updates is not None:
            changed = state_event(agent.updates, "changed")
            lines.append(f"  {_id(name)} -. updates .-> {node(changed)}")
        for event in AGENT_EVENTS:
            lifecycle = agent_event(name, event)
            if lifecycle in signals:
                lines.append(f"  {_id(name)} --> {node(lifecycle)}")
    return "\n".join(dict.fromkeys(lines))


def _is_noise(signal: str, pattern: Pattern) -> bool:
    """Wide patterns (``**``) would connect everything; draw only declared signals."""
    return isinstance(pattern, str) and pattern.count("*") > 0 and signal in SYSTEM_SIGNALS


def _id(name: str) -> str:
    return "a_" + re.sub(r"\W", "_", name)
