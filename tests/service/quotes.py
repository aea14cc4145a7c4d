"""A trading desk's objects, served for the objects pages' tests.

``reactor serve --app tests.service.quotes:make_service``: quotes and the agents that
work on them. ``flag`` reacts to every quote but runs only for a price over 100 (its
``when`` guard: a cheaper quote is a ``skipped`` entry, no run); ``review`` suggests a
note on quotes over 1,000; ``tidy`` (a manual or cron agent) and the ``census`` graph
use ``ctx.objects`` outside any reaction.
"""

from __future__ import annotations

from typing import Any

import pydantic

from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, Reaction, ReactionService


class Quote(pydantic.BaseModel):
    symbol: str
    price: float
    flagged: bool = False
    seen: bool = False
    note: str | None = None


class Census(pydantic.BaseModel):
    title: str
    quotes: int


async def flag(ctx: AgentContext[Any]) -> None:
    """Flag a dear quote (only dear ones get here: see the guard)."""
    await ctx.objects.update(ctx.object.id, {"flagged": True})


async def review(ctx: AgentContext[Any]) -> None:
    """Suggest a note on a very dear quote (a person approves it)."""
    await ctx.objects.update(ctx.object.id, {"note": "check the spread"})


async def tidy(ctx: AgentContext[Any]) -> int:
    """Mark every quote seen; how many there were."""
    quotes = await ctx.objects.list("Quote")
    for quote in quotes:
        await ctx.objects.update(quote.id, {"seen": True})
    return len(quotes)


async def count(ctx: AgentContext[Any]) -> str:
    """Count the quotes, as a Census object; its id."""
    quotes = await ctx.objects.list("Quote")
    census = await ctx.objects.create("Census", {"title": ctx.input, "quotes": len(quotes)})
    return str(census.id)


AGENTS = {
    "flag": agent(
        run=flag,
        reaction=Reaction(types=["Quote"], events=["created", "updated"]),
        when="object.data.price > 100 and not object.data.flagged",
        execution_mode="execute",
    ),
    "review": agent(
        run=review,
        reaction=Reaction(types=["Quote"], events=["created"]),
        when=lambda ctx: ctx.object.data["price"] > 1000,
        execution_mode="suggest",
    ),
    "tidy": agent(run=tidy),
}
GRAPHS = {"census": reactive({"count": agent(run=count)}, name="census")}


def make_service(url: str) -> ReactionService:
    """The desk's service, on the database at ``url``."""
    return ReactionService(
        objects=ObjectStore(url, types=[Quote, Census], untyped=False),
        agents=AGENTS,
        graphs=GRAPHS,
    )
