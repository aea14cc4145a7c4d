"""Evaluating recorded runs: ``graph.evaluate`` on 1,000 runs, against replaying them.

A desk (an analyst and a risk agent asked in parallel, a trader joining them in code)
runs 1,000 times with a scripted model, recorded to SQLite. The baseline replays each
recorded run (``run(replay=recording, record=store)``, eight at a time, each read off
the event loop first); ours is ``graph.evaluate(ids, store=store)`` on the same graph,
unchanged, which does that and compares each new log with its recording, diffs the
final states and writes the report. The target is 80% of the replay's speed with no
model call (a provider that fails on any call is given, and the report counts them).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench._runner import Row, best_of_pair
from reactor import (
    Provider,
    ProviderEvent,
    ProviderRequest,
    Reactive,
    ScriptedProvider,
    SQLiteSignalStore,
    agent,
    reactive,
)

RUNS = 1_000
CONCURRENCY = 8


def desk() -> Reactive:
    return reactive(
        {
            "analyst": agent(prompt="Trend of {{ input.symbol }}?", updates="trend"),
            "risk": agent(prompt="Risk of {{ input.symbol }}?", updates="risk"),
            "trader": agent(
                run=lambda ctx: "buy" if ctx.state["trend"] == "up" else "hold",
                activate_on=["state:trend:changed", "state:risk:changed"],
                when="state.trend and state.risk",
                updates="decision",
            ),
        },
        state={"trend": None, "risk": None, "decision": None},
        name="desk",
    )


class NoCalls(Provider):
    """A provider that must never be asked: an unchanged evaluation calls no model."""

    model = "none"

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        raise AssertionError(f"the evaluation called the model for {request.agent!r}")


def record(graph: Reactive, where: Path, count: int) -> list[str]:
    model = ScriptedProvider(
        {
            "analyst": lambda request: "up" if "7" in request.prompt else "down",
            "risk": lambda request: "low",
        }
    )

    async def all_runs() -> list[str]:
        with SQLiteSignalStore(where) as store:
            ids = []
            for i in range(count):
                result = await graph.run(input={"symbol": f"S{i}"}, provider=model, record=store)
                assert result.status == "completed", result.error
                ids.append(result.run_id)
            return ids

    return asyncio.run(all_runs())


def run(runs: int, scale: float) -> list[Row]:
    count = max(50, int(RUNS * scale))
    graph = desk()
    calls: list[int] = []
    with tempfile.TemporaryDirectory() as folder:
        original = Path(folder) / "recorded.db"
        ids = record(graph, original, count)
        copies = iter(range(runs * 2))

        def fresh() -> Path:
            copy = Path(folder) / f"copy{next(copies)}.db"
            shutil.copyfile(original, copy)
            return copy

        def replay() -> float:
            copy = fresh()

            async def replayed() -> float:
                with SQLiteSignalStore(copy) as store:
                    gate = asyncio.Semaphore(CONCURRENCY)
                    start = time.perf_counter()

                    async def one(run_id: str) -> Any:
                        async with gate:
                            recording = await asyncio.to_thread(store.load, run_id)
                            return await graph.run(replay=recording, record=store)

                    await asyncio.gather(*(one(run_id) for run_id in ids))
                    return time.perf_counter() - start

            return asyncio.run(replayed())

        def evaluate() -> float:
            copy = fresh()

            async def evaluated() -> float:
                with SQLiteSignalStore(copy) as store:
                    start = time.perf_counter()
                    report = await graph.evaluate(
                        ids, store=store, provider=NoCalls(), concurrency=CONCURRENCY
                    )
                    elapsed = time.perf_counter() - start
                    assert report.passed, report.summary()
                    calls.append(report.summary()["model_calls"])
                    return elapsed

            return asyncio.run(evaluated())

        replayed, evaluated = best_of_pair(runs, replay, evaluate)
    speed = replayed / evaluated  # the share of the replay's speed the evaluation keeps
    return [
        Row(
            workload=f"evaluate {count:,} recorded runs, unchanged (SQLite, {CONCURRENCY} at once)",
            ours=f"{evaluated:.2f} s, {sum(calls)} model calls",
            baseline=f"{replayed:.2f} s (replaying them, recorded)",
            ratio=speed,
            ratio_text=f"{speed:.0%} of replay speed",
            target=">= 80% of replay speed, 0 model calls",
            met=speed >= 0.8 and sum(calls) == 0,
        )
    ]
