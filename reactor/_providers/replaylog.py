"""A recording read for a replay: its provider calls, and its handlers' turns.

A replay answers providers from :func:`recorded_calls` (each call's events, each with
its place in the recording) and holds the activations that call no provider to their
recorded order with :func:`handler_turns`: when each emitted what it emitted while it
ran, and when it finished. See :mod:`reactor._providers.sequence` for how a step
waits for its turn.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping

from reactor._providers.base import (
    End,
    ProviderEvent,
    Retry,
    TextComplete,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolResult,
    Usage,
)
from reactor._providers.sequence import Step
from reactor._recording.recording import Recording
from reactor._signals.names import (
    PROMPT_START,
    PROVIDER_END,
    PROVIDER_EVENTS,
    PROVIDER_RETRY,
    PROVIDER_START,
    SESSION_PROMPT,
    TEXT_COMPLETE,
    TEXT_DELTA,
    THINKING_DELTA,
    TOOL_CALL,
    TOOL_RESULT,
    parse_agent_event,
    span_event,
)
from reactor._signals.signal import Signal

__all__ = ["Call", "CallStep", "HandlerTurns", "handler_turns", "recorded_calls"]


@dataclasses.dataclass
class Call:
    """One recorded provider call: its request key, and what it streamed."""

    agent: str
    request_hash: str
    model: str | None
    start: Step
    events: list[CallStep] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class CallStep(Step):
    """One recorded event of a call (or its error), with its place in the recording."""

    event: ProviderEvent | None = None
    error: tuple[str, str, bool] | None = None  # (type, message, retryable)


def recorded_calls(recording: Recording) -> list[Call]:
    """Rebuild each provider call from its signals (they hang under its activation)."""
    calls: list[Call] = []
    open_calls: dict[str | None, Call] = {}
    for signal in recording.signals:
        name, payload = signal.name, signal.payload
        if name == PROVIDER_START:
            started = Call(
                payload["agent"], payload["request_hash"], payload.get("model"), Step(signal.seq)
            )
            open_calls[signal.caused_by] = started
            calls.append(started)
            continue
        found = open_calls.get(signal.caused_by) if name in PROVIDER_EVENTS else None
        if found is None:
            continue
        call = found
        step = CallStep(signal.seq)
        call.events.append(step)
        if name == TEXT_DELTA:
            step.event = TextDelta(payload["content"])
        elif name == THINKING_DELTA:
            step.event = ThinkingDelta(payload["content"])
        elif name == TEXT_COMPLETE:
            step.event = TextComplete(payload["content"])
        elif name == TOOL_CALL:
            step.event = ToolCall(payload["id"], payload["name"], payload["input"])
        elif name == TOOL_RESULT:
            step.event = ToolResult(
                payload["id"], payload["name"], payload["result"], payload.get("error")
            )
        elif name == PROVIDER_RETRY:
            step.event = Retry(
                int(payload["attempt"]),
                float(payload["wait_s"]),
                payload.get("status"),
                str(payload.get("error") or ""),
            )
        elif name == PROVIDER_END:
            usage = payload.get("usage") or {}
            step.event = End(
                output=payload["output"],
                usage=Usage(**{k: int(v) for k, v in usage.items() if k in _USAGE}),
                cost_usd=payload.get("cost_usd"),
                stop_reason=payload.get("stop_reason"),
                model=call.model,
            )
            del open_calls[signal.caused_by]
        else:
            error = payload.get("error") or {}
            step.error = (
                str(error.get("type", "ProviderError")),
                str(error.get("message", "")),
                bool(payload.get("retryable", False)),
            )
            del open_calls[signal.caused_by]
    return calls


_USAGE = frozenset(field.name for field in dataclasses.fields(Usage))


@dataclasses.dataclass
class HandlerTurns:
    """When a handler activation (one that called no provider) emitted what it emitted.

    Attributes:
        steps: The ``seq`` of each signal the activation emitted itself (``ctx.emit``,
            state writes, phases and tasks while its code ran; its ``updates``, ``emits``
            and ``completed`` when it finished): each waits for its turn in a replay.
        completion: Its turn to finish (its ``updates``, ``emits`` and ``completed``).
    """

    steps: list[int]
    completion: Step


def handler_turns(recording: Recording) -> dict[tuple[str, int], HandlerTurns]:
    """The turns of each handler activation: ``(agent, nth)`` -> :class:`HandlerTurns`.

    Its completion waits for the last signal recorded before the activation's own
    closing run of signals (its ``updates``, ``emits``, ``completed`` and what they
    caused): whatever other agents did before it finished. Its steps are the signals
    caused by the activation itself (or by one of its phases, tasks or prompts), its
    ``completed`` last: the replay lets each go once the signal recorded before it is
    replayed.
    """
    signals = recording.signals
    by_id = {signal.id: signal for signal in signals}
    activated: dict[str, tuple[str, int]] = {}
    counts: Counter[str] = Counter()
    called: set[str] = set()
    owners: dict[str, str] = {}  # activation, phase, task, prompt id -> its activation
    steps: dict[str, list[int]] = {}
    found: dict[tuple[str, int], HandlerTurns] = {}
    for index, signal in enumerate(signals):
        parsed = parse_agent_event(signal.name)
        cause = signal.caused_by
        if parsed is not None and parsed[1] == "activated":
            counts[parsed[0]] += 1
            activated[signal.id] = (parsed[0], counts[parsed[0]])
            owners[signal.id] = signal.id
            continue
        owner = owners.get(cause or "")
        if signal.name == PROVIDER_START and owner is not None:
            called.add(owner)
        elif (
            parsed is not None
            and parsed[1] in ("completed", "failed")
            and cause in activated
            and cause not in called
        ):
            root = cause
            before = index - 1
            while before >= 0 and _descends(signals[before], root, by_id):
                before -= 1
            after = signals[before].seq if before >= 0 else 0
            own = [*steps.get(root, ()), signal.seq]
            found[activated[root]] = HandlerTurns(own, Step(signal.seq, after))
        elif owner is not None and signal.name not in PROVIDER_EVENTS:
            steps.setdefault(owner, []).append(signal.seq)
            if signal.name in _CAUSES:  # what it emits inside is the activation's too
                owners[signal.id] = owner
    return found


_CAUSES = frozenset(
    {span_event("phase", "start"), span_event("task", "start"), PROMPT_START, SESSION_PROMPT}
)
"""Signals inside which an activation's code goes on emitting (its own signals)."""


def _descends(signal: Signal, root: str, by_id: Mapping[str, Signal]) -> bool:
    """Whether ``signal`` is ``root`` or was caused, at any remove, by it."""
    seen = 0
    current: Signal | None = signal
    while current is not None and seen < 10_000:
        if current.id == root:
            return True
        current = by_id.get(current.caused_by or "")
        seen += 1
    return False
