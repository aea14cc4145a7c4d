from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
import structlog
from pydantic import BaseModel

from reactor import (
    AgentContext,
    CycleWarning,
    LoopLimitError,
    MemorySignalStore,
    NoProviderError,
    RunTimeoutError,
    ScriptedProvider,
    agent,
    reactive,
    run_reactive,
)
from reactor.testing import signal_names as names
from stores import Store, action
from tests.reactor.support import SlowProvider
from tests.reactor.support import until as _until


class Analysis(BaseModel):
    trend: str
    confidence: float


class Desk(BaseModel):
    analysis: Analysis | None = None
    risk: float | None = None
    decision: str | None = None
    count: int = 0


class DeskStore(Store[Desk]):
    @action
    def bump(self, draft: Desk) -> None:
        draft.count += 1


# -- a single agent -------------------------------------------------------------


async def test_single_agent_emits_its_lifecycle_in_order() -> None:
    analyst = agent(name="analyst", prompt="Analyze {{ input }}", emits=["analysis:done"])
    provider = ScriptedProvider({"analyst": ["The trend is up."]})
    result = await run_reactive(analyst, input="AAPL", provider=provider)
    assert result.status == "completed"
    assert result.output == "The trend is up."
    assert names(result, deltas=True) == [
        "harness:start",
        "agent:analyst:activated",
        "provider:start",
        "text:delta",
        "text:delta",
        "text:delta",
        "text:delta",
        "text:complete",
        "provider:end",
        "analysis:done",
        "agent:analyst:completed",
        "harness:end",
    ]
    deltas = [s.payload["content"] for s in result.select("text:delta")]
    assert "".join(deltas) == "The trend is up."
    end = result.signals[-1]
    assert end.payload["status"] == "completed"
    assert end.payload["activations"] == 1


def test_provider_signals_hang_under_the_activation() -> None:
    analyst = agent(name="analyst", prompt="go", emits=["analysis:done"])
    graph = reactive({"analyst": analyst})
    result = graph.run_sync(provider=ScriptedProvider({"analyst": ["ok"]}))
    activated = result.select("agent:analyst:activated")[0]
    for signal in result.signals:
        if signal.name.startswith(("provider:", "text:", "analysis:", "agent:analyst:completed")):
            assert signal.caused_by == activated.id, signal.name
            assert signal.source == "analyst"
            assert signal.depth == 1
    assert activated.caused_by == result.signals[0].id
    assert result.signals[0].depth == 0


async def test_false_guard_skips_and_never_calls_the_provider() -> None:
    provider = ScriptedProvider({"a": ["never"]})
    guarded = agent(name="a", prompt="x", when=lambda ctx: ctx.input["go"])
    result = await run_reactive(guarded, input={"go": False}, provider=provider)
    assert result.status == "completed"
    assert provider.requests == []
    skipped = result.select("agent:a:skipped")
    assert [s.payload for s in skipped] == [
        {"agent": "a", "trigger": "harness:start", "reason": "guard"}
    ]


async def test_string_guard_reads_the_same_names_as_templates() -> None:
    provider = ScriptedProvider({"a": ["yes"]})
    guarded = agent(
        name="a", prompt="x", when="input.score > 0.5 and signal.name == 'harness:start'"
    )
    assert (await run_reactive(guarded, input={"score": 0.9}, provider=provider)).output == "yes"
    skipped = await run_reactive(guarded, input={"score": 0.1}, provider=provider)
    assert skipped.select("agent:a:skipped")[0].payload["reason"] == "guard"


async def test_a_raising_guard_fails_the_activation() -> None:
    def guard(ctx: AgentContext) -> bool:
        raise KeyError("missing")

    result = await run_reactive(agent(name="a", run=lambda ctx: 1, when=guard))
    assert result.status == "failed"
    assert isinstance(result.error, KeyError)
    assert result.select("agent:a:failed")[0].payload["error"]["type"] == "KeyError"


async def test_the_agents_own_provider_beats_the_runs() -> None:
    own = ScriptedProvider({"a": ["mine"]})
    default = ScriptedProvider({"a": ["default"]})
    result = await run_reactive(agent(name="a", prompt="x", provider=own), provider=default)
    assert result.output == "mine"
    assert default.requests == []


async def test_no_provider_anywhere_is_a_clear_error() -> None:
    result = await run_reactive(agent(name="writer", prompt="x"))
    assert result.status == "failed"
    assert isinstance(result.error, NoProviderError)
    assert str(result.error).startswith("Agent 'writer' has no provider")
    assert "provider=" in str(result.error)
    assert names(result)[-2:] == ["agent:writer:failed", "harness:end"]


async def test_handler_agents_run_sync_and_async() -> None:
    async def slow(ctx: AgentContext) -> str:
        await asyncio.sleep(0)
        return f"async {ctx.input}"

    assert (
        await run_reactive(agent(name="s", run=lambda ctx: f"sync {ctx.input}"), input=1)
    ).output == "sync 1"
    assert (await run_reactive(agent(name="a", run=slow), input=2)).output == "async 2"


# -- several agents ---------------------------------------------------------------


async def test_a_chain_of_three_agents_records_causality() -> None:
    graph = reactive(
        {
            "a": agent(run=lambda ctx: 1, emits=["one"]),
            "b": agent(run=lambda ctx: ctx.signal.payload + 1, activate_on="one", emits=["two"]),
            "c": agent(run=lambda ctx: ctx.signal.payload + 1, activate_on="two", updates="count"),
        },
        state=Desk,
    )
    result = await graph.run()
    assert result.state["count"] == 3
    final = result.select("state:count:changed")[0]
    chain = [s.name for s in result.causal_chain(final)]
    assert chain == [
        "harness:start",
        "agent:a:activated",
        "one",
        "agent:b:activated",
        "two",
        "agent:c:activated",
        "state:count:changed",
    ]
    depths = {s.name: s.depth for s in result.causal_chain(final)}
    assert (
        depths["agent:a:activated"],
        depths["agent:b:activated"],
        depths["agent:c:activated"],
    ) == (1, 2, 3)


async def test_agents_on_one_signal_run_concurrently() -> None:
    started: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}

    def worker(me: str, other: str) -> Any:
        async def run(ctx: AgentContext) -> str:
            started[me].set()
            await asyncio.wait_for(started[other].wait(), 60)  # times out if sequential
            return me

        return run

    graph = reactive({"a": agent(run=worker("a", "b")), "b": agent(run=worker("b", "a"))})
    result = await graph.run()
    assert result.status == "completed"
    order = names(result)
    assert order.index("agent:b:activated") < order.index("agent:a:completed")
    assert order.index("agent:a:activated") < order.index("agent:b:completed")


async def test_fan_in_two_parallel_agents_emit_the_same_signal() -> None:
    class Parts(BaseModel):
        parts: list[str] = []
        parts_report: str | None = None

    class PartsStore(Store[Parts]):
        @action
        def add(self, draft: Parts, part: str) -> None:
            draft.parts.append(part)

    def collect(ctx: AgentContext) -> None:
        ctx.store.add(ctx.signal.payload)

    graph = reactive(
        {
            "left": agent(run=lambda ctx: "L", emits=["part:ready"]),
            "right": agent(run=lambda ctx: "R", emits=["part:ready"]),
            "join": agent(run=collect, activate_on="part:ready"),
            "report": agent(
                run=lambda ctx: "+".join(sorted(ctx.state.parts)),
                activate_on="state:parts:added",
                when=lambda ctx: len(ctx.state.parts) == 2,
                updates="parts_report",
            ),
        },
        state=PartsStore,
    )
    result = await graph.run()
    assert result.metrics.activations_by_agent == {"left": 1, "right": 1, "join": 2, "report": 1}
    assert result.state["parts_report"] == "L+R"
    causes = {s.caused_by for s in result.select("agent:join:activated")}
    assert len(causes) == 2


async def test_updates_feed_subscribers_of_the_state_signal() -> None:
    provider = ScriptedProvider({"analyst": [Analysis(trend="up", confidence=0.9)]})
    graph = reactive(
        {
            "analyst": agent(prompt="Analyze", output=Analysis, updates="analysis"),
            "trader": agent(
                run=lambda ctx: "buy" if ctx.state.analysis.trend == "up" else "hold",
                activate_on="state:analysis:changed",
                updates="decision",
            ),
        },
        state=Desk,
    )
    result = await graph.run(provider=provider)
    assert result.state["decision"] == "buy"
    change = result.select("state:analysis:changed")[0]
    assert change.payload["actor"] == "agent:analyst"
    assert result.select("state:decision:changed")[0].payload["actor"] == "agent:trader"


async def test_a_guard_sees_the_state_change_of_its_own_trigger() -> None:
    seen: list[int] = []

    def guard(ctx: AgentContext) -> bool:
        seen.append(ctx.state.count)
        return bool(ctx.signal.payload["new"] == ctx.state.count)

    graph = reactive(
        {
            "bumper": agent(run=lambda ctx: ctx.store.bump()),
            "watcher": agent(run=lambda ctx: "saw", activate_on="state:count:changed", when=guard),
        },
        state=DeskStore,
    )
    result = await graph.run()
    assert seen == [1]
    assert result.metrics.activations_by_agent["watcher"] == 1


async def test_a_join_through_state_waits_for_both_inputs() -> None:
    provider = ScriptedProvider(
        {"analyst": [Analysis(trend="up", confidence=0.9)], "risk": ["0.2"]},
        latency=lambda request: 0.02 if request.agent == "risk" else 0.0,
    )
    both = "state.analysis is not none and state.risk is not none"
    graph = reactive(
        {
            "analyst": agent(prompt="a", output=Analysis, updates="analysis"),
            "risk": agent(prompt="r", updates="risk"),
            "trader": agent(
                run=lambda ctx: "buy",
                activate_on=["state:analysis:changed", "state:risk:changed"],
                when=both,
                updates="decision",
            ),
        },
        state=Desk,
    )
    result = await graph.run(provider=provider)
    trader = result.select("agent:trader:*")
    assert [(s.name, s.payload.get("reason")) for s in trader] == [
        ("agent:trader:skipped", "guard"),
        ("agent:trader:activated", None),
        ("agent:trader:completed", None),
    ]
    assert result.state["risk"] == 0.2


# -- ending ---------------------------------------------------------------------------


def _ending_graph(on_end: Literal["drain", "cancel"]) -> Any:
    async def slow(ctx: AgentContext) -> str:
        await asyncio.sleep(0.05)
        return "slow done"

    return reactive(
        {
            "fast": agent(run=lambda ctx: "decided", emits=["decision:made"]),
            "slow": agent(run=slow),
            "after": agent(run=lambda ctx: "too late", activate_on="decision:made"),
        },
        end_when="decision:made",
        on_end=on_end,
    )


async def test_end_when_pattern_drains_in_flight_work_and_skips_new_activations() -> None:
    result = await _ending_graph("drain").run()
    assert result.status == "ended"
    assert result.output == "decided"
    order = names(result)
    assert order.index("harness:ending") < order.index("agent:slow:completed")
    decision = result.select("decision:made")[0]
    skipped = result.select("agent:after:skipped")[0]
    assert skipped.payload["reason"] == "ended"
    assert result.select("agent:after:activated") == []
    assert result.select("harness:ending")[0].caused_by == decision.id
    assert skipped.caused_by == decision.id
    assert order[-1] == "harness:end"
    assert result.signals[-1].payload["reason"] == "end_when held after decision:made"


async def test_end_when_cancel_cancels_in_flight_work() -> None:
    result = await _ending_graph("cancel").run()
    assert result.status == "ended"
    assert result.select("agent:slow:completed") == []
    cancelled = result.select("agent:slow:cancelled")
    assert [s.payload["agent"] for s in cancelled] == ["slow"]


async def test_end_when_callable_reads_the_run() -> None:
    graph = reactive(
        {
            "counter": agent(
                run=lambda ctx: ctx.store.bump(),
                activate_on=["harness:start", "state:count:changed"],
            )
        },
        state=DeskStore,
        end_when=lambda run: run.state.count >= 3,
    )
    result = await graph.run()
    assert result.status == "ended"
    assert result.state["count"] == 3
    assert result.output == result.state


async def test_timeout_cancels_a_slow_provider_and_still_ends(slow_provider: SlowProvider) -> None:
    result = await run_reactive(agent(name="a", prompt="x"), provider=slow_provider, timeout=2)
    assert result.status == "timeout"
    assert isinstance(result.error, RunTimeoutError)
    assert slow_provider.cancelled == ["a"]
    assert names(result)[-3:] == ["provider:start", "agent:a:cancelled", "harness:end"]
    assert result.signals[-1].payload["status"] == "timeout"


async def test_cancelling_the_caller_cancels_the_run(slow_provider: SlowProvider) -> None:
    graph = reactive({"a": agent(prompt="x")})
    task = asyncio.create_task(graph.run(provider=slow_provider))
    await _until(lambda: slow_provider.started == ["a"])  # cancelled inside the model call
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow_provider.cancelled == ["a"]


class Interrupted(BaseException):
    """Not an ``Exception``: agents' failures do not absorb it."""


def _interrupt(ctx: AgentContext[Any]) -> None:
    raise Interrupted


@pytest.mark.parametrize("live", [False, True], ids=["run", "live run"])
async def test_a_base_exception_in_an_agent_stops_the_run_and_reaches_the_caller(
    slow_provider: SlowProvider, live: bool
) -> None:
    graph = reactive({"slow": agent(prompt="x"), "bad": agent(run=_interrupt)})
    # A live run stays open until something stops it.
    ran = (
        graph.start(provider=slow_provider).result() if live else graph.run(provider=slow_provider)
    )
    with pytest.raises(Interrupted):
        await asyncio.wait_for(ran, 60)
    assert slow_provider.cancelled == ["slow"]


async def test_a_run_cancelled_twice_still_waits_for_its_agents_to_stop() -> None:
    started: list[str] = []
    stopped: list[str] = []

    async def stubborn(ctx: AgentContext[Any]) -> None:
        started.append(ctx.agent)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0.02)  # cleaning up takes a while
            stopped.append(ctx.agent)
            raise

    graph = reactive({"a": agent(run=stubborn), "b": agent(run=stubborn)})
    task = asyncio.create_task(graph.run())
    await _until(lambda: len(started) == 2)  # both agents are in their handlers
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(stopped) == ["a", "b"]


# -- loops and limits -------------------------------------------------------------


async def test_a_self_looping_agent_trips_the_depth_limit_naming_the_cycle() -> None:
    with pytest.warns(CycleWarning, match=r"Agents form a cycle: tick -> tick -> tick"):
        graph = reactive(
            {
                "tick": agent(
                    run=lambda ctx: 1, activate_on=["harness:start", "tick"], emits=["tick"]
                )
            }
        )
    result = await graph.run(max_depth=10)
    assert result.status == "loop_limit"
    assert isinstance(result.error, LoopLimitError)
    assert result.error.cycle == ("tick", "tick", "tick")
    assert str(result.error).startswith(
        "Loop limit reached: max_depth=10 (10 activations on one causal chain). "
        "Repeating cycle: tick -> tick -> tick."
    )
    assert result.metrics.activations == 10
    assert result.signals[-1].payload["status"] == "loop_limit"


async def test_a_two_agent_loop_is_spelled_out() -> None:
    with pytest.warns(
        CycleWarning, match="trader -> trade:proposed -> reviewer -> trade:rejected -> trader"
    ):
        graph = reactive(
            {
                "trader": agent(
                    run=lambda ctx: "p",
                    activate_on=["harness:start", "trade:rejected"],
                    emits=["trade:proposed"],
                ),
                "reviewer": agent(
                    run=lambda ctx: "r", activate_on="trade:proposed", emits=["trade:rejected"]
                ),
            }
        )
    result = await graph.run(max_activations=9)
    assert result.status == "loop_limit"
    assert (
        "Repeating cycle: trader -> trade:proposed -> reviewer -> trade:rejected -> trader."
        in str(result.error)
    )
    assert isinstance(result.error, LoopLimitError)
    assert result.error.limit == "max_activations"


async def test_per_agent_max_activations_skips_with_reason_limit() -> None:
    with pytest.warns(CycleWarning):
        graph = reactive(
            {
                "tick": agent(
                    run=lambda ctx: 1,
                    activate_on=["harness:start", "tick"],
                    emits=["tick"],
                    max_activations=3,
                )
            }
        )
    result = await graph.run()
    assert result.status == "completed"
    assert result.metrics.activations == 3
    assert result.select("agent:tick:skipped")[0].payload["reason"] == "limit"


# -- failures -------------------------------------------------------------------------


def _failing_graph() -> Any:
    def boom(ctx: AgentContext) -> None:
        raise ValueError("bad input")

    async def slow(ctx: AgentContext) -> str:
        await asyncio.sleep(0.05)
        return "ok"

    return reactive({"boom": agent(run=boom), "slow": agent(run=slow)})


async def test_fail_fast_stops_the_run_and_cancels_the_rest() -> None:
    result = await _failing_graph().run()
    assert result.status == "failed"
    assert isinstance(result.error, ValueError)
    assert result.reason == "agent 'boom' failed: ValueError: bad input"
    assert result.select("agent:boom:failed")[0].payload["error"] == {
        "type": "ValueError",
        "message": "bad input",
    }
    assert result.select("agent:slow:cancelled")
    assert names(result)[-1] == "harness:end"


async def test_without_fail_fast_the_run_continues_and_reports_its_failures() -> None:
    store = MemorySignalStore()
    result = await _failing_graph().run(fail_fast=False, record=store)
    assert result.status == "completed"
    assert result.error is None
    assert result.select("agent:slow:completed")
    assert not result.ok
    [failure] = result.failures
    assert (failure.agent, str(failure.error)) == ("boom", "bad input")
    assert failure.signal_id == result.select("agent:boom:failed")[0].id
    assert result.signals[-1].payload["failures"] == 1
    assert store.runs()[0].failures == 1


def test_run_sync_can_raise_the_error() -> None:
    with pytest.raises(ValueError, match="bad input"):
        _failing_graph().run_sync(raise_on_error=True)


async def test_run_sync_inside_a_loop_says_to_await() -> None:
    with pytest.raises(RuntimeError, match=r"await graph\.run"):
        reactive({"a": agent(run=lambda ctx: 1)}).run_sync()


# -- what activations see and do ---------------------------------------------------------


async def test_on_output_runs_after_updates_and_emits_are_not_doubled() -> None:
    seen: list[Any] = []

    def on_output(ctx: AgentContext, output: Any) -> None:
        seen.append((output, ctx.state.decision))
        ctx.emit("trade:done", {"by": "on_output"})

    graph = reactive(
        {
            "trader": agent(
                run=lambda ctx: "buy", updates="decision", on_output=on_output, emits=["trade:done"]
            )
        },
        state=Desk,
    )
    result = await graph.run()
    assert seen == [("buy", "buy")]
    assert [s.payload for s in result.select("trade:done")] == [{"by": "on_output"}]
    order = names(result)
    assert (
        order.index("state:decision:changed")
        < order.index("trade:done")
        < order.index("agent:trader:completed")
    )


async def test_undeclared_emits_work_and_are_logged_once() -> None:
    def run(ctx: AgentContext) -> None:
        ctx.emit("surprise")
        ctx.emit("surprise")

    with structlog.testing.capture_logs() as logs:
        result = await run_reactive(agent(name="a", run=run))
    assert len(result.select("surprise")) == 2
    warnings = [log for log in logs if log["event"] == "undeclared emit"]
    assert [(w["agent"], w["signal"]) for w in warnings] == [("a", "surprise")]


async def test_ctx_emit_is_caused_by_the_activation() -> None:
    result = await run_reactive(agent(name="a", run=lambda ctx: ctx.emit("x", 1), emits=["x"]))
    (x,) = result.select("x")
    assert x.caused_by == result.select("agent:a:activated")[0].id
    assert x.source == "a"


async def test_metrics_sum_tokens_and_count_activations() -> None:
    provider = ScriptedProvider({"a": ["one two three four"]}, pricing=(3.0, 15.0))
    result = await run_reactive(agent(name="a", prompt="count to four"), provider=provider)
    end = result.select("provider:end")[0].payload
    assert end["usage"] == {"input_tokens": 4, "output_tokens": 5}
    assert result.metrics.input_tokens == 4
    assert result.metrics.output_tokens == 5
    assert result.metrics.cost_usd == pytest.approx((4 * 3 + 5 * 15) / 1e6)
    assert result.metrics.activations_by_agent == {"a": 1}
    assert result.metrics.duration_ms > 0


async def test_a_store_instance_is_shared_and_class_specs_are_fresh_per_run() -> None:
    shared = DeskStore()
    bump = agent(run=lambda ctx: ctx.store.bump())
    graph = reactive({"bump": bump}, state=shared)
    await graph.run()
    await graph.run()
    assert shared.state.count == 2
    fresh = reactive({"bump": bump}, state=DeskStore)
    assert (await fresh.run()).state["count"] == 1
    assert (await fresh.run()).state["count"] == 1


async def test_a_history_limit_keeps_memory_bounded_and_the_run_correct() -> None:
    with pytest.warns(CycleWarning):
        graph = reactive(
            {
                "tick": agent(
                    run=lambda ctx: 1,
                    activate_on=["harness:start", "tick"],
                    emits=["tick"],
                    max_activations=50,
                )
            }
        )
    result = await graph.run(history_limit=10)
    assert result.status == "completed"
    assert result.metrics.activations == 50
    assert len(result.signals) == 10
    assert result.signals[-1].name == "harness:end"


async def test_a_run_takes_the_id_its_caller_chose(tmp_path: Any) -> None:
    from reactor import SQLiteSignalStore

    graph = reactive({"a": agent(run=lambda ctx: 1, updates="x")}, state={"x": 0})
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        result = await graph.run(run_id="run_chosen-1", record=store)
        assert result.run_id == "run_chosen-1"
        assert {signal.run_id for signal in result.signals} == {"run_chosen-1"}
        assert store.load("run_chosen-1").state == {"x": 1}
    for bad in ("", "has space", "x" * 65):
        with pytest.raises(ValueError, match="run_id must be"):
            await graph.run(run_id=bad)
    with pytest.raises(ValueError, match="keeps its id"):
        await graph.run(run_id="run_a", resume="run_b", record=store)
