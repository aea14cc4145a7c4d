"""Admission of reaction agents: which object events start a run when they come too fast."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from reactor import (
    AgentContext,
    Batch,
    Debounce,
    Latest,
    ModelPrice,
    ScriptedProvider,
    SpendCap,
    SQLiteSignalStore,
    Throttle,
    agent,
)
from reactor.service import ObjectStore, ProcessingEntry, Reaction, ReactionService
from reactor.service._reactions.definitions import AgentChanges
from reactor.service._reactions.evaluated import reaction_scope
from tests.service.support import Gate, running


class Seen:
    """A handler agent noting each activation: the object's version and its batch."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, list[int] | None]] = []

    def __call__(self, ctx: AgentContext[Any]) -> None:
        batch = ctx.batch
        versions = None if batch is None else [event.version for event in batch]
        self.calls.append((ctx.object.id, ctx.object.version, versions))


_NOTHING = '{"reasoning": "nothing to do", "operations": []}'


def by_status(entries: list[ProcessingEntry]) -> Counter[str]:
    return Counter(entry.status for entry in entries)


@pytest.mark.parametrize(
    ("updates", "together"),
    [pytest.param(50, False, id="one-by-one"), pytest.param(1_200, True, id="a-burst")],
)
async def test_a_busy_latest_agent_runs_on_the_newest_version_only(
    url: str, updates: int, together: bool
) -> None:
    # One by one, decisions follow each other (the links move on to the newest); a burst
    # of a thousand is superseded by one decision, written as a whole.
    gate, seen = Gate(), Seen()

    async def analyst(ctx: AgentContext[Any]) -> None:
        if not gate.opened.is_set():
            await gate(ctx)
        seen(ctx)

    agents = {"analyst": agent(run=analyst, reaction=Reaction(admit=Latest()))}
    async with running(url, agents) as (objects, service):
        quote = await objects.create("Person", {"name": "v1"})
        await asyncio.wait_for(gate.waiting.wait(), 60)
        changes = [objects.update(quote.id, {"name": f"v{n}"}) for n in range(2, updates + 2)]
        if together:
            await asyncio.gather(*changes)
        else:
            for change in changes:
                await change
        gate.open()
        await service.idle(timeout=120)
        entries = await service.processing_log(agent="analyst")
    last = updates + 1
    assert 1 < len(seen.calls) <= 5
    assert seen.calls[-1][1] == last  # the last activation saw the last change
    statuses = by_status(entries)
    assert statuses["completed"] == len(seen.calls)
    assert statuses["superseded"] == last - len(seen.calls)
    ran = {entry.id for entry in entries if entry.status == "completed"}
    superseded = [entry for entry in entries if entry.status == "superseded"]
    assert all(entry.superseded_by in ran for entry in superseded)
    assert all(entry.run_id is None for entry in superseded)


async def test_a_key_freed_among_busy_slots_takes_its_newest_version_at_once(url: str) -> None:
    # Under load a take waits for a quarter of the slots to be free (fewer, larger
    # transactions). Here seven slots of eight stay busy with slow calls: when the hot
    # quote's call ends, its newest version must start anyway, not wait for another.
    gate, hot_release, hot_seen = Gate(), asyncio.Event(), asyncio.Event()
    versions: list[int] = []

    async def analyst(ctx: AgentContext[Any]) -> None:
        if ctx.object.data["name"] != "hot":
            await gate(ctx)
            return
        versions.append(ctx.object.version)
        if ctx.object.version == 1:
            await hot_release.wait()
        else:
            hot_seen.set()

    agents = {"analyst": agent(run=analyst, reaction=Reaction(admit=Latest()))}
    async with running(url, agents, max_running=8) as (objects, service):
        hot = await objects.create("Person", {"name": "hot"})
        for n in range(7):
            await objects.create("Person", {"name": f"held {n}"})
        deadline = time.monotonic() + 60
        while len(gate.seen) < 7 or versions != [1]:
            assert time.monotonic() < deadline, "the eight slots never filled"
            await asyncio.sleep(0.01)
        await objects.update(hot.id, {"name": "hot", "employer": "v2"})
        await objects.update(hot.id, {"name": "hot", "employer": "v3"})
        hot_release.set()
        try:
            await asyncio.wait_for(hot_seen.wait(), 60)
        finally:
            gate.open()
        await service.idle(timeout=120)
        entries = await service.processing_log(agent="analyst")
    assert versions == [1, 3]  # v2 was superseded while v1 ran
    assert by_status(entries) == Counter({"completed": 9, "superseded": 1})


async def test_latest_per_key_keeps_the_newest_of_each_symbol(url: str) -> None:
    gate, seen = Gate(), Seen()

    async def analyst(ctx: AgentContext[Any]) -> None:
        if not gate.opened.is_set():
            await gate(ctx)
        seen(ctx)

    desk = Reaction(types=["Person"], admit=Latest(key="{{ object.data.employer }}"))
    async with running(url, {"analyst": agent(run=analyst, reaction=desk)}) as (objects, service):
        first = await objects.create("Person", {"name": "a0", "employer": "ACME"})
        await asyncio.wait_for(gate.waiting.wait(), 60)
        for n in range(1, 6):  # five quotes of each symbol, each a new object
            await objects.create("Person", {"name": f"a{n}", "employer": "ACME"})
            await objects.create("Person", {"name": f"g{n}", "employer": "GLOBEX"})
        gate.open()
        await service.idle(timeout=120)
        names = [(await objects.get(object_id)).data["name"] for object_id, _, _ in seen.calls]
    assert names[0] == first.data["name"]
    acme = [name for name in names if name.startswith("a")]
    globex = [name for name in names if name.startswith("g")]
    assert acme == ["a0", "a5"]  # busy with a0: only the newest of the rest waited
    assert globex[-1] == "g5"  # another symbol is not held up by ACME's run


async def test_debounce_delivers_a_burst_as_one_batch_in_order(url: str) -> None:
    seen = Seen()
    burst = Reaction(admit=Debounce(3.0, deliver="batch"))
    async with running(url, {"summary": agent(run=seen, reaction=burst)}) as (objects, service):
        note = await objects.create("Person", {"name": "n1"})
        for version in range(2, 11):
            await objects.update(note.id, {"name": f"n{version}"})
        await service.idle(timeout=120)
        entries = await service.processing_log(agent="summary")
    assert seen.calls == [(note.id, 10, list(range(1, 11)))]
    taken = next(entry for entry in entries if entry.status == "completed")
    merged = [entry for entry in entries if entry.status == "merged"]
    assert len(merged) == 9
    assert {entry.superseded_by for entry in merged} == {taken.id}


async def test_debounce_with_max_wait_goes_before_the_burst_ends(url: str) -> None:
    seen = Seen()
    burst = Reaction(admit=Debounce(2.0, max_wait=3.0))
    async with running(url, {"summary": agent(run=seen, reaction=burst)}) as (objects, service):
        note = await objects.create("Person", {"name": "n1"})
        for version in range(2, 14):  # a burst of six seconds, never quiet for two
            await asyncio.sleep(0.5)
            await objects.update(note.id, {"name": f"n{version}"})
        await service.idle(timeout=60)
    assert len(seen.calls) >= 2  # max_wait let the burst's start go while it went on
    assert seen.calls[-1][1] == 13


async def test_batch_gives_max_items_at_once_and_the_rest_after_max_wait(url: str) -> None:
    seen = Seen()
    batched = Reaction(admit=Batch(4, max_wait=1.0))
    async with running(url, {"ledger": agent(run=seen, reaction=batched)}) as (objects, service):
        made = [await objects.create("Person", {"name": f"p{n}"}) for n in range(10)]
        await service.idle(timeout=60)
    sizes = [len(batch or []) for _, _, batch in seen.calls]
    assert sum(sizes) == 10
    assert max(sizes) <= 4
    assert made[-1].id in {object_id for object_id, _, _ in seen.calls}  # a batch's newest


async def test_a_throttle_never_drops_an_event(url: str) -> None:
    seen = Seen()
    paced = Reaction(admit=Throttle("20/s", burst=2))
    async with running(url, {"paced": agent(run=seen, reaction=paced)}) as (objects, service):
        quote = await objects.create("Person", {"name": "v1"})
        for version in range(2, 31):
            await objects.update(quote.id, {"name": f"v{version}"})
        await service.idle(timeout=120)
        entries = await service.processing_log(agent="paced")
    assert sorted(version for _, version, _ in seen.calls) == list(range(1, 31))
    assert by_status(entries) == {"completed": 30}


async def test_latest_then_throttle_coalesces_what_waits_for_the_bucket(url: str) -> None:
    seen = Seen()
    paced = Reaction(admit=(Latest(), Throttle("1/min")))
    async with running(url, {"paced": agent(run=seen, reaction=paced)}) as (objects, service):
        quote = await objects.create("Person", {"name": "v1"})
        await service.idle(timeout=60)
        for version in range(2, 12):
            await objects.update(quote.id, {"name": f"v{version}"})
        await wait_for(lambda: service.processing_log(agent="paced", status="superseded"), 9)
        entries = await service.processing_log(agent="paced")
    statuses = by_status(entries)
    assert statuses == {"completed": 1, "superseded": 9, "pending": 1}
    (waiting,) = [entry for entry in entries if entry.status == "pending"]
    assert waiting.object_version == 11  # the newest waits for the next token
    assert [version for _, version, _ in seen.calls] == [1]


async def test_kept_types_are_never_coalesced(url: str) -> None:
    gate, seen = Gate(), Seen()

    async def desk(ctx: AgentContext[Any]) -> None:
        if not gate.opened.is_set():
            await gate(ctx)
        seen(ctx)

    admit = Latest(key="{{ object.data.name }}", keep=["Comp*"])
    reaction = Reaction(admit=admit)
    async with running(url, {"desk": agent(run=desk, reaction=reaction)}) as (objects, service):
        await objects.create("Person", {"name": "ACME"})
        await asyncio.wait_for(gate.waiting.wait(), 60)
        fills = [await objects.create("Company", {"name": "ACME"}) for _ in range(4)]
        for _ in range(4):
            await objects.create("Person", {"name": "ACME"})
        gate.open()
        await service.idle(timeout=120)
        entries = await service.processing_log(agent="desk")
    ran = {object_id for object_id, _, _ in seen.calls}
    assert {fill.id for fill in fills} <= ran  # every fill, though they share the key
    assert by_status(entries)["superseded"] == 3  # the quotes: the newest of four ran


async def test_a_spend_cap_holds_entries_and_an_admin_releases_them(url: str) -> None:
    price = ModelPrice(input=1_000_000.0, output=0.0)  # a dollar a token
    provider = ScriptedProvider(default=[_NOTHING] * 3, pricing=price)
    capped = agent(
        prompt="Quote {{ object.data.name }}",
        reaction=Reaction(admit=SpendCap(0.5, per=timedelta(days=1))),
    )
    async with running(url, {"capped": capped}, provider=provider) as (objects, service):
        await objects.create("Person", {"name": "q1"})
        await service.idle(timeout=60)
        await objects.create("Person", {"name": "q2"})
        await objects.create("Person", {"name": "q3"})
        held = await wait_for(lambda: service.processing_log(agent="capped", status="held"), 2)
        await service.idle(timeout=60)  # idle does not wait for held entries
        assert all(entry.error and entry.error.startswith("spend cap") for entry in held)
        assert len(provider.requests) == 1
        spent = await service.processing_log(agent="capped", status="completed")
        assert (spent[0].cost_usd or 0) > 0.5

        await service.catalog.update("capped", AgentChanges(spend_cap_usd=1_000.0))
        await wait_for(lambda: service.processing_log(agent="capped", status="completed"), 3)
        await service.idle(timeout=60)
    assert len(provider.requests) == 3


async def test_the_service_cap_is_summed_over_every_agent(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACTOR_SPEND_CAP_USD", "0.5")
    monkeypatch.setenv("REACTOR_SPEND_CAP_PER", "1d")
    price = ModelPrice(input=1_000_000.0, output=0.0)
    provider = ScriptedProvider(default=[_NOTHING] * 2, pricing=price)
    agents = {
        "one": agent(prompt="one {{ object.id }}", reaction=Reaction(types=["Person"])),
        "two": agent(prompt="two {{ object.id }}", reaction=Reaction(types=["Company"])),
    }
    async with running(url, agents, provider=provider) as (objects, service):
        await objects.create("Person", {"name": "p"})
        await service.idle(timeout=60)
        await objects.create("Company", {"name": "c"})
        (held,) = await wait_for(lambda: service.processing_log(agent="two", status="held"), 1)
    assert "the service's" in (held.error or "")
    assert len(provider.requests) == 1


async def test_a_guard_is_asked_once_per_event_and_its_verdict_logged(url: str) -> None:
    asked: Counter[int] = Counter()

    def wanted(ctx: AgentContext[Any]) -> bool:
        asked[ctx.object.version] += 1
        return bool(ctx.object.version % 2)

    seen = Seen()
    guarded = agent(run=seen, when=wanted, reaction=Reaction(concurrency="queue"))
    async with running(url, {"guarded": guarded}) as (objects, service):
        quote = await objects.create("Person", {"name": "v1"})
        for version in range(2, 7):
            await objects.update(quote.id, {"name": f"v{version}"})
        await service.idle(timeout=60)
        entries = await service.processing_log(agent="guarded")
    assert asked == dict.fromkeys(range(1, 7), 1)
    assert [version for _, version, _ in seen.calls] == [1, 3, 5]
    assert by_status(entries) == {"completed": 3, "skipped": 3}


async def test_a_guard_that_raises_fails_its_entry_without_a_run(url: str) -> None:
    def broken(ctx: AgentContext[Any]) -> bool:
        raise RuntimeError("no quote feed")

    seen = Seen()
    async with running(url, {"g": agent(run=seen, when=broken, reaction=Reaction())}) as (
        objects,
        service,
    ):
        await objects.create("Person", {"name": "v1"})
        await service.idle(timeout=60)
        (entry,) = await service.processing_log(agent="g")
    assert (entry.status, entry.run_id, seen.calls) == ("failed", None, [])
    assert "no quote feed" in (entry.error or "")


async def test_an_evaluation_sees_the_batch_admission_delivered(url: str, tmp_path: Any) -> None:
    seen = Seen()
    burst = Reaction(admit=Debounce(2.0, deliver="batch"))
    with SQLiteSignalStore(tmp_path / "runs.db") as record:
        report = await _evaluated(url, record, seen, burst)
    assert [case.status for case in report.cases] == ["same"]
    assert [batch for _, _, batch in seen.calls] == [[1, 2, 3, 4], [1, 2, 3, 4]]


async def _evaluated(url: str, record: SQLiteSignalStore, seen: Seen, burst: Reaction) -> Any:
    """A debounced reaction on four changes, and its one run evaluated again."""
    async with (
        ObjectStore(url) as objects,
        ReactionService(
            objects=objects, agents={"s": agent(run=seen, reaction=burst)}, record=record
        ) as service,
    ):
        note = await objects.create("Person", {"name": "n1"})
        for version in range(2, 5):
            await objects.update(note.id, {"name": f"n{version}"})
        await service.idle(timeout=60)
        (entry,) = await service.processing_log(agent="s", status="completed")
        target = service.reactions["s"]
        assert entry.run_id is not None
        return await target.graph.evaluate(
            [entry.run_id], store=record, scope=reaction_scope(objects, target)
        )


async def wait_for(read: Any, count: int) -> list[ProcessingEntry]:
    """Read entries until there are ``count`` of them (a generous deadline, not a sleep)."""
    deadline = time.monotonic() + 60.0
    while True:
        found: list[ProcessingEntry] = await read()
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) >= count, found
            return found
        await asyncio.sleep(0.05)
