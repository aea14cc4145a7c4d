"""What the pages show of a run's log: totals, per-agent metrics, the causal tree, diffs.

Everything here is computed from the recorded signals (the log is the truth), so a
page of a finished run and of one still executing are built the same way.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reactor._signals.names import DELTAS, PROVIDER_END, parse_agent_event
from reactor._signals.signal import Signal
from reactor.service._objects.changes import Create, Delete, Operation, Update

__all__ = [
    "AgentMetrics",
    "DiffLine",
    "Node",
    "agent_metrics",
    "causal_tree",
    "operation_diff",
    "shown",
    "totals",
]


def shown(signal: Signal) -> bool:
    """Whether the timeline shows a signal (streamed text deltas are left out)."""
    return signal.name not in DELTAS


def _usage(signal: Signal) -> tuple[str, int, int, float | None]:
    payload: Mapping[str, Any] = signal.payload if isinstance(signal.payload, Mapping) else {}
    given = payload.get("usage")
    usage: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    cost = payload.get("cost_usd")
    return (
        str(payload.get("agent", "")),
        int(usage.get("input_tokens", 0) or 0),
        int(usage.get("output_tokens", 0) or 0),
        float(cost) if isinstance(cost, int | float) else None,
    )


def totals(signals: Iterable[Signal]) -> tuple[int, float | None]:
    """Tokens (in and out) and cost of a run's provider calls; cost ``None`` if one is unknown."""
    tokens, cost, known = 0, 0.0, True
    for signal in signals:
        if signal.name == PROVIDER_END:
            _, tokens_in, tokens_out, price = _usage(signal)
            tokens += tokens_in + tokens_out
            if price is None:
                known = False
            else:
                cost += price
    return tokens, (round(cost, 6) if known else None)


@dataclasses.dataclass
class AgentMetrics:
    """One agent's counters in a run."""

    agent: str
    activated: int = 0
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0


def agent_metrics(signals: Iterable[Signal]) -> list[AgentMetrics]:
    """Each agent's activations, outcomes, tokens and cost, by name."""
    found: dict[str, AgentMetrics] = {}
    for signal in signals:
        parsed = parse_agent_event(signal.name)
        if parsed is not None:
            name, event = parsed
            metrics = found.setdefault(name, AgentMetrics(name))
            if event in ("activated", "completed", "failed", "skipped"):
                setattr(metrics, event, getattr(metrics, event) + 1)
        elif signal.name == PROVIDER_END:
            name, tokens_in, tokens_out, price = _usage(signal)
            metrics = found.setdefault(name, AgentMetrics(name))
            metrics.input_tokens += tokens_in
            metrics.output_tokens += tokens_out
            if price is None or metrics.cost_usd is None:
                metrics.cost_usd = None
            else:
                metrics.cost_usd += price
    return sorted(found.values(), key=lambda metrics: metrics.agent)


@dataclasses.dataclass
class Node:
    """A signal of the causal tree, and the signals it caused."""

    signal: Signal
    children: list[Node] = dataclasses.field(default_factory=list)


def causal_tree(signals: Sequence[Signal]) -> list[Node]:
    """The run's signals as a forest: each under the signal that caused it (deltas left out)."""
    nodes = {signal.id: Node(signal) for signal in signals if shown(signal)}
    roots: list[Node] = []
    for node in nodes.values():
        parent = nodes.get(node.signal.caused_by or "")
        (parent.children if parent is not None else roots).append(node)
    return roots


@dataclasses.dataclass(frozen=True)
class DiffLine:
    """A line of a proposed change: ``-`` what goes, ``+`` what comes, `` `` context."""

    sign: str
    text: str


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def operation_diff(operation: Operation, current: Mapping[str, Any] | None) -> list[DiffLine]:
    """How one operation changes an object's fields (``current``: its data now, if known)."""
    if isinstance(operation, Create):
        return [DiffLine("+", f"{key}: {_value(value)}") for key, value in operation.data.items()]
    if isinstance(operation, Delete):
        return [DiffLine("-", f"{key}: {_value(value)}") for key, value in (current or {}).items()]
    assert isinstance(operation, Update)
    lines: list[DiffLine] = []
    for key, value in operation.data.items():
        if current is not None and key in current:
            if current[key] == value:
                lines.append(DiffLine(" ", f"{key}: {_value(value)}"))
                continue
            lines.append(DiffLine("-", f"{key}: {_value(current[key])}"))
        lines.append(DiffLine("+", f"{key}: {_value(value)}"))
    return lines
