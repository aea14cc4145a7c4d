from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Collection
from pathlib import Path

import pytest
import structlog

from reactor import (
    AgentContext,
    CycleWarning,
    MemorySignalStore,
    Reactive,
    RunHandle,
    SignalNameError,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor._recording.inbox import Posted
from tests.reactor.databases import StorePlace


async def started(handle: RunHandle) -> None:
    """Wait until the run has begun: its first signal is out."""
    async with asyncio.timeout(60):
        async for _ in handle.signals():
            return


def tally() -> Reactive:
    def add(ctx: AgentContext) -> list[int]:
        return [*ctx.state.seen, ctx.signal.payload["n"]]

    return reactive(
        {"counter": agent(run=add, activate_on="tick", updates="seen", concurrency="serial")},
        state={"seen": []},
        external=["tick"],
        name="tally",
    )


async def test_a_live_run_emits_posted_messages_in_order(store_place: StorePlace) -> None:
    with store_place.open() as runs, store_place.open() as other_process:
        handle = tally().start(record=runs)
        for n in (1, 2, 3):
            other_process.post(handle.run_id, "tick", {"n": n})
        completed = 0
        async with asyncio.timeout(60):
            async for signal in handle.signals():
                completed += signal.name == "agent:counter:completed"
                if completed == 3:
                    break
        handle.close()
        result = await handle.result()
        assert result.state["seen"] == [1, 2, 3]
        ticks = result.select("tick")
        assert [s.source for s in ticks] == ["user"] * 3
        assert other_process.undelivered([handle.run_id]) == []


async def test_a_message_posted_while_no_process_runs_it_arrives_on_resume(
    store_place: StorePlace,
) -> None:
    with store_place.open() as store:
        graph = tally()
        handle = graph.start(record=store)
        await started(handle)
        handle._run.outside.stop()  # the process "dies": nobody takes messages now
        handle._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await handle.result()
    with store_place.open() as store:
        # Cancelling ended the run; make it look cut off, as a killed process leaves it.
        recording = store.load(handle.run_id)
    cut = MemorySignalStore()
    cut.start_run(recording.info)
    for signal in recording.signals:
        if signal.name != "harness:end":
            cut.append(signal)
    message_id = cut.post(handle.run_id, "tick", {"n": 7})
    result = await graph.resume(handle.run_id, record=cut)
    assert result.state["seen"] == [7]
    assert [s.payload for s in result.select("tick")] == [{"n": 7}]
    assert cut.undelivered([handle.run_id]) == []
    assert message_id.startswith("msg_")


def test_posting_a_runtime_signal_is_refused() -> None:
    store = MemorySignalStore()
    with pytest.raises(SignalNameError, match=r"^Cannot post 'agent:x:completed': 'agent:'"):
        store.post("run_1", "agent:x:completed", {"output": "approved"})
    store.post("run_1", "session:reply", {"prompt_id": "p1", "answer": "yes"})
    store.post("run_1", "session:abort", {"reason": "enough"})


async def test_a_replay_of_a_live_run_gets_its_outside_input_at_its_place() -> None:
    store = MemorySignalStore()
    graph = tally()
    handle = graph.start(record=store)
    handle.send("tick", {"n": 1})
    await asyncio.sleep(0.01)
    handle.send("tick", {"n": 2})
    handle.close()
    original = await handle.result()
    assert original.state["seen"] == [1, 2]
    replayed = await graph.run(replay=store.load(original.run_id))
    assert replayed.state == original.state
    assert store.load(original.run_id).diff(replayed) is None


def waiting() -> Reactive:
    async def wait(ctx: AgentContext) -> str:
        await asyncio.sleep(60)
        return "woke"

    return reactive({"waiter": agent(run=wait, updates="woke")}, state={"woke": None})


async def test_a_posted_abort_stops_the_run_where_it_executes_and_says_who(
    store_place: StorePlace,
) -> None:
    with store_place.open() as runs, store_place.open() as other_process:
        graph = waiting()
        handle = graph.start(record=runs)
        await started(handle)
        other_process.post(handle.run_id, "session:abort", {"reason": "enough"}, source="ops")
        async with asyncio.timeout(60):
            result = await handle.result()
        assert result.status == "aborted"
        assert result.reason == "enough"
        (abort,) = result.select("session:abort")
        assert (abort.payload, abort.source) == ({"reason": "enough"}, "ops")
        assert result.select("agent:waiter:completed") == []
        runs.flush()
        assert other_process.undelivered([handle.run_id]) == []
        recording = runs.load(handle.run_id)
    replayed = await graph.run(replay=recording)
    assert (replayed.status, replayed.reason) == ("aborted", "enough")
    assert recording.diff(replayed) is None


async def test_runs_are_listed_by_status(store_place: StorePlace) -> None:
    with store_place.open() as store:
        done = await tally().run(record=store)
        handle = tally().start(record=store)
        await started(handle)
        store.flush()
        assert [i.run_id for i in store.runs(status="running")] == [handle.run_id]
        assert [i.run_id for i in store.runs(status="completed")] == [done.run_id]
        handle.close()
        await handle.result()
        assert store.runs(status="running") == []


def test_a_locked_database_holds_the_run_back_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteSignalStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    released = threading.Timer(1.0, lambda: holder.execute("COMMIT"))
    with pytest.warns(CycleWarning):
        graph = reactive(
            {
                "ticker": agent(
                    run=lambda ctx: None,
                    activate_on=["harness:start", "tick"],
                    emits=["tick"],
                    max_activations=40,
                )
            },
            max_depth=None,
        )
    with structlog.testing.capture_logs() as logs:
        released.start()
        with SQLiteSignalStore(path, timeout=0.05, max_backlog=8) as store:
            result = graph.run_sync(record=store)
            store.flush()
            recorded = store.load(result.run_id)
    holder.close()
    assert result.status == "completed"
    assert [s.seq for s in recorded.signals] == [s.seq for s in result.signals]
    assert recorded.status == "completed"
    events = [entry["event"] for entry in logs]
    assert "database locked; keeping the signals and retrying" in events
    assert "recording resumed" in events


class NotedReads(MemorySignalStore):
    """A memory store that notes which runs' waiting messages are read, and by which thread."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, str]] = []

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        name = threading.current_thread().name
        self.reads += [(run_id, name) for run_id in run_ids]
        return super().waiting_messages(run_ids)


async def test_a_run_given_its_id_reads_its_inbox_first_unless_the_id_is_fresh() -> None:
    store, graph = NotedReads(), tally()
    store.post("run_known", "tick", {"n": 1})
    known = await graph.run(run_id="run_known", record=store)
    fresh = await graph.run(run_id="run_fresh", fresh=True, record=store)
    assert known.state["seen"] == [1]  # read before it began: there at its start
    assert fresh.ok
    first_reads = {run_id for run_id, thread in store.reads if thread != "reactor-inbox"}
    assert first_reads == {"run_known"}  # the fresh one was neither read nor sent a thread


class PollingThreads(MemorySignalStore):
    """A memory store that notes the threads its inbox was polled from."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []  # held: a new thread is a new object

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        thread = threading.current_thread()
        if thread.name == "reactor-inbox" and thread not in self.threads:
            self.threads.append(thread)
        return super().waiting_messages(run_ids)


async def test_runs_that_come_and_go_share_one_polling_thread() -> None:
    """Reactions start and end all the time: the inbox thread outlives a short gap."""
    store, graph = PollingThreads(), tally()
    for n in range(3):
        handle = graph.start(record=store)
        store.post(handle.run_id, "tick", {"n": n})  # delivered by a poll
        async with asyncio.timeout(60):
            async for _ in handle.signals("agent:counter:completed"):
                break
        handle.close()
        assert (await handle.result()).state["seen"] == [n]
        await asyncio.sleep(0.3)  # no run watches for three poll intervals
    assert len(store.threads) == 1
