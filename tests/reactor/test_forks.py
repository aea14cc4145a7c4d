"""A fork keeps the edit: what was in flight settles from the log, then the edit, then new work."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import MemorySignalStore, Provider, Recording, ScriptedProvider, agent, reactive

DESK = reactive(
    {
        "analyst": agent(prompt="How risky is {{ input }}?", updates="risk"),
        "trader": agent(
            ask="Buy {{ 10 if state.risk == 'high' else 5 }}?",
            choices=["yes", "no"],
            activate_on="state:risk:changed",
            when="state.risk is not none",
            updates="decision",
        ),
    },
    state={"risk": None, "decision": None},
    name="desk",
)


def _provider() -> ScriptedProvider:
    return ScriptedProvider({"analyst": ["low"]})


async def _recorded(store: MemorySignalStore) -> Recording:
    handle = DESK.start(input="NVDA", keep_open=False, provider=_provider(), record=store)
    prompt = await handle.next_prompt(timeout=30)
    assert prompt.question == "Buy 5?"
    handle.reply(prompt.prompt_id, "yes", source="user:bob")
    result = await handle.result()
    assert result.status == "completed"
    return store.load(result.run_id)


def _seq(recording: Recording, name: str) -> int:
    return next(signal.seq for signal in recording.signals if signal.name == name)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("state:risk:changed", id="at-a-state-change"),
        pytest.param("provider:end", id="at-the-answer-that-wrote-it"),
        pytest.param("agent:analyst:completed", id="after-the-writer-completed"),
    ],
)
async def test_a_fork_with_an_edit_asks_once_and_keeps_the_edited_value(name: str) -> None:
    store = MemorySignalStore()
    recorded = await _recorded(store)
    calls = _provider()
    handle = DESK.start(
        fork={"run_id": recorded.run_id, "at": _seq(recorded, name), "state": {"risk": "high"}},
        keep_open=False,
        provider=calls,
        record=store,
    )
    prompt = await handle.next_prompt(timeout=30)
    assert prompt.question == "Buy 10?"  # the trader saw the edit
    handle.reply(prompt.prompt_id, "no")
    result = await handle.result()
    assert result.status == "completed"
    assert result.state == {"risk": "high", "decision": "no"}
    forked = store.load(result.run_id)
    begun = _seq(forked, "harness:forked")
    asked = [s.payload["question"] for s in forked.signals if s.name == "session:prompt"]
    assert asked[-1:] == ["Buy 10?"]
    assert len([s for s in forked.signals if s.seq > begun and s.name == "session:prompt"]) == 1
    written = [
        (s.payload["actor"], s.payload["new"]) for s in forked.signals
        if s.seq > begun and s.name == "state:risk:changed"
    ]  # fmt: skip
    assert written[-1] == ("user", "high")  # nothing that began before the fork wrote after it
    assert calls.requests == []  # the past is answered from the log


async def test_a_fork_settles_what_was_in_flight_from_the_log_without_asking_the_model() -> None:
    store = MemorySignalStore()
    recorded = await _recorded(store)
    at = _seq(recorded, "provider:start")  # the analyst had asked its model, not heard back

    class Refusing(Provider):
        model = "refusing"

        def stream(self, request: Any) -> Any:
            raise AssertionError("the fork asked the model again")

    handle = DESK.start(
        fork={"run_id": recorded.run_id, "at": at, "state": {"risk": "high"}},
        keep_open=False,
        provider=Refusing(),
        record=store,
    )
    prompt = await handle.next_prompt(timeout=30)
    assert prompt.question == "Buy 10?"
    handle.reply(prompt.prompt_id, "yes")
    result = await handle.result()
    assert result.state == {"risk": "high", "decision": "yes"}
