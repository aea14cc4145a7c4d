"""Budgets: a model call that would start over a run's or an agent's budget is not made."""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

from reactor import (
    Budget,
    BudgetExceededError,
    CycleWarning,
    MemorySignalStore,
    ScriptedProvider,
    agent,
    reactive,
)
from reactor._agents.budget import dollars

PRICED = (3.0, 15.0)  # USD per million input / output tokens


def chatty(calls: int = 5, **options: Any) -> Any:
    """One agent that asks the model ``calls`` times in a row (a self-loop)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CycleWarning)  # the loop is the point
        return _chatty(calls, **options)


def _chatty(calls: int, **options: Any) -> Any:
    return reactive(
        agents={
            "writer": agent(
                prompt="Write part {{ signal.payload or 0 }}.",
                activate_on=["harness:start", "part:done"],
                emits=["part:done"],
                max_activations=calls,
                **options,
            )
        },
        max_depth=None,
    )


async def test_model_calls_stop_at_the_runs_budget_and_the_run_fails() -> None:
    provider = ScriptedProvider({"writer": ["one", "two", "three", "four"]})
    result = await chatty().run(provider=provider, budget=Budget(model_calls=2))
    assert result.status == "failed"
    assert isinstance(result.error, BudgetExceededError)
    assert len(result.select("provider:start")) == 2  # the third call was not made
    assert str(result.error) == (
        "The run's budget allows 2 model call(s), and 2 were made: agent 'writer' was not "
        "allowed another. Raise the budget if the run should go on."
    )
    assert (result.error.budget, result.error.limit, result.error.spent) == ("model_calls", 2, 2)
    assert (result.error.agent, result.error.scope) == ("writer", "run")


async def test_a_budget_stops_the_run_even_without_fail_fast() -> None:
    provider = ScriptedProvider({"writer": ["one", "two", "three"]})
    result = await chatty().run(provider=provider, budget=Budget(model_calls=1), fail_fast=False)
    assert result.status == "failed"
    assert isinstance(result.error, BudgetExceededError)


async def test_tokens_are_checked_before_each_call() -> None:
    provider = ScriptedProvider({"writer": ["x" * 400] * 5})
    result = await chatty().run(provider=provider, budget=Budget(output_tokens=150))
    assert isinstance(result.error, BudgetExceededError)
    assert result.error.budget == "output_tokens"
    spent = result.metrics.output_tokens
    assert spent >= 150
    assert result.error.spent == spent  # the call that crossed it finished; none after it
    assert re.match(
        r"^The run's budget of 150 output tokens is spent \(\d+ used\)", str(result.error)
    )


async def test_dollars_are_checked_against_the_priced_cost() -> None:
    provider = ScriptedProvider({"writer": ["x" * 4000] * 5}, pricing=PRICED)
    result = await chatty().run(provider=provider, budget=Budget(usd=0.001))
    assert isinstance(result.error, BudgetExceededError)
    assert result.error.budget == "usd"
    assert result.metrics.cost_usd is not None
    assert result.metrics.cost_usd >= 0.001
    assert result.error.spent == result.metrics.cost_usd
    assert str(result.error).startswith(
        f"The run's budget of $0.001 is spent ({dollars(result.metrics.cost_usd)} so far): agent "
        "'writer' was not allowed another model call."
    )


async def test_an_unknown_price_counts_as_over_a_usd_budget() -> None:
    provider = ScriptedProvider({"writer": ["fine"]})  # no pricing: costs are unknown
    result = await chatty(1).run(provider=provider, budget=Budget(usd=5))
    assert result.status == "failed"
    assert result.select("provider:start") == []  # not even the first call
    assert isinstance(result.error, BudgetExceededError)
    assert result.error.spent is None
    assert "is unknown (no price)" in str(result.error)
    assert "an unknown cost counts as over a USD budget" in str(result.error)


async def test_an_agents_own_budget_bounds_only_its_calls() -> None:
    graph = reactive(
        agents={
            "cheap": agent(prompt="Hi.", budget=Budget(model_calls=1), emits=["hi:done"]),
            "again": agent(prompt="Again.", activate_on="hi:done", emits=["again:done"]),
            "cheap_again": agent(run=lambda ctx: None, activate_on="again:done"),
        }
    )
    provider = ScriptedProvider({"cheap": ["hello"], "again": ["ok"]})
    result = await graph.run(provider=provider)
    assert result.status == "completed"  # one call each: within the budget

    looping = chatty(3, budget=Budget(model_calls=2))
    result = await looping.run(provider=ScriptedProvider({"writer": ["a", "b", "c"]}))
    assert isinstance(result.error, BudgetExceededError)
    assert (result.error.scope, result.error.agent) == ("agent", "writer")
    assert str(result.error).startswith("The budget of agent 'writer' allows 2 model call(s)")


async def test_an_agents_spent_budget_names_the_agent_and_the_amount() -> None:
    provider = ScriptedProvider({"writer": ["x" * 400] * 5})
    result = await chatty(budget=Budget(output_tokens=150)).run(provider=provider)
    assert isinstance(result.error, BudgetExceededError)
    assert re.match(
        r"^The budget of agent 'writer' \(150 output tokens\) is spent \(\d+ used\): agent "
        r"'writer' was not allowed another model call\. Raise the budget if the run should go "
        r"on\.$",
        str(result.error),
    )


@pytest.mark.filterwarnings("ignore::reactor.CycleWarning")
@pytest.mark.parametrize("snapshot_every", [None, 3], ids=["whole-log", "from-a-snapshot"])
async def test_a_resumed_run_counts_what_it_spent_before(snapshot_every: int | None) -> None:
    graph = reactive(
        agents={
            "writer": agent(
                prompt="Draft.", activate_on=["harness:start", "go:on"], emits=["draft:done"]
            ),
            "gate": agent(ask="Go on?", choices=["yes"], activate_on="draft:done", emits=["go:on"]),
        }
    )
    store = MemorySignalStore(snapshot_every=snapshot_every)
    provider = ScriptedProvider({"writer": ["first", "second"]})
    handle = graph.start(provider=provider, record=store, budget=Budget(model_calls=1))
    asked = await handle.next_prompt()
    await handle.suspend()  # the process goes away; the log holds one model call
    resumed = graph.start(
        resume=handle.run_id, record=store, provider=provider, budget=Budget(model_calls=1)
    )
    resumed.reply(asked.prompt_id, "yes")
    result = await resumed.result()
    assert result.status == "failed"
    assert isinstance(result.error, BudgetExceededError)
    assert result.error.spent == 1
    assert len(store.load(handle.run_id).select("provider:start")) == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [("usd", -1), ("model_calls", "3"), ("input_tokens", True)],
)
def test_a_budget_is_made_of_numbers(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^Budget\({field}=\.\.\.\) must be a number >= 0"):
        Budget(**{field: value})


def test_a_run_budget_must_be_a_budget() -> None:
    with pytest.raises(TypeError, match=r"^budget must be a Budget"):
        chatty().run_sync(budget={"usd": 1})


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        pytest.param(5, "$5.00", id="dollars"),
        pytest.param(1234.5, "$1,234.50", id="thousands"),
        pytest.param(0.5, "$0.50", id="cents"),
        pytest.param(0.0157, "$0.0157", id="a-fraction-of-a-cent"),
        pytest.param(1e-07, "$0.0000001", id="never-an-exponent"),
        pytest.param(0, "$0.00", id="nothing"),
    ],
)
def test_amounts_are_written_as_people_write_dollars(amount: float, shown: str) -> None:
    assert dollars(amount) == shown
