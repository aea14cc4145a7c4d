"""A run's signal log, and what can be read from it: the one base of results and recordings.

:class:`SignalLog` holds the views every log offers: signals by pattern, the causal
chain and tree, the state at any signal, the first difference from another log, and
JSON lines. :class:`reactor.RunResult` (a run that just finished) and
:class:`reactor.Recording` (a run loaded from a signal store) are both signal logs.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pydantic_core

from reactor._recording.diff import VOLATILE, Divergence, first_divergence
from reactor._recording.eventtree import EventTree
from reactor._recording.info import RunInfo
from reactor._recording.seals import sound
from reactor._signals.diagnostics import short_repr
from reactor._signals.names import DELTAS, HARNESS_SNAPSHOT, HARNESS_START, parse_state_event
from reactor._signals.patterns import Pattern, compile_pattern
from reactor._signals.signal import Signal, json_fallback, to_jsonable

__all__ = ["SignalLog", "causal_chain", "latest_snapshot", "needed_seqs", "render_tree"]


class SignalLog:
    """Views of a run's signals, shared by run results and recordings.

    Subclasses provide ``signals`` (in ``seq`` order), ``requests`` (what each
    provider call was asked, by request hash, when known) and ``run_info``.
    """

    signals: tuple[Signal, ...]
    requests: Mapping[str, Mapping[str, Any]]

    @property
    def run_info(self) -> RunInfo:
        """What is known about the run."""
        raise NotImplementedError

    def select(self, pattern: Pattern) -> list[Signal]:
        """Return the signals whose names match ``pattern``, in order."""
        matcher = compile_pattern(pattern)
        return [signal for signal in self.signals if matcher(signal.name)]

    def causal_chain(self, signal: Signal | str) -> list[Signal]:
        """Return the chain of causes of ``signal`` (or its id): root first, it last.

        Raises:
            KeyError: No such signal in this log.
        """
        return causal_chain(self.signals, signal)

    def tree(self, *, exclude: Iterable[Pattern] = DELTAS, payloads: bool = False) -> str:
        """Render the signals as a causal tree (deltas excluded by default)."""
        return render_tree(self.signals, exclude=exclude, payloads=payloads)

    def event_tree(self, store: Any = None) -> EventTree:
        """The run as an :class:`~reactor.EventTree`: activations, prompts, tools, steps...

        Child runs started with ``ctx.spawn`` hang under their ``spawn`` node: those a
        run result kept, and those ``store`` (a signal store) has recorded.
        """
        kept = self.child_runs()

        def children(run_id: str) -> Sequence[Signal] | None:
            found = kept.get(run_id)
            if found is None and store is not None:
                try:
                    found = store.load(run_id).signals
                except LookupError:
                    return None
            return found

        return EventTree.build(self.signals, children, name=self.run_info.graph or "run")

    def child_runs(self) -> Mapping[str, Sequence[Signal]]:
        """Signals of the child runs this log keeps, by run id (a run result's spawns)."""
        return {}

    def state_at(self, seq: int) -> dict[str, Any]:
        """Rebuild the state as it was right after signal ``seq`` was emitted.

        Starts from the latest sound ``harness:snapshot`` at or before ``seq`` (else
        from the state in ``harness:start``) and applies the ``new`` value of every
        ``state:<key>:changed`` after it, up to ``seq``: a long log is read from its
        last snapshot on. A snapshot that fails its check is skipped, with a warning
        (see ``reactor._recording.seals``). The result is plain JSON data.
        """
        signals = self.signals
        snapshot = latest_snapshot(signals, seq)
        if snapshot is not None:
            initial, after = snapshot.payload["state"], int(snapshot.payload["seq"])
        else:
            start = next((s for s in signals if s.name == HARNESS_START), None)
            payload = start.payload if start is not None else None
            initial = payload.get("state") if isinstance(payload, Mapping) else None
            after = 0
        state: dict[str, Any] = copy.deepcopy(to_jsonable(initial or {}))
        begin = bisect.bisect_right(signals, after, key=_seq) if after else 0
        for signal in itertools.islice(signals, begin, None):
            if signal.seq > seq:
                break
            parsed = parse_state_event(signal.name)
            if parsed is not None and parsed[1] == "changed":
                payload = signal.payload
                state[payload["key"]] = copy.deepcopy(to_jsonable(payload["new"]))
        return state

    def diff(
        self, other: SignalLog, *, ignore: Iterable[str] = VOLATILE, causal: bool = False
    ) -> Divergence | None:
        """Return where this run and ``other`` first differ, or ``None`` if they match.

        Signals are compared in recorded (``seq``) order, and the earliest one that
        differs is reported: when it is part of a provider's answer, the divergence
        names the agent and shows both answers; when it is a request, both prompts.
        Ids, timestamps and run ids are not compared, nor payload keys in ``ignore``
        (timings, by default). ``causal=True`` compares in causal order instead, which
        forgives parallel agents that merely interleaved differently.
        """
        return first_divergence(
            self.signals,
            other.signals,
            left_requests=self.requests,
            right_requests=other.requests,
            ignore=ignore,
            causal=causal,
        )

    def to_jsonl(self) -> str:
        """One JSON object per line: a header (run info, requests), then each signal."""
        header = {"recording": self.run_info.to_dict(), "requests": dict(self.requests)}
        lines = [json.dumps(header, default=str)]
        lines.extend(
            pydantic_core.to_json(signal.to_dict(), fallback=json_fallback).decode()
            for signal in self.signals
        )
        return "\n".join(lines) + "\n"


def _seq(signal: Signal) -> int:
    return signal.seq


_SLACK = 64
"""How far past its point a snapshot may come: it is queued behind what was emitted."""


def latest_snapshot(signals: Sequence[Signal], at: int | None = None) -> Signal | None:
    """The latest sound ``harness:snapshot`` of a log holding the run as it was at ``at`` or before.

    ``signals`` are in ``seq`` order; ``at`` is the last signal by default. A snapshot
    that fails its check (:func:`~reactor._recording.seals.sound`: changed since it was
    taken, not a snapshot's shape) is skipped, with a warning, for the one before it.

    A snapshot taken right after signal ``n`` says ``seq: n`` and comes a little after
    it in the log, so the search starts just past ``at`` and walks back.
    """
    if not signals:
        return None
    end = len(signals) if at is None else bisect.bisect_right(signals, at, key=_seq)
    for index in range(min(len(signals), end + _SLACK) - 1, -1, -1):
        signal = signals[index]
        if signal.name != HARNESS_SNAPSHOT:
            continue
        if index >= end:  # after ``at`` in the log: one taken at ``at`` or before?
            payload = signal.payload
            covered = payload.get("seq") if isinstance(payload, Mapping) else None
            if not isinstance(covered, int) or at is None or covered > at:
                continue
        if sound(signal):
            return signal
    return None


def needed_seqs(needs: Iterable[Sequence[int]]) -> list[int]:
    """The earlier signals a snapshot needs: its ``needs`` runs ``[first, step, count]``.

    A snapshot names the signals from before it that a resume takes up again (triggers
    not decided yet) instead of holding copies of them; a store reading a run's tail
    reads these too.
    """
    return [first + step * n for first, step, count in needs for n in range(count)]


def causal_chain(signals: Sequence[Signal], target: Signal | str) -> list[Signal]:
    """Walk ``caused_by`` links from ``target`` up to its root."""
    by_id = {signal.id: signal for signal in signals}
    key = target if isinstance(target, str) else target.id
    if key not in by_id:
        raise KeyError(f"No signal with id {key!r} in this run.")
    chain = [by_id[key]]
    seen = {key}
    while (parent := chain[-1].caused_by) is not None and parent in by_id and parent not in seen:
        seen.add(parent)
        chain.append(by_id[parent])
    chain.reverse()
    return chain


def render_tree(
    signals: Sequence[Signal], *, exclude: Iterable[Pattern] = DELTAS, payloads: bool = False
) -> str:
    """Render signals as an indented causal tree, one signal per line.

    The walk is iterative, so a causal chain thousands of activations deep renders
    (as deep indentation) instead of exhausting the stack.
    """
    skip = [compile_pattern(p) for p in exclude]
    shown = [s for s in signals if not any(m(s.name) for m in skip)]
    ids = {s.id for s in shown}
    children: dict[str | None, list[Signal]] = {}
    for signal in shown:
        parent = signal.caused_by if signal.caused_by in ids else None
        children.setdefault(parent, []).append(signal)
    start = signals[0].timestamp if signals else 0.0
    lines: list[str] = []
    # (signal, prefix of its line, prefix of its children, is it a root)
    stack: list[tuple[Signal, str, str]] = [
        (signal, "", "") for signal in reversed(children.get(None, []))
    ]
    while stack:
        signal, prefix, child_prefix = stack.pop()
        lines.append(f"{prefix}{describe(signal, start, payloads)}")
        kids = children.get(signal.id, [])
        for index in range(len(kids) - 1, -1, -1):
            last = index == len(kids) - 1
            branch = "└── " if last else "├── "
            below = "    " if last else "│   "
            stack.append((kids[index], child_prefix + branch, child_prefix + below))
    return "\n".join(lines)


def describe(signal: Signal, start: float, payloads: bool = False) -> str:
    """One line for a signal: name, source, time since ``start``, and key details."""
    offset = (signal.timestamp - start) * 1000
    text = f"{signal.name}  [{signal.source or '-'}, +{offset:.0f}ms]"
    payload = signal.payload
    if isinstance(payload, Mapping):
        duration = payload.get("duration_ms")
        if isinstance(duration, int | float):
            text += f" {duration:.0f}ms"
        if "reason" in payload and signal.name.endswith(":skipped"):
            text += f" ({payload['reason']})"
        error = payload.get("error")
        if isinstance(error, Mapping):
            text += f" {error.get('type')}: {error.get('message')}"
    if payloads and payload is not None:
        text += f" {short_repr(payload)}"
    return text
