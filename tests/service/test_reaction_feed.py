"""The dispatcher takes the events its own process writes from memory, and reads the rest."""

from __future__ import annotations

import asyncio
from typing import Any

from reactor import AgentContext, agent
from reactor.service import ObjectStore, Reaction
from tests.service.support import TYPES, running


async def test_changes_of_this_process_and_of_another_are_each_processed_once(url: str) -> None:
    seen: list[tuple[str, int]] = []

    async def note(ctx: AgentContext[Any]) -> None:
        seen.append((ctx.object.id, ctx.object.version))

    agents = {"note": agent(run=note, reaction=Reaction(types=["Person"], events=["updated"]))}
    async with (
        running(url, agents) as (objects, service),
        ObjectStore(url, types=TYPES) as elsewhere,  # another process's writes: not in memory
    ):
        here = await objects.create("Person", {"name": "Ada"})
        there = await elsewhere.create("Person", {"name": "Grace"})

        async def write(store: ObjectStore, object_id: str, first: int) -> None:
            for n in range(first, first + 10):
                await store.update(object_id, {"name": f"v{n}"})

        await asyncio.gather(write(objects, here.id, 0), write(elsewhere, there.id, 100))
        await write(objects, here.id, 200)  # after the gap, from memory again
        await service.idle(timeout=60)
        log = await service.processing_log(agent="note")
    expected = {(here.id, v) for v in range(2, 22)} | {(there.id, v) for v in range(2, 12)}
    assert sorted((e.object_id, e.object_version) for e in log) == sorted(expected)
    assert {e.status for e in log} == {"completed"}
    assert sorted(seen) == sorted(expected)
