"""A service process killed mid-reaction: its entry is taken again, up to max_attempts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
from typing import Any

import pytest

from reactor import AgentContext, agent
from reactor.exceptions import RunNotFoundError
from reactor.service import (
    EntryNotFoundError,
    ObjectStore,
    Reaction,
    ReactionService,
    RetryRefusedError,
)
from reactor.service._hosting.hosting import default_record
from reactor.service._objects.db import Database
from tests.service.support import TYPES, Recorder

HANGING_SERVICE = textwrap.dedent(
    """
    import asyncio, sys
    from reactor import agent
    from reactor.service import ObjectStore, Reaction, ReactionService

    async def hang(ctx):
        print("processing", ctx.object.id, ctx.run_id, flush=True)
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
    """A service process that takes Ada's reaction and is killed (SIGKILL) in it; her id.

    Killed once its run is in the store: the retry finds it there, unfinished.
    """
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
    db = Database(url)
    store, _ = await default_record(db)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        said, object_id, run_id = line.decode().split()
        assert (said, object_id) == ("processing", ada.id)
        for _ in range(600):
            with contextlib.suppress(RunNotFoundError):
                if (await asyncio.to_thread(store.info, run_id)).signals >= 2:
                    break
            await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
        await asyncio.to_thread(store.close)
        await db.close()
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
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        assert service.record is not None
        runs = service.record.runs()
    assert (entry.status, entry.attempts) == ("completed", 2)
    assert [c["id"] for c in seen.calls] == [ada]
    # The retry went on with the killed process's run: one run, and it has ended.
    assert [(info.run_id, info.status) for info in runs] == [(entry.run_id, "completed")]
    assert runs[0].signals > 2


async def test_a_cut_off_run_its_changed_agent_cannot_resume_is_closed_naming_its_successor(
    url: str,
) -> None:
    ada = await _killed_mid_reaction(url)
    seen = Recorder()

    async def enrich(ctx: AgentContext[Any]) -> None:
        seen(ctx)

    # What the agent emits changed since its activation began: the run cannot go on.
    agents = {"enrich": agent(run=enrich, reaction=Reaction(), emits=["enriched"])}
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents=agents, stuck_after=3600) as service,
    ):
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        assert service.record is not None
        runs = {info.run_id: info for info in service.record.runs()}
    assert (entry.status, entry.attempts) == ("completed", 2)
    assert [c["id"] for c in seen.calls] == [ada]
    assert entry.run_id is not None
    (earlier,) = [info for run_id, info in runs.items() if run_id != entry.run_id]
    assert runs[entry.run_id].status == "completed"
    assert earlier.status == "failed"  # closed, naming the run that took its work over
    assert f"entry {entry.id} was retried as run {entry.run_id}" in (earlier.reason or "")


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
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        assert (entry.status, entry.attempts) == ("failed", 1)
        assert entry.error is not None
        assert "stopped; gave up after 1 attempts (max_attempts=1)" in entry.error
        assert seen.calls == []
        assert service.record is not None
        assert entry.run_id is not None
        given_up = service.record.info(entry.run_id)  # closed, not running for the dead
        assert (given_up.status, given_up.reason) == ("failed", f"its process died; {entry.error}")
        again = await service.retry(entry.id)
        assert (again.status, again.attempts) == ("pending", 0)
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        assert (entry.status, entry.attempts) == ("completed", 1)
        with pytest.raises(RetryRefusedError) as refused:
            await service.retry(entry.id)  # completed: nothing to retry
        assert str(refused.value) == (
            f"Entry {entry.id} is completed: only a failed or abandoned entry is retried."
        )
        assert (refused.value.entry_id, refused.value.status) == (entry.id, "completed")
        with pytest.raises(EntryNotFoundError, match=r"^No processing-log entry 999999\.$"):
            await service.retry(999999)
    assert [c["id"] for c in seen.calls] == [ada]
