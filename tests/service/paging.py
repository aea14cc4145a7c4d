"""The app of the paged-reads tests: long runs, a question, runs that wait or nap.

``reactor serve --app tests.service.paging:make_service``. ``burst`` emits as many
``tick`` signals as its input says (a long log of small signals); ``counter`` counts
its ticks in its state, one ``state:n:changed`` per tick (states that change all along
a log, across its snapshots); ``approval``, ``relay`` and ``nap`` are the HTTP tests'
graphs (a question to a person, a run that waits for a ``go`` signal, a nap).
"""

from __future__ import annotations

import asyncio
from typing import Any

from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, ReactionService
from tests.service.bursting import GRAPHS as BURSTING
from tests.service.served import GRAPHS as SERVED


async def _ticks(ctx: AgentContext[Any]) -> None:
    for i in range(int(ctx.input or 0)):
        ctx.emit("tick", {"i": i})
        for _ in range(5):  # the count of the tick is done before the next tick
            await asyncio.sleep(0)


async def _count(ctx: AgentContext[Any]) -> int:
    return int(ctx.state["n"]) + 1


COUNTER = reactive(
    {
        "ticker": agent(run=_ticks, emits=["tick"]),
        "count": agent(run=_count, activate_on="tick", updates="n"),
    },
    state={"n": 0},
    name="counter",
)

GRAPHS = {
    **BURSTING,
    "counter": COUNTER,
    **{name: SERVED[name] for name in ("approval", "relay", "nap")},
}


def make_service(db: str) -> ReactionService:
    """The service on ``db``, with the graphs above."""
    return ReactionService(objects=ObjectStore(db), graphs=GRAPHS)
