"""Reaction workload: 10,000 object updates through the service, two reaction agents.

The updates are stored first (100 objects, 100 updates each); then a service starts
on the database and is timed until it is idle: every event dispatched to both agents
as a recorded run (to the default signal store in the same SQLite file), with its
processing-log entries claimed, started and finished. The figure is events per
second. The processing log must then be exact: one ``completed`` entry per agent and
event, nothing else. The baseline runs the same two agents directly, one run per
event each, with no database.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._runner import Row, best_of_pair, rate
from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, Reaction, ReactionService, User

OBJECTS = 100
UPDATES = 10_000
TARGET = 2_000.0
ON_UPDATES = Reaction(types=["Account"], events=["updated"], concurrency="parallel")


def audit(ctx: AgentContext[Any]) -> int:
    return len(ctx.object.data)


def score(ctx: AgentContext[Any]) -> int:
    return int(ctx.object.data["balance"]) % 7


AGENTS = {
    "audit": agent(run=audit, reaction=ON_UPDATES, execution_mode="execute"),
    "score": agent(run=score, reaction=ON_UPDATES, execution_mode="execute"),
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
            await objects.update(account.id, {"balance": n}, actor=User("bench"))


async def through_service(updates: int) -> float:
    """Seconds the service takes to process the backlog; checks the log is exact."""
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        await backlog(url, updates)
        async with ObjectStore(url) as objects:
            start = time.perf_counter()
            async with ReactionService(objects=objects, agents=AGENTS) as service:
                await service.idle()
                elapsed = time.perf_counter() - start
                log = await service.processing_log()
        keys = {(e.agent, e.object_id, e.object_version) for e in log}
        statuses = {e.status for e in log}
        if len(log) != 2 * updates or len(keys) != len(log) or statuses != {"completed"}:
            raise AssertionError(
                f"processing log not exact: {len(log)} entries, {len(keys)} distinct, "
                f"statuses {sorted(statuses)} (expected {2 * updates} completed)"
            )
        return elapsed


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


def run(runs: int, scale: float) -> list[Row]:
    updates = max(1_000, int(UPDATES * scale))
    service, direct = best_of_pair(
        max(1, runs // 2),
        lambda: asyncio.run(through_service(updates)),
        lambda: asyncio.run(directly(updates)),
    )
    events_per_second = updates / service
    return [
        Row(
            workload=(
                f"reactions: {updates:,} object updates, 2 reaction agents, each reaction a "
                "recorded run (SQLite), processing log exact"
            ),
            ours=rate(updates, service),
            baseline=f"{rate(updates, direct)} (the agents run directly, no database)",
            ratio=service / direct,
            ratio_text=f"{service / direct:.2f}x the baseline time",
            target=">= 2,000 events/s",
            met=events_per_second >= TARGET,
        )
    ]
