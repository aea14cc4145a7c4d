from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    ProviderRequest,
    Reactive,
    Recording,
    RunFinishedError,
    RunNotFoundError,
    ScriptedProvider,
    Signal,
    agent,
    reactive,
)
from reactor.testing import ToolUse, fake_anthropic, turn

ORDERS: list[str] = []


def place(ctx: AgentContext) -> str:
    ORDERS.append(ctx.state.analysis)
    return f"order for {ctx.state.analysis}"


def desk() -> Reactive:
    return reactive(
        {
            "analyst": agent(prompt="Analyse {{ input }}", updates="analysis"),
            "trader": agent(run=place, activate_on="state:analysis:changed", updates="order"),
            "reviewer": agent(
                prompt="Review {{ state.order }}",
                activate_on="state:order:changed",
                updates="review",
            ),
        },
        state={"analysis": None, "order": None, "review": None},
        name="desk",
    )


def answers() -> ScriptedProvider:
    return ScriptedProvider({"analyst": ["up"], "reviewer": ["fine"]})


def cut(recording: Recording, keep: Callable[[Signal], bool]) -> MemorySignalStore:
    """A store holding the recording up to (not including) the first signal not kept."""
    store = MemorySignalStore()
    store.start_run(recording.info)
    for signal in recording.signals:
        if not keep(signal):
            break
        store.append(signal)
    return store


def record(graph: Reactive, provider: ScriptedProvider, **options: Any) -> Recording:
    store = MemorySignalStore()
    result = graph.run_sync(record=store, provider=provider, **options)
    return store.load(result.run_id)


@pytest.fixture(autouse=True)
def no_orders() -> None:
    ORDERS.clear()


def test_a_run_cut_during_a_model_call_resumes_without_repeating_what_finished() -> None:
    full = record(desk(), answers(), input="AAPL")
    assert ORDERS == ["up"]
    reviewing = next(s for s in full.signals if s.name == "agent:reviewer:activated")
    store = cut(full, lambda s: s.seq <= reviewing.seq + 1)  # reviewer's call is in flight
    ORDERS.clear()
    provider = answers()
    result = desk().resume_sync(full.run_id, record=store, provider=provider)
    assert result.status == "completed"
    assert [r.agent for r in provider.requests] == ["reviewer"]  # the call in flight, again
    assert result.run_id == full.run_id
    assert ORDERS == []  # the trader completed before the cut: it never runs again
    assert result.state == full.state
    names = [s.name for s in result.signals]
    assert names.count("harness:start") == names.count("harness:end") == 1
    assert names.count("harness:resumed") == 1
    assert names.count("agent:reviewer:activated") == 1
    seqs = [s.seq for s in result.signals]
    assert seqs == sorted(set(seqs))
    resumed = store.load(full.run_id)
    assert [s.seq for s in resumed.signals] == seqs
    assert resumed.signals[-1].name == "harness:end"


def test_a_handler_in_flight_reruns_and_its_answered_calls_come_from_the_log() -> None:
    calls: list[str] = []

    async def check(ctx: AgentContext) -> str:
        assert ctx.provider is not None
        reply = ""
        async for event in ctx.provider.stream(
            ProviderRequest.build(agent="checker", system=None, prompt="risk?")
        ):
            reply = getattr(event, "output", reply)
        calls.append(reply)
        return f"checked: {reply}"

    graph = reactive({"checker": agent(run=check, updates="check")}, state={"check": None})
    provider = ScriptedProvider({"checker": ["low"]})
    full = record(graph, provider)
    end = next(s for s in full.signals if s.name == "provider:end")
    store = cut(full, lambda s: s.seq <= end.seq)  # the answer is in, the handler is not
    again = ScriptedProvider({"checker": ["high"]})
    result = graph.resume_sync(full.run_id, record=store, provider=again)
    assert result.state["check"] == "checked: low"  # the recorded answer, not a new one
    assert again.requests == []
    assert [s.name for s in result.signals].count("provider:end") == 1


def test_undecided_signals_are_dispatched_before_new_work() -> None:
    full = record(desk(), answers(), input="AAPL")
    changed = next(s for s in full.signals if s.name == "state:analysis:changed")
    store = cut(full, lambda s: s.seq <= changed.seq)  # the trader never saw it
    result = desk().resume_sync(full.run_id, record=store, provider=answers())
    assert ORDERS == ["up", "up"]  # once in the first process, once after the resume
    trader = result.select("agent:trader:activated")
    assert [s.caused_by for s in trader] == [changed.id]
    assert result.state == full.state


def test_a_recorded_tool_result_is_reused_when_the_call_is_made_again() -> None:
    runs: list[str] = []

    def buy(symbol: str) -> str:
        """Buy a share."""
        runs.append(symbol)
        return f"bought {symbol}"

    graph = reactive({"broker": agent(prompt="Buy AAPL", tools=[buy], updates="done")})
    first = fake_anthropic([turn(ToolUse("t1", "buy", {"symbol": "AAPL"})), "Done."])
    full = record(graph, first)  # type: ignore[arg-type]
    result_signal = next(s for s in full.signals if s.name == "tool:result")
    store = cut(full, lambda s: s.seq <= result_signal.seq)
    again = fake_anthropic([turn(ToolUse("t9", "buy", {"symbol": "AAPL"})), "Done again."])
    result = graph.resume_sync(full.run_id, record=store, provider=again)
    assert runs == ["AAPL"]  # the purchase happened once
    assert result.state["done"] == "Done again."
    results = result.select("tool:result")
    assert [s.payload["result"] for s in results] == ["bought AAPL", "bought AAPL"]


def test_only_a_run_that_stopped_early_can_be_resumed() -> None:
    store = MemorySignalStore()
    finished = desk().run_sync(record=store, provider=answers(), input="X")
    with pytest.raises(RunFinishedError, match=r"has already ended \(completed\)"):
        desk().resume_sync(finished.run_id, record=store, provider=answers())
    with pytest.raises(RunNotFoundError):
        desk().resume_sync("run_nope", record=store, provider=answers())
    with pytest.raises(ValueError, match=r"^resume='run_x' needs record=: the signal store"):
        desk().resume_sync("run_x", provider=answers())


def test_limits_count_over_the_whole_run() -> None:
    full = record(desk(), answers(), input="AAPL")
    reviewing = next(s for s in full.signals if s.name == "agent:reviewer:activated")
    store = cut(full, lambda s: s.seq < reviewing.seq)
    result = desk().resume_sync(full.run_id, record=store, provider=answers(), max_activations=2)
    assert result.status == "loop_limit"
    assert "max_activations=2" in str(result.error)
