"""What a run returns: status, output, state, the signal log, metrics, and views of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from reactor._recording.info import RunInfo
from reactor._recording.log import SignalLog
from reactor._signals.names import HARNESS_START, parse_agent_event
from reactor._signals.signal import Signal
from reactor.exceptions import LoopLimitError

if TYPE_CHECKING:
    from reactor._providers.base import ProviderRequest

__all__ = [
    "AgentFailure",
    "Fingerprints",
    "RunMetrics",
    "RunResult",
    "RunStatus",
    "find_cycle",
    "loop_limit_error",
]

RunStatus = Literal["completed", "ended", "timeout", "aborted", "failed", "loop_limit"]


class Fingerprints(Mapping[str, Mapping[str, Any]]):
    """What each provider call of a run was asked, by hash, made into data when read.

    A run keeps its requests; most results are never asked what they were, so the
    JSON data of each is built on first access, not for every run.
    """

    __slots__ = ("_data", "_requests")

    def __init__(self, requests: Mapping[str, ProviderRequest]) -> None:
        self._requests = requests
        self._data: dict[str, Mapping[str, Any]] = {}

    def __getitem__(self, digest: str) -> Mapping[str, Any]:
        found = self._data.get(digest)
        if found is None:
            found = self._data[digest] = self._requests[digest].fingerprint()
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._requests)

    def __len__(self) -> int:
        return len(self._requests)


@dataclasses.dataclass(frozen=True)
class AgentFailure:
    """An activation that failed (see :attr:`RunResult.failures`).

    Attributes:
        agent: The agent's name.
        error: The exception it failed with.
        signal_id: The id of its ``agent:<name>:failed`` signal (to find it in the log).
    """

    agent: str
    error: BaseException
    signal_id: str | None = None


@dataclasses.dataclass(frozen=True)
class RunMetrics:
    """Counters of a run (frozen).

    Attributes:
        duration_ms: Wall time from ``harness:start`` to ``harness:end``.
        activations: Agent activations started.
        activations_by_agent: The same, per agent.
        input_tokens: Provider input tokens, summed (the prompt cache's reads and writes
            included, as budgets count them).
        output_tokens: Provider output tokens, summed.
        cost_usd: Provider cost, summed; ``None`` when any call's cost is unknown (a
            model without a price: an unknown price is never a guessed zero), ``0.0``
            when no call was made.
    """

    duration_ms: float
    activations: int
    activations_by_agent: Mapping[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


@dataclasses.dataclass(frozen=True, repr=False)
class RunResult(SignalLog):
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
        requests: What each provider call was asked, by ``request_hash``.
        failures: Every activation that failed, in order. With ``fail_fast=False`` a
            run goes on after a failure and may still complete: ``failures`` (and
            ``ok``) say it did not go cleanly.
        children: The results of the child runs its handlers started with
            ``ctx.spawn``, by run id (their trees hang under it in :meth:`event_tree`).
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
    requests: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    failures: tuple[AgentFailure, ...] = ()
    children: Mapping[str, RunResult] = dataclasses.field(default_factory=dict, repr=False)

    def child_runs(self) -> Mapping[str, Sequence[Signal]]:
        """The signals of the child runs it spawned, theirs included, by run id."""
        found: dict[str, Sequence[Signal]] = {}
        pending = list(self.children.items())
        while pending:
            run_id, child = pending.pop()
            found[run_id] = child.signals
            pending.extend(child.children.items())
        return found

    @property
    def ok(self) -> bool:
        """Whether the run completed or ended as asked, with no agent failing on the way."""
        return self.status in ("completed", "ended") and not self.failures

    def __repr__(self) -> str:
        failures = f", {len(self.failures)} failed" if self.failures else ""
        return (
            f"<RunResult {self.run_id} {self.status}{failures}: {len(self.signals)} signals, "
            f"{self.metrics.activations} activations>"
        )

    @property
    def run_info(self) -> RunInfo:
        """The run as a signal store would list it."""
        signals = self.signals
        return RunInfo(
            run_id=self.run_id,
            graph=self.graph,
            started_at=signals[0].timestamp if signals else 0.0,
            ended_at=signals[-1].timestamp if signals else None,
            status=self.status,
            reason=self.reason,
            signals=len(signals),
            failures=len(self.failures),
        )

    def to_mermaid(self) -> str:
        """Draw what happened: each activation, and the signal that caused it."""
        return _mermaid(self.signals)


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
        parsed = parse_agent_event(signal.name)
        if parsed is not None and parsed[1] == "activated":
            if previous is not None and tokens:
                tokens.append(previous.name)
            tokens.append(parsed[0])
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
    lines = ["flowchart TD", f'  harness_start(["{HARNESS_START}"])']
    node_of: dict[str, str] = {}
    counts: dict[str, int] = {}
    by_id = {signal.id: signal for signal in signals}
    for signal in signals:
        if signal.name == HARNESS_START:
            node_of[signal.id] = "harness_start"
    for signal in signals:
        parsed = parse_agent_event(signal.name)
        if parsed is None or parsed[1] != "activated":
            continue
        agent = parsed[0]
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
