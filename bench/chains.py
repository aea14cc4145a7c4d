"""What the audit trail's hash chains cost: the same workloads with chaining on and off.

DESIGN.md section 39: "hash chain ... on | the same workloads off | <= 10% slower".
Each side runs in a fresh process whose environment says ``REACTOR_AUDIT_CHAIN`` (on:
the default, SHA-256; off: ``0``), measured alternately (on, off, on, off, ...) so that
both see the same machine; a row's ratio is the median of its pairs' ratios:

* *recording*: the recording workload (``bench/recording.py``: signals emitted on a
  bus, each recorded) to SQLite and to PostgreSQL; each store's writer thread chains
  every signal (canonical JSON, SHA-256) as it writes its batch;
* *reactions*: the reaction workload (``bench/reactions.py``): a backlog of object
  updates processed end to end by two reaction agents (each reaction a recorded run:
  its signals chained; the events chained as they were written), and the live writes
  to one hot object while the agents react (each event linked in its write's
  transaction).

Two figures per side: the rate (wall time), and the CPU time the workload's process
spent (all its threads; PostgreSQL's own processes not counted). The ratio is of CPU
time: on a machine shared with other work, wall time says more about the neighbours
than about the chains.

With ``REACTOR_AUDIT_KEY`` set (HMAC-SHA-256) each link costs about a microsecond
more; the rows are measured without a key, as the default runs.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench import reactions, recording
from bench._runner import Row
from reactor import tune_gc
from reactor._signals.settings import settings
from reactor.service import ObjectStore, ReactionService

TARGET = 1.10
"""Chained at most 10% slower than unchained."""

Timing = tuple[float, float]
"""Wall seconds and CPU seconds of one measurement."""
Pair = tuple[Timing, Timing]
"""One measurement chained, then one not."""


def _recorded(count: int, kind: str, chain: bool) -> Timing:
    figures = recording.measure(count, kind, env={"REACTOR_AUDIT_CHAIN": "1" if chain else "0"})
    return figures["seconds"], figures["cpu"]


def _chaining(chain: bool) -> None:
    """A pool process's start: chaining on or off, and tuned as ``reactor serve``."""
    os.environ["REACTOR_AUDIT_CHAIN"] = "1" if chain else "0"
    os.environ.pop("REACTOR_AUDIT_KEY", None)
    settings.cache_clear()
    tune_gc()


def served(chain: bool) -> Executor:
    """A fresh process, chaining on or off, tuned as ``reactor serve`` tunes its own."""
    return ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_chaining,
        initargs=(chain,),
    )


def _with_cpu(fn: Callable[..., float], *args: Any) -> Timing:
    """``fn(*args)`` (its own wall seconds) and the CPU seconds this process spent on it."""
    cpu = time.process_time()
    wall = fn(*args)
    return wall, time.process_time() - cpu


async def _processing(updates: int) -> Timing:
    """The backlog processed end to end (``reactions.through_service``), its CPU included.

    The backlog is stored first, untimed: the figure is of the processing alone.
    """
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        await reactions.backlog(url, updates)
        async with ObjectStore(url) as objects:
            start, cpu = time.perf_counter(), time.process_time()
            async with ReactionService(objects=objects, agents=reactions.AGENTS) as service:
                await service.idle()
                timing = time.perf_counter() - start, time.process_time() - cpu
                log = await service.processing_log()
        reactions._check_exact(log, updates)
        return timing


def _processed(updates: int) -> Timing:
    return asyncio.run(_processing(updates))


def _pair(runs: int, on: Callable[[], Timing], off: Callable[[], Timing]) -> list[Pair]:
    """``runs`` pairs, measured alternately (on, off, on, off, ...)."""
    return [(on(), off()) for _ in range(runs)]


def _row(workload: str, count: int, pairs: list[Pair]) -> Row:
    """The median of the pairs' CPU ratios, and each side's median figures.

    A pair's two sides run back to back, so they see the same machine; the median of
    the ratios is what one neighbour's burst over one side cannot move (the best of each
    side, kept before, moved the ratio by ±15% between runs of the same code).
    """
    slower = statistics.median(on[1] / off[1] for on, off in pairs)
    on, off = (
        [statistics.median(pair[side][i] for pair in pairs) for i in (0, 1)] for side in (0, 1)
    )
    ratios = ", ".join(f"{chained[1] / unchained[1] - 1:+.0%}" for chained, unchained in pairs)
    return Row(
        workload=workload,
        ours=f"{count / on[0]:,.0f}/s, {on[1] / count * 1e6:,.1f} µs CPU each, chained",
        baseline=(
            f"{count / off[0]:,.0f}/s, {off[1] / count * 1e6:,.1f} µs CPU each "
            "(REACTOR_AUDIT_CHAIN=0, same run)"
        ),
        ratio=slower,
        ratio_text=f"{slower - 1:+.1%} CPU (median of {len(pairs)} pairs: {ratios})",
        target="<= 10% slower",
        met=slower <= TARGET,
    )


def run(runs: int, scale: float) -> list[Row]:
    pairs = max(2, runs - 2)  # 3 pairs by default; 2 with --quick
    count = max(10_000, int(recording.SIGNALS * scale))
    rows = []
    for kind, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        measured = _pair(
            pairs,
            functools.partial(_recorded, count, kind, True),
            functools.partial(_recorded, count, kind, False),
        )
        rows.append(_row(f"chain: record {count:,} signals to {name}", count, measured))
    updates = max(1_000, int(reactions.UPDATES * scale))
    writes = max(300, int(reactions.WRITES * scale))
    with served(True) as chained, served(False) as unchained:
        measured = _pair(
            pairs,
            lambda: chained.submit(_processed, updates).result(),
            lambda: unchained.submit(_processed, updates).result(),
        )
        rows.append(
            _row(
                f"chain: reactions, {updates:,} events processed end to end (the reaction "
                "workload: runs and events chained; SQLite)",
                updates,
                measured,
            )
        )
        live = reactions._timed_live
        measured = _pair(
            pairs + 2,  # 20 writers and 2 agents contend: the noisiest row
            lambda: chained.submit(_with_cpu, live, writes, False, True).result(),
            lambda: unchained.submit(_with_cpu, live, writes, False, True).result(),
        )
        rows.append(
            _row(
                f"chain: reactions live, hot object, {writes:,} updates while 2 agents react "
                "(each event linked in its write's transaction; SQLite)",
                writes,
                measured,
            )
        )
    return rows
