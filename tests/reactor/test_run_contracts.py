"""Small promises of a run: the last signal, the handle's filters and waits, prices, checks."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from reactor import (
    AgentContext,
    GraphValidationError,
    MetricsReporter,
    PromptTimeoutError,
    RunFinishedError,
    ScriptedProvider,
    Signal,
    agent,
    reactive,
)


class Exploding:
    """A reporter on every signal that raises on every one of them."""

    patterns = ("**",)

    def on_signal(self, signal: Signal) -> None:
        raise RuntimeError(f"cannot report {signal.name}")


async def test_harness_end_stays_last_when_a_subscriber_raises_on_it() -> None:
    graph = reactive({"one": agent(run=lambda ctx: 1)})
    result = await graph.run(reporters=[Exploding()])
    assert result.signals[-1].name == "harness:end"
    assert "bus:handler_error" in [s.name for s in result.signals]  # the others are said


async def test_handle_signals_filters_by_pattern_and_ends_with_the_run() -> None:
    graph = reactive({"one": agent(run=lambda ctx: 1), "two": agent(run=lambda ctx: 2)})
    handle = graph.start()
    handle.close()
    seen = [signal.name async for signal in handle.signals("agent:*:completed")]
    assert sorted(seen) == ["agent:one:completed", "agent:two:completed"]
    everything = [signal.name async for signal in handle.signals()]
    assert everything[0] == "harness:start"
    assert everything[-1] == "harness:end"
    await handle.result()


async def test_next_prompt_waits_for_a_question_and_raises_once_the_run_ends() -> None:
    async def asker(ctx: AgentContext) -> Any:
        await asyncio.sleep(0.05)
        first = await ctx.ask("First?")
        second = await ctx.ask("Second?")
        return [first, second]

    handle = reactive({"asker": agent(run=asker)}).start()
    answers = iter(["a", "b"])
    asked: list[str] = []

    async def answer_all() -> None:
        while True:  # as the docs do: until the run ends
            prompt = await handle.next_prompt(timeout=5)
            asked.append(prompt.question)
            handle.reply(prompt.prompt_id, next(answers))
            if len(asked) == 2:
                handle.close()

    with pytest.raises(RunFinishedError, match=r"^Run run_\w+ ended \(completed\) without"):
        await answer_all()
    assert asked == ["First?", "Second?"]
    assert (await handle.result()).status == "completed"


async def test_next_prompt_raises_when_the_run_fails_instead_of_hanging() -> None:
    def broken(ctx: AgentContext) -> None:
        raise ValueError("no question today")

    handle = reactive({"broken": agent(run=broken)}, fail_fast=True).start()
    with pytest.raises(RunFinishedError, match=r"ended \(failed\)"):
        await handle.next_prompt(timeout=5)
    assert (await handle.result()).status == "failed"


async def test_next_prompt_times_out_when_nothing_is_asked() -> None:
    handle = reactive({"idle": agent(run=lambda ctx: None, activate_on="go")}, external=["go"])
    running = handle.start()
    with pytest.raises(PromptTimeoutError, match=r"asked nothing within 0\.05s"):
        await running.next_prompt(timeout=0.05)
    running.close()
    await running.result()


async def test_an_unknown_price_stays_unknown_in_the_metrics() -> None:
    graph = reactive(
        {
            "priced": agent(prompt="hi", provider=ScriptedProvider(default="a", pricing=(1, 2))),
            "unpriced": agent(prompt="hi", provider=ScriptedProvider(default="b")),
        }
    )
    metrics = MetricsReporter()
    result = await graph.run(reporters=[metrics])
    assert result.metrics.cost_usd is None
    snapshot = metrics.snapshot()
    assert snapshot["agents"]["unpriced"]["cost_usd"] is None
    assert snapshot["agents"]["priced"]["cost_usd"] > 0
    assert snapshot["totals"]["cost_usd"] is None
    assert "unknown" in str(metrics)
    only_priced = await reactive(
        {"priced": agent(prompt="hi", provider=ScriptedProvider(default="a", pricing=(1, 2)))}
    ).run()
    assert only_priced.metrics.cost_usd is not None
    assert only_priced.metrics.cost_usd > 0
    assert (await reactive({"h": agent(run=lambda ctx: 1)}).run()).metrics.cost_usd == 0.0


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: reactive({"a": agent(prompt="Summarize {{ inptu }}")}),
            "Agent 'a': the prompt reads 'inptu', which is not defined (templates read "
            "state, input, signal, agent, run_id). Hint: did you mean 'input'? fix the name, "
            "or pass it in scope=.",
            id="misspelt-name",
        ),
        pytest.param(
            lambda: reactive(
                {"a": agent(prompt="Use {{ state.analysys }}", updates="analysis")},
                state={"analysis": None},
            ),
            "Agent 'a': the prompt reads state.analysys, which the state does not have "
            "(keys: analysis). Hint: did you mean 'analysis'? fix the name, add the key to "
            "the state, or declare the agent that writes it (updates=, writes=).",
            id="dict-state-key",
        ),
        pytest.param(
            lambda: reactive(
                {
                    "a": agent(run=lambda ctx: 1, updates="analysis"),
                    "b": agent(run=lambda ctx: 2, activate_on="state:analysys:changed"),
                },
                state={"notes": []},
            ),
            "Agent 'b' activates on 'state:analysys:changed', but the state has no key "
            "'analysys' and no agent writes it (keys: notes, analysis), so it would never "
            "run. Hint: did you mean 'analysis'? fix the key, or declare the agent that "
            "writes it (updates=, writes=).",
            id="activate-on-unwritten-key",
        ),
    ],
)
def test_build_time_checks_catch_misspelt_names(build: Any, message: str) -> None:
    with pytest.raises(GraphValidationError) as caught:
        build()
    assert list(caught.value.problems) == [message]


def test_names_a_run_may_give_in_scope_and_written_keys_build() -> None:
    reactive({"a": agent(prompt="Hello {{ customer }}")})  # scope= may define it per run
    reactive(
        {
            "a": agent(run=lambda ctx: 1, writes=["late"]),
            "b": agent(prompt="{{ state.late }}", activate_on="state:late:changed"),
        },
        state={},
    )
    with pytest.raises(GraphValidationError, match=re.escape("did you mean 'customer'?")):
        reactive({"a": agent(prompt="Hello {{ custmer }}")}, scope={"customer": "Ann"})
