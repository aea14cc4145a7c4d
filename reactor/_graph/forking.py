"""Forks: a new run that begins with another run's log up to a signal, then goes on live.

``graph.fork(run_id, at=seq, state={...}, record=store)`` (or ``start(fork=...)``)
copies the source run's signals up to ``at`` into a new run (under its own id, in the
same store), reads them as a resume would, and records ``harness:forked {from_run_id,
at}``. Then, in this order (the run does it: ``Run.settle``):

1. what was in flight at ``at`` *settles*: it runs again with everything the source's
   log answered it, also after ``at`` (its model calls, tool results, replies), so the
   past makes no model call and asks nobody twice; nothing new starts meanwhile;
2. ``state`` is written as the actor ``user``, so no activation that began before
   ``at`` writes over an edited key;
3. what was triggered meanwhile starts, each agent once (the triggers pending at ``at``
   and the edit's ``state:<key>:changed`` coalesce into one activation, which sees
   the edited state).

The source run is not touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reactor._activation.resume import ResumePlan
from reactor._engine.opening import Forked, rebound
from reactor._engine.routes import Routes, routes_of
from reactor._engine.runspec import GraphSpec
from reactor._recording.info import RunInfo, new_run_id
from reactor._recording.recording import Recording
from reactor._signals.names import HARNESS_END, HARNESS_ENDING, parse_agent_event
from stores import create_store

if TYPE_CHECKING:
    from reactor._engine.options import RunOptions

__all__ = ["fork_plan"]


def fork_plan(graph: GraphSpec, options: RunOptions) -> tuple[ResumePlan, Forked]:
    """What a fork starts from: the source's log up to ``at``, read as a resume reads it.

    Raises:
        RunNotFoundError: The store has no such source run.
        ValueError: ``at`` is not a signal of the source run.
        StateValidationError: ``state`` does not fit the graph's state (nothing is
            recorded).
    """
    spec = options.fork
    record = options.record
    assert spec is not None
    assert record is not None
    source_id, at = str(spec["run_id"]), int(spec["at"])
    state: Mapping[str, Any] = dict(spec.get("state") or {})
    source = record.load(source_id)
    last = source.signals[-1].seq if source.signals else 0
    if not 1 <= at <= last:
        raise ValueError(
            f"Run {source_id} has signals 1 to {last}: fork it at one of them, not at {at}."
        )
    ending = next((s.seq for s in source.signals if s.name in (HARNESS_ENDING, HARNESS_END)), 0)
    cut = min(at, ending - 1) if ending else at  # a fork goes on: it does not begin ended
    run_id = options.run_id or new_run_id()
    prefix = rebound([signal for signal in source.signals if signal.seq <= cut], run_id)
    info = RunInfo(run_id=run_id, graph=graph.name, forked_from=source_id)
    recording = Recording(info=info, signals=tuple(prefix), requests=source.requests)
    agents = list(graph.agents.values())
    routes = routes_of(graph, agents)
    plan = ResumePlan.read(recording, list(graph.agents), routes)
    _answer_from_the_source(plan, source, cut, list(graph.agents), routes)
    if state:
        scratch = create_store(graph.state)
        scratch.restore(plan.state)
        scratch.update(dict(state), actor="user")  # refused here, before anything is recorded
    return plan, Forked(source_id, cut, state)


def _answer_from_the_source(
    plan: ResumePlan, source: Recording, cut: int, agents: list[str], routes: Routes
) -> None:
    """Give what was in flight at ``cut`` all the source's log answered it, after ``cut`` too.

    The source's log read on without the finishing signals of those activations keeps
    them in flight, with every model answer, tool result and reply they got: their
    answers settle the fork's reruns (the rest of that reading is not used).
    """
    flying = {flight.signal.id for flight in plan.in_flight}
    if not flying or not source.signals or source.signals[-1].seq <= cut:
        return
    kept = [
        signal
        for signal in source.signals
        if not (
            signal.caused_by in flying
            and (parsed := parse_agent_event(signal.name)) is not None
            and parsed[1] in _FINISHING
        )
    ]
    read = ResumePlan.read(dataclasses.replace(source, signals=tuple(kept)), agents, routes)
    answered = {flight.signal.id: flight.answers for flight in read.in_flight}
    for flight in plan.in_flight:
        flight.answers = answered.get(flight.signal.id, flight.answers)


_FINISHING = frozenset({"completed", "failed", "cancelled"})
