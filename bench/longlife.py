"""Runs that live long: resuming a 1,000,000-signal run, and what snapshots cost.

Resume: a graph whose ticker emits ticks that a counter folds into the state runs to
about 1,000,000 signals, recorded to SQLite (a ``harness:snapshot`` every 10,000
signals, the default), then waits for a person and is suspended: a run whose log
stops before its end. The baseline is the same graph run to just under 10,000 signals
(so it has no snapshot, and a resume reads all of it). The long run ends just before
its next snapshot would be due, so its resume reads almost 10,000 signals too (its
worst case: the latest snapshot is that far back). Both are timed from
``start(resume=...)`` to its return: the run's tail loaded, its plan read, the state
rebuilt and ``harness:resumed`` emitted. A resume reads the latest snapshot and the
signals after it, so the target is that the long run resumes within 2x of the short.

Snapshot cost: the same graph run to 100,000 signals, recorded to SQLite with snapshots
and without (``snapshot_every=None``), alternately; the difference per signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from pathlib import Path

from bench._runner import Row, best_of_pair
from bench.resume import ticking
from reactor import Reactive, RunSuspendedError, SQLiteSignalStore, agent, reactive

LONG = 1_000_000
SHORT = 10_000
COST = 100_000
PER_TICK = 5  # tick, agent:count:activated, state:n:changed, agent:gate:skipped, ...:completed


def waiting_graph(ticks: int) -> Reactive:
    """Ticks counted into the state, then a question to a person once all are counted."""
    return reactive(
        {
            **ticking(ticks),
            "gate": agent(
                ask="Counted {{ state.n }} ticks. Go on?",
                choices=["yes", "no"],
                activate_on="state:n:changed",
                when=f"state.n == {ticks}",
                updates="go",
            ),
        },
        state={"n": 0, "go": None},
        name="waiting",
    )


def waiting_run(graph: Reactive, where: Path, snapshot_every: int | None = 10_000) -> str:
    """Record ``graph`` to ``where`` until it asks its question, then suspend it."""

    async def record() -> str:
        with SQLiteSignalStore(where, snapshot_every=snapshot_every) as store:
            handle = graph.start(record=store, max_activations=None, history_limit=1_000)
            await handle.next_prompt()
            await handle.suspend()
            with contextlib.suppress(RunSuspendedError):
                await handle.result()
            return handle.run_id

    return asyncio.run(record())


def resume_time(graph: Reactive, original: Path, run_id: str, copy: Path) -> float:
    """Seconds from ``start(resume=...)`` to its return, on a fresh copy of the database."""
    shutil.copyfile(original, copy)
    with SQLiteSignalStore(copy) as store:

        async def ready() -> float:
            started = time.perf_counter()
            handle = graph.start(resume=run_id, record=store)
            elapsed = time.perf_counter() - started
            await handle.suspend()
            with contextlib.suppress(RunSuspendedError):
                await handle.result()
            return elapsed

        return asyncio.run(ready())


def run(runs: int, scale: float) -> list[Row]:
    # Both runs end just before a snapshot would be due, so each resume reads almost
    # 10,000 signals: the short run has none yet, the long one's last is ~10,000 back
    # (the worst case for it). Each snapshot is a signal too: 1 in 10,000.
    long_size = max(SHORT * 2, int(LONG * scale))
    long_ticks = (long_size - 60 - long_size // SHORT) // PER_TICK
    short_ticks = (SHORT - 60) // PER_TICK
    long_graph, short_graph = waiting_graph(long_ticks), waiting_graph(short_ticks)
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        long_id = waiting_run(long_graph, base / "long.db")
        short_id = waiting_run(short_graph, base / "short.db")
        with SQLiteSignalStore(base / "long.db", readonly=True) as store:
            long_count = store.runs()[0].signals
        with SQLiteSignalStore(base / "short.db", readonly=True) as store:
            short_count = store.runs()[0].signals
        copies = iter(range(runs * 2))

        def short() -> float:
            copy = base / f"short{next(copies)}.db"
            return resume_time(short_graph, base / "short.db", short_id, copy)

        def long() -> float:
            copy = base / f"long{next(copies)}.db"
            return resume_time(long_graph, base / "long.db", long_id, copy)

        short_s, long_s = best_of_pair(runs, short, long)
        cost_graph = waiting_graph(COST // PER_TICK)
        places = iter(range(runs * 2))

        def recorded(every: int | None) -> float:
            where = base / f"cost{next(places)}.db"
            started = time.perf_counter()
            waiting_run(cost_graph, where, snapshot_every=every)
            elapsed = time.perf_counter() - started
            where.unlink()
            return elapsed

        without, with_snapshots = best_of_pair(
            runs, lambda: recorded(None), lambda: recorded(10_000)
        )
    ratio = long_s / short_s
    cost_us = (with_snapshots - without) / COST * 1e6
    return [
        Row(
            workload=f"resume a {long_count:,}-signal run until ready (SQLite, snapshots)",
            ours=f"{long_s * 1000:,.0f} ms",
            baseline=f"{short_s * 1000:,.0f} ms (a {short_count:,}-signal run)",
            ratio=ratio,
            ratio_text=f"{ratio:.2f}x",
            target="<= 2x the short run",
            met=ratio <= 2,
        ),
        Row(
            workload=(
                f"snapshot cost: the same graph run to {COST:,} signals, recorded to SQLite "
                "with a snapshot every 10,000 signals"
            ),
            ours=f"{cost_us:+.2f} µs per signal",
            baseline=f"{without / COST * 1e6:.2f} µs per signal (snapshot_every=None)",
            ratio=with_snapshots / without,
            ratio_text=f"{with_snapshots / without:.2f}x",
            target="report",
            met=None,
        ),
    ]
