"""A service process killed mid-reaction: its entry is abandoned, then processed again."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from typing import Any

from reactor import AgentContext, agent
from reactor.service import ObjectStore, Reaction, ReactionService
from tests.service.support import TYPES, Recorder

HANGING_SERVICE = textwrap.dedent(
    """
    import asyncio, sys
    from reactor import agent
    from reactor.service import ObjectStore, Reaction, ReactionService

    async def hang(ctx):
        print("processing", ctx.object.id, flush=True)
        await asyncio.sleep(3600)

    async def main():
        agents = {"enrich": agent(run=hang, reaction=Reaction())}
        async with ObjectStore(sys.argv[1]) as objects:
            async with ReactionService(objects=objects, agents=agents):
                await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_a_killed_process_leaves_an_entry_the_detector_abandons(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HANGING_SERVICE,
        url,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line.decode().split() == ["processing", ada.id]
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()

    seen = Recorder()

    async def enrich(ctx: AgentContext[Any]) -> None:
        seen(ctx)

    agents = {"enrich": agent(run=enrich, reaction=Reaction())}
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(
            objects=objects, agents=agents, stuck_after=0.5, stuck_check_every=0.1
        ) as service,
    ):
        (stuck,) = await service.processing_log()
        assert stuck.status == "processing"  # the dead process's: not this one's to redo
        for _ in range(100):
            (entry,) = await service.processing_log()
            if entry.status == "abandoned":
                break
            await asyncio.sleep(0.05)
        assert entry.status == "abandoned"
        assert seen.calls == []
        (event,) = await objects.events()
        await service.dispatch(event)
        await service.idle(timeout=10)
        log = await service.processing_log()
    assert [e.status for e in log] == ["abandoned", "completed"]
    assert [c["id"] for c in seen.calls] == [ada.id]
