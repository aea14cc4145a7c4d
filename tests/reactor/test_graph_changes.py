"""Resume after a code change: the graph is checked against the fingerprints in the log."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from reactor import (
    AgentContext,
    GraphChangedError,
    MemorySignalStore,
    Reactive,
    ReactorError,
    Recording,
    ScriptedProvider,
    Signal,
    agent,
    reactive,
)

ORDERS: list[str] = []


def place(ctx: AgentContext[Any]) -> str:
    ORDERS.append(ctx.state.analysis)
    return f"order for {ctx.state.analysis}"


def desk(
    analyst: str = "Analyse {{ input }}",
    reviewer: str = "Review {{ state.order }}",
    trader_when: str | None = None,
    **more: Any,
) -> Reactive:
    agents = {
        "analyst": agent(prompt=analyst, updates="analysis"),
        "trader": agent(
            run=place, activate_on="state:analysis:changed", updates="order", when=trader_when
        ),
        "reviewer": agent(prompt=reviewer, activate_on="state:order:changed", updates="review"),
        **more,
    }
    return reactive(
        agents, state={"analysis": None, "order": None, "review": None, "audit": None}, name="desk"
    )


def answers() -> ScriptedProvider:
    return ScriptedProvider({"analyst": ["up"], "reviewer": ["fine"]}, default=["noted"])


def cut_before(graph: Reactive, name: str) -> tuple[Recording, MemorySignalStore]:
    """Record ``graph``, then a store with its log up to (not including) signal ``name``."""
    store = MemorySignalStore()
    result = graph.run_sync(record=store, provider=answers(), input="AAPL")
    full = store.load(result.run_id)
    stop = next(s.seq for s in full.signals if s.name == name)
    cut = MemorySignalStore()
    cut.start_run(full.info)
    for signal in full.signals:
        if signal.seq < stop:
            cut.append(signal)
    return full, cut


@pytest.fixture(autouse=True)
def no_orders() -> None:
    ORDERS.clear()


def test_harness_start_records_a_fingerprint_of_each_agent() -> None:
    result = desk().run_sync(provider=answers(), input="AAPL")
    prints = result.signals[0].payload["fingerprints"]
    assert set(prints) == {"analyst", "trader", "reviewer"}
    assert set(prints["analyst"]) == {
        "kind",
        "activate_on",
        "when",
        "emits",
        "updates",
        "templates",
        "output",
        "tools",
    }
    again = desk().run_sync(provider=answers(), input="MSFT")
    assert again.signals[0].payload["fingerprints"] == prints  # the code, not the run
    changed = desk(analyst="Analyse {{ input }} twice").run_sync(provider=answers(), input="X")
    differs = changed.signals[0].payload["fingerprints"]
    assert differs["analyst"]["templates"] != prints["analyst"]["templates"]
    assert differs["trader"] == prints["trader"]


def test_a_changed_prompt_of_an_agent_that_ran_refuses_the_resume() -> None:
    full, store = cut_before(desk(), "agent:reviewer:activated")
    before = store.load(full.run_id).signals
    message = (
        f"Run {full.run_id} cannot resume on this graph: its code changed what the run's log "
        "says was done (agent 'analyst': its prompt templates changed, and it has 1 recorded "
        "activation). Deploy the code the run last ran with, or resume with "
        "on_change='force' to go on anyway"
    )
    with pytest.raises(GraphChangedError, match=f"^{re.escape(message)}") as caught:
        desk(analyst="Analyse {{ input }} with care").resume_sync(
            full.run_id, record=store, provider=answers()
        )
    assert caught.value.changes == {
        "analyst": "its prompt templates changed, and it has 1 recorded activation"
    }
    assert caught.value.run_id == full.run_id
    assert isinstance(caught.value, ReactorError)
    assert isinstance(caught.value, RuntimeError)
    assert store.load(full.run_id).signals == before  # nothing was recorded


def test_on_change_force_resumes_anyway_and_says_so() -> None:
    full, store = cut_before(desk(), "agent:reviewer:activated")
    with capture_logs() as logs:
        result = desk(analyst="Analyse {{ input }} with care").resume_sync(
            full.run_id, record=store, provider=answers(), on_change="force"
        )
    assert result.status == "completed"
    assert result.state["review"] == "fine"
    [warning] = [entry for entry in logs if entry["event"] == "resumed on a changed graph"]
    assert "analyst: its prompt templates changed" in warning["changes"]


def test_adding_an_agent_resumes_and_it_reacts_only_to_what_comes_next() -> None:
    full, store = cut_before(desk(), "agent:reviewer:activated")
    audited: list[str] = []

    def audit(ctx: AgentContext[Any]) -> str:
        audited.append(ctx.signal.name)
        return "ok"

    bigger = desk(
        auditor=agent(
            run=audit, activate_on=["harness:start", "state:review:changed"], updates="audit"
        )
    )
    result = bigger.resume_sync(full.run_id, record=store, provider=answers())
    assert result.status == "completed"
    assert audited == ["state:review:changed"]  # not the harness:start before the deploy
    assert result.state["audit"] == "ok"
    resumed = [s for s in result.signals if s.name == "harness:resumed"]
    assert "auditor" in resumed[0].payload["fingerprints"]


def test_an_agent_changed_before_it_ever_ran_resumes_with_its_new_prompt() -> None:
    full, store = cut_before(desk(), "agent:reviewer:activated")
    provider = answers()
    result = desk(reviewer="Review {{ state.order }} strictly").resume_sync(
        full.run_id, record=store, provider=provider
    )
    assert result.status == "completed"
    assert [r.prompt for r in provider.requests] == ["Review order for up strictly"]


def test_removing_an_agent_refuses_only_if_it_ran() -> None:
    full, store = cut_before(desk(), "agent:reviewer:activated")
    without_reviewer = reactive(
        {
            "analyst": agent(prompt="Analyse {{ input }}", updates="analysis"),
            "trader": agent(run=place, activate_on="state:analysis:changed", updates="order"),
        },
        state={"analysis": None, "order": None, "review": None, "audit": None},
        name="desk",
    )
    result = without_reviewer.resume_sync(full.run_id, record=store, provider=answers())
    assert result.status == "completed"
    without_trader = reactive(
        {
            "analyst": agent(prompt="Analyse {{ input }}", updates="analysis"),
            "reviewer": agent(prompt="Review {{ state.order }}", activate_on="state:order:changed"),
        },
        state={"analysis": None, "order": None, "review": None, "audit": None},
        name="desk",
    )
    full, store = cut_before(desk(), "agent:reviewer:activated")
    with pytest.raises(GraphChangedError) as caught:
        without_trader.resume_sync(full.run_id, record=store, provider=answers())
    assert caught.value.changes == {"trader": "removed, and it has 1 recorded activation"}


def _guarded(when: str | Callable[[AgentContext[Any]], Any]) -> Reactive:
    def note(ctx: AgentContext[Any]) -> int:
        return int(ctx.signal.payload)

    return reactive(
        {
            "ticker": agent(run=_ticks, emits=["tick"]),
            "noter": agent(run=note, activate_on="tick", when=when, updates="last"),
        },
        state={"last": None},
        name="guarded",
    )


async def _ticks(ctx: AgentContext[Any]) -> None:
    for n in range(1, 6):
        ctx.emit("tick", n)


def _waiting(graph: Reactive) -> tuple[str, MemorySignalStore]:
    """Record ``graph`` to the point it has ticked, cut before its end."""
    store = MemorySignalStore()
    result = graph.run_sync(record=store)
    full = store.load(result.run_id)
    cut = MemorySignalStore()
    cut.start_run(full.info)
    for signal in full.signals:
        if signal.name not in ("harness:end", "harness:ending"):
            cut.append(signal)
    return result.run_id, cut


def test_a_changed_guard_that_decides_the_log_the_same_way_resumes() -> None:
    run_id, store = _waiting(_guarded("signal.payload % 2 == 1"))
    same = _guarded("signal.payload in (1, 3, 5)")  # other words, the same decisions
    result = same.resume_sync(run_id, record=store)
    assert result.status == "completed"


def test_a_changed_guard_that_decides_a_recorded_signal_otherwise_refuses() -> None:
    run_id, store = _waiting(_guarded("signal.payload % 2 == 1"))
    stricter = _guarded("signal.payload == 1")
    with pytest.raises(GraphChangedError) as caught:
        stricter.resume_sync(run_id, record=store)
    [(agent_name, why)] = caught.value.changes.items()
    assert agent_name == "noter"
    assert re.fullmatch(
        r"its guard \(when\) changed, and it activated on signal #\d+ \(tick\) where the "
        r"new guard would skip it",
        why,
    )
    looser = _guarded(lambda ctx: True)
    with pytest.raises(GraphChangedError, match=r"skipped signal #\d+ \(tick\) where the new"):
        looser.resume_sync(run_id, record=store)


def test_a_run_recorded_without_fingerprints_resumes_as_before() -> None:
    full, store = cut_before(desk(), "agent:reviewer:activated")
    old = MemorySignalStore()
    old.start_run(full.info)
    for signal in store.load(full.run_id).signals:
        if signal.name == "harness:start":
            payload = {k: v for k, v in signal.payload.items() if k != "fingerprints"}
            signal = Signal(
                signal.name, payload, id=signal.id, seq=signal.seq, run_id=signal.run_id
            )
        old.append(signal)
    result = desk(analyst="anything").resume_sync(full.run_id, record=old, provider=answers())
    assert result.status == "completed"


def test_on_change_is_fail_or_force() -> None:
    with pytest.raises(ValueError, match=r"^on_change must be 'fail' \(refuse to resume"):
        desk().run_sync(provider=answers(), on_change="maybe")  # type: ignore[arg-type]


def test_start_takes_on_change_too() -> None:
    full, store = cut_before(desk(), "agent:reviewer:activated")
    changed = desk(analyst="Analyse {{ input }} with care")

    async def resumed() -> str:
        handle = changed.start(
            resume=full.run_id, record=store, provider=answers(), on_change="force"
        )
        handle.close()
        return (await handle.result()).status

    assert asyncio.run(resumed()) == "completed"
