"""A reaction's guard, asked once per event, when the event is logged for the agent.

A reaction agent's ``when`` is evaluated once for each event, as the run would see it
(the graph's initial state, the event as the input, the object, the store and the
event in scope), when the dispatcher logs the event for the agent: an event it turns
down is logged ``skipped``, naming the guard, and never waits, so admission
(``Reaction(admit=...)``) decides among the events that passed it. A guard that
raises logs the entry ``failed`` with its error. The agent's run has no guard
(:class:`~reactor.service._reactions.registry.ReactionAgent` builds its graph
without it): a guard with a side effect runs once per event, never twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

from reactor._agents.context import AgentContext
from reactor._agents.sandbox import template_values
from reactor._agents.templates import render
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import HARNESS_START
from reactor._signals.signal import new_signal
from reactor.service._reactions.registry import ReactionAgent
from stores import create_store

__all__ = ["guard_skips", "guard_verdict"]


def guard_skips(
    target: ReactionAgent, input: Any, scope: Mapping[str, Any], run_id: str
) -> str | None:
    """Why the agent's ``when`` guard turns this reaction down, or ``None`` when it runs.

    ``None`` too when it has no guard.

    Raises:
        Exception: What the guard raised.
    """
    agent, name = target.agent, target.name
    if agent.when is None:
        return None
    store = create_store(target.graph.state)
    start = new_signal(
        HARNESS_START,
        freeze_payload({"input": input, "state": store.state}),
        id="sig_1",
        seq=1,
        timestamp=time.time(),
        source="harness",
        caused_by=None,
        depth=0,
        run_id=run_id,
    )
    if agent.when_expression is not None:
        context = {
            **template_values(scope),
            "state": store.state,
            "input": input,
            "signal": start,
            "agent": name,
            "run_id": run_id,
        }
        passed = render(agent.when_expression, context, agent=name, field="when expression")
    else:
        ctx = AgentContext(name, run_id, start, input, store, None, None, scope)
        passed = agent.when(ctx)  # type: ignore[operator]
    if passed:
        return None
    return f"its guard is false for this event (when={_spelled(agent.when)}): no run was started"


def guard_verdict(
    target: ReactionAgent, input: Any, scope: Mapping[str, Any]
) -> tuple[Literal["skipped", "failed"], str] | None:
    """What becomes of an event the agent's guard does not let through (``None``: it goes).

    ``("skipped", why)`` when the guard is false, ``("failed", why)`` when it raises.
    """
    try:
        skipped = guard_skips(target, input, scope, "")
    except Exception as exc:
        return "failed", f"its guard (when={_spelled(target.agent.when)}) raised {exc!r}"
    return None if skipped is None else ("skipped", skipped)


def _spelled(when: Any) -> str:
    """The guard as its author wrote it: the expression, or the function's name."""
    if isinstance(when, str):
        return repr(when)
    name = getattr(when, "__qualname__", None)  # a function; any other callable by its repr
    return f"{when.__module__}.{name}" if name else repr(when)
