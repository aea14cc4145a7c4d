"""A service process killed mid-reaction: its entry is taken again, up to max_attempts."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from typing import Any

import pytest

from reactor import AgentContext, agent
from reactor.service import ObjectStore, Reaction, ReactionService
from reactor.service._objects.owners import RetryRefused
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


async def _killed_mid_reaction(url: str) -> str:
    """A service process that takes Ada's reaction and is killed (SIGKILL) in it; her id."""
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
    return ada.id


async def test_a_reaction_cut_off_by_a_crash_is_taken_again_at_once(url: str) -> None:
    ada = await _killed_mid_reaction(url)
    seen = Recorder()

    async def enrich(ctx: AgentContext[Any]) -> None:
        seen(ctx)

    agents = {"enrich": agent(run=enrich, reaction=Reaction())}
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents=agents, stuck_after=3600) as service,
    ):
        await service.idle(timeout=30)
        (entry,) = await service.processing_log()
    assert (entry.status, entry.attempts) == ("completed", 2)
    assert [c["id"] for c in seen.calls] == [ada]


async def test_past_max_attempts_it_fails_with_the_reason_and_is_retried_by_hand(
    url: str,
) -> None:
    ada = await _killed_mid_reaction(url)
    seen = Recorder()

    async def enrich(ctx: AgentContext[Any]) -> None:
        seen(ctx)

    agents = {"enrich": agent(run=enrich, reaction=Reaction())}
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents=agents, max_attempts=1) as service,
    ):
        await service.idle(timeout=30)
        (entry,) = await service.processing_log()
        assert (entry.status, entry.attempts) == ("failed", 1)
        assert entry.error is not None
        assert "stopped; gave up after 1 attempts (max_attempts=1)" in entry.error
        assert seen.calls == []
        again = await service.retry(entry.id)
        assert (again.status, again.attempts) == ("pending", 0)
        await service.idle(timeout=30)
        (entry,) = await service.processing_log()
        assert (entry.status, entry.attempts) == ("completed", 1)
        with pytest.raises(RetryRefused):
            await service.retry(entry.id)  # completed: nothing to retry
    assert [c["id"] for c in seen.calls] == [ada]
