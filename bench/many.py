"""Many small runs at once: what a trading desk or a reaction service runs.

N concurrent runs of one 3-agent graph: two scripted model calls that each wait 50 ms,
then a join through the state. The figure is the cost per run over the 50 ms floor
(``(wall - 50 ms) / N``) and the memory per in-flight run (peak RSS over the process's
RSS before the runs, / N). Each size runs in a fresh subprocess so that memory figures
do not mix. ``python -m bench.many N [--tuned]`` prints one line: ``n=... cost_ms=...
kb=...``; by default the collector keeps Python's settings (reactor leaves it alone),
``--tuned`` measures the same after :func:`reactor.tune_gc`.
"""

from __future__ import annotations

import asyncio
import gc
import re
import resource
import subprocess
import sys
import time
from typing import Any

from bench._runner import Row, peak_rss_kb
from reactor import (
    AgentContext,
    Reactive,
    ScriptedProvider,
    agent,
    reactive,
    tune_gc,
)

LATENCY = 0.05
SIZES = (1_000, 5_000, 10_000)
MEMORY_TARGET_KB = 12.0  # per in-flight run at the largest size (DESIGN.md section 39)
FLAT_TARGET = 1.5  # untuned cost per run at the largest size over the smallest


async def _join(ctx: AgentContext[Any]) -> Any:
    return ctx.state.a + ctx.state.b


def small_graph() -> Reactive:
    """Two model calls and a join.

    The join's handler is async, as users who care about overhead write code that
    does not block (a plain ``def`` would run in a worker thread).
    """
    return reactive(
        {
            "a": agent(prompt="a", updates="a"),
            "b": agent(prompt="b", updates="b"),
            "join": agent(
                run=_join,
                activate_on=["state:a:changed", "state:b:changed"],
                when="state.a is not none and state.b is not none",
                updates="joined",
            ),
        },
        state={"a": None, "b": None, "joined": None},
        name="small",
    )


async def many_runs(graph: Reactive, n: int) -> float:
    provider = ScriptedProvider(default=lambda request: request.agent, latency=LATENCY)
    start = time.perf_counter()
    results = await asyncio.gather(*(graph.run(provider=provider) for _ in range(n)))
    elapsed = time.perf_counter() - start
    assert all(result.state["joined"] == "ab" for result in results)
    return elapsed


def _rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 1024


def measure(n: int, *, tuned: bool = False) -> tuple[float, float]:
    """``(cost per run over the floor in ms, KB per in-flight run)`` in this process."""
    if tuned:
        tune_gc()
    graph = small_graph()
    asyncio.run(many_runs(graph, 10))  # warm: imports, caches
    gc.collect()
    before = _rss_kb()
    wall = asyncio.run(many_runs(graph, n))
    peak = peak_rss_kb()
    return (wall - LATENCY) / n * 1000, max(0, peak - before) / n


def in_subprocess(
    n: int, command: list[str] | None = None, *, tuned: bool = False
) -> tuple[float, float]:
    """Run :func:`measure` for ``n`` in a fresh interpreter (or ``command``, a peer's)."""
    argv = command or [sys.executable, "-m", "bench.many", str(n), *(["--tuned"] * tuned)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    found = re.search(r"cost_ms=([0-9.]+) kb=([0-9.]+)", out)
    if found is None:
        raise RuntimeError(f"{' '.join(argv)} printed no figure: {out!r}")
    return float(found.group(1)), float(found.group(2))


def run(runs: int, scale: float) -> list[Row]:
    sizes = [max(100, int(n * scale)) for n in SIZES]
    cases = [(n, tuned) for tuned in (True, False) for n in sizes]
    # Every case once per round, so that a slow patch of the machine hits them all.
    rounds = [
        [in_subprocess(n, tuned=tuned) for n, tuned in cases]
        for _ in range(max(1, (runs + 1) // 2))
    ]
    best = dict(zip(cases, map(min, zip(*rounds, strict=True)), strict=True))
    return [*_rows(sizes, best, tuned=True), *_rows(sizes, best, tuned=False)]


def _rows(
    sizes: list[int], best: dict[tuple[int, bool], tuple[float, float]], *, tuned: bool
) -> list[Row]:
    figures = {n: best[n, tuned] for n in sizes}
    small, large = sizes[0], sizes[-1]
    how = (
        "reactor tuned (`reactor.tune_gc()`, as `reactor serve` and `reactor worker` do)"
        if tuned
        else "reactor untuned (Python's collector settings: what an application gets)"
    )
    return [
        Row(
            f"many small runs, {how}: {n:,} concurrent 3-agent runs (two 50 ms calls, a join)",
            f"{cost:.3f} ms per run over the floor, {kb:.1f} KB per in-flight run",
            "LangGraph on equal settings: see the peer table (`make bench-peers`)",
            cost,
            f"{cost / figures[small][0]:.2f}x the cost per run at {small:,}",
            *_target(n, small, large, tuned, cost / figures[small][0], kb),
        )
        for n, (cost, kb) in figures.items()
    ]


def _target(
    n: int, small: int, large: int, tuned: bool, growth: float, kb: float
) -> tuple[str, bool | None]:
    """The targets of section 39 a row carries: memory at the largest size, flat untuned."""
    if n != large:
        return "— (for comparison)", None
    memory = f"<= {MEMORY_TARGET_KB:g} KB per in-flight run"
    if tuned:
        return memory, kb <= MEMORY_TARGET_KB
    flat = f"untuned cost <= {FLAT_TARGET:g}x the cost at {small:,}"
    return f"{memory}; {flat}", kb <= MEMORY_TARGET_KB and growth <= FLAT_TARGET


def main() -> None:
    n = int(sys.argv[1])
    cost, kb = measure(n, tuned="--tuned" in sys.argv[2:])
    print(f"n={n} cost_ms={cost:.4f} kb={kb:.2f}")


if __name__ == "__main__":
    main()
