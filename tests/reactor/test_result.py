from __future__ import annotations

import dataclasses

import pytest

from reactor import RunResult, ScriptedProvider, Signal, agent, reactive
from reactor._engine.result import find_cycle


def trade_run() -> RunResult:
    graph = reactive(
        {
            "analyst": agent(prompt="go", emits=["analysis:complete"]),
            "trader": agent(run=lambda ctx: "buy", activate_on="analysis:complete"),
        },
        name="bot",
    )
    return graph.run_sync(provider=ScriptedProvider({"analyst": ["up"]}))


def test_tree_shows_causality_without_deltas() -> None:
    result = trade_run()
    lines = [line.split("  [")[0] for line in result.tree().splitlines()]
    assert lines == [
        "harness:start",
        "└── agent:analyst:activated",
        "    ├── provider:start",
        "    ├── text:complete",
        "    ├── provider:end",
        "    ├── analysis:complete",
        "    │   └── agent:trader:activated",
        "    │       └── agent:trader:completed",
        "    └── agent:analyst:completed",
        "harness:end",
    ]
    assert "text:delta" in result.tree(exclude=())


def test_tree_can_show_payloads() -> None:
    assert "'trigger': 'harness:start'" in trade_run().tree(payloads=True)


def test_causal_chain_runs_from_the_root_to_the_signal() -> None:
    result = trade_run()
    completed = result.select("agent:trader:completed")[0]
    chain = result.causal_chain(completed.id)
    assert [s.name for s in chain] == [
        "harness:start",
        "agent:analyst:activated",
        "analysis:complete",
        "agent:trader:activated",
        "agent:trader:completed",
    ]
    with pytest.raises(KeyError, match="No signal with id 'nope'"):
        result.causal_chain("nope")


def test_result_mermaid_draws_activations_and_their_triggers() -> None:
    assert trade_run().to_mermaid().splitlines() == [
        "flowchart TD",
        '  harness_start(["harness:start"])',
        '  analyst_1["analyst #1"]',
        '  harness_start -->|"harness:start"| analyst_1',
        '  trader_1["trader #1"]',
        '  analyst_1 -->|"analysis:complete"| trader_1',
    ]


def test_result_basics() -> None:
    result = trade_run()
    assert result.ok
    assert result.graph == "bot"
    assert result.reason == "quiescence: nothing left to do"
    assert result.run_id.startswith("run_")
    assert all(s.run_id == result.run_id for s in result.signals)
    assert [s.seq for s in result.signals] == list(range(1, len(result.signals) + 1))


def test_a_result_has_every_field_and_stays_frozen() -> None:
    result = trade_run()
    assert set(vars(result)) >= {field.name for field in dataclasses.fields(RunResult)}
    assert set(vars(result.metrics)) == {field.name for field in dataclasses.fields(result.metrics)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "failed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.metrics.activations = 0  # type: ignore[misc]


def _chain(*items: str) -> list[Signal]:
    """Build a causal chain from names; agents as 'agent:<name>:activated'."""
    signals: list[Signal] = []
    for index, name in enumerate(items):
        parent = signals[-1].id if signals else None
        signals.append(Signal(name, id=f"s{index}", caused_by=parent))
    return signals


def test_find_cycle_spells_the_repeating_loop_from_where_it_started() -> None:
    chain = _chain(
        "harness:start",
        "agent:a:activated",
        "ping",
        "agent:b:activated",
        "pong",
        "agent:a:activated",
        "ping",
        "agent:b:activated",
        "pong",
    )
    assert find_cycle(chain, "a") == ("a", "ping", "b", "pong", "a")
    assert find_cycle(chain[:5], "a") == ()
