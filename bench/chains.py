"""What the audit trail's hash chains cost: the same workloads with chaining on and off.

DESIGN.md section 39: "hash chain ... on | the same workloads off | <= 10% slower".
Each side runs in a fresh process whose environment says ``REACTOR_AUDIT_CHAIN`` (on:
the default, SHA-256; off: ``0``), measured alternately (on, off, on, off, ...) so that
both see the same machine, the best of each kept:

* *recording*: the recording workload (``bench/recording.py``: signals emitted on a
  bus, each recorded) to SQLite and to PostgreSQL; each store's writer thread chains
  every signal (canonical JSON, SHA-256) as it writes its batch;
* *reactions*: the reaction workload (``bench/reactions.py``): a backlog of object
  updates processed end to end by two reaction agents (each reaction a recorded run:
  its signals chained; the events chained as they were written), and the live writes
  to one hot object while the agents react (each event linked in its write's
  transaction).

With ``REACTOR_AUDIT_KEY`` set (HMAC-SHA-256) each link costs about a microsecond
more; the rows are measured without a key, as the default runs.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

from bench import reactions, recording
from bench._runner import Row, best_of_pair, rate
from reactor import tune_gc
from reactor._signals.settings import settings

TARGET = 1.10
"""Chained at most 10% slower than unchained."""


def measure_recording(count: int, kind: str, chain: bool) -> float:
    """Seconds to record ``count`` signals to a new database of ``kind``."""
    return recording.measure(count, kind, env={"REACTOR_AUDIT_CHAIN": "1" if chain else "0"})[
        "seconds"
    ]


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


def _in(pool: Executor, fn: Callable[..., Any], *args: Any) -> Callable[[], float]:
    return lambda: float(pool.submit(fn, *args).result())


def _processed(updates: int) -> float:
    return reactions._timed_backlog(updates)[1]


def _row(workload: str, count: int, on: float, off: float) -> Row:
    slower = on / off
    return Row(
        workload=workload,
        ours=f"{rate(count, on)} chained",
        baseline=f"{rate(count, off)} (REACTOR_AUDIT_CHAIN=0, same run)",
        ratio=slower,
        ratio_text=f"{slower - 1:+.1%} time",
        target="<= 10% slower",
        met=slower <= TARGET,
    )


def run(runs: int, scale: float) -> list[Row]:
    pairs = max(2, runs // 2)
    count = max(10_000, int(recording.SIGNALS * scale))
    rows = []
    for kind, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        on, off = best_of_pair(
            min(pairs, 3),
            functools.partial(measure_recording, count, kind, True),
            functools.partial(measure_recording, count, kind, False),
        )
        rows.append(
            _row(f"chain: record {count:,} signals to {name}, chained vs not", count, on, off)
        )
    updates = max(1_000, int(reactions.UPDATES * scale))
    writes = max(300, int(reactions.WRITES * scale))
    with served(True) as chained, served(False) as unchained:
        on, off = best_of_pair(
            pairs, _in(chained, _processed, updates), _in(unchained, _processed, updates)
        )
        rows.append(
            _row(
                f"chain: reactions, {updates:,} events processed end to end (the reaction "
                "workload; runs and events chained vs not; SQLite)",
                updates,
                on,
                off,
            )
        )
        on, off = best_of_pair(
            pairs,
            _in(chained, reactions._timed_live, writes, 1, True),
            _in(unchained, reactions._timed_live, writes, 1, True),
        )
        rows.append(
            _row(
                f"chain: reactions live, hot object, {writes:,} updates while 2 agents react "
                "(events linked in each write's transaction; chained vs not; SQLite)",
                writes,
                on,
                off,
            )
        )
    return rows
