"""The app of the log-as-a-stream tests: a graph whose agent emits a burst of signals.

``reactor serve --app tests.service.bursting:make_service``; the run's input is the
number of signals (``ctx.emit`` in a loop, giving the loop a turn every 1,000).
"""

from __future__ import annotations

import asyncio
from typing import Any

from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, ReactionService


async def burst(ctx: AgentContext[Any]) -> int:
    count = int(ctx.input or 0)
    for i in range(count):
        ctx.emit("tick", {"i": i, "text": "a signal of a long run"})
        if i % 1_000 == 999:
            await asyncio.sleep(0)
    return count


GRAPHS = {
    "burst": reactive({"burst": agent(run=burst, emits=["tick"], updates="emitted")},
                      state={"emitted": 0}, name="burst"),
}  # fmt: skip


def make_service(db: str) -> ReactionService:
    """The service on ``db``, with the burst graph."""
    return ReactionService(objects=ObjectStore(db), graphs=GRAPHS)
