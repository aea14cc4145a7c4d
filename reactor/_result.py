"""What a run returns: status, output, state, the signal log, metrics, and views of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from reactor._patterns import Pattern, compile_pattern
from reactor._signal import Signal
from reactor.exceptions import LoopLimitError

__all__ = [
    "RunMetrics",
    "RunResult",
    "RunStatus",
    "causal_chain",
    "find_cycle",
    "loop_limit_error",
    "render_tree",
    "short_repr",
]

RunStatus = Literal["completed", "ended", "timeout", "aborted", "failed", "loop_limit"]

DELTAS = ("text:delta", "thinking:delta")


@dataclasses.dataclass(frozen=True)
class RunMetrics:
    """Counters of a run (frozen).

    Attributes:
        duration_ms: Wall time from ``harness:start`` to ``harness:end``.
        activations: Agent activations started.
        activations_by_agent: The same, per agent.
        input_tokens: Provider input tokens, summed.
        output_tokens: Provider output tokens, summed.
        cost_usd: Provider cost, summed (0.0 if providers report none).
    """

    duration_ms: float
    activations: int
    activations_by_agent: Mapping[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float


@dataclasses.dataclass(frozen=True)
class RunResult:
    """The outcome of a run.

    Attributes:
        status: ``completed`` (quiescence), ``ended`` (``end_when`` held),
            ``timeout``, ``aborted``, ``failed`` or ``loop_limit``.
        output: For a single agent, its last output; for a graph, the final state
            snapshot, or the payload of the signal that satisfied a pattern
            ``end_when``.
        state: The final state, as plain JSON data.
        signals: The run's signal log, in order.
        error: The exception that stopped the run, if any.
        metrics: Counters (:class:`RunMetrics`).
        run_id: Identifies the run (and its recording).
        reason: Why the run ended, in words (as in ``harness:end``).
        graph: The graph's name.
    """

    status: RunStatus
    output: Any
    state: Mapping[str, Any]
    signals: tuple[Signal, ...]
    error: BaseException | None
    metrics: RunMetrics
    run_id: str
    reason: str = ""
    graph: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run completed or ended as asked (no failure, limit or abort)."""
        return self.status in ("completed", "ended")

    def select(self, pattern: Pattern) -> list[Signal]:
        """Return the signals whose names match ``pattern``, in order."""
        matcher = compile_pattern(pattern)
        return [signal for signal in self.signals if matcher(signal.name)]

    def causal_chain(self, signal: Signal | str) -> list[Signal]:
        """Return the chain of causes of ``signal`` (or its id): root first, it last.

        Raises:
            KeyError: No such signal in this run.
        """
        return causal_chain(self.signals, signal)

    def tree(self, *, exclude: Iterable[Pattern] = DELTAS, payloads: bool = False) -> str:
        """Render the signals as a causal tree (deltas excluded by default)."""
        return render_tree(self.signals, exclude=exclude, payloads=payloads)

    def to_mermaid(self) -> str:
        """Draw what happened: each activation, and the signal that caused it."""
        return _mermaid(self.signals)


def causal_chain(signals: Sequence[Signal], target: Signal | str) -> list[Signal]:
    """Walk ``caused_by`` links from ``target`` up to its root."""
    by_id = {signal.id: signal for signal in signals}
    key = target if isinstance(target, str) else target.id
    if key not in by_id:
        raise KeyError(f"No signal with id {key!r} in this run.")
    chain = [by_id[key]]
    while chain[-1].caused_by is not None and chain[-1].caused_by in by_id:
        chain.append(by_id[chain[-1].caused_by])
    chain.reverse()
    return chain


def render_tree(
    signals: Sequence[Signal], *, exclude: Iterable[Pattern] = DELTAS, payloads: bool = False
) -> str:
    """Render signals as an indented causal tree, one signal per line."""
    skip = [compile_pattern(p) for p in exclude]
    shown = [s for s in signals if not any(m(s.name) for m in skip)]
    ids = {s.id for s in shown}
    children: dict[str | None, list[Signal]] = {}
    for signal in shown:
        parent = signal.caused_by if signal.caused_by in ids else None
        children.setdefault(parent, []).append(signal)
    start = signals[0].timestamp if signals else 0.0
    lines: list[str] = []

    def walk(parent: str | None, prefix: str) -> None:
        kids = children.get(parent, [])
        for index, signal in enumerate(kids):
            last = index == len(kids) - 1
            branch = "" if parent is None else ("└── " if last else "├── ")
            lines.append(f"{prefix}{branch}{_describe(signal, start, payloads)}")
            walk(signal.id, prefix + ("" if parent is None else ("    " if last else "│   ")))

    walk(None, "")
    return "\n".join(lines)


def _describe(signal: Signal, start: float, payloads: bool) -> str:
    offset = (signal.timestamp - start) * 1000
    text = f"{signal.name}  [{signal.source or '-'}, +{offset:.0f}ms]"
    payload = signal.payload
    if isinstance(payload, dict):
        if "duration_ms" in payload and payload["duration_ms"] is not None:
            text += f" {payload['duration_ms']:.0f}ms"
        if "reason" in payload and signal.name.endswith(":skipped"):
            text += f" ({payload['reason']})"
        if "error" in payload and isinstance(payload["error"], dict):
            text += f" {payload['error'].get('type')}: {payload['error'].get('message')}"
    if payloads and payload is not None:
        text += f" {short_repr(payload)}"
    return text


def short_repr(value: Any, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def find_cycle(chain: Sequence[Signal], next_agent: str | None = None) -> tuple[str, ...]:
    """Return the repeating cycle of agents and signals at the end of a causal chain.

    The chain is read as ``agent, signal-it-caused, agent, ...``: each activation's
    agent, then the signal that triggered the next activation. The shortest period
    that repeats at least twice at the tail is the cycle, returned closed (it starts
    and ends with the same agent), e.g. ``trader, trade:proposed, reviewer,
    trade:rejected, trader``. Empty if nothing repeats.
    """
    tokens: list[str] = []
    previous: Signal | None = None
    for signal in chain:
        if signal.name.startswith("agent:") and signal.name.endswith(":activated"):
            if previous is not None and tokens:
                tokens.append(previous.name)
            tokens.append(signal.name.split(":")[1])
        previous = signal
    if next_agent is not None and tokens and previous is not None:
        tokens += [previous.name, next_agent]
    for period in range(2, len(tokens) // 2 + 1, 2):
        tail = tokens[-period:]
        if tokens[-2 * period : -period] == tail:
            # Rotate the loop to start at the agent that entered it first.
            loop = tokens[-period - 1 : -1]
            agents = set(loop[0::2])
            first = next(token for token in tokens if token in agents)
            start = loop.index(first)
            rotated = loop[start:] + loop[:start]
            return (*rotated, rotated[0])
    return ()


def loop_limit_error(
    limit: str, value: int, chain: Sequence[Signal], next_agent: str
) -> LoopLimitError:
    """The error of a run that hit ``limit``, naming the cycle it was caught in."""
    cycle = find_cycle(chain, next_agent)
    where = (
        f"Repeating cycle: {' -> '.join(cycle)}."
        if cycle
        else f"Last chain: {' -> '.join(s.name for s in chain[-6:])}."
    )
    what = (
        f"{value} activations on one causal chain"
        if limit == "max_depth"
        else f"{value} activations in the run"
    )
    return LoopLimitError(
        f"Loop limit reached: {limit}={value} ({what}). {where} Add a guard (when=...) "
        f"or an end_when that stops the loop, or raise {limit} (None disables it).",
        limit=limit,
        cycle=cycle,
    )


def _mermaid(signals: Sequence[Signal]) -> str:
    lines = ["flowchart TD", '  harness_start(["harness:start"])']
    node_of: dict[str, str] = {}
    counts: dict[str, int] = {}
    by_id = {signal.id: signal for signal in signals}
    for signal in signals:
        if signal.name == "harness:start":
            node_of[signal.id] = "harness_start"
    for signal in signals:
        if not (signal.name.startswith("agent:") and signal.name.endswith(":activated")):
            continue
        agent = signal.name.split(":")[1]
        counts[agent] = counts.get(agent, 0) + 1
        node = f"{_mermaid_id(agent)}_{counts[agent]}"
        node_of[signal.id] = node
        lines.append(f'  {node}["{agent} #{counts[agent]}"]')
        trigger = by_id.get(signal.caused_by or "")
        origin = _origin(trigger, by_id, node_of)
        label = trigger.name if trigger is not None else "?"
        lines.append(f'  {origin} -->|"{label}"| {node}')
    return "\n".join(lines)


def _origin(trigger: Signal | None, by_id: Mapping[str, Signal], node_of: Mapping[str, str]) -> str:
    """The activation (or harness:start) a trigger signal descends from."""
    current = trigger
    while current is not None:
        if current.id in node_of:
            return node_of[current.id]
        current = by_id.get(current.caused_by or "")
    return "harness_start"


def _mermaid_id(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)
