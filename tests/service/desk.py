"""A trading desk, served for the desk's tests: quotes moved by a feed, agents that suggest.

``reactor serve --app tests.service.desk:make_service``. A ``Quote`` per symbol, whose
price a feed moves; three agents suggest changes to quotes for a person to approve:

* ``analyst`` reacts to every change of a quote (one object's events in order) and
  suggests a note with the price it saw: each new suggestion supersedes its pending one;
* ``noter`` suggests a note once, when a quote is created: a price moving leaves it
  fresh, a note written meanwhile makes it stale;
* ``hedger`` suggests hedging a new quote, and depends on its price
  (``depends_on=["price"]``): a price moving makes it stale.
"""

from __future__ import annotations

from typing import Any

import pydantic

from reactor import AgentContext, agent
from reactor.service import ObjectStore, Reaction, ReactionService


class Quote(pydantic.BaseModel):
    symbol: str
    price: float
    notes: str | None = None
    hedge: bool = False


async def analyst(ctx: AgentContext[Any]) -> None:
    """Note the price it saw."""
    data = ctx.object.data
    await ctx.objects.update(ctx.object.id, {"notes": f"{data['symbol']} at {data['price']}"})


async def noter(ctx: AgentContext[Any]) -> None:
    """Note something about the quote that does not depend on its price."""
    await ctx.objects.update(ctx.object.id, {"notes": "watch the spread"})


async def hedger(ctx: AgentContext[Any]) -> None:
    """Hedge the quote, at the price it saw."""
    await ctx.objects.update(ctx.object.id, {"hedge": True})


AGENTS = {
    "analyst": agent(
        run=analyst,
        reaction=Reaction(types=["Quote"], events=["created", "updated"], concurrency="queue"),
        execution_mode="suggest",
    ),
    "noter": agent(
        run=noter, reaction=Reaction(types=["Quote"], events=["created"]), execution_mode="suggest"
    ),
    "hedger": agent(
        run=hedger,
        reaction=Reaction(types=["Quote"], events=["created"], depends_on=["price"]),
        execution_mode="suggest",
    ),
}


def make_service(url: str) -> ReactionService:
    """The desk's service, on the database at ``url``."""
    return ReactionService(
        objects=ObjectStore(url, types=[Quote], untyped=False), agents=AGENTS, poll_every=0.2
    )
