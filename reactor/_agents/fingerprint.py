"""An agent's fingerprint: a hash of each part of it that decides what it does.

A run records its graph's fingerprints in ``harness:start`` (and again in
``harness:resumed`` and ``harness:forked``, for the graph that goes on from there), so
that a resume can tell which agents the current code changed since the run last ran:
the parts are its kind (prompt, handler, question, none), ``activate_on``, ``when``,
``emits``, ``updates``, its templates (prompt, system, question, choices), its output
schema and the names of its tools and MCP servers. A handler's code is not part of
it: a fix in a handler is what a deploy is for.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import textwrap
import weakref
from collections.abc import Mapping
from typing import Any

from reactor._agents.agent import Agent
from reactor._signals.views import DictView

__all__ = ["PARTS", "fingerprint", "fingerprints", "recorded_fingerprints"]

PARTS = ("kind", "activate_on", "when", "emits", "updates", "templates", "output", "tools")
"""The parts of a fingerprint, in the order messages name them."""

_CACHE: weakref.WeakKeyDictionary[Agent, DictView] = weakref.WeakKeyDictionary()
"""Each agent's fingerprint, read-only: made once, shared by every run that records it."""


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _kind(agent: Agent) -> str:
    if agent.is_llm:
        return "prompt"
    if agent.ask is not None:
        return "ask"
    return "run" if agent.run is not None else "none"


def _guard(agent: Agent) -> Any:
    """A guard as text: its expression, or the source of its function."""
    when = agent.when
    if when is None or isinstance(when, str):
        return when
    try:
        return textwrap.dedent(inspect.getsource(when))
    except (OSError, TypeError):  # no source (a builtin, a REPL): its name, at least
        return getattr(when, "__qualname__", repr(when))


def fingerprint(agent: Agent) -> dict[str, str]:
    """The hash of each part of ``agent`` (see :data:`PARTS`), computed once per agent."""
    return dict(_fingerprint(agent))


def _fingerprint(agent: Agent) -> DictView:
    found = _CACHE.get(agent)
    if found is None:
        parts = {
            "kind": _kind(agent),
            "activate_on": sorted(str(pattern) for pattern in agent.activate_on),
            "when": _guard(agent),
            "emits": list(agent.emits),
            "updates": agent.updates,
            "templates": [agent.prompt_text, agent.system, agent.ask, agent.choices],
            "output": agent.output_schema,
            "tools": [
                sorted(tool.name for tool in agent.tools),
                sorted(str(getattr(server, "name", server)) for server in agent.mcps),
            ],
        }
        found = _CACHE[agent] = DictView({part: _digest(parts[part]) for part in PARTS})
    return found


def fingerprints(agents: Mapping[str, Agent]) -> dict[str, dict[str, str]]:
    """The fingerprint of each agent of a graph, by name."""
    return {name: fingerprint(agent) for name, agent in agents.items()}


def recorded_fingerprints(agents: Mapping[str, Agent]) -> DictView:
    """:func:`fingerprints` as ``harness:start`` records them, read-only.

    Each agent's part is made once and shared by all its runs (thousands of runs of one
    graph may be in flight: a copy each would cost every run a dozen objects).
    """
    return DictView({name: _fingerprint(agent) for name, agent in agents.items()})
