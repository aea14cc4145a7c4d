"""Resuming a long run: how long until a 100,000-signal run is ready to go on.

A graph whose ticker emits ticks that a counter folds into the state runs to about
100,000 signals in memory; its log, cut before its end, is written to a
SQLite store as a run whose process died. The baseline is loading that run
(``store.load``); ours is ``start(resume=...)`` until it returns: the run loaded, its
plan read, the state rebuilt and ``harness:resumed`` emitted, ready for new work.
Each resume gets a fresh copy of the database, made outside the timing.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._runner import Row, best_of_pair
from reactor import Agent, AgentContext, Reactive, RunInfo, SQLiteSignalStore, agent, reactive

SIGNALS = 100_000
PER_TICK = 4  # tick, agent:count:activated, state:n:changed, agent:count:completed


def ticking(ticks: int) -> dict[str, Agent]:
    """A ticker emitting ``ticks`` ticks, each counted into ``state.n`` one at a time."""

    async def ticker(ctx: AgentContext[Any]) -> None:
        for i in range(ticks):
            ctx.emit("tick", i)

    async def count(ctx: AgentContext[Any]) -> int:
        return int(ctx.state.n) + 1

    return {
        "ticker": agent(run=ticker, activate_on="harness:start", emits=["tick"]),
        "count": agent(run=count, activate_on="tick", updates="n", concurrency="serial"),
    }


def long_graph(ticks: int) -> Reactive:
    return reactive(ticking(ticks), state={"n": 0}, name="long")


def crashed_run(graph: Reactive, where: Path) -> tuple[str, int]:
    """Record a run of ``graph`` to ``where`` as if its process died before its end."""
    result = graph.run_sync(max_activations=None)
    assert result.status == "completed", result.error
    ending = next(s.seq for s in result.signals if s.name in ("harness:ending", "harness:end"))
    with SQLiteSignalStore(where) as store:
        store.start_run(
            RunInfo(run_id=result.run_id, graph="long", started_at=time.time(), target=None)
        )
        kept = [s for s in result.signals if s.seq < ending]
        for signal in kept:
            store.append(signal)
    return result.run_id, len(kept)


def run(runs: int, scale: float) -> list[Row]:
    ticks = max(1_000, int(SIGNALS * scale) // PER_TICK)
    graph = long_graph(ticks)
    with tempfile.TemporaryDirectory() as folder:
        original = Path(folder) / "crashed.db"
        run_id, count = crashed_run(graph, original)
        copies = iter(range(runs * 2))

        def load() -> float:
            with SQLiteSignalStore(original, readonly=True) as store:
                start = time.perf_counter()
                store.load(run_id)
                return time.perf_counter() - start

        def resume() -> float:
            copy = Path(folder) / f"copy{next(copies)}.db"
            shutil.copyfile(original, copy)
            with SQLiteSignalStore(copy) as store:

                async def ready() -> float:
                    start = time.perf_counter()
                    handle = graph.start(resume=run_id, record=store)
                    elapsed = time.perf_counter() - start
                    handle.close()
                    await handle.result()
                    return elapsed

                return asyncio.run(ready())

        loaded, resumed = best_of_pair(runs, load, resume)
    ratio = resumed / loaded
    return [
        Row(
            workload=f"resume a {count:,}-signal run until ready (SQLite)",
            ours=f"{resumed * 1000:,.0f} ms",
            baseline=f"{loaded * 1000:,.0f} ms (store.load of the run)",
            ratio=ratio,
            ratio_text=f"{ratio:.2f}x",
            target="<= 2x loading it",
            met=ratio <= 2,
        )
    ]
