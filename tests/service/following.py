"""The app of the followers tests: a run that waits for a word, then emits a burst.

``reactor serve --app tests.service.following:make_service``. The graph ``gated``
asks "Go?" at once and waits (its streams stay open as long as the test wants); once
answered, it emits ``input`` ``tick`` signals (giving the loop a turn every 500) and
ends. The graph ``burst`` is the log-as-a-stream tests' (a burst at once).
"""

from __future__ import annotations

import asyncio
from typing import Any

from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, ReactionService
from tests.service.bursting import GRAPHS as BURSTING

TEXT = "a signal of a run followed by many clients"


async def _tick(ctx: AgentContext[Any]) -> int:
    count = int(ctx.input or 0)
    for i in range(count):
        ctx.emit("tick", {"i": i, "text": TEXT})
        if i % 500 == 499:
            await asyncio.sleep(0)
    return count


GRAPHS = {
    **BURSTING,
    "gated": reactive(
        {
            "gate": agent(ask="Go?", choices=["go"]),
            "ticker": agent(run=_tick, activate_on="agent:gate:completed", emits=["tick"]),
        },
        name="gated",
    ),
}


def make_service(db: str) -> ReactionService:
    """The service on ``db``, with the gated and the burst graphs."""
    return ReactionService(objects=ObjectStore(db), graphs=GRAPHS)
