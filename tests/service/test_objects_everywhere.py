"""Objects are first-class in the service: ``ctx.objects`` in every run it starts, a
reaction its guard turns down runs nothing, changes name what made them, and objects
are read in pages.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reactor import AgentContext, MemorySignalStore, agent, reactive
from reactor.service import (
    Capabilities,
    ObjectStore,
    Reaction,
    ReactionService,
    ServiceConfigError,
    ServiceStateError,
    User,
)
from tests.service.quotes import AGENTS, GRAPHS, Census, Quote

DEADLINE = 60.0
"""Seconds a test waits for a run to end (a loaded machine is slow; a stuck run fails)."""


async def _completed(record: MemorySignalStore, run_id: str) -> None:
    async with asyncio.timeout(DEADLINE):
        while True:
            try:
                if record.info(run_id).complete:
                    return
            except LookupError:
                pass
            await asyncio.sleep(0.05)


def _service(objects: ObjectStore, record: MemorySignalStore, **options: Any) -> ReactionService:
    options.setdefault("agents", AGENTS)
    options.setdefault("graphs", GRAPHS)
    return ReactionService(objects=objects, record=record, **options)


async def test_a_reaction_its_guard_turns_down_is_skipped_with_no_run(url: str) -> None:
    record = MemorySignalStore()
    async with (
        ObjectStore(url, types=[Quote, Census]) as objects,
        _service(objects, record) as service,
    ):
        cheap = await objects.create("Quote", {"symbol": "AAPL", "price": 50}, actor=User("u1"))
        dear = await objects.create("Quote", {"symbol": "NVDA", "price": 120}, actor=User("u1"))
        await service.idle(timeout=DEADLINE)
        log = {(e.agent, e.object_id): e for e in await service.processing_log()}
    skipped = log[("flag", cheap.id)]
    assert (skipped.status, skipped.run_id) == ("skipped", None)
    assert skipped.error == (
        "its guard is false for this event (when='object.data.price > 100 and not "
        "object.data.flagged'): no run was started"
    )
    assert log[("review", cheap.id)].error == (
        "its guard is false for this event (when=tests.service.quotes.<lambda>): no run was started"
    )
    ran = log[("flag", dear.id)]
    assert ran.status == "completed"
    runs = record.runs()  # the dear quote's flag run, and nothing for the cheap one
    assert [info.run_id for info in runs] == [ran.run_id]
    assert record.runs(tag=f"object={cheap.id}") == []


async def test_a_guard_that_raises_fails_its_entry_once_without_a_run(url: str) -> None:
    def broken(ctx: AgentContext[Any]) -> bool:
        raise KeyError("volume")

    picky = agent(run=lambda ctx: None, reaction=Reaction(types=["Quote"]), when=broken)
    record = MemorySignalStore()
    async with (
        ObjectStore(url, types=[Quote]) as objects,
        _service(objects, record, agents={"picky": picky}, graphs={}) as service,
    ):
        await objects.create("Quote", {"symbol": "AAPL", "price": 50}, actor=User("u1"))
        await service.idle(timeout=DEADLINE)
        (entry,) = await service.processing_log()
    assert entry.status == "failed"
    assert entry.run_id is None  # asked once, when the event was logged: no run to fail in
    assert "KeyError" in (entry.error or "")
    assert "picky" not in {info.graph for info in record.runs()}


async def test_cron_manual_and_graph_agents_change_objects_through_ctx_objects(
    url: str,
) -> None:
    record = MemorySignalStore()
    async with (
        ObjectStore(url, types=[Quote, Census]) as objects,
        _service(objects, record) as service,
    ):
        quote = await objects.create("Quote", {"symbol": "AAPL", "price": 50}, actor=User("u1"))
        manual = await service.run_agent("tidy")
        await _completed(record, manual)
        census = await service.submit("census", input="morning")
        await _completed(record, census)
        await service.idle(timeout=DEADLINE)
        seen = await objects.get(quote.id)
        (counted,) = await objects.list("Census")
        events = await objects.events(quote.id)
    assert record.info(manual).status == "completed"
    assert record.info(census).status == "completed"
    assert seen.data["seen"] is True
    assert str(seen.actor) == "agent:tidy"
    cause = events[-1].cause
    assert cause is not None
    assert (cause.run_id, cause.agent, cause.depth) == (manual, "tidy", 0)
    assert counted.data == {"title": "morning", "quotes": 1}
    assert str(counted.actor) == "agent:count"


async def test_a_cron_agent_has_ctx_objects_when_its_tick_comes(url: str) -> None:
    async def stamp(ctx: AgentContext[Any]) -> None:
        for quote in await ctx.objects.list("Quote"):
            await ctx.objects.update(quote.id, {"note": "stamped by cron"})

    nightly = agent(run=stamp, schedule="0 0 1 1 *")
    async with (
        ObjectStore(url, types=[Quote]) as objects,
        _service(objects, MemorySignalStore(), agents={"nightly": nightly}, graphs={}) as s,
    ):
        quote = await objects.create("Quote", {"symbol": "AAPL", "price": 50}, actor=User("u1"))
        assert s.cron.run_now("nightly")  # the tick comes due now
        async with asyncio.timeout(DEADLINE):
            while (await objects.get(quote.id)).version == 1:  # noqa: ASYNC110 - a stored value
                await asyncio.sleep(0.05)
        stamped = await objects.get(quote.id)
    assert (stamped.data["note"], str(stamped.actor)) == ("stamped by cron", "agent:nightly")


async def test_a_graph_agent_changes_objects_only_within_its_capabilities(url: str) -> None:
    async def wipe(ctx: AgentContext[Any]) -> None:
        for quote in await ctx.objects.list("Quote"):
            await ctx.objects.delete(quote.id)

    careful = agent(run=wipe, capabilities=Capabilities(can_delete=False))
    record = MemorySignalStore()
    graphs = {"wipe": reactive({"wipe": careful}, name="wipe")}
    async with (
        ObjectStore(url, types=[Quote]) as objects,
        _service(objects, record, agents={}, graphs=graphs) as service,
    ):
        await objects.create("Quote", {"symbol": "AAPL", "price": 50}, actor=User("u1"))
        run_id = await service.submit("wipe")
        await _completed(record, run_id)
        left = await objects.list("Quote")
    assert record.info(run_id).status == "failed"
    assert len(left) == 1


def test_ctx_objects_outside_the_service_says_where_objects_are() -> None:
    async def count(ctx: AgentContext[Any]) -> int:
        return len(await ctx.objects.list("Quote"))

    result = reactive({"count": agent(run=count)}).run_sync()
    error = result.failures[0].error
    assert isinstance(error, ServiceStateError)
    assert re.fullmatch(
        r"Agent 'count' uses ctx\.objects, but run run_\w+ has no object store: the objects "
        r"exist in runs that `reactor serve` or a ReactionService starts \(graphs, cron and "
        r"manual agents, reactions\)\. Start it through the service \(service\.submit\(\.\.\.\), "
        r'POST /api/runs\), or give the run one: run\(\.\.\., scope=\{"objects": '
        r"ObjectStore\(\.\.\.\)\}\)\.",
        str(error),
    )


async def test_an_approved_suggestion_names_itself_as_its_changes_cause(url: str) -> None:
    async with (
        ObjectStore(url, types=[Quote, Census]) as objects,
        _service(objects, MemorySignalStore()) as service,
    ):
        dear = await objects.create("Quote", {"symbol": "BRK", "price": 5000}, actor=User("u1"))
        await service.idle(timeout=DEADLINE)
        (suggestion,) = await service.suggestions("pending")
        await service.approve(
            suggestion.id, actor=User("u2"), force=True, justification="the quote moved since"
        )
        last = (await objects.events(dear.id))[-1]
    assert last.data["note"] == "check the spread"
    assert last.cause is not None
    assert (last.cause.suggestion_id, last.cause.agent, last.cause.depth) == (
        suggestion.id,
        "review",
        0,
    )
    assert last.cause.run_id == suggestion.run_id
    assert last.payload()["cause"] == {
        "run_id": suggestion.run_id,
        "agent": "review",
        "depth": 0,
        "chain": [],
        "suggestion_id": suggestion.id,
    }


async def test_objects_are_read_in_pages_the_most_recently_changed_first(url: str) -> None:
    async with ObjectStore(url, types=[Quote, Census]) as objects:
        made = [
            await objects.create("Quote", {"symbol": f"S{i:02}", "price": i}, actor=User("u1"))
            for i in range(7)
        ]
        await objects.create("Census", {"title": "Morning 100%", "quotes": 7}, actor=User("u2"))
        await objects.update(made[0].id, {"price": 99}, actor=User("u1"))
        pages, after = [], None
        while True:
            page = await objects.page("Quote", after=after, limit=3)
            pages.append([quote.data["symbol"] for quote in page.objects])
            if page.next is None:
                break
            after = page.next
        assert pages == [["S00", "S06", "S05"], ["S04", "S03", "S02"], ["S01"]]
        everything = await objects.page(limit=20)
        assert len(everything.objects) == 8
        assert everything.next is None
        assert [o.data["symbol"] for o in (await objects.page(search="s03")).objects] == ["S03"]
        assert [o.title for o in (await objects.page(search="0%")).objects] == ["Morning 100%"]
        assert (await objects.page(search="1_0")).objects == []  # "_" is no wildcard
        prefix = made[4].id[:10]
        assert made[4].id in [o.id for o in (await objects.page(search=prefix)).objects]
        by_u2 = await objects.page(created_by="user:u2")
        assert [o.type for o in by_u2.objects] == ["Census"]
        assert len((await objects.page(created_by="u1")).objects) == 7
        assert (await objects.page(created_by="agent:u1")).objects == []
        later = datetime.now(UTC) + timedelta(minutes=1)
        assert (await objects.page(since=later)).objects == []
        assert len((await objects.page(since=made[0].created_at)).objects) == 8
        assert await objects.stored_types() == ["Census", "Quote"]
        with pytest.raises(ServiceConfigError, match=r"^'nope' is not the cursor of a page"):
            await objects.page(after="nope")
        with pytest.raises(ServiceConfigError, match=r"^limit must be 1 to 500, got 0\.$"):
            await objects.page(limit=0)
