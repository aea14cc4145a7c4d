"""Resuming after a code change: would this graph repeat what the run's log says it did?

A run records its graph's fingerprints (``harness:start``, and again at each resume
and fork). Before a resume, the current graph is compared with the latest of them,
agent by agent (:func:`check_resume`):

* an agent added since is compatible: it reacts to what comes next;
* an agent changed or removed is compatible if it has no recorded activation (nothing
  it did is in the log), and not otherwise: the log holds outputs the new code would
  not have produced, or an activation in flight that nothing could finish;
* an agent whose guard (``when``) changed is checked against the log: the new guard is
  evaluated offline on every recorded decision of the agent (the state at that signal,
  rebuilt from the log, and the signal itself); one it decides differently (it would
  activate where the run skipped, or skip where the run activated) makes it
  incompatible.

A run recorded before fingerprints existed has nothing to compare with: it resumes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reactor._activation.resume import ResumePlan
from reactor._agents.context import AgentContext
from reactor._agents.fingerprint import PARTS, fingerprints
from reactor._agents.sandbox import template_values
from reactor._agents.templates import render
from reactor._engine.routes import routes_of
from reactor._engine.runspec import GraphSpec
from reactor._signals.names import HARNESS_START, parse_agent_event, parse_state_event
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions import GraphChangedError, RunFinishedError
from stores import create_store

if TYPE_CHECKING:
    from reactor._agents.agent import Agent
    from reactor._recording.recording import Recording
    from reactor._recording.store import SignalStore

__all__ = ["Verdict", "check_resume", "resume_plan"]

_WORDS = {
    "kind": "kind (prompt, handler or question)",
    "activate_on": "activate_on",
    "when": "guard (when)",
    "emits": "emits",
    "updates": "updates",
    "templates": "prompt templates",
    "output": "output schema",
    "tools": "tools",
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether a run may resume on a graph, and why.

    Attributes:
        run_id: The run.
        changes: Each agent that makes the resume unsafe, and what changed, in words.
        compatible_changes: Changes that do not (agents added, or changed but never
            activated), in words.
        checked: Whether the run recorded fingerprints to compare with.
    """

    run_id: str
    changes: Mapping[str, str]
    compatible_changes: tuple[str, ...] = ()
    checked: bool = True

    @property
    def compatible(self) -> bool:
        """Whether the run may resume on the graph."""
        return not self.changes

    def error(self) -> GraphChangedError:
        """The error a resume with ``on_change="fail"`` raises."""
        listed = "; ".join(f"agent {agent!r}: {why}" for agent, why in self.changes.items())
        return GraphChangedError(
            f"Run {self.run_id} cannot resume on this graph: its code changed what the "
            f"run's log says was done ({listed}). Deploy the code the run last ran with, or "
            "resume with on_change='force' to go on anyway (`reactor resume RUN --force`, "
            "POST /api/runs/{id}/resume?force=true).",
            run_id=self.run_id,
            changes=self.changes,
        )

    def __str__(self) -> str:
        if not self.checked:
            return (
                f"Run {self.run_id} was recorded without fingerprints, so its graph cannot "
                "be compared: it resumes as it is."
            )
        lines = [
            f"Run {self.run_id} can resume on this graph."
            if self.compatible
            else f"Run {self.run_id} cannot resume on this graph:"
        ]
        lines += [f"  agent {agent!r}: {why}" for agent, why in self.changes.items()]
        lines += [f"  (compatible) {note}" for note in self.compatible_changes]
        return "\n".join(lines)


def resume_plan(
    graph: GraphSpec, record: SignalStore, run_id: str, scope: Mapping[str, Any] | None = None
) -> tuple[ResumePlan, Verdict]:
    """Read run ``run_id``'s plan from its latest snapshot on, and check ``graph`` against it.

    Raises:
        RunNotFoundError: ``record`` has no such run.
        RunFinishedError: The run has already ended.
    """
    recording: Recording = record.load_tail(run_id)
    if recording.complete:
        raise RunFinishedError(
            f"Run {recording.run_id} has already ended ({recording.status}); only a run "
            "that stopped before its harness:end can be resumed. Start a new run, or "
            "replay this one with run(replay=...).",
            run_id=recording.run_id,
            status=recording.status,
        )
    agents = list(graph.agents.values())
    plan = ResumePlan.read(recording, list(graph.agents), routes_of(graph, agents))
    verdict = check_resume(graph, plan, load=lambda: record.load(run_id), scope=scope)
    return plan, verdict


def check_resume(
    graph: GraphSpec,
    plan: ResumePlan,
    whole: Recording | None = None,
    *,
    load: Any = None,
    scope: Mapping[str, Any] | None = None,
) -> Verdict:
    """Compare ``graph`` with the fingerprints ``plan``'s run recorded (see the module).

    ``whole`` is the run's whole log, or ``load()`` gives it: needed only when a guard
    changed, to evaluate it on the recorded decisions.
    """
    recorded = plan.fingerprints
    if recorded is None:
        return Verdict(plan.run_id, {}, checked=False)
    current = fingerprints(graph.agents)
    changes: dict[str, str] = {}
    notes = [f"agent {name!r} was added" for name in current if name not in recorded]
    guards: list[str] = []
    for name, parts in recorded.items():
        launched = plan.launched.get(name, 0)
        activations = f"{launched} recorded activation{'s' if launched != 1 else ''}"
        now = current.get(name)
        if now is None:
            if launched:
                changes[name] = f"removed, and it has {activations}"
            else:
                notes.append(f"agent {name!r} was removed; it never activated")
            continue
        changed = [part for part in PARTS if parts.get(part) != now.get(part)]
        behaviour = [_WORDS[part] for part in changed if part != "when"]
        if behaviour and launched:
            changes[name] = f"its {', '.join(behaviour)} changed, and it has {activations}"
        elif behaviour:
            notes.append(f"agent {name!r} changed ({', '.join(behaviour)}); it never activated")
        if "when" in changed and name not in changes:
            guards.append(name)
    if guards:
        log = whole if whole is not None else load()
        changes.update(_guards_differ(graph, guards, log, scope or {}))
    return Verdict(plan.run_id, changes, tuple(notes))


def _guards_differ(
    graph: GraphSpec, names: list[str], log: Recording, scope: Mapping[str, Any]
) -> dict[str, str]:
    """The agents whose new guard decides a recorded decision differently, and where.

    One pass finds the recorded decisions (an activation: the guard passed; a skip
    with reason ``guard``: it did not), a second walks the log once, rebuilding the
    state, and evaluates the new guard as each decision's trigger comes.
    """
    wanted = set(names)
    by_id = {signal.id: signal for signal in log.signals}
    decisions: dict[int, list[tuple[str, bool]]] = {}
    for signal in log.signals:
        event = parse_agent_event(signal.name)
        if event is None or event[0] not in wanted:
            continue
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        if event[1] == "activated":
            expected = True
        elif event[1] == "skipped" and payload.get("reason") == "guard":
            expected = False
        else:
            continue
        trigger = by_id.get(signal.caused_by or "")
        if trigger is not None:
            decisions.setdefault(trigger.seq, []).append((event[0], expected))
    store = create_store(graph.state)
    state: dict[str, Any] = {}
    found: dict[str, str] = {}
    for signal in log.signals:
        parsed = parse_state_event(signal.name)
        if signal.name == HARNESS_START and isinstance(signal.payload, Mapping):
            state = copy.deepcopy(to_jsonable(signal.payload.get("state") or {}))
        elif parsed is not None and parsed[1] == "changed":
            state[signal.payload["key"]] = signal.payload["new"]
        for agent, expected in decisions.get(signal.seq, ()):
            if agent in found:
                continue
            store.restore(copy.deepcopy(state))
            verdict = _decides(graph.agents[agent], agent, signal, store, log, scope)
            if verdict != expected:
                did = "activated on" if expected else "skipped"
                would = "would skip it" if expected else "would activate on it"
                outcome = verdict if isinstance(verdict, str) else would
                found[agent] = (
                    f"its guard (when) changed, and it {did} signal #{signal.seq} "
                    f"({signal.name}) where the new guard {outcome}"
                )
    return found


def _decides(
    agent: Agent, name: str, trigger: Signal, store: Any, log: Recording, scope: Mapping[str, Any]
) -> bool | str:
    """The new guard's decision on ``trigger`` (or, if it raised, what it raised)."""
    try:
        if agent.when_expression is not None:
            context = {
                **template_values(scope),
                "state": store.state,
                "input": log.input,
                "signal": trigger,
                "agent": name,
                "run_id": log.run_id,
            }
            return bool(render(agent.when_expression, context, agent=name, field="when expression"))
        guard: Any = agent.when
        return bool(guard(AgentContext(name, log.run_id, trigger, log.input, store, scope=scope)))
    except Exception as exc:
        return f"raises {type(exc).__name__}: {exc}"
