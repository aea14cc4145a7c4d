"""Which agents a signal triggers: a table made once per graph, filled as names appear.

Every run of a graph asks the same question for each signal it dispatches: whose
``activate_on`` matches this name? The answer depends only on the graph, so it is
computed once per (graph, name), with exact names looked up and patterns matched once,
and shared by every run of the graph. A run then needs no subscription per agent.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from reactor._agents.agent import Agent
from reactor._signals.names import inbox_agent
from reactor._signals.patterns import compile_pattern, is_exact

__all__ = ["Routes", "routes_of"]

_LIMIT = 65_536
"""Most names remembered per graph (outside input may bring any number of names)."""


class Routes:
    """The agents (by position) each signal name activates, in the graph's order.

    ``inbox:<agent>`` activates ``<agent>`` only, whatever other patterns match it.
    """

    def __init__(self, agents: Sequence[Agent]) -> None:
        self._names = [agent.name for agent in agents]
        self._exact: dict[str, list[int]] = {}
        self._wild: list[tuple[int, Any]] = []
        for index, agent in enumerate(agents):
            for pattern in agent.activate_on:
                if is_exact(pattern):
                    self._exact.setdefault(str(pattern), []).append(index)
                else:
                    self._wild.append((index, compile_pattern(pattern)))
        self.known: dict[str, tuple[int, ...]] = {}
        """The names answered so far (read directly by runs, for speed)."""
        self.unrouted: set[str] = set()
        """Known names that activate no agent and are no agent's message: nothing to do."""

    def __call__(self, name: str) -> tuple[int, ...]:
        """The positions of the agents ``name`` activates."""
        found = self.known.get(name)
        if found is None:
            matched = set(self._exact.get(name, ()))
            matched.update(index for index, matcher in self._wild if matcher(name))
            addressee = inbox_agent(name)
            if addressee is not None:  # a message to one agent reaches that agent only
                matched = {index for index in matched if self._names[index] == addressee}
            found = tuple(sorted(matched))
            if len(self.known) < _LIMIT:
                self.known[name] = found
                if not found and addressee is None:
                    self.unrouted.add(name)
        return found


_BY_GRAPH: weakref.WeakKeyDictionary[Any, Routes] = weakref.WeakKeyDictionary()


def routes_of(graph: Any, agents: Sequence[Agent]) -> Routes:
    """The routes of ``graph`` (made on its first run)."""
    routes = _BY_GRAPH.get(graph)
    if routes is None:
        routes = _BY_GRAPH[graph] = Routes(agents)
    return routes
