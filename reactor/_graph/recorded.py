"""What an evaluation reads of a recording, checked first; the agents and the decision in it.

A store checks its rows as it reads them (JSON payloads, the harness's and the
state's signals shaped as readers rely on); an evaluation reads more: the model's
answers and usage, the text it streamed, the tool calls and results it replays.
:func:`check_recording` checks those before any case runs, so that a damaged
recording is one line naming the run, the signal and the fault (a
:class:`~reactor.RecordingError`), never a traceback from deep inside a replay.

:func:`agents_of` says which agents a run's graph had (the fingerprints
``harness:start`` keeps, else the agents that ran), and :func:`outcome` is what a run
ended with, as evaluations compare it: its final state as JSON data and, for a run
of a graph of one agent (a reaction's), that agent's output, its decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reactor._engine.result import RunResult
from reactor._recording.log import SignalLog
from reactor._recording.recording import Recording
from reactor._signals.names import (
    HARNESS_END,
    HARNESS_START,
    PROVIDER_END,
    PROVIDER_ERROR,
    PROVIDER_RETRY,
    PROVIDER_START,
    SESSION_REPLY,
    TEXT_COMPLETE,
    TEXT_DELTA,
    THINKING_DELTA,
    TIMER_FIRED,
    TOOL_CALL,
    TOOL_RESULT,
    agent_event,
    parse_agent_event,
)
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions import RecordingError

__all__ = ["OUTPUT", "agents_of", "check_recording", "outcome", "output_of"]

OUTPUT = "output"
"""The key a one-agent run's output is compared under, beside its state's keys."""


def _text(payload: Mapping[str, Any]) -> str | None:
    content = payload.get("content")
    return None if isinstance(content, str) else f"has the content {_short(content)}, not text"


def _usage(payload: Mapping[str, Any]) -> str | None:
    usage = payload.get("usage", {})
    if not isinstance(usage, Mapping) or not all(
        isinstance(count, int) and not isinstance(count, bool) for count in usage.values()
    ):
        return f"has the usage {_short(usage)}, not token counts"
    cost = payload.get("cost_usd")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)):
        return f"has the cost {_short(cost)}, not a number"
    return None


def _named(*fields: str) -> Callable[[Mapping[str, Any]], str | None]:
    def check(payload: Mapping[str, Any]) -> str | None:
        for field in fields:
            if not isinstance(payload.get(field), str):
                return f"has the {field} {_short(payload.get(field))}, not text"
        return None

    return check


def _fine(payload: Mapping[str, Any]) -> str | None:
    return None


_CHECKS: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    HARNESS_START: _fine,
    HARNESS_END: _fine,
    PROVIDER_START: _named("agent", "request_hash"),
    PROVIDER_END: _usage,
    PROVIDER_ERROR: _fine,
    PROVIDER_RETRY: _fine,
    TEXT_DELTA: _text,
    THINKING_DELTA: _text,
    TEXT_COMPLETE: _text,
    TOOL_CALL: _named("id", "name"),
    TOOL_RESULT: _named("id", "name"),
    SESSION_REPLY: _fine,
    TIMER_FIRED: _fine,
}
"""The signals an evaluation reads, and what each payload must hold (a mapping, always)."""


def check_recording(log: SignalLog, run_id: str) -> None:
    """Check the payloads an evaluation reads.

    Raises:
        RecordingError: One is damaged: ``The recording of 'run_...' is damaged:
            signal #12 ('provider:end') has the usage 'lots', not token counts. ...``
    """
    for signal in log.signals:
        check = _CHECKS.get(signal.name)
        if check is None and parse_agent_event(signal.name) is not None:
            check = _fine
        if check is None:
            continue
        payload = signal.payload
        problem = (
            check(payload)
            if isinstance(payload, Mapping)
            else f"has the payload {_short(payload)}, not an object"
        )
        if problem is not None:
            raise RecordingError(
                f"The recording of {run_id!r} is damaged: signal #{signal.seq} "
                f"({signal.name!r}) {problem}. Record the run again, or delete it."
            )


def agents_of(log: SignalLog) -> tuple[str, ...]:
    """The agents of the graph that made a run: its fingerprints, else those that ran."""
    start = next((s for s in log.signals if s.name == HARNESS_START), None)
    payload = start.payload if start is not None else None
    prints = payload.get("fingerprints") if isinstance(payload, Mapping) else None
    if isinstance(prints, Mapping) and prints:
        return tuple(str(name) for name in prints)
    seen: dict[str, None] = {}
    for signal in log.signals:
        parsed = parse_agent_event(signal.name)
        if parsed is not None:
            seen[parsed[0]] = None
    return tuple(seen)


def output_of(signals: tuple[Signal, ...], agent: str) -> Any:
    """An agent's last output in a run (its last ``agent:<name>:completed``), as JSON."""
    completed = agent_event(agent, "completed")
    for signal in reversed(signals):
        if signal.name == completed and isinstance(signal.payload, Mapping):
            return to_jsonable(signal.payload.get("output"))
    return None


def outcome(log: Recording | RunResult) -> dict[str, Any]:
    """What a run ended with, as evaluations compare it (see the module's docstring).

    The output of a run of one agent is under ``"output"`` (``"<agent>.output"``
    when its state has an ``output`` key).
    """
    state = to_jsonable(log.state)
    ended = dict(state) if isinstance(state, Mapping) else {}
    agents = agents_of(log)
    if len(agents) == 1:
        key = OUTPUT if OUTPUT not in ended else f"{agents[0]}.{OUTPUT}"
        ended[key] = output_of(log.signals, agents[0])
    return ended


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
