"""``agent(admit=...)``: which triggers an agent is given in a run, recorded and replayed."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Literal

import pytest

import reactor
from reactor import (
    AgentConfigError,
    AgentContext,
    Batch,
    Debounce,
    Latest,
    MemorySignalStore,
    ScriptedProvider,
    SpendCap,
    Throttle,
    agent,
    reactive,
)

DEADLINE = 60  # seconds: generous, for a loaded machine; nothing here is timed


def _graph(admit: Any, work: Any, *, on: tuple[str, ...] = ("quote",)) -> reactor.Graph:
    return reactive(
        {"desk": agent(run=work, activate_on=list(on), admit=admit, updates="last")},
        state={"last": None},
        external=list(on),
        name="desk",
    )


def _skips(result: reactor.RunResult, reason: str) -> list[Any]:
    return [
        s.payload for s in result.signals if s.name == "agent:desk:skipped" and
        s.payload["reason"] == reason
    ]  # fmt: skip


def _activations(result: reactor.RunResult) -> list[Any]:
    return [s.payload for s in result.signals if s.name == "agent:desk:activated"]


async def test_a_busy_latest_agent_answers_only_the_newest_of_fifty_sends() -> None:
    seen: list[Any] = []
    release = asyncio.Event()

    async def work(ctx: AgentContext[Any]) -> Any:
        seen.append((ctx.signal.payload, ctx.batch))
        await release.wait()
        return ctx.signal.payload

    handle = _graph(Latest(), work).start()
    for price in range(50):
        handle.send("quote", price)
    release.set()
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert result.status == "completed"
    assert 1 <= len(seen) <= 5
    assert seen[-1] == (49, None)  # the last activation saw the last send; nothing merged
    assert result.state["last"] == 49
    assert len(_skips(result, "superseded")) == 50 - len(seen)
    sends = {s.seq: s.payload for s in result.signals if s.name == "quote"}
    seqs = {s.id: s.seq for s in result.signals}
    for skipped in (s for s in result.signals if s.name == "agent:desk:skipped"):
        newer = skipped.payload["superseded_by"]  # a newer send superseded it
        assert sends[newer] > sends[seqs[skipped.caused_by]]


async def test_latest_keeps_the_newest_trigger_of_each_key() -> None:
    seen: list[Any] = []
    release = asyncio.Event()

    async def work(ctx: AgentContext[Any]) -> Any:
        seen.append(ctx.signal.payload)
        await release.wait()
        return ctx.signal.payload

    handle = _graph(Latest(key="{{ signal.payload.symbol }}"), work).start()
    for price in range(6):
        for symbol in ("ACME", "INIT"):
            handle.send("quote", {"symbol": symbol, "price": price})
    release.set()
    handle.close()
    await asyncio.wait_for(handle.result(), DEADLINE)

    newest = {quote["symbol"]: quote["price"] for quote in seen}
    assert newest == {"ACME": 5, "INIT": 5}
    assert len(seen) <= 4  # each symbol's first, then each symbol's newest


async def test_debounce_delivers_a_burst_as_one_batch_in_arrival_order() -> None:
    batches: list[list[Any]] = []

    async def work(ctx: AgentContext[Any]) -> Any:
        assert ctx.batch is not None
        batches.append([signal.payload for signal in ctx.batch])
        return ctx.signal.payload

    handle = _graph(Debounce(1.0, deliver="batch"), work).start()
    for price in range(10):
        handle.send("quote", price)
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert batches == [list(range(10))]
    (activated,) = _activations(result)
    sends = [s.seq for s in result.signals if s.name == "quote"]
    assert activated["batch"] == sends
    assert len(_skips(result, "merged")) == 9


async def test_a_prompt_agent_reads_its_batch_in_templates() -> None:
    graph = reactive(
        {
            "desk": agent(
                prompt="Quotes: {{ batch | map(attribute='payload') | join(',') }}",
                activate_on=["quote"],
                admit=Debounce(1.0, deliver="batch"),
                updates="last",
            )
        },
        state={"last": None},
        external=["quote"],
        name="prompted",
    )
    provider = ScriptedProvider(default=lambda request: request.prompt)
    handle = graph.start(provider=provider)
    for price in range(3):
        handle.send("quote", price)
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert result.state["last"] == "Quotes: 0,1,2"


async def test_debounce_last_delivers_the_newest_and_records_the_others_merged() -> None:
    seen: list[Any] = []

    async def work(ctx: AgentContext[Any]) -> Any:
        seen.append((ctx.signal.payload, ctx.batch))
        return ctx.signal.payload

    handle = _graph(Debounce(1.0), work).start()
    for price in range(5):
        handle.send("quote", price)
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert seen == [(4, None)]
    assert [payload["trigger"] for payload in _skips(result, "merged")] == ["quote"] * 4
    (activated,) = [s for s in result.signals if s.name == "agent:desk:activated"]
    seqs = {s.id: s.seq for s in result.signals}
    taker = seqs[activated.caused_by]  # the trigger the merged ones went with
    assert {payload["superseded_by"] for payload in _skips(result, "merged")} == {taker}


async def test_batch_delivers_up_to_max_items_at_once() -> None:
    batches: list[list[Any]] = []

    async def work(ctx: AgentContext[Any]) -> Any:
        assert ctx.batch is not None
        batches.append([signal.payload for signal in ctx.batch])
        return len(ctx.batch)

    handle = _graph(Batch(4, 0.5), work).start()
    for item in range(10):
        handle.send("quote", item)
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert result.status == "completed"
    assert [item for batch in batches for item in batch] == list(range(10))
    assert all(len(batch) <= 4 for batch in batches)
    assert batches[0] == [0, 1, 2, 3]


async def test_a_throttle_never_drops_a_trigger() -> None:
    seen: list[Any] = []

    async def work(ctx: AgentContext[Any]) -> Any:
        seen.append(ctx.signal.payload)
        return ctx.signal.payload

    handle = _graph(Throttle("20/s", burst=2), work).start()
    for item in range(12):
        handle.send("quote", item)
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert sorted(seen) == list(range(12))
    assert not [s for s in result.signals if s.name == "agent:desk:skipped"]


async def test_kept_triggers_are_never_superseded() -> None:
    seen: list[tuple[str, Any]] = []
    release = asyncio.Event()

    async def work(ctx: AgentContext[Any]) -> Any:
        seen.append((ctx.signal.name, ctx.signal.payload))
        await release.wait()
        return ctx.signal.payload

    graph = _graph(Latest(keep=["user:fill*"]), work, on=("user:quote", "user:fill"))
    handle = graph.start()
    for step in range(12):
        handle.send("user:quote", step)
        if step % 4 == 3:
            handle.send("user:fill", step)
    release.set()
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert [payload for name, payload in seen if name == "user:fill"] == [3, 7, 11]
    skipped = [p["trigger"] for p in _skips(result, "superseded")]
    assert "user:fill" not in skipped
    assert skipped  # the quotes were coalesced


async def _until(handle: reactor.RunHandle, name: str) -> None:
    async for _ in handle.signals(name):
        return


async def test_a_spend_cap_in_a_run_skips_what_comes_past_it() -> None:
    graph = reactive(
        {
            "desk": agent(
                prompt="Quote {{ signal.payload }}",
                activate_on=["quote"],
                admit=SpendCap(0.000001, per=timedelta(days=1)),
            )
        },
        external=["quote"],
        name="capped",
    )
    provider = ScriptedProvider(default=lambda request: "noted " * 50, pricing=(3.0, 15.0))
    handle = graph.start(provider=provider)
    handle.send("quote", 1)
    await asyncio.wait_for(_until(handle, "agent:desk:completed"), DEADLINE)
    handle.send("quote", 2)
    await asyncio.wait_for(_until(handle, "agent:desk:skipped"), DEADLINE)
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert (result.metrics.cost_usd or 0) > 0.000001
    assert len(_activations(result)) == 1
    assert [p["reason"] for p in _skips(result, "spend_cap")] == ["spend_cap"]


@pytest.mark.parametrize(("scope", "outcome"), [("agent", "completed"), ("service", "skipped")])
async def test_a_service_wide_spend_cap_counts_every_agents_spend(
    scope: Literal["agent", "service"], outcome: str
) -> None:
    """``scope="service"``: what the other agents of the run spent counts too."""
    graph = reactive(
        {
            "spender": agent(prompt="Look at {{ signal.payload }}", activate_on=["quote"]),
            "desk": agent(
                prompt="Trade {{ signal.payload }}",
                activate_on=["agent:spender:completed"],
                admit=SpendCap(0.000001, per=timedelta(days=1), scope=scope),
            ),
        },
        external=["quote"],
        name="capped_together",
    )
    provider = ScriptedProvider(default=lambda request: "noted " * 50, pricing=(3.0, 15.0))
    handle = graph.start(provider=provider)
    handle.send("quote", 1)
    await asyncio.wait_for(_until(handle, f"agent:desk:{outcome}"), DEADLINE)
    handle.close()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    desk = [s.name for s in result.signals if s.name.startswith("agent:desk:")]
    assert f"agent:desk:{outcome}" in desk
    if outcome == "skipped":
        assert [p["reason"] for p in _skips(result, "spend_cap")] == ["spend_cap"]
        assert "agent:desk:activated" not in desk


async def test_a_run_that_stops_skips_what_waits_for_admission() -> None:
    async def work(ctx: AgentContext[Any]) -> Any:
        return ctx.signal.payload

    handle = _graph(Debounce(3600), work).start()
    for price in range(3):
        handle.send("quote", price)
    await asyncio.wait_for(_until(handle, "quote"), DEADLINE)
    handle.abort()
    result = await asyncio.wait_for(handle.result(), DEADLINE)

    assert result.status == "aborted"
    assert not _activations(result)
    assert len(_skips(result, "ended")) == 3


async def test_triggers_waiting_for_admission_wait_again_after_a_resume() -> None:
    batches: list[list[Any]] = []

    async def work(ctx: AgentContext[Any]) -> Any:
        assert ctx.batch is not None
        batches.append([signal.payload for signal in ctx.batch])
        return len(ctx.batch)

    graph = _graph(Batch(3, 3600), work)
    store = MemorySignalStore()
    handle = graph.start(record=store)
    handle.send("quote", 0)
    handle.send("quote", 1)
    await asyncio.wait_for(_until(handle, "quote"), DEADLINE)
    await handle.suspend()  # the process goes away with two quotes waiting for the third

    resumed = graph.start(resume=handle.run_id, record=store)
    resumed.send("quote", 2)
    resumed.close()
    result = await asyncio.wait_for(resumed.result(), DEADLINE)

    assert result.status == "completed"
    assert batches == [[0, 1, 2]]


@pytest.mark.parametrize("snapshot_every", [None, 2], ids=["whole-log", "from-a-snapshot"])
async def test_an_activation_in_flight_at_a_suspend_gets_its_batch_again(
    snapshot_every: int | None,
) -> None:
    """Resumed from a snapshot taken after its triggers too: they are read back."""
    batches: list[list[Any]] = []
    release = asyncio.Event()

    async def work(ctx: AgentContext[Any]) -> Any:
        assert ctx.batch is not None
        batches.append([signal.payload for signal in ctx.batch])
        await release.wait()
        return len(ctx.batch)

    graph = reactive(
        {"desk": agent(run=work, activate_on=["quote"], admit=Batch(3, 3600), updates="last")},
        state={"last": None},
        external=["quote", "note"],
        name="desk",
    )
    store = MemorySignalStore(snapshot_every=snapshot_every)
    handle = graph.start(record=store)
    for price in range(3):
        handle.send("quote", price)
    await asyncio.wait_for(_until(handle, "agent:desk:activated"), DEADLINE)
    for _ in range(4):  # signals after the activation: a snapshot comes after its triggers
        handle.send("note", None)
    await asyncio.wait_for(_until(handle, "note"), DEADLINE)
    await handle.suspend()  # the batch's activation was in flight
    if snapshot_every is not None:
        tail = store.load_tail(handle.run_id).signals
        assert tail[0].seq > 1  # a resume reads from a snapshot, not the whole log

    release.set()
    resumed = graph.start(resume=handle.run_id, record=store)
    resumed.close()
    result = await asyncio.wait_for(resumed.result(), DEADLINE)

    assert result.status == "completed"
    assert result.state["last"] == 3
    assert batches == [[0, 1, 2], [0, 1, 2]]  # run again, with the same batch


@pytest.mark.parametrize(
    "admit",
    [
        pytest.param(Latest(), id="latest"),
        pytest.param(Debounce(0.03, deliver="batch"), id="debounce"),
        pytest.param((Latest(), Throttle("50/s")), id="latest-throttle"),
        pytest.param(Batch(5, 0.03), id="batch"),
    ],
)
async def test_a_replay_repeats_the_recorded_admission(admit: Any) -> None:
    # Recorded in three bursts; the replay releases the sends back to back, so a
    # Debounce or a Batch deciding by the clock again would merge them differently.
    async def work(ctx: AgentContext[Any]) -> Any:
        await asyncio.sleep(0.01)
        return [signal.payload for signal in ctx.batch or [ctx.signal]]

    graph = _graph(admit, work)
    store = MemorySignalStore()
    handle = graph.start(record=store)
    for price in range(20):
        handle.send("quote", price)
        if price % 7 == 6:
            await asyncio.sleep(0.2)
    handle.close()
    recorded_result = await asyncio.wait_for(handle.result(), DEADLINE)
    recorded = store.load(recorded_result.run_id)

    if isinstance(admit, Debounce):
        assert len(_activations(recorded_result)) == 3  # one per burst

    replayed = await asyncio.wait_for(graph.run(replay=recorded), DEADLINE)

    assert replayed.status == "completed"
    assert replayed.state == recorded_result.state

    def decisions(signals: Any) -> list[tuple[int, str, Any]]:
        named = ("agent:desk:activated", "agent:desk:skipped")
        return [(s.seq, s.name, s.payload) for s in signals if s.name in named]

    assert decisions(replayed.signals) == decisions(recorded.signals)
    assert recorded.diff(replayed) is None


async def test_a_replay_takes_the_recorded_decisions_not_the_clock() -> None:
    async def work(ctx: AgentContext[Any]) -> Any:
        return [signal.payload for signal in ctx.batch or [ctx.signal]]

    handle = _graph(Debounce(0.03, deliver="batch"), work).start(
        record=(store := MemorySignalStore())
    )
    for price in range(6):
        handle.send("quote", price)
        if price % 3 == 2:
            await asyncio.sleep(0.2)
    handle.close()
    recorded = store.load((await asyncio.wait_for(handle.result(), DEADLINE)).run_id)

    # The same graph waiting an hour for quiet: a replay deciding by the clock would hang.
    slow = _graph(Debounce(3600, deliver="batch"), work)
    replayed = await asyncio.wait_for(slow.run(replay=recorded), DEADLINE)

    assert replayed.state["last"] == [3, 4, 5]
    assert recorded.diff(replayed) is None


@pytest.mark.parametrize(
    ("admit", "message"),
    [
        pytest.param(
            "latest",
            r"^Agent 'desk': admit= takes admission policies \(reactor.Latest, Debounce, "
            r"Throttle, Batch, SpendCap\), one or a tuple of them; got 'latest'.$",
            id="a-string",
        ),
        pytest.param(
            (Latest(), Latest()),
            r"^Agent 'desk': admit= has two Latest policies; give each kind once.$",
            id="twice",
        ),
        pytest.param(
            Latest(key="{{ signal.payload.symbol"),
            r"^Agent 'desk': the admission key template has a syntax error",
            id="a-broken-key",
        ),
    ],
)
def test_bad_admit_values_are_reported_at_definition(admit: Any, message: str) -> None:
    with pytest.raises(AgentConfigError, match=message):
        agent(name="desk", run=lambda ctx: None, admit=admit)


def test_a_bad_policy_is_reported_when_it_is_made() -> None:
    with pytest.raises(AgentConfigError, match=r"^Invalid Debounce: "):
        Debounce(0)
