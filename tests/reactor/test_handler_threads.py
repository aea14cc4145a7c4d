"""Synchronous handlers run in worker threads: a blocking one never freezes the run."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import structlog
from pydantic import BaseModel

from reactor import AgentContext, RunTimeoutError, agent, reactive
from reactor.exceptions import TransactionError
from reactor.testing import signal_names as names
from stores import Store, action


async def test_a_blocking_handler_does_not_stop_the_timeout_or_a_parallel_agent() -> None:
    ticks: list[float] = []
    released, returned = threading.Event(), threading.Event()

    def blocker(ctx: AgentContext) -> str:
        released.wait(60)  # blocks until the test lets it go at its end
        returned.set()
        return "late"

    async def ticker(ctx: AgentContext) -> int:
        for _ in range(100):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)
        return len(ticks)

    graph = reactive({"blocker": agent(run=blocker), "ticker": agent(run=ticker)})
    with structlog.testing.capture_logs() as logs:
        result = await graph.run(timeout=0.5)
    ended_while_blocked = not returned.is_set()
    released.set()
    assert ended_while_blocked  # the timeout did not wait for the handler
    assert result.status == "timeout"
    assert isinstance(result.error, RunTimeoutError)
    assert "agent:blocker:cancelled" in names(result.signals)
    assert len(ticks) >= 2  # the async agent ran on while the handler blocked
    assert any(line["event"] == "handler abandoned in its worker thread" for line in logs)


async def test_abort_ends_a_run_while_a_sync_handler_blocks() -> None:
    entered, released, returned = threading.Event(), threading.Event(), threading.Event()

    def blocker(ctx: AgentContext) -> None:
        entered.set()
        released.wait(60)
        returned.set()

    handle = reactive({"blocker": agent(run=blocker)}).start()
    assert await asyncio.to_thread(entered.wait, 60)
    handle.abort("enough")
    result = await asyncio.wait_for(handle.result(), 60)
    ended_while_blocked = not returned.is_set()
    released.set()
    assert ended_while_blocked  # the abort did not wait for the handler
    assert result.status == "aborted"
    assert "agent:blocker:cancelled" in names(result.signals)


async def test_ctx_calls_from_the_thread_reach_the_run_on_its_loop() -> None:
    seen: dict[str, Any] = {}

    def worker(ctx: AgentContext) -> str:
        seen["thread"] = threading.current_thread().name
        ctx.emit("progress", {"step": 1})
        ctx.store.set("notes", ["from the thread"])
        seen["state"] = ctx.state["notes"]
        return "done"

    def after(ctx: AgentContext, output: Any) -> None:
        seen["on_output thread"] = threading.current_thread().name
        ctx.emit("after", output)

    graph = reactive(
        {
            "worker": agent(run=worker, on_output=after, emits=["progress", "after"]),
            "listener": agent(run=lambda ctx: ctx.signal.payload, activate_on="progress"),
        },
        state={"notes": []},
    )
    result = await graph.run()
    assert result.status == "completed"
    assert seen["thread"].startswith("reactor-handler")
    assert seen["on_output thread"].startswith("reactor-handler")
    assert seen["state"] == ["from the thread"]
    assert result.state["notes"] == ["from the thread"]
    by_name = {s.name: s for s in result.signals}
    activated = by_name["agent:worker:activated"]
    for name in ("progress", "state:notes:changed", "after"):
        assert by_name[name].caused_by == activated.id  # causality kept across the hop
    assert by_name["state:notes:changed"].payload["actor"] == "agent:worker"
    assert by_name["agent:listener:completed"].payload["output"] == {"step": 1}


async def test_an_abandoned_thread_can_no_longer_change_the_run() -> None:
    entered, released, finished = threading.Event(), threading.Event(), threading.Event()
    outcome: list[str] = []

    def late(ctx: AgentContext) -> None:
        entered.set()
        released.wait(60)
        try:
            ctx.emit("too:late")
        except RuntimeError as exc:
            outcome.append(str(exc))
        finally:
            finished.set()

    handle = reactive({"late": agent(run=late, emits=["too:late"])}).start()
    assert await asyncio.to_thread(entered.wait, 60)  # abandoned inside its handler
    handle.abort("enough")
    result = await asyncio.wait_for(handle.result(), 60)
    released.set()
    assert await asyncio.to_thread(finished.wait, 60)
    assert result.status == "aborted"
    assert "too:late" not in names(result.signals)
    assert outcome
    assert outcome[0].startswith("The handler of agent 'late' was abandoned")


async def test_actions_from_parallel_threads_never_lose_each_others_changes() -> None:
    class Parts(BaseModel):
        parts: list[str] = []

    class PartsStore(Store[Parts]):
        @action
        def add(self, draft: Parts, part: str) -> None:
            time.sleep(0.02)  # both threads inside their action at once
            draft.parts.append(part)

    def collect(ctx: AgentContext) -> None:
        ctx.store.add(ctx.agent)

    graph = reactive({name: agent(run=collect) for name in ("a", "b", "c")}, state=PartsStore)
    result = await graph.run()
    assert result.status == "completed"
    assert sorted(result.state["parts"]) == ["a", "b", "c"]


async def test_a_transaction_in_a_thread_over_a_changed_key_is_refused_not_lost() -> None:
    started, go = threading.Event(), threading.Event()

    def slow(ctx: AgentContext) -> None:
        with ctx.store.transaction() as draft:
            draft["count"] = draft["count"] + 1
            started.set()
            go.wait(3)

    async def fast(ctx: AgentContext) -> None:
        await asyncio.to_thread(started.wait, 3)
        ctx.store.set("count", 10)
        go.set()

    result = await reactive(
        {"slow": agent(run=slow), "fast": agent(run=fast)}, state={"count": 0}
    ).run()
    assert result.state["count"] == 10  # the other write kept, the stale one refused
    (failure,) = result.failures
    assert isinstance(failure.error, TransactionError)
    assert "'count' changed while it was open in a worker thread" in str(failure.error)
