from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from reactor import (
    AgentContext,
    CycleWarning,
    End,
    MemorySignalStore,
    Provider,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    Reactive,
    Recording,
    ReplayMismatchError,
    ReplayProvider,
    ScriptedProvider,
    ToolCall,
    ToolResult,
    Usage,
    agent,
    reactive,
)
from tests.reactor.databases import StorePlace


class Analysis(BaseModel):
    trend: str
    confidence: float


class Desk(BaseModel):
    analysis: Analysis | None = None
    risk: str | None = None
    decision: str | None = None


def desk_graph(analyst_prompt: str = "Analyze {{ input.symbol }}") -> Reactive:
    return reactive(
        {
            "analyst": agent(prompt=analyst_prompt, output=Analysis, updates="analysis"),
            "risk": agent(prompt="Risk of {{ input.symbol }}", updates="risk"),
            "trader": agent(
                run=lambda ctx: "buy" if ctx.state.analysis.trend == "up" else "hold",
                activate_on=["state:analysis:changed", "state:risk:changed"],
                when="state.analysis is not none and state.risk is not none",
                updates="decision",
            ),
        },
        state=Desk,
        name="desk",
    )


def live_provider() -> ScriptedProvider:
    # The analyst answers last, so the trader's join sees the risk first.
    return ScriptedProvider(
        {"analyst": [Analysis(trend="up", confidence=0.8)], "risk": ["low"]},
        latency=lambda request: 0.03 if request.agent == "analyst" else 0.01,
        pricing=(3.0, 15.0),
    )


def comparable(recording: Recording) -> list[tuple[str, Any]]:
    return [
        (s.name, {k: v for k, v in s.payload.items() if k != "duration_ms"})
        if isinstance(s.payload, dict)
        else (s.name, s.payload)
        for s in recording.signals
    ]


async def test_replay_from_a_store_reproduces_names_payloads_and_state(
    store_place: StorePlace,
) -> None:
    with store_place.open() as store:
        original = await desk_graph().run(
            input={"symbol": "AAPL"}, provider=live_provider(), record=store
        )
    with store_place.open() as store:  # a new instance: from the database
        recording = store.load(original.run_id)
        replayed = await desk_graph().run(replay=recording, record=store)
        replay_recording = store.load(replayed.run_id)
    assert recording.complete
    assert replayed.status == original.status == "completed"
    assert replayed.state == original.state
    assert comparable(replay_recording) == comparable(recording)
    assert recording.diff(replay_recording) is None
    assert replayed.metrics.input_tokens == original.metrics.input_tokens
    assert replayed.metrics.cost_usd == original.metrics.cost_usd
    assert replayed.output == original.output


async def test_parallel_calls_get_their_own_answers_and_keep_their_order() -> None:
    store = MemorySignalStore()
    original = await desk_graph().run(
        input={"symbol": "AAPL"}, provider=live_provider(), record=store
    )
    replay = ReplayProvider(store.load(original.run_id))
    replayed = await desk_graph().run(replay=replay)
    order = [s.name for s in replayed.signals if s.name.startswith("state:")]
    assert order == ["state:risk:changed", "state:analysis:changed", "state:decision:changed"]
    assert replayed.select("agent:trader:skipped")[0].payload["reason"] == "guard"
    assert replay.misses == []


async def test_replay_uses_the_recorded_input_unless_given() -> None:
    store = MemorySignalStore()
    original = await desk_graph().run(
        input={"symbol": "AAPL"}, provider=live_provider(), record=store
    )
    replayed = await desk_graph().run(replay=store.load(original.run_id))
    assert replayed.signals[0].payload["input"] == {"symbol": "AAPL"}


async def test_strict_replay_names_the_agent_and_the_first_changed_field() -> None:
    store = MemorySignalStore()
    original = await desk_graph().run(
        input={"symbol": "AAPL"}, provider=live_provider(), record=store
    )
    changed = desk_graph("Analyze {{ input.symbol }} carefully")
    result = await changed.run(replay=store.load(original.run_id))
    assert result.status == "failed"
    error = result.error
    assert isinstance(error, ReplayMismatchError)
    assert error.agent == "analyst"
    assert error.field == "messages[0].content"
    assert (error.recorded, error.current) == ("Analyze AAPL", "Analyze AAPL carefully")
    assert str(error).startswith(
        "Replay has no recorded answer for agent 'analyst': the request differs from the "
        "recorded one in messages[0].content (recorded 'Analyze AAPL', now 'Analyze AAPL "
        "carefully')."
    )


async def test_a_changed_input_is_a_mismatch_too() -> None:
    store = MemorySignalStore()
    original = await desk_graph().run(
        input={"symbol": "AAPL"}, provider=live_provider(), record=store
    )
    result = await desk_graph().run(replay=store.load(original.run_id), input={"symbol": "MSFT"})
    assert isinstance(result.error, ReplayMismatchError)


async def test_fallback_fetches_the_missing_answer_and_it_is_recorded() -> None:
    store = MemorySignalStore()
    original = await desk_graph().run(
        input={"symbol": "AAPL"}, provider=live_provider(), record=store
    )
    fallback = ScriptedProvider({"analyst": [Analysis(trend="down", confidence=0.6)]})
    replay = ReplayProvider(store.load(original.run_id), fallback=fallback)
    changed = desk_graph("Analyze {{ input.symbol }} again")
    result = await changed.run(replay=replay, record=store)
    assert result.status == "completed"
    assert result.state["decision"] == "hold"
    assert [r.agent for r in replay.misses] == ["analyst"]
    assert [r.agent for r in fallback.requests] == ["analyst"]
    new = store.load(result.run_id)
    ends = {s.payload["agent"]: s.payload["output"] for s in new.select("provider:end")}
    assert ends["analyst"] == {"trend": "down", "confidence": 0.6}
    # The new recording replays on its own, now without the fallback.
    again = await changed.run(replay=new)
    assert again.state == result.state


async def test_non_strict_replay_answers_a_changed_request_anyway() -> None:
    store = MemorySignalStore()
    original = await desk_graph().run(
        input={"symbol": "AAPL"}, provider=live_provider(), record=store
    )
    replay = ReplayProvider(store.load(original.run_id), strict=False)
    result = await desk_graph("Different {{ input.symbol }}").run(replay=replay)
    assert result.state == original.state
    assert [r.agent for r in replay.misses] == ["analyst"]


async def test_an_agent_without_recorded_calls_is_named() -> None:
    store = MemorySignalStore()
    original = await desk_graph().run(
        input={"symbol": "AAPL"}, provider=live_provider(), record=store
    )
    extra = reactive(
        {**desk_graph().agents, "critic": agent(prompt="criticise")}, state=Desk, name="desk"
    )
    result = await extra.run(replay=store.load(original.run_id))
    assert isinstance(result.error, ReplayMismatchError)
    assert "the recording has no provider calls for it (agents with calls: analyst, risk)" in str(
        result.error
    )


class ToolingProvider(Provider):
    """A provider whose answers include tool calls and, once, a failure."""

    model = "tooling-1"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.calls += 1
        if request.agent == "flaky":
            raise ProviderError("overloaded", retryable=True)
        yield ToolCall("t1", "lookup", {"q": "x"})
        yield ToolResult("t1", "lookup", {"price": 1.5})
        yield End(output="priced", usage=Usage(7, 3), cost_usd=0.002, stop_reason="end_turn")


async def test_tool_calls_and_provider_errors_replay_without_the_provider() -> None:
    graph = reactive({"pricer": agent(prompt="price it"), "flaky": agent(prompt="try")})
    store = MemorySignalStore()
    provider = ToolingProvider()
    original = await graph.run(provider=provider, record=store, fail_fast=False)
    replayed = await graph.run(replay=store.load(original.run_id), fail_fast=False)
    assert provider.calls == 2
    assert comparable(store.load(original.run_id)) == comparable(
        Recording.from_signals(replayed.signals)
    )
    start = replayed.select("provider:start")[0].payload
    assert start["model"] == "tooling-1"
    assert replayed.select("provider:error")[0].payload["retryable"] is True


def test_replay_matches_by_occurrence_for_repeated_identical_requests() -> None:
    counter = {"n": 0}

    def answer(request: ProviderRequest) -> str:
        counter["n"] += 1
        return f"answer {counter['n']}"

    with pytest.warns(CycleWarning):
        graph = reactive(
            {
                "ask": agent(prompt="same question", activate_on=["harness:start", "again"]),
                "repeat": agent(
                    run=lambda ctx: None,
                    activate_on="agent:ask:completed",
                    emits=["again"],
                    max_activations=2,
                ),
            }
        )
    store = MemorySignalStore()
    original = graph.run_sync(provider=ScriptedProvider({"ask": answer}), record=store)
    outputs = [s.payload["output"] for s in original.select("agent:ask:completed")]
    assert outputs == ["answer 1", "answer 2", "answer 3"]
    replayed = graph.run_sync(replay=store.load(original.run_id))
    assert [s.payload["output"] for s in replayed.select("agent:ask:completed")] == outputs


async def test_a_mismatch_deep_in_a_long_prompt_is_shown_where_it_differs() -> None:
    preamble = "Consider the market carefully. " * 10
    store = MemorySignalStore()
    graph = reactive({"a": agent(prompt=preamble + "Answer about {{ input }}.")})
    original = await graph.run(input="AAPL", provider=ScriptedProvider({"a": ["ok"]}), record=store)
    result = await graph.run(replay=store.load(original.run_id), input="MSFT")
    message = str(result.error)
    assert (
        "(recorded ...'fully. Answer about AAPL.', now ...'fully. Answer about MSFT.')" in message
    )


async def test_a_handler_racing_a_model_keeps_its_recorded_order() -> None:
    async def handle(ctx: AgentContext) -> str:
        await asyncio.sleep(0.03)
        return "h"

    graph = reactive(
        {
            "h": agent(run=handle, updates="h"),
            "l": agent(prompt="go", updates="l"),
            "j": agent(
                run=lambda ctx: "h-first" if ctx.state.h else "l-first",
                activate_on=["state:h:changed", "state:l:changed"],
                when="state.j is none",
                updates="j",
            ),
        },
        state={"h": None, "l": None, "j": None},
    )
    store = MemorySignalStore()
    original = await graph.run(provider=ScriptedProvider({"l": ["l"]}, latency=0.1), record=store)
    assert original.state["j"] == "h-first"
    recording = store.load(original.run_id)
    replayed = await graph.run(replay=recording, record=store)
    assert replayed.state["j"] == "h-first"
    assert recording.diff(store.load(replayed.run_id)) is None


async def test_a_prompt_that_uses_run_id_replays() -> None:
    graph = reactive({"a": agent(prompt="Run {{ run_id }}: go.", updates="a")}, state={"a": None})
    store = MemorySignalStore()
    original = await graph.run(provider=ScriptedProvider({"a": ["done"]}), record=store)
    replayed = await graph.run(replay=store.load(original.run_id))
    assert replayed.status == "completed", replayed.error
    assert replayed.state == original.state
