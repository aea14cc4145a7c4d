"""Replay covers people and outside input: released in their recorded turns, never waited for."""

from __future__ import annotations

import asyncio
import random
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    ReplayMismatchError,
    ReplayProvider,
    SQLiteSignalStore,
    agent,
    reactive,
)
from tests.reactor.cli_support import reactor_cli

ASKING = textwrap.dedent(
    """
    from reactor import agent, reactive

    async def order(ctx):
        answer = await ctx.ask("Buy 5 shares?", choices=["yes", "no"])
        ctx.emit("order:decided", {"answer": answer})
        return answer

    graph = reactive(
        {"order": agent(run=order, emits=["order:decided"], updates="decision")},
        state={"decision": None},
        name="asking",
    )
    """
)


def _answered_run(folder: Path) -> str:
    """A run of ``asking:graph`` recorded in ``folder``, its question answered by a person."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("asking", folder / "asking.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["asking"] = module
    spec.loader.exec_module(module)

    async def answered() -> str:
        with SQLiteSignalStore(folder / ".reactor" / "runs.db") as store:
            handle = module.graph.start(keep_open=False, record=store, target="asking:graph")
            prompt = await handle.next_prompt(timeout=30)
            handle.reply(prompt.prompt_id, "yes", source="user:bob")
            result = await handle.result()
            assert result.status == "completed"
            return str(result.run_id)

    try:
        return asyncio.run(answered())
    finally:
        sys.modules.pop("asking", None)


def test_reactor_replay_of_a_run_that_asked_a_person_ends_as_recorded(tmp_path: Path) -> None:
    (tmp_path / "asking.py").write_text(ASKING)
    run_id = _answered_run(tmp_path)
    replayed = reactor_cli(tmp_path, "replay", run_id, "--quiet")  # hung for ever before
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "Replay matches" in replayed.stdout


async def test_a_replay_given_a_provider_releases_the_recorded_reply() -> None:
    async def order(ctx: AgentContext[Any]) -> str:
        answer: str = await ctx.ask("Buy?", choices=["yes", "no"])
        return answer

    graph = reactive({"order": agent(run=order, updates="decision")}, state={"decision": None})
    store = MemorySignalStore()
    handle = graph.start(keep_open=False, record=store)
    prompt = await handle.next_prompt(timeout=30)
    handle.reply(prompt.prompt_id, "no")
    recorded = store.load((await handle.result()).run_id)
    replayed = await asyncio.wait_for(graph.run(replay=ReplayProvider(recorded)), 30)
    assert (replayed.status, replayed.state) == ("completed", {"decision": "no"})
    assert recorded.diff(replayed) is None


async def test_a_replay_that_would_wait_for_an_answer_never_recorded_fails_at_once() -> None:
    graph = reactive({"approve": agent(ask="Ship {{ input }}?", choices=["yes", "no"])})
    store = MemorySignalStore()
    handle = graph.start(input="v2", record=store)
    await handle.next_prompt(timeout=30)
    await handle.suspend()  # the recorded run still waits for its answer
    recorded = store.load(handle.run_id)
    began = time.monotonic()
    result = await asyncio.wait_for(graph.run(replay=recorded), 30)
    assert time.monotonic() - began < 25  # it did not wait: it failed
    assert result.status == "failed"
    assert isinstance(result.error, ReplayMismatchError)
    assert str(result.error).startswith(
        f"Replay of run {recorded.run_id}: agent 'approve' asks prompt_"
    )
    assert "never waits for a person" in str(result.error)


def _busy(name: str) -> Any:
    """A handler that emits and writes the state while it runs, with random pauses."""

    async def work(ctx: AgentContext[Any]) -> int:
        for step in range(4):
            ctx.emit(f"{name}:step", {"step": step})
            ctx.store.set(f"{name}_{step % 2}", step)
            await asyncio.sleep(random.random() / 200)
        return 4

    return work


def _busy_sync(name: str) -> Any:
    def work(ctx: AgentContext[Any]) -> int:
        for step in range(4):
            ctx.emit(f"{name}:step", {"step": step})
            ctx.store.set(f"{name}_{step % 2}", step)
            time.sleep(random.random() / 200)
        return 4

    return work


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_concurrent_handlers_that_emit_while_they_run_replay_exactly(kind: str) -> None:
    make = _busy if kind == "async" else _busy_sync
    names = ("a", "b", "c")
    graph = reactive(
        {name: agent(run=make(name), emits=[f"{name}:step"]) for name in names},
        state={f"{name}_{i}": None for name in names for i in (0, 1)},
        name="busy",
    )
    store = MemorySignalStore()
    recorded = store.load((await graph.run(record=store)).run_id)
    for _ in range(10):
        replayed = await graph.run(replay=recorded)
        assert replayed.status == "completed"
        assert recorded.diff(replayed) is None  # in seq order, signal for signal
