"""Bus workloads: emit rate against bare blinker, and the cost of unrelated patterns."""

from __future__ import annotations

import blinker

from bench._runner import Row, best_of_pair, rate, timed
from reactor import Signal, SignalBus

EMITS = 200_000
PATTERNS = 100


def _blinker_send(n: int) -> float:
    signal = blinker.Signal()
    hits: list[object] = []
    signal.connect(lambda sender, **kw: hits.append(kw), weak=False)
    send = signal.send
    return timed(lambda: [send(None, payload=i) for i in range(n)])


def _bus_emit(n: int, extra_patterns: int = 0) -> float:
    bus = SignalBus()
    hits: list[Signal] = []
    bus.subscribe("tick", hits.append)
    for i in range(extra_patterns):
        bus.subscribe(f"other{i}:*:changed", hits.append)
    emit = bus.emit
    elapsed = timed(lambda: [emit("tick", i) for i in range(n)])
    assert len(hits) == n
    assert len(bus.history) == n
    return elapsed


def run(runs: int, scale: float) -> list[Row]:
    n = max(1_000, int(EMITS * scale))
    baseline, ours = best_of_pair(runs, lambda: _blinker_send(n), lambda: _bus_emit(n))
    plain, with_patterns = best_of_pair(runs, lambda: _bus_emit(n), lambda: _bus_emit(n, PATTERNS))
    emit_ratio = baseline / ours
    pattern_ratio = plain / with_patterns
    return [
        Row(
            workload=f"bus: {n:,} emits, one exact subscriber, history on",
            ours=rate(n, ours),
            baseline=f"{rate(n, baseline)} (blinker send)",
            ratio=emit_ratio,
            ratio_text=f"{emit_ratio:.0%} of baseline rate",
            target=">= 40%",
            met=emit_ratio >= 0.40,
        ),
        Row(
            workload=f"bus: same with {PATTERNS} non-matching pattern subscriptions",
            ours=rate(n, with_patterns),
            baseline=f"{rate(n, plain)} (without them)",
            ratio=pattern_ratio,
            ratio_text=f"{pattern_ratio:.0%} of baseline rate",
            target="within 10%",
            met=pattern_ratio >= 0.90,
        ),
    ]
