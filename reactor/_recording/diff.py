"""Where two signal logs part, and why: the first differing signal, named by its cause.

Logs are compared signal by signal in their recorded (``seq``) order, so the first
difference is the earliest thing that happened differently. When that is part of a
provider call (a streamed piece of an answer, or the answer itself), the divergence
names the agent and shows both answers; when it is the request (``provider:start``
with another ``request_hash``), both prompts. Everything downstream of it is a
consequence, and is not reported.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from reactor._signals.diagnostics import short_repr
from reactor._signals.names import (
    HARNESS_SNAPSHOT,
    HARNESS_START,
    PROVIDER_END,
    PROVIDER_ERROR,
    PROVIDER_EVENTS,
    PROVIDER_START,
    TEXT_DELTA,
    TOOL_CALL,
    TOOL_RESULT,
)
from reactor._signals.signal import Signal, to_jsonable

__all__ = ["VOLATILE", "Divergence", "canonical_order", "first_divergence"]

VOLATILE = frozenset({"duration_ms"})
"""Payload keys that differ between identical runs (timings); ignored by ``diff``."""

Kind = Literal["signal", "answer", "prompt", "length"]


@dataclasses.dataclass(frozen=True)
class Divergence:
    """Where two runs first differ (see :meth:`reactor.Recording.diff`).

    Attributes:
        step: Position of the differing signals in the compared order.
        path: Names of the signals leading to it (its causal chain).
        field: What differs: ``"name"``, ``"source"``, ``"payload.<key>..."``, or
            ``"length"`` when one run has more signals.
        left: The first run's signal there (``None`` if it ended earlier).
        right: The second run's signal there.
        kind: ``"answer"`` when a provider answered differently, ``"prompt"`` when
            an agent asked differently, ``"length"`` when one run stopped earlier,
            else ``"signal"``.
        agent: The agent whose answer or prompt differs (for those kinds).
        left_text: The first run's answer or prompt, as text (for those kinds).
        right_text: The second run's.
    """

    step: int
    path: tuple[str, ...]
    field: str
    left: Signal | None
    right: Signal | None
    kind: Kind = "signal"
    agent: str | None = None
    left_text: str | None = None
    right_text: str | None = None

    def __str__(self) -> str:
        where = " > ".join(self.path) or "start"
        if self.kind in ("answer", "prompt"):
            what = f"the {self.kind} of agent {self.agent!r}"
            return (
                f"Runs diverge at step {self.step} ({where}): {what} differs.\n"
                f"  left:  {short_repr(self.left_text, 500)}\n"
                f"  right: {short_repr(self.right_text, 500)}"
            )
        return (
            f"Runs diverge at step {self.step} ({where}), in {self.field}:\n"
            f"  left:  {_describe(self.left)}\n"
            f"  right: {_describe(self.right)}"
        )


def _describe(signal: Signal | None) -> str:
    if signal is None:
        return "(no signal: the run ended here)"
    data = to_jsonable(signal.payload)
    if signal.name == HARNESS_START and isinstance(data, dict):
        data = {key: value for key, value in data.items() if key not in _CODE}
    payload = json.dumps(data, sort_keys=True, default=str)
    if len(payload) > 300:
        payload = payload[:297] + "..."
    return f"{signal.name} [{signal.source}] {payload}"


@dataclasses.dataclass(frozen=True)
class _Side:
    signals: Sequence[Signal]
    requests: Mapping[str, Mapping[str, Any]]


def first_divergence(
    left: Sequence[Signal],
    right: Sequence[Signal],
    *,
    left_requests: Mapping[str, Mapping[str, Any]],
    right_requests: Mapping[str, Mapping[str, Any]],
    ignore: Iterable[str] = VOLATILE,
    causal: bool = False,
) -> Divergence | None:
    """The first divergence between two logs, or ``None`` if they match.

    Ids, timestamps and run ids are never compared, nor payload keys in ``ignore``.
    With ``causal=True`` the logs are compared in causal order (each signal followed by
    its consequences), which forgives concurrent activations that interleaved
    differently; by default the recorded order must match too.
    """
    ignored = frozenset(ignore)
    a_side, b_side = _Side(left, left_requests), _Side(right, right_requests)
    a_order = canonical_order(left) if causal else list(left)
    b_order = canonical_order(right) if causal else list(right)
    by_id = {s.id: s for s in left}
    for step, (a, b) in enumerate(zip(a_order, b_order, strict=False)):
        field = _difference(a, b, ignored)
        if field is not None:
            path = tuple(s.name for s in _chain(a, by_id)[:-1])
            return _explain(step, path, field, a, b, a_side, b_side)
    if len(a_order) != len(b_order):
        step = min(len(a_order), len(b_order))
        return Divergence(
            step,
            (),
            "length",
            a_order[step] if step < len(a_order) else None,
            b_order[step] if step < len(b_order) else None,
            kind="length",
        )
    return None


def _explain(
    step: int, path: tuple[str, ...], field: str, a: Signal, b: Signal, left: _Side, right: _Side
) -> Divergence:
    if a.name == PROVIDER_START == b.name and field == "payload.request_hash":
        agent = _agent(a)
        return Divergence(
            step,
            path,
            field,
            a,
            b,
            kind="prompt",
            agent=agent,
            left_text=_prompt_text(a, left.requests),
            right_text=_prompt_text(b, right.requests),
        )
    if _in_call(a) and _in_call(b) and _agent(a) == _agent(b) is not None:
        return Divergence(
            step,
            path,
            field,
            a,
            b,
            kind="answer",
            agent=_agent(a),
            left_text=_answer_text(a, left.signals),
            right_text=_answer_text(b, right.signals),
        )
    return Divergence(step, path, field, a, b)


def _agent(signal: Signal) -> str | None:
    payload = signal.payload
    if isinstance(payload, Mapping):
        agent = payload.get("agent")
        return agent if isinstance(agent, str) else None
    return None


def _in_call(signal: Signal) -> bool:
    return signal.name in PROVIDER_EVENTS


def _prompt_text(start: Signal, requests: Mapping[str, Mapping[str, Any]]) -> str:
    digest = start.payload.get("request_hash") if isinstance(start.payload, Mapping) else None
    fingerprint = requests.get(str(digest))
    if fingerprint is None:
        return f"(request {digest}; its text was not recorded)"
    parts = []
    if fingerprint.get("system"):
        parts.append(f"[system] {fingerprint['system']}")
    for message in fingerprint.get("messages") or ():
        parts.append(f"[{message.get('role')}] {message.get('content')}")
    return "\n".join(parts)


def _answer_text(signal: Signal, signals: Sequence[Signal]) -> str:
    """The whole answer of the provider call ``signal`` belongs to."""
    index = next(i for i, s in enumerate(signals) if s is signal)
    cause = signal.caused_by
    start = index
    while start > 0 and not (
        signals[start].name == PROVIDER_START and signals[start].caused_by == cause
    ):
        start -= 1
    pieces: list[str] = []
    for candidate in signals[start:]:
        if candidate.caused_by != cause or candidate.name not in PROVIDER_EVENTS:
            continue
        payload = candidate.payload
        if candidate.name == PROVIDER_END:
            output = payload.get("output")
            return output if isinstance(output, str) else json.dumps(to_jsonable(output))
        if candidate.name == PROVIDER_ERROR:
            return "".join(pieces) + f"[error: {short_repr(payload.get('error'))}]"
        if candidate.name == TEXT_DELTA:
            pieces.append(str(payload.get("content")))
        elif candidate.name in (TOOL_CALL, TOOL_RESULT):
            pieces.append(f"[{candidate.name} {short_repr(payload.get('name'))}]")
    return "".join(pieces)


def canonical_order(signals: Sequence[Signal]) -> list[Signal]:
    """Signals in causal order: depth-first over the causal tree, siblings by ``seq``.

    Within one signal's consequences the order is deterministic (they are emitted by
    its dispatch or by one activation in sequence), so this order does not depend on
    how concurrent activations interleaved.
    """
    ids = {s.id for s in signals}
    children: dict[str | None, list[Signal]] = {}
    for signal in signals:
        parent = signal.caused_by if signal.caused_by in ids else None
        children.setdefault(parent, []).append(signal)
    ordered: list[Signal] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        signal = stack.pop()
        ordered.append(signal)
        stack.extend(reversed(children.get(signal.id, [])))
    return ordered


def _chain(signal: Signal, by_id: Mapping[str, Signal]) -> list[Signal]:
    chain = [signal]
    seen = {signal.id}
    while (parent := by_id.get(chain[-1].caused_by or "")) is not None and parent.id not in seen:
        seen.add(parent.id)
        chain.append(parent)
    chain.reverse()
    return chain


def _difference(a: Signal, b: Signal, ignored: frozenset[str]) -> str | None:
    if a.name != b.name:
        return "name"
    if a.source != b.source:
        return "source"
    if a.name == HARNESS_SNAPSHOT:
        return None  # what a resume needs, derived from the signals before it (compared)
    if a.name == HARNESS_START:
        ignored = ignored | _CODE  # the same behaviour from other code is the same run
    left, right = to_jsonable(a.payload), to_jsonable(b.payload)
    if left == right:  # most signals of two runs that match: no walk needed
        return None
    return json_difference(left, right, "payload", ignored)


_CODE = frozenset({"fingerprints"})


def json_difference(a: Any, b: Any, path: str, ignored: frozenset[str] = frozenset()) -> str | None:
    """The dotted path of the first difference between two JSON values, or ``None``.

    Walks iteratively, so deep values cannot exhaust the stack.
    """
    stack: list[tuple[Any, Any, str]] = [(a, b, path)]
    while stack:
        x, y, where = stack.pop()
        if isinstance(x, dict) and isinstance(y, dict):
            keys = [key for key in {**x, **y} if key not in ignored]
            for key in keys:
                if key not in x or key not in y:
                    return f"{where}.{key}"
            stack.extend((x[key], y[key], f"{where}.{key}") for key in reversed(keys))
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return where
            pairs = list(enumerate(zip(x, y, strict=True)))
            stack.extend((p, q, f"{where}.{i}") for i, (p, q) in reversed(pairs))
        elif x != y and not (_is_nan(x) and _is_nan(y)):
            return where
    return None


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value
