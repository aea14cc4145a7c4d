"""Recorded runs as a regression suite: ``graph.evaluate`` and its report."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import structlog
import structlog.testing

from reactor import (
    AgentContext,
    EvalReport,
    MemorySignalStore,
    Reactive,
    SQLiteSignalStore,
    ToolContext,
    agent,
    reactive,
    tool,
)
from reactor.eval import cost_within, decision_kept, state_equal
from reactor.testing import FakeAnthropic, ToolUse, fake_anthropic, turn

TRENDS = {"AAPL": "up", "MSFT": "down", "NVDA": "up"}


def desk(analyst: str = "Is {{ input.symbol }} trending up or down? One word.") -> Reactive:
    """A desk: an analyst (a model) reads the trend, a trader (code) decides on it."""
    return reactive(
        {
            "analyst": agent(prompt=analyst, updates="trend"),
            "trader": agent(
                run=lambda ctx: "buy" if ctx.state["trend"] == "up" else "hold",
                activate_on="state:trend:changed",
                updates="decision",
            ),
        },
        state={"trend": None, "decision": None},
        name="desk",
    )


def market(body: dict[str, Any]) -> Any:
    """The model: the trend of the symbol its prompt names (a pessimist's, if asked so)."""
    prompt = json.dumps(body["messages"])
    symbol = next(symbol for symbol in TRENDS if symbol in prompt)
    trend = "down" if "pessimist" in prompt else TRENDS[symbol]
    return turn(trend, input_tokens=20, output_tokens=2)


def recorded(store: Any, graph: Reactive | None = None) -> list[str]:
    """One recorded run of the desk per symbol; their ids."""
    graph = graph or desk()
    provider = fake_anthropic(market)
    ids = []
    for symbol in TRENDS:
        result = graph.run_sync(input={"symbol": symbol}, provider=provider, record=store)
        assert result.status == "completed", result.error
        ids.append(result.run_id)
    return ids


def test_an_unchanged_graph_evaluates_same_with_no_model_call() -> None:
    store = MemorySignalStore()
    ids = recorded(store)
    endpoint = FakeAnthropic()  # no reply: any call it got would fail the case
    report = desk().evaluate_sync(ids, store=store, provider=endpoint.provider())
    assert [case.status for case in report.cases] == ["same"] * 3
    assert report.passed
    assert endpoint.requests == []
    assert [case.run_id for case in report.cases] == ids
    for case in report.cases:
        assert case.divergence is None
        assert case.state_diff == {}
        assert case.tokens == (22, 22)  # what the graph spends live, answered from the log
        assert case.model_calls == 0
        assert case.new_run_id is not None
        new = store.info(case.new_run_id)
        assert new is not None
        assert new.tags == {"eval": report.id, "eval_of": case.run_id}
    assert report.summary()["same"] == 3
    assert report.summary()["model_calls"] == 0
    assert {info.run_id for info in store.runs(tag=f"eval={report.id}")} == {
        case.new_run_id for case in report.cases
    }


def test_a_changed_prompt_without_a_provider_diverges_at_the_agent_that_asks() -> None:
    store = MemorySignalStore()
    ids = recorded(store)
    changed = desk("As a pessimist: is {{ input.symbol }} trending up or down? One word.")
    with structlog.testing.capture_logs() as logged:
        report = changed.evaluate_sync(ids, store=store)
    assert [line["event"] for line in logged if line["event"] == "agent failed"] == []  # reported
    assert [case.status for case in report.cases] == ["diverged"] * 3
    assert not report.passed
    case = report.cases[0]
    assert case.agent == "analyst"
    assert case.field is not None
    assert case.field.startswith("messages")
    assert case.error is not None
    assert "ReplayMismatchError" in case.error


def test_a_changed_prompt_with_a_provider_shows_the_flipped_decisions() -> None:
    store = MemorySignalStore()
    ids = recorded(store)
    changed = desk("As a pessimist: is {{ input.symbol }} trending up or down? One word.")
    endpoint = FakeAnthropic(brain=market)
    report = changed.evaluate_sync(
        ids,
        store=store,
        provider=endpoint.provider(),
        scorers=[decision_kept("decision"), cost_within(1.5)],
    )
    by_run = {case.run_id: case for case in report.cases}
    aapl, msft, nvda = (by_run[run_id] for run_id in ids)
    assert len(endpoint.requests) == 3  # each changed request went to the model
    assert msft.status == "changed"
    assert msft.passed
    assert msft.scores == {"decision_kept('decision')": True, "cost_within(1.5)": True}
    for flipped in (aapl, nvda):
        assert flipped.status == "changed"
        assert not flipped.passed
        assert flipped.scores["decision_kept('decision')"] is False
        assert flipped.state_diff == {"trend": ("up", "down"), "decision": ("buy", "hold")}
        assert flipped.agent == "analyst"
        assert flipped.field == "messages[0].content"  # the request's field that changed
        assert flipped.seq is not None
        assert flipped.tokens == (22, 22)
        assert flipped.model_calls == 1
    assert not report.passed
    assert report.summary()["changed"] == 3
    assert report.summary()["failed_cases"] == 2


BROKER: list[str] = []


@tool
def place_order(symbol: str, shares: int, call: ToolContext) -> str:
    """Buy shares of a stock."""
    BROKER.append(f"{shares} {symbol}")
    return f"order {len(BROKER)}: {shares} {symbol}"


def broker(instructions: str = "Buy 5 {{ input.symbol }}.") -> Reactive:
    return reactive(
        {"broker": agent(prompt=instructions, tools=[place_order], updates="done")},
        state={"done": None},
        name="broker",
    )


def buys(shares: int) -> Any:
    """A model that places one order of ``shares``, then says it is done."""

    def brain(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "user" and isinstance(
            body["messages"][-1]["content"], list
        ):
            results = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
            if results:
                return turn(f"Done: {results[0]['content']}")
        return turn(ToolUse("t1", "place_order", {"symbol": "AAPL", "shares": shares}))

    return brain


def test_a_tool_with_a_side_effect_is_not_called_again() -> None:
    BROKER.clear()
    store = MemorySignalStore()
    first = broker().run_sync(
        input={"symbol": "AAPL"}, provider=fake_anthropic(buys(5)), record=store
    )
    assert first.status == "completed"
    assert BROKER == ["5 AAPL"]
    changed = broker("Buy 5 {{ input.symbol }}, and say so politely.")

    same_call = changed.evaluate_sync([first.run_id], store=store, provider=fake_anthropic(buys(5)))
    [case] = same_call.cases
    assert case.status == "changed", case.error
    assert BROKER == ["5 AAPL"]  # the recorded result answered the same call
    assert case.model_calls == 2
    assert case.state_diff == {}
    new = store.load(str(case.new_run_id))
    assert new.state["done"] == "Done: order 1: 5 AAPL"

    other_call = changed.evaluate_sync(
        [first.run_id], store=store, provider=fake_anthropic(buys(9))
    )
    [case] = other_call.cases
    assert case.status == "failed"
    assert not case.passed
    assert case.error is not None
    assert "ToolNotRecordedError" in case.error
    assert "place_order" in case.error
    assert BROKER == ["5 AAPL"]  # never placed

    live = changed.evaluate_sync(
        [first.run_id], store=store, provider=fake_anthropic(buys(9)), live_tools=["place_order"]
    )
    assert live.cases[0].status == "changed"
    assert BROKER == ["5 AAPL", "9 AAPL"]  # asked for: the tool ran


async def ask_first(ctx: AgentContext[Any]) -> str:
    answer: str = await ctx.ask("Buy 5 shares?", choices=["yes", "no"])
    return answer


def test_a_run_that_asked_a_person_evaluates_offline(tmp_path: Path) -> None:
    graph = reactive(
        {
            "order": agent(run=ask_first, updates="approved"),
            "analyst": agent(
                prompt="Approved: {{ state.approved }}. Say ok.",
                activate_on="state:approved:changed",
                updates="note",
            ),
        },
        state={"approved": None, "note": None},
        name="asking",
    )

    async def answered(store: SQLiteSignalStore) -> str:
        handle = graph.start(keep_open=False, record=store, provider=fake_anthropic("ok"))
        prompt = await handle.next_prompt(timeout=30)
        handle.reply(prompt.prompt_id, "yes", source="user:bob")
        result = await handle.result()
        assert result.status == "completed", result.error
        return result.run_id

    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        run_id = asyncio.run(answered(store))

        async def evaluated() -> EvalReport:  # nobody is there to answer: it must not wait
            return await asyncio.wait_for(graph.evaluate([run_id], store=store), timeout=60)

        report = asyncio.run(evaluated())
    [case] = report.cases
    assert case.status == "same", case.error
    assert case.passed


def test_runs_are_given_as_recordings_run_infos_or_a_filter() -> None:
    store = MemorySignalStore()
    ids = recorded(store)
    graph = desk()
    by_recording = graph.evaluate_sync([store.load(ids[0])], store=store)
    assert [case.run_id for case in by_recording.cases] == [ids[0]]
    by_filter = graph.evaluate_sync({"graph": "desk", "status": "completed"}, store=store)
    assert sorted(case.run_id for case in by_filter.cases) == sorted(ids)  # not eval's runs
    made = graph.evaluate_sync({"tag": f"eval={by_filter.id}"}, store=store)
    assert len(made.cases) == 3  # unless they are asked for
    by_infos = graph.evaluate_sync(store.runs(graph="desk", limit=2), store=store)
    assert len(by_infos.cases) == 2
    by_prefix = graph.evaluate_sync(ids[1][:24], store=store)
    assert [case.run_id for case in by_prefix.cases] == [ids[1]]


def test_evaluate_says_what_is_wrong_with_its_arguments() -> None:
    store = MemorySignalStore()
    ids = recorded(store)
    graph = desk()
    with pytest.raises(ValueError, match="no runs"):
        graph.evaluate_sync([], store=store)
    with pytest.raises(ValueError, match="concurrency"):
        graph.evaluate_sync(ids, store=store, concurrency=0)
    with pytest.raises(TypeError, match="run ids, Recordings"):
        graph.evaluate_sync([42], store=store)  # type: ignore[list-item]
    with pytest.raises(LookupError):
        graph.evaluate_sync(["run_nothere"], store=store)

    async def inside() -> None:
        graph.evaluate_sync(ids, store=store)

    with pytest.raises(RuntimeError, match=r"await graph\.evaluate"):
        asyncio.run(inside())


def test_scorers_are_any_callable_and_one_that_raises_fails_its_case() -> None:
    store = MemorySignalStore()
    ids = recorded(store)

    def bought(old: Any, new: Any) -> bool:
        return bool(new.state["decision"] == "buy")

    def broken(old: Any, new: Any) -> bool:
        raise KeyError("missing")

    report = desk().evaluate_sync(ids, store=store, scorers=[bought, state_equal("trend")])
    outcome = {case.run_id: case.passed for case in report.cases}
    assert outcome == {ids[0]: True, ids[1]: False, ids[2]: True}
    broke = desk().evaluate_sync(ids[:1], store=store, scorers=[broken])
    [case] = broke.cases
    assert not case.passed
    assert any("broken raised KeyError" in name for name in case.scores)


def test_the_report_goes_to_json_junit_and_a_table(tmp_path: Path) -> None:
    store = MemorySignalStore()
    ids = recorded(store)
    changed = desk("As a pessimist: is {{ input.symbol }} trending up or down? One word.")
    report = changed.evaluate_sync(
        ids, store=store, provider=fake_anthropic(market), scorers=[decision_kept("decision")]
    )
    data = json.loads(report.to_json())
    assert data["summary"]["cases"] == 3
    assert data["summary"]["passed"] == 1
    assert data["summary"]["cost_usd"]["old"] == data["summary"]["cost_usd"]["new"]
    flipped = next(case for case in data["cases"] if case["run_id"] == ids[0])
    assert flipped["state_diff"]["decision"] == {"old": "buy", "new": "hold"}
    assert flipped["divergence"]

    junit = tmp_path / "eval.xml"
    report.to_junit_xml(junit)
    suite = ElementTree.parse(junit).getroot()
    assert (suite.tag, suite.get("tests"), suite.get("failures")) == ("testsuite", "3", "2")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == set(ids)
    assert cases[ids[1]].find("failure") is None
    failure = cases[ids[0]].find("failure")
    assert failure is not None
    assert "decision_kept" in (failure.get("message") or "")

    text = str(report)
    assert ids[0] in text
    assert "changed" in text
    assert "1 passed" in text
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(report)
    assert ids[0] in console.export_text()
    marked = dataclasses.replace(report.cases[0], error="[bold]x[/bold]\x1b[2J", status="failed")
    console = Console(width=200, record=True)
    console.print(dataclasses.replace(report, cases=(marked,)))
    assert "[bold]x[/bold]" in console.export_text()  # text from a log is never markup
    assert "\x1b" not in console.export_text()


def test_evaluating_runs_stored_in_sqlite_records_the_new_runs_beside_them(
    tmp_path: Path,
) -> None:
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        ids = recorded(store)
        report = desk().evaluate_sync(ids, store=store, concurrency=2)
        assert report.passed
        new_ids = [case.new_run_id for case in report.cases]
        assert all(new_id is not None for new_id in new_ids)
        assert {info.run_id for info in store.runs(tag=f"eval={report.id}")} == set(new_ids)
        assert store.load(ids[0]).diff(store.load(str(new_ids[0]))) is None


def test_scorers_read_dotted_paths_into_the_state() -> None:
    store = MemorySignalStore()
    graph = reactive(
        {
            "trader": agent(
                run=lambda ctx: {"action": "buy", "why": f"run {ctx.input}"},
                updates="proposal",
            )
        },
        state={"proposal": None},
        name="dotted",
    )
    recorded_run = graph.run_sync(input=1, record=store)
    changed = reactive(
        {
            "trader": agent(
                run=lambda ctx: {"action": "buy", "why": "another reason"}, updates="proposal"
            )
        },
        state={"proposal": None},
        name="dotted",
    )
    report = changed.evaluate_sync(
        [recorded_run.run_id],
        store=store,
        scorers=[decision_kept("proposal.action"), state_equal("proposal.why")],
    )
    [case] = report.cases
    assert case.status == "changed"
    assert case.scores == {
        "decision_kept('proposal.action')": True,
        "state_equal('proposal.why')": False,
    }
