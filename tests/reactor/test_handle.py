from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    RunClosedError,
    SignalNameError,
    agent,
    reactive,
)
from reactor.exceptions import ReadOnlyStateError
from reactor.testing import signal_names as names
from tests.reactor.support import SlowProvider


def worker_graph(concurrency: Any) -> tuple[Any, list[int], list[int]]:
    """A graph whose worker takes 10 ms per job and records concurrency."""
    done: list[int] = []
    running: list[int] = [0, 0]  # current, peak

    async def work(ctx: AgentContext) -> int:
        running[0] += 1
        running[1] = max(running[1], running[0])
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
        handle.send("job", job)
    await asyncio.sleep(0.06)
    handle.close()
    return await handle.result()


async def test_parallel_runs_every_trigger_at_once() -> None:
    graph, done, running = worker_graph("parallel")
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
    await asyncio.sleep(0.02)
    assert not handle.done
    handle.send("job", 7)
    await asyncio.sleep(0.03)
    assert done == [7]
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
    await asyncio.sleep(0.03)
    handle.close()
    result = await handle.result()
    await asyncio.wait_for(watcher, 1)
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
    await asyncio.sleep(0.02)
    handle.abort("operator stop")
    result = await asyncio.wait_for(handle.result(), 1)
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
    result = await asyncio.wait_for(handle.result(), 1)
    assert (result.status, result.output) == ("ended", "hello")


async def test_a_live_run_times_out() -> None:
    graph, _, _ = worker_graph("parallel")
    handle = graph.start(timeout=0.03)
    result = await asyncio.wait_for(handle.result(), 1)
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
