"""A reaction's guard, asked before its run: an event its ``when`` turns down starts no run.

A reaction agent's one-agent graph would start a run, evaluate the guard on
``harness:start`` and end at once, ``completed`` with nothing done: a run per event
that says nothing (half the runs of a service whose guards filter prices). So the
guard is evaluated first, as the run would (the graph's initial state, the event as
the input, the object, the store and the event in scope), and an event it turns down
is logged ``skipped`` in the processing log, naming the guard, with no run.

A guard that raises is left to the run: it fails there, recorded, as it always did.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from reactor._agents.context import AgentContext
from reactor._agents.sandbox import template_values
from reactor._agents.templates import render
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import HARNESS_START
from reactor._signals.signal import new_signal
from reactor.service._reactions.registry import ReactionAgent
from stores import create_store

__all__ = ["guard_skips"]


def guard_skips(
    target: ReactionAgent, input: Any, scope: Mapping[str, Any], run_id: str
) -> str | None:
    """Why the agent's ``when`` guard turns this reaction down, or ``None`` when it runs.

    ``None`` too when it has no guard, or when the guard raises (its run fails with it).
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
    try:
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
    except Exception:  # the run evaluates it again, and fails with the error
        return None
    if passed:
        return None
    return f"its guard is false for this event (when={_spelled(agent.when)}): no run was started"


def _spelled(when: Any) -> str:
    """The guard as its author wrote it: the expression, or the function's name."""
    if isinstance(when, str):
        return repr(when)
    name = getattr(when, "__qualname__", None)  # a function; any other callable by its repr
    return f"{when.__module__}.{name}" if name else repr(when)
