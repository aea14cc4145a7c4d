from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    PayloadError,
    RunClosedError,
    RunHandle,
    SignalNameError,
    agent,
    reactive,
)
from reactor._signals.signal import Signal
from reactor.exceptions import ReadOnlyStateError
from reactor.testing import signal_names as names
from tests.reactor.support import SlowProvider
from tests.reactor.support import until as _until


def worker_graph(concurrency: Any, meet: int = 0) -> tuple[Any, list[int], list[int]]:
    """A graph whose worker takes 10 ms per job and records concurrency.

    With `meet`, each job also waits until that many jobs are running at once.
    """
    done: list[int] = []
    running: list[int] = [0, 0]  # current, peak
    met = asyncio.Event()

    async def work(ctx: AgentContext) -> int:
        running[0] += 1
        running[1] = max(running[1], running[0])
        if running[1] == meet:
            met.set()
        if meet:
            await asyncio.wait_for(met.wait(), 60)  # one at a time, the first never returns
        await asyncio.sleep(0.01)
        running[0] -= 1
        done.append(ctx.signal.payload)
        return int(ctx.signal.payload)

    graph = reactive(
        {"worker": agent(run=work, activate_on="job", concurrency=concurrency)},
        external=["job"],
    )
    return graph, done, running


async def run_jobs(graph: Any, jobs: int = 3) -> Any:
    handle = graph.start()
    for job in range(1, jobs + 1):
        handle.send("job", job)  # all sent before the first starts: no await between
    handle.close()  # the run still ends only once its queued jobs are done
    return await asyncio.wait_for(handle.result(), 60)


async def test_parallel_runs_every_trigger_at_once() -> None:
    graph, done, running = worker_graph("parallel", meet=3)
    result = await run_jobs(graph)
    assert sorted(done) == [1, 2, 3]
    assert running[1] == 3
    assert result.status == "completed"


async def test_serial_queues_triggers_and_runs_them_in_order() -> None:
    graph, done, running = worker_graph("serial")
    await run_jobs(graph)
    assert done == [1, 2, 3]
    assert running[1] == 1


async def test_skip_drops_triggers_while_busy() -> None:
    graph, done, _ = worker_graph("skip")
    result = await run_jobs(graph)
    assert done == [1]
    skipped = result.select("agent:worker:skipped")
    assert [(s.payload["reason"], s.caused_by) for s in skipped] == [
        ("busy", result.select("job")[1].id),
        ("busy", result.select("job")[2].id),
    ]


async def test_latest_keeps_only_the_newest_queued_trigger() -> None:
    graph, done, running = worker_graph("latest")
    result = await run_jobs(graph, jobs=4)
    assert done == [1, 4]
    assert running[1] == 1
    reasons = [s.payload["reason"] for s in result.select("agent:worker:skipped")]
    assert reasons == ["superseded", "superseded"]


async def test_a_live_run_stays_open_at_quiescence_until_closed() -> None:
    graph, done, _ = worker_graph("parallel")
    handle = graph.start()
    await asyncio.sleep(0.02)  # time to end, if it wrongly ended at quiescence
    assert not handle.done
    handle.send("job", 7)
    await _until(lambda: done == [7])
    await asyncio.sleep(0.02)  # as above
    assert not handle.done
    handle.close()
    result = await handle
    assert result.status == "completed"
    assert handle.done


async def test_signals_streams_the_whole_run_then_stops() -> None:
    graph, _, _ = worker_graph("parallel")
    handle = graph.start()
    handle.send("job", 1)
    seen: list[str] = []

    async def watch() -> None:
        async for signal in handle.signals():
            seen.append(signal.name)

    watcher = asyncio.create_task(watch())
    await _until(lambda: "agent:worker:completed" in seen)  # it streams while the run is live
    handle.close()
    result = await asyncio.wait_for(handle.result(), 60)
    await asyncio.wait_for(watcher, 60)
    assert seen == names(result)
    assert seen[0] == "harness:start"
    assert seen[-1] == "harness:end"


async def test_send_after_close_is_refused() -> None:
    graph, _, _ = worker_graph("parallel")
    handle = graph.start()
    handle.close()
    with pytest.raises(RunClosedError, match=r"takes no more input"):
        handle.send("job", 1)
    await handle.result()


async def test_sent_signals_come_from_the_user() -> None:
    graph, _, _ = worker_graph("parallel")
    handle = graph.start()
    sent = handle.send("job", 5)
    assert (sent.source, sent.caused_by, sent.depth) == ("user", None, 0)
    handle.close()
    result = await handle.result()
    assert result.select("agent:worker:activated")[0].caused_by == sent.id


async def test_abort_cancels_in_flight_provider_calls() -> None:
    provider = SlowProvider(10.0)
    graph = reactive({"a": agent(prompt="x")})
    handle = graph.start(provider=provider)
    await _until(lambda: provider.started == ["a"])
    handle.abort("operator stop")
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "aborted"
    assert result.reason == "operator stop"
    assert provider.cancelled == ["a"]
    assert names(result)[-2:] == ["agent:a:cancelled", "harness:end"]


async def test_end_when_ends_a_live_run() -> None:
    graph = reactive(
        {"echo": agent(run=lambda ctx: ctx.signal.payload, activate_on="msg", emits=["reply"])},
        external=["msg"],
        end_when="reply",
    )
    handle = graph.start()
    handle.send("msg", "hello")
    result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.output) == ("ended", "hello")


async def test_a_live_run_times_out() -> None:
    graph, _, _ = worker_graph("parallel")
    handle = graph.start(timeout=0.03)
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "timeout"


@pytest.mark.parametrize(
    "name",
    ["harness:end", "state:x:changed", "agent:reviewer:completed", "tool:result", "session:x"],
)
async def test_outside_input_cannot_forge_runtime_signals(name: str) -> None:
    graph = reactive(
        {
            "executor": agent(run=lambda ctx: "filled", activate_on="agent:reviewer:completed"),
            "reviewer": agent(run=lambda ctx: "ok", activate_on="review:asked"),
        },
        external=["review:asked"],
    )
    handle = graph.start()
    namespace = name.partition(":")[0]
    with pytest.raises(
        SignalNameError,
        match=rf"^Cannot send '{name}': '{namespace}:' signals come from the runtime",
    ):
        handle.send(name, {"output": "approved"})
    handle.close()
    result = await handle.result()
    assert result.select("agent:executor:*") == []


async def test_payloads_cannot_change_after_they_are_emitted() -> None:
    order: dict[str, Any] = {"symbol": "AAPL", "legs": [{"qty": 1}]}
    seen: list[Any] = []

    def place(ctx: AgentContext) -> dict[str, Any]:
        ctx.emit("order:placed", order)
        order["symbol"] = "MSFT"  # the emitter changes its own dict afterwards
        order["legs"][0]["qty"] = 9
        return order

    store = MemorySignalStore()
    graph = reactive(
        {
            "trader": agent(run=place, emits=["order:placed"]),
            "audit": agent(
                run=lambda ctx: seen.append(ctx.signal.payload), activate_on="order:placed"
            ),
        }
    )
    handle = graph.start(record=store)
    sent = {"note": "hi"}
    handle.send("desk:note", sent)
    sent["note"] = "changed"
    handle.close()
    result = await handle.result()
    placed = result.select("order:placed")[0].payload
    assert placed == {"symbol": "AAPL", "legs": [{"qty": 1}]}
    assert seen == [placed]
    with pytest.raises(ReadOnlyStateError):
        placed["symbol"] = "X"
    assert result.select("desk:note")[0].payload == {"note": "hi"}
    recorded = store.load(result.run_id).select("order:placed")[0].payload
    assert recorded == {"symbol": "AAPL", "legs": [{"qty": 1}]}
    assert result.select("agent:trader:completed")[0].payload["output"]["symbol"] == "MSFT"


# -- acts with their actors ----------------------------------------------------------


async def test_abort_records_who_and_why_and_ends_with_that_reason() -> None:
    store = MemorySignalStore()
    provider = SlowProvider(10.0)
    handle = reactive({"a": agent(prompt="x")}).start(provider=provider, record=store)
    await _until(lambda: provider.started == ["a"])
    handle.abort("desk closed early", source="user:bob")
    result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.reason) == ("aborted", "desk closed early")
    log = store.load(handle.run_id)
    (abort,) = log.select("session:abort")
    assert (abort.payload, abort.source) == ({"reason": "desk closed early"}, "user:bob")
    assert (log.status, log.info.reason) == ("aborted", "desk closed early")
    assert names(result)[-1] == "harness:end"
    assert result.select("harness:end")[0].payload["reason"] == "desk closed early"


async def test_an_abort_before_the_first_handler_begins_ends_the_run() -> None:
    # The first activation is announced (agent:slow:activated) before the run's tasks
    # start: an abort in between used to leave it to start and run forever.
    handle = reactive({"slow": agent(run=Forever())}).start()
    await _until(lambda: "agent:slow:activated" in names(handle._run.bus.history))
    handle.abort("before it began")
    result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.reason) == ("aborted", "before it began")
    assert "agent:slow:cancelled" in names(result)


async def test_an_abort_whose_reason_the_log_cannot_hold_changes_nothing() -> None:
    store, provider = MemorySignalStore(), SlowProvider(10.0)
    handle = reactive({"a": agent(prompt="x")}).start(provider=provider, record=store)
    await _until(lambda: provider.started == ["a"])
    with pytest.raises(PayloadError, match=r"reason"):
        handle.abort("\ud800")
    assert not handle.done
    assert not handle.closed
    assert "session:abort" not in names(handle._run.bus.history)
    handle.abort("a clean reason")
    result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.reason) == ("aborted", "a clean reason")
    assert store.load(handle.run_id).status == "aborted"


async def test_send_and_reply_record_the_callers_source() -> None:
    graph = reactive(
        {"echo": agent(run=lambda ctx: ctx.signal.payload, activate_on="msg")},
        external=["msg"],
    )
    store = MemorySignalStore()
    handle = graph.start(record=store)
    sent = handle.send("msg", 1, source="user:ada")
    handle.close()
    await handle.result()
    assert sent.source == "user:ada"
    (recorded,) = store.load(handle.run_id).select("msg")
    assert recorded.source == "user:ada"


# -- suspended, not ended ------------------------------------------------------------


async def test_a_suspended_run_says_why_last_and_resumes_after_it() -> None:
    started = asyncio.Event()

    async def slow(ctx: AgentContext) -> str:
        started.set()
        await asyncio.sleep(3600 if not ctx.input else 0)
        return "done"

    graph = reactive({"slow": agent(run=slow)})
    store = MemorySignalStore()
    handle = graph.start(keep_open=False, record=store)
    seen: list[Signal] = []
    subscription = handle._run.bus.subscribe("**", seen.append)
    await asyncio.wait_for(started.wait(), 60)
    await handle.suspend("the service stopped (SIGTERM)")
    subscription.cancel()
    log = store.load(handle.run_id)
    assert log.signals[-1].name == "harness:suspended"
    assert log.signals[-1].payload == {"reason": "the service stopped (SIGTERM)"}
    assert "harness:end" not in names(log)
    # What was in flight is dropped unseen: nobody saw a signal the log lacks.
    assert [s.seq for s in seen] == [s.seq for s in log.signals][-len(seen) :]
    assert seen[-1].name == "harness:suspended"
    assert store.runs()[0].status == "running"

    result = await graph.resume(handle.run_id, record=store, input=1)
    assert result.status == "completed"
    seqs = [s.seq for s in store.load(handle.run_id).signals]
    assert seqs == list(range(1, len(seqs) + 1))  # no seq twice: it goes on after the last
    resumed = store.load(handle.run_id).select("harness:resumed")[0]
    assert resumed.seq == log.signals[-1].seq + 1


class ReadWhere(MemorySignalStore):
    """A memory store that notes which thread each run's log was read in."""

    def __init__(self) -> None:
        super().__init__()
        self.read_in: list[str] = []

    def load(self, run_id: str) -> Any:
        self.read_in.append(threading.current_thread().name)
        return super().load(run_id)

    def load_tail(self, run_id: str) -> Any:
        self.read_in.append(threading.current_thread().name)
        return super().load_tail(run_id)

    def waiting_messages(self, run_ids: Any) -> Any:
        self.read_in.append(threading.current_thread().name)
        return super().waiting_messages(run_ids)


async def test_astart_reads_what_a_resume_needs_off_the_loop() -> None:
    forever = Forever()

    async def slow_at_first(ctx: AgentContext) -> str:
        if not ctx.input:
            await forever(ctx)
        return "done"

    graph = reactive({"slow": agent(run=slow_at_first)})
    store = ReadWhere()
    handle = graph.start(keep_open=False, record=store)
    await asyncio.wait_for(forever.started.wait(), 60)
    await handle.suspend("deploy")
    store.read_in.clear()
    resumed = await graph.astart(resume=handle.run_id, record=store, input=1, keep_open=False)
    assert store.read_in
    assert threading.main_thread().name not in store.read_in  # read in a worker thread
    assert resumed.run_id == handle.run_id
    assert (await asyncio.wait_for(resumed.result(), 60)).status == "completed"
    store.read_in.clear()
    fresh = await graph.astart(run_id="run_fresh", fresh=True, record=store, input=1)
    fresh.close()
    assert (await asyncio.wait_for(fresh.result(), 60)).status == "completed"
    assert store.read_in == []  # a fresh id: nothing was posted to it, nothing is read


async def test_a_cancelled_wait_leaves_the_run_running() -> None:
    forever = Forever()
    handle = reactive({"slow": agent(run=forever)}).start(keep_open=False)
    await asyncio.wait_for(forever.started.wait(), 60)
    waiter = asyncio.ensure_future(handle.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not handle.done
    handle.abort("enough")
    await asyncio.wait_for(handle.wait(), 60)
    result = await handle.result()  # at once: it has ended
    assert (result.status, result.reason) == ("aborted", "enough")


class Forever:
    """A handler that never ends; `started` is set once it runs."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def __call__(self, ctx: AgentContext) -> None:
        self.started.set()
        await asyncio.sleep(3600)


async def test_a_suspended_runs_stream_ends_with_its_last_signal() -> None:
    forever = Forever()
    graph = reactive({"slow": agent(run=forever)})
    handle = graph.start(record=MemorySignalStore())
    streamed: list[str] = []

    async def follow() -> None:
        async for signal in handle.signals():
            streamed.append(signal.name)

    following = asyncio.ensure_future(follow())
    await asyncio.wait_for(forever.started.wait(), 60)
    await handle.suspend("deploy")
    await asyncio.wait_for(following, 60)
    assert streamed[-1] == "harness:suspended"


class Follower:
    """A channel that keeps the names of the signals its run streams."""

    def __init__(self) -> None:
        self.names: list[str] = []

    async def attach(self, handle: RunHandle) -> None:
        async for signal in handle.signals():
            self.names.append(signal.name)


async def test_a_resumed_runs_stream_goes_past_its_earlier_suspension() -> None:
    forever = Forever()

    async def slow_at_first(ctx: AgentContext) -> None:
        if not ctx.input:
            await forever(ctx)

    graph = reactive({"slow": agent(run=slow_at_first)})
    store = MemorySignalStore()
    handle = graph.start(record=store)
    await asyncio.wait_for(forever.started.wait(), 60)
    await handle.suspend("deploy")
    follower = Follower()
    result = await graph.resume(handle.run_id, record=store, input=1, channels=[follower])
    assert result.status == "completed"
    assert "harness:suspended" in follower.names  # its earlier life, from the history
    assert follower.names[-1] == "harness:end"  # and on to the end of this one


async def test_a_suspend_whose_reason_the_log_cannot_hold_changes_nothing() -> None:
    forever = Forever()
    graph = reactive({"slow": agent(run=forever)})
    handle = graph.start(record=MemorySignalStore())
    # Its handler runs: an abort right after `agent:slow:activated`, before the handler
    # started, hangs the run (a race in the runtime, reported), so the test waits past it.
    await asyncio.wait_for(forever.started.wait(), 60)
    with pytest.raises(PayloadError, match=r"reason"):
        await handle.suspend("\udfff")
    assert not handle.done
    handle.abort()
    assert (await asyncio.wait_for(handle.result(), 60)).status == "aborted"
