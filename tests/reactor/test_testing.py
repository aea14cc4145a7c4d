from __future__ import annotations

import asyncio

import pytest

from reactor import Reactive, agent, reactive
from reactor.testing import (
    FakeAnthropic,
    ScriptedProvider,
    assert_signals,
    capture_signals,
    fake_anthropic,
    signal_names,
    turn,
)

pytest_plugins = ["pytester"]


def pair() -> Reactive:
    return reactive(
        {
            "a": agent(prompt="Hello {{ input }}", updates="a"),
            "b": agent(run=lambda ctx: ctx.state.a.upper(), activate_on="state:a:changed"),
        },
        state={"a": None},
        name="pair",
    )


async def test_capture_collects_every_run_started_inside_it_tasks_included() -> None:
    provider = ScriptedProvider({"a": ["x", "y", "z"]})
    outside = await pair().run(input=0, provider=provider)
    with capture_signals() as captured:
        first = await pair().run(input=1, provider=provider)
        second = asyncio.create_task(pair().run(input=2, provider=provider))
        await second
    assert captured.run_ids == [first.run_id, second.result().run_id]
    assert outside.run_id not in captured.run_ids
    assert captured.of_run(first.run_id) == list(first.signals)
    assert len(captured) == len(first.signals) + len(second.result().signals)
    assert [s.payload["output"] for s in captured.select("agent:b:completed")] == ["Y", "Z"]


def test_capture_sees_runs_of_run_sync() -> None:
    with capture_signals() as captured:
        result = pair().run_sync(input=1, provider=ScriptedProvider({"a": ["x"]}))
    assert captured.names() == signal_names(result)
    assert "text:delta" in captured.names(deltas=True)
    assert "text:delta" not in captured.names()


def test_assert_signals_checks_order_not_the_whole_log() -> None:
    result = pair().run_sync(input=1, provider=ScriptedProvider({"a": ["x"]}))
    assert_signals(result, ["harness:start", "agent:a:completed", "agent:b:*", "harness:end"])
    with pytest.raises(AssertionError, match=r"^No signal matching 'agent:a:\*' after "):
        assert_signals(result.signals, ["agent:b:completed", "agent:a:*"])
    with pytest.raises(AssertionError, match=r"The signals were:\n +1 harness:start\n"):
        assert_signals(result, ["agent:c:completed"])


async def test_fake_anthropic_answers_through_the_real_sdk() -> None:
    endpoint = FakeAnthropic("The trend is up.")
    result = await pair().run(input="AAPL", provider=fake_anthropic(endpoint))
    assert result.state["a"] == "The trend is up."
    assert endpoint.bodies[0]["messages"] == [{"role": "user", "content": "Hello AAPL"}]
    await endpoint.aclose()


async def test_fake_anthropic_takes_a_list_or_a_brain() -> None:
    listed = fake_anthropic(["one", turn("two")])
    first = await pair().run(input=1, provider=listed)
    second = await pair().run(input=2, provider=listed)
    assert (first.state["a"], second.state["a"]) == ("one", "two")
    brain = fake_anthropic(lambda body: f"echo {body['messages'][0]['content']}")
    echoed = await pair().run(input=3, provider=brain)
    assert echoed.state["a"] == "echo Hello 3"


def test_the_pytest_plugin_offers_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from reactor import agent, reactive

        graph = reactive({"a": agent(prompt="hi", updates="a")}, state={"a": None})

        def test_scripted(scripted_provider, reactor_signals):
            result = graph.run_sync(provider=scripted_provider({"a": ["yo"]}))
            assert result.state["a"] == "yo"
            assert reactor_signals.run_ids == [result.run_id]

        def test_fake(fake_anthropic):
            result = graph.run_sync(provider=fake_anthropic("hello"))
            assert result.state["a"] == "hello"
        """
    )
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    outcome.assert_outcomes(passed=2)
