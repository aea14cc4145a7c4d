"""Reaction workloads: object updates through the service, two reaction agents.

*Live* (DESIGN.md sections 34 and 39, the way a desk sees it): the service runs while
``WRITES`` writes arrive over the Python ``ObjectStore`` API (``WRITERS`` writers at
once, each write awaited): updates of one hot object, or ``WRITES`` new objects (each
created, the agents reacting to ``created``); timed from the first write to the last
completed processing-log entry (2,000 events/s). The baseline is the same writes with
no service.

Every figure is taken as ``reactor serve`` runs: in a fresh process that called
:func:`reactor.tune_gc` as it started (the service then freezes what the process holds
out of the collector's walks), the baseline in that process too, so the ratio is on equal
settings. The hot-object row also gives both figures with Python's collector settings
(in this process, untuned).

*Backlog*: the updates are stored first (100 objects, 100 updates each); then a service starts
on the database and is timed. Two figures: events *dispatched* per second (until the
last event is logged in the processing log for both agents: the target of DESIGN.md
section 22), and events *processed* end to end (until it is idle: every reaction run
as a recorded run, to the default signal store in the same SQLite file, and its entry
completed: the target of section 29, 2,000 events/s). The processing log must then
be exact: one ``completed`` entry per agent and event, nothing else. The baseline
runs the same two agents directly, one run per event each, with no database.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench._runner import Row, best_of_pair, rate
from reactor import AgentContext, agent, reactive, tune_gc
from reactor.service import ObjectStore, ProcessingEntry, Reaction, ReactionService, User

OBJECTS = 100
UPDATES = 10_000
WRITES = 3_000
WRITERS = 20
TARGET = 2_000.0
ON_UPDATES = Reaction(types=["Account"], events=["updated"], concurrency="parallel")
ON_NEW = Reaction(types=["Account"], events=["created"], concurrency="parallel")
T = TypeVar("T")


async def audit(ctx: AgentContext[Any]) -> int:
    return len(ctx.object.data)


async def score(ctx: AgentContext[Any]) -> int:
    return int(ctx.object.data["balance"]) % 7


AGENTS = {
    "audit": agent(run=audit, reaction=ON_UPDATES, execution_mode="execute"),
    "score": agent(run=score, reaction=ON_UPDATES, execution_mode="execute"),
}
ON_CREATES = {
    "audit": agent(run=audit, reaction=ON_NEW, execution_mode="execute"),
    "score": agent(run=score, reaction=ON_NEW, execution_mode="execute"),
}


async def backlog(url: str, updates: int) -> None:
    """Store the objects and their updates, with the agents registered at the start."""
    async with ObjectStore(url) as objects:
        async with ReactionService(objects=objects, agents=AGENTS):
            pass  # register the agents: they start at the first event
        made = [
            await objects.create("Account", {"balance": 0}, actor=User("bench"))
            for _ in range(OBJECTS)
        ]
        for n in range(updates):
            account = made[n % OBJECTS]
            # n + 1: an update that changes nothing stores no event
            await objects.update(account.id, {"balance": n + 1}, actor=User("bench"))


async def live(writes: int, new_objects: bool, service: bool) -> float:
    """Seconds from the first write to the last completed entry (or write, alone).

    ``writes`` updates of one object, or ``writes`` new objects (``new_objects``);
    without ``service`` they are only stored (the baseline).

    Raises:
        AssertionError: The processing log is not exact.
    """
    with tempfile.TemporaryDirectory() as folder:
        async with ObjectStore(f"sqlite:///{Path(folder) / 'bench.db'}") as objects:
            hot = await objects.create("Account", {"balance": 0}, actor=User("bench"))

            async def writer(first: int) -> None:
                for n in range(first, writes, WRITERS):
                    # n + 1: an update that changes nothing stores no event
                    if new_objects:
                        await objects.create("Account", {"balance": n + 1}, actor=User("bench"))
                    else:
                        await objects.update(hot.id, {"balance": n + 1}, actor=User("bench"))

            async def write_all() -> None:
                async with asyncio.TaskGroup() as group:
                    for first in range(WRITERS):
                        group.create_task(writer(first))

            if not service:
                start = time.perf_counter()
                await write_all()
                return time.perf_counter() - start
            agents = ON_CREATES if new_objects else AGENTS
            async with ReactionService(objects=objects, agents=agents) as running:
                await running.idle()  # the agents are registered, nothing is pending
                began = datetime.now(UTC)
                await write_all()
                await running.idle()
                log = await running.processing_log()
        log = [e for e in log if e.created_at >= began]
        _check_exact(log, writes)
        return (max(e.updated_at for e in log) - began).total_seconds()


def _check_exact(log: list[ProcessingEntry], events: int) -> None:
    keys = {(e.agent, e.object_id, e.object_version) for e in log}
    statuses = {e.status for e in log}
    if len(log) != 2 * events or len(keys) != len(log) or statuses != {"completed"}:
        raise AssertionError(
            f"processing log not exact: {len(log)} entries, {len(keys)} distinct, "
            f"statuses {sorted(statuses)} (expected {2 * events} completed)"
        )


async def through_service(updates: int) -> tuple[float, float]:
    """Seconds until every event was dispatched, and until all were processed.

    Raises:
        AssertionError: The processing log is not exact.
    """
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        await backlog(url, updates)
        async with ObjectStore(url) as objects:
            began = datetime.now(UTC)
            start = time.perf_counter()
            async with ReactionService(objects=objects, agents=AGENTS) as service:
                await service.idle()
                processed = time.perf_counter() - start
                log = await service.processing_log()
        _check_exact(log, updates)
        dispatched = (max(e.created_at for e in log) - began).total_seconds()
        return dispatched, processed


async def directly(updates: int) -> float:
    """Seconds to run the same two agents once per event each, without the service."""
    graphs = [reactive({name: definition}) for name, definition in AGENTS.items()]
    async with ObjectStore("sqlite://") as objects:
        account = await objects.create("Account", {"balance": 0})
        start = time.perf_counter()
        for n in range(updates):
            current = account.model_copy(update={"version": n + 2, "data": {"balance": n}})
            for graph in graphs:
                await graph.run(scope={"object": current, "objects": objects})
        return time.perf_counter() - start


def _timed_live(writes: int, new_objects: bool, service: bool) -> float:
    return asyncio.run(live(writes, new_objects, service))


def _timed_backlog(updates: int) -> tuple[float, float]:
    return asyncio.run(through_service(updates))


def _timed_directly(updates: int) -> float:
    return asyncio.run(directly(updates))


def as_served() -> Executor:
    """A fresh process tuned as ``reactor serve`` tunes its own: ``tune_gc()`` at start."""
    return ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=tune_gc
    )


def _in(pool: Executor, fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """``fn(*args)`` measured in ``pool``'s process (the timing is taken there)."""
    return lambda: pool.submit(fn, *args).result()


def live_rows(runs: int, scale: float, pool: Executor) -> list[Row]:
    """The live rows: one hot object, then new objects (tuned as ``reactor serve``)."""
    writes = max(300, int(WRITES * scale))
    pairs = max(1, runs // 2)
    rows = []
    for new_objects, name in ((False, "hot object"), (True, f"{writes:,} new objects")):
        what = "objects created" if new_objects else "updates of one object"
        ours, alone = best_of_pair(
            pairs,
            _in(pool, _timed_live, writes, new_objects, True),
            _in(pool, _timed_live, writes, new_objects, False),
        )
        untuned = ""
        if not new_objects:  # one figure with Python's own collector settings, both sides
            raw, raw_alone = best_of_pair(
                pairs,
                functools.partial(_timed_live, writes, new_objects, True),
                functools.partial(_timed_live, writes, new_objects, False),
            )
            untuned = (
                f"; untuned (Python's collector settings, both): {rate(writes, raw)} vs "
                f"{rate(writes, raw_alone)}, {raw_alone / raw:.2f}x"
            )
        rows.append(
            Row(
                workload=(
                    f"reactions live, {name}: {writes:,} {what} over the ObjectStore API "
                    f"({WRITERS} writers) while 2 reaction agents react, first write to last "
                    "completed entry (SQLite, processing log exact; tuned as reactor serve: "
                    f"tune_gc() in a fresh process, both sides{untuned})"
                ),
                ours=rate(writes, ours),
                baseline=f"{rate(writes, alone)} (the writes alone, no service)",
                ratio=ours / alone,
                ratio_text=f"{alone / ours:.2f}x the writes' rate",
                target=">= 2,000 events/s",
                met=writes / ours >= TARGET,
            )
        )
    return rows


def run(runs: int, scale: float) -> list[Row]:
    updates = max(1_000, int(UPDATES * scale))
    timings: list[tuple[float, float]] = []
    with as_served() as pool:
        rows = live_rows(runs, scale, pool)
        backlog = _in(pool, _timed_backlog, updates)

        def service() -> float:
            timings.append(backlog())
            return timings[-1][1]

        _, direct = best_of_pair(max(1, runs // 2), service, _in(pool, _timed_directly, updates))
    dispatched = min(t[0] for t in timings)
    processed = min(t[1] for t in timings)
    baseline = f"{rate(updates, direct)} (the agents run directly, no database)"
    return [
        *rows,
        Row(
            workload=(
                f"reactions: {updates:,} object updates dispatched to 2 reaction agents "
                "(each event logged for both, while the reactions run; SQLite; tuned as "
                "reactor serve, both sides)"
            ),
            ours=rate(updates, dispatched),
            baseline=baseline,
            ratio=dispatched / direct,
            ratio_text=f"{direct / dispatched:.2f}x the baseline rate",
            target=">= 2,000 events/s",
            met=updates / dispatched >= TARGET,
        ),
        Row(
            workload=(
                f"reactions: the same {updates:,} events processed end to end (each reaction "
                "a recorded run, processing log exact; tuned as reactor serve, both sides)"
            ),
            ours=rate(updates, processed),
            baseline=baseline,
            ratio=processed / direct,
            ratio_text=f"{direct / processed:.2f}x the baseline rate",
            target=">= 2,000 events/s",
            met=updates / processed >= TARGET,
        ),
    ]
