"""Reaction loops are cut at a depth; suggestions carry the version they were based on."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import structlog

from reactor import AgentContext, Signal, SuggestionStaleError, agent
from reactor.service import Reaction, User
from tests.service.support import running


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_two_agents_updating_each_other_stop_at_the_depth_limit(url: str) -> None:
    lines = _Lines()
    logger = logging.getLogger("reactor.service")
    level, logger.disabled = logger.level, False
    logger.setLevel(logging.INFO)
    logger.addHandler(lines)

    def bump(field: str) -> Any:
        async def react(ctx: AgentContext[Any]) -> None:
            count = int(ctx.object.data.get(field) or 0)
            await ctx.objects.update(ctx.object.id, {field: count + 1})

        return agent(
            run=react,
            reaction=Reaction(types=["Counter"], events=["updated"], ignore_self=True),
            execution_mode="execute",
        )

    agents = {"ping": bump("ping"), "pong": bump("pong")}
    async with running(url, agents, max_reaction_depth=4) as (objects, service):
        loops: list[Signal] = []
        subscription = service.bus.subscribe("reaction:loop", loops.append)
        try:
            counter = await objects.create("Counter", {"ping": 0, "pong": 0}, actor=User("u1"))
            await objects.update(counter.id, {"ping": 1}, actor=User("u1"))
            await service.idle(timeout=60)
        finally:
            subscription.cancel()
        final = await objects.get(counter.id)
        events = await objects.events(object_id=counter.id)
        skipped = await service.processing_log(status="skipped")
    depths = [e.cause.depth if e.cause else 0 for e in events]
    assert max(depths) == 5  # one past the limit: made, but never dispatched
    assert final.version == len(events)  # and nothing went on after
    assert skipped
    for entry in skipped:
        assert entry.error is not None
        assert entry.error.startswith("reaction loop: ")
        assert "at depth 5, past max_reaction_depth=4" in entry.error
    chains = {" -> ".join(loop.payload["chain"]) for loop in loops}
    assert chains <= {
        "ping -> pong -> ping -> pong -> ping",
        "pong -> ping -> pong -> ping -> pong",
    }
    assert chains
    logger.removeHandler(lines)
    logger.setLevel(level)
    if not structlog.is_configured():  # else the line went to structlog's own output
        cut = [r for r in lines.records if "reaction loop cut" in r.getMessage()]
        assert cut
        assert {r.levelno for r in cut} == {logging.WARNING}


async def test_approving_a_suggestion_whose_object_changed_is_refused_unless_forced(
    url: str,
) -> None:
    """Changed in what it depends on: the field it sets (a price moving is not that)."""

    async def stop_loss(ctx: AgentContext[Any]) -> None:
        await ctx.objects.update(ctx.object.id, {"stop": ctx.object.data["price"] * 0.9})

    agents = {
        "guard": agent(
            run=stop_loss,
            reaction=Reaction(types=["Position"], events=["created"]),
            execution_mode="suggest",
        )
    }
    async with running(url, agents) as (objects, service):
        position = await objects.create("Position", {"price": 100.0}, actor=User("u1"))
        await service.idle(timeout=60)
        (first,) = await service.suggestions("pending")
        assert (first.object_version, first.basis) == (1, {"stop": None})
        await objects.update(position.id, {"price": 200.0}, actor=User("u1"))
        await objects.update(position.id, {"stop": 150.0}, actor=User("u2"))
        with pytest.raises(SuggestionStaleError) as refused:
            await service.approve(first.id, actor=User("u1"))
        assert (refused.value.based_on, refused.value.current) == (1, 3)
        assert refused.value.changed == ("stop",)
        assert "approve anyway (force=True" in str(refused.value)
        assert (await objects.get(position.id)).data["stop"] == 150.0  # unchanged
        assert [s.id for s in await service.suggestions("pending")] == [first.id]
        await service.approve(
            first.id, actor=User("u1"), force=True, justification="our stop stands"
        )
        assert (await objects.get(position.id)).data["stop"] == 90.0
