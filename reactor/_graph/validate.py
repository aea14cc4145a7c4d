"""Build-time checks of a graph, and cycle detection.

The graph is read from declarations only: ``activate_on``, ``emits``, ``updates``,
``writes``, the state's keys and ``external``, plus the ``state.<key>`` reads of
prompts and guards. Every problem is collected, each with a hint.

Everything here is linear in the size of the graph: emitters and listeners are indexed
by signal name, wildcard patterns are matched once per name, and every walk is
iterative, so a graph of ten thousand agents builds in well under a second.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from reactor._agents.agent import Agent
from reactor._agents.templates import CONTEXT_NAMES, state_references, top_level_names
from reactor._signals.names import (
    AGENT_EVENTS,
    HARNESS_END,
    HARNESS_ENDING,
    STATE_EVENTS,
    SYSTEM_SIGNALS,
    agent_event,
    inbox_agent,
    inbox_signal,
    parse_state_event,
    state_event,
)
from reactor._signals.patterns import Pattern, compile_pattern, is_exact
from stores import Store

__all__ = [
    "Declarations",
    "StateSchema",
    "edges",
    "find_cycles",
    "problems",
    "state_schema",
    "written_keys",
]

_NEVER = {
    HARNESS_END: "the last signal of a run: nothing runs after it",
    HARNESS_ENDING: "emitted when the run stops taking new activations",
}


@dataclass(frozen=True)
class StateSchema:
    """What is known of the state's keys at build time.

    Attributes:
        keys: The keys, or ``None`` when new keys may appear at run time.
        list_keys: Keys whose value may be a list (``None``: unknown).
        name: How messages name the state (its model, or "the state").
        dict_keys: A dict state's keys at the start (it may gain keys that agents
            declare they write); ``None`` for a model.
    """

    keys: tuple[str, ...] | None
    list_keys: frozenset[str] | None
    name: str
    dict_keys: tuple[str, ...] | None = None


def state_schema(store: Store[Any]) -> StateSchema:
    """The keys a graph's state has, from the store each run will start with."""
    model = store.model_type
    if model is None:
        return StateSchema(None, None, "the state", store.keys())
    if model.model_config.get("extra") == "allow":
        return StateSchema(None, None, model.__name__)
    lists = frozenset(
        key for key, info in model.model_fields.items() if _may_be_list(info.annotation)
    )
    return StateSchema(store.keys(), lists, model.__name__)


def _may_be_list(annotation: Any) -> bool:
    if annotation is None:
        return False
    origin = typing.get_origin(annotation) or annotation
    if origin in (list, typing.Any) or annotation is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_may_be_list(arg) for arg in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _may_be_list(typing.get_args(annotation)[0])
    return isinstance(origin, type) and issubclass(origin, list)


@dataclass(frozen=True)
class Declarations:
    """What a graph declares it can emit, by whom, and who listens."""

    agents: Mapping[str, Agent]
    state: StateSchema
    external: tuple[Pattern, ...]
    single: bool = False
    scope: frozenset[str] = frozenset()
    _listeners: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def emitted_by(self, name: str, *, normal_only: bool = False) -> list[str]:
        """Concrete signal names agent ``name`` can emit.

        With ``normal_only``, leave out what only happens when something goes wrong
        (failed, skipped, cancelled): cycle detection follows the normal flow.
        """
        agent = self.agents[name]
        events = ("activated", "completed") if normal_only else AGENT_EVENTS
        names = [agent_event(name, event) for event in events]
        names.extend(agent.emits)
        for key in written_keys(agent):
            names.extend(state_event(key, event) for event in STATE_EVENTS)
        return names

    @cached_property
    def state_keys(self) -> tuple[str, ...] | None:
        """The keys the state can have: a model's, or a dict's and those agents write."""
        state = self.state
        if state.keys is not None or state.dict_keys is None:
            return state.keys
        written = [key for agent in self.agents.values() for key in written_keys(agent)]
        return tuple(dict.fromkeys([*state.dict_keys, *written]))

    @cached_property
    def known(self) -> dict[str, str]:
        """Every concrete name something can emit, with who emits it."""
        known = dict.fromkeys(SYSTEM_SIGNALS, "the runtime")
        for key in self.state.keys or ():
            for event in STATE_EVENTS:
                known[state_event(key, event)] = "the store"
        for agent in self.agents:
            known[inbox_signal(agent)] = "handle.send_to"
            for name in self.emitted_by(agent):
                known.setdefault(name, agent)
        return known

    @cached_property
    def _exact(self) -> dict[str, list[str]]:
        listeners: dict[str, list[str]] = {}
        for name, agent in self.agents.items():
            for pattern in agent.activate_on:
                if is_exact(pattern):
                    listeners.setdefault(str(pattern), []).append(name)
        return listeners

    @cached_property
    def _wild(self) -> list[tuple[str, Any]]:
        return [
            (name, compile_pattern(pattern))
            for name, agent in self.agents.items()
            for pattern in agent.activate_on
            if not is_exact(pattern)
        ]

    def listeners(self, signal: str) -> list[str]:
        """The agents activated by ``signal``, in graph order, without repeats."""
        found = self._listeners.get(signal)
        if found is None:
            names = self._exact.get(signal, []) + [n for n, m in self._wild if m(signal)]
            found = self._listeners[signal] = list(dict.fromkeys(names))
        return found

    def matching(self, pattern: Pattern) -> list[str]:
        """The known names a pattern matches (one lookup for an exact name)."""
        if is_exact(pattern):
            return [str(pattern)] if pattern in self.known else []
        matcher = compile_pattern(pattern)
        return [name for name in self.known if matcher(name)]


def written_keys(agent: Agent) -> list[str]:
    """The state keys an agent declares it writes: ``updates`` and ``writes``."""
    keys = [agent.updates] if agent.updates is not None else []
    return list(dict.fromkeys([*keys, *agent.writes]))


def problems(decl: Declarations) -> list[str]:
    """Every problem of the declarations, each with a hint."""
    found: list[str] = []
    for name, agent in decl.agents.items():
        if agent.prompt_text is None and agent.run is None and agent.ask is None:
            found.append(
                f"Agent {name!r} has none of prompt=, run= or ask=, so it would do nothing "
                "when activated. Hint: give it one of them; an agent with none is used on "
                "its own, through agent.prompt()."
            )
        reachable = []
        for pattern in agent.activate_on:
            problem = _activation_problem(name, pattern, decl)
            reachable.append(problem is None)
            if problem is not None:
                found.append(problem)
        if decl.single and any(reachable):
            # Run on its own, an agent may list signals its usual graph would send.
            found = [p for p in found if not p.startswith(f"Agent {name!r} activates on")]
        found.extend(_key_problems(name, agent, decl.state))
        found.extend(_template_problems(name, agent, decl))
    return found


def _reads(agent: Agent) -> list[tuple[str, str, bool]]:
    """The templates an agent renders: (field, source, whether an expression)."""
    reads = [("prompt", agent.prompt_text, False), ("system prompt", agent.system, False)]
    reads.append(("ask", agent.ask, False))
    if isinstance(agent.when, str):
        reads.append(("when expression", agent.when, True))
    return [(field, source, expr) for field, source, expr in reads if isinstance(source, str)]


def _template_problems(name: str, agent: Agent, decl: Declarations) -> Iterable[str]:
    """Names a template reads that nothing defines, and a dict state's unknown keys.

    A name that resembles no defined one may come from a run's ``scope=`` (given at
    run time), so only a near miss of a defined name is a problem: a misspelling.
    """
    defined = [*CONTEXT_NAMES, *sorted(decl.scope)]
    dict_keys = decl.state_keys if decl.state.keys is None else None
    for field_name, source, expression in _reads(agent):
        for word in top_level_names(source, expression=expression):
            if word not in defined and difflib.get_close_matches(word, defined, n=1):
                yield (
                    f"Agent {name!r}: the {field_name} reads {word!r}, which is not defined "
                    f"(templates read {', '.join(defined)}). Hint: "
                    f"{_did_you_mean(word, defined)}fix the name, or pass it in scope=."
                )
        if dict_keys is None:
            continue
        for key in state_references(source, expression=expression):
            if key not in dict_keys:
                yield (
                    f"Agent {name!r}: the {field_name} reads state.{key}, which the state "
                    f"does not have (keys: {', '.join(dict_keys)}). Hint: "
                    f"{_did_you_mean(key, dict_keys)}fix the name, add the key to the "
                    "state, or declare the agent that writes it (updates=, writes=)."
                )


def _activation_problem(agent: str, pattern: Pattern, decl: Declarations) -> str | None:
    addressee = inbox_agent(str(pattern)) if is_exact(pattern) else None
    if addressee is not None:
        if addressee == agent:
            return None  # its own messages: handle.send_to(agent, ...) sends them
        return (
            f"Agent {agent!r} activates on {pattern!r}, but messages to {addressee!r} reach "
            f"{addressee!r} only. Hint: activate on {inbox_signal(agent)!r} (its own "
            "messages), or have the other agent emit a signal of its own."
        )
    if pattern in _NEVER:
        return (
            f"Agent {agent!r} activates on {pattern!r}, {_NEVER[str(pattern)]}, so it would "
            "never run. Hint: activate on the signal that means your work is done, or use "
            "on_end= and end_when= to control how a run finishes."
        )
    state = parse_state_event(str(pattern)) if is_exact(pattern) else None
    dict_keys = decl.state_keys if decl.state.keys is None else None
    if state is not None and dict_keys is not None and state[0] not in dict_keys:
        return (
            f"Agent {agent!r} activates on {pattern!r}, but the state has no key "
            f"{state[0]!r} and no agent writes it (keys: {', '.join(dict_keys) or 'none'}), "
            f"so it would never run. Hint: {_did_you_mean(state[0], dict_keys)}fix the "
            "key, or declare the agent that writes it (updates=, writes=)."
        )
    lists = decl.state.list_keys
    if state is not None and state[1] != "changed" and lists is not None:
        key = state[0]
        if decl.state.keys is not None and key in decl.state.keys and key not in lists:
            return (
                f"Agent {agent!r} activates on {pattern!r}, but {key!r} is not a list in "
                f"{decl.state.name}, so it is never {state[1]}. Hint: activate on "
                f"'state:{key}:changed'."
            )
    if _satisfiable(pattern, decl):
        return None
    return _unreachable(agent, pattern, decl.known)


def _key_problems(name: str, agent: Agent, state: StateSchema) -> Iterable[str]:
    keys = state.keys
    if keys is None:
        return
    for key in written_keys(agent):
        if key not in keys:
            how = "updates" if key == agent.updates else "writes"
            yield (
                f"Agent {name!r} {how} {key!r}, which {state.name} does not have (keys: "
                f"{', '.join(keys)}). Hint: {_did_you_mean(key, keys)}add the field to the "
                f"state model, or change {how}=."
            )
    for field_name, source, expression in _reads(agent):
        for key in state_references(source, expression=expression):
            if key not in keys:
                yield (
                    f"Agent {name!r}: the {field_name} reads state.{key}, which "
                    f"{state.name} does not have (keys: {', '.join(keys)}). Hint: "
                    f"{_did_you_mean(key, keys)}fix the name, or add the field to the model."
                )


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _satisfiable(pattern: Pattern, decl: Declarations) -> bool:
    if not isinstance(pattern, str):
        return True  # a regular expression: cannot be checked statically
    if decl.matching(pattern):
        return True
    if decl.state.keys is None and pattern.startswith(("state:", "*")):
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


def edges(decl: Declarations) -> dict[str, dict[str, str]]:
    """``edges[a][b] = signal``: agent ``a`` can emit ``signal``, which activates ``b``."""
    found: dict[str, dict[str, str]] = {name: {} for name in decl.agents}
    for source in decl.agents:
        targets = found[source]
        for signal in decl.emitted_by(source, normal_only=True):
            for target in decl.listeners(signal):
                targets.setdefault(target, signal)
    return found


def find_cycles(decl: Declarations) -> list[list[str]]:
    """One cycle per strongly connected group of agents, as ``agent, signal, ...``."""
    graph = edges(decl)
    cycles: list[list[str]] = []
    for group in _components(graph):
        path = _cycle_from(group[0], set(group), graph)
        if path:
            cycles.append(path)
    return cycles


def _components(graph: Mapping[str, Mapping[str, str]]) -> list[list[str]]:
    """Strongly connected components that contain a cycle (Tarjan's, iteratively)."""
    return _Tarjan(graph).components()


class _Tarjan:
    """Tarjan's walk, with an explicit stack of (node, successors left) for depth."""

    def __init__(self, graph: Mapping[str, Mapping[str, str]]) -> None:
        self.graph = graph
        self.order = {node: position for position, node in enumerate(graph)}
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.on_stack: set[str] = set()
        self.found: list[list[str]] = []

    def components(self) -> list[list[str]]:
        for root in self.graph:
            if root not in self.index:
                self._walk(root)
        return self.found

    def _walk(self, root: str) -> None:
        work: list[tuple[str, Iterator[str]]] = []
        self._enter(root, work)
        low, index = self.low, self.index
        while work:
            node, successors = work[-1]
            if self._advance(node, successors, work):
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                self._close(node)

    def _enter(self, node: str, work: list[tuple[str, Iterator[str]]]) -> None:
        self.index[node] = self.low[node] = len(self.index)
        self.stack.append(node)
        self.on_stack.add(node)
        work.append((node, iter(self.graph[node])))

    def _advance(
        self, node: str, successors: Iterator[str], work: list[tuple[str, Iterator[str]]]
    ) -> bool:
        """Go down to the next successor not visited yet; whether there was one."""
        for nxt in successors:
            if nxt not in self.index:
                self._enter(nxt, work)
                return True
            if nxt in self.on_stack:
                self.low[node] = min(self.low[node], self.index[nxt])
        return False

    def _close(self, node: str) -> None:
        """Pop the component ``node`` is the root of; keep it if it holds a cycle."""
        group = []
        while True:
            member = self.stack.pop()
            self.on_stack.discard(member)
            group.append(member)
            if member == node:
                break
        if len(group) > 1 or node in self.graph[node]:
            self.found.append(sorted(group, key=self.order.__getitem__))


def _cycle_from(start: str, group: set[str], graph: Mapping[str, Mapping[str, str]]) -> list[str]:
    """A shortest cycle through ``start`` within ``group``: ``start, sig, ..., sig, start``."""
    parents: dict[str, tuple[str, str]] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt, signal in graph[node].items():
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
