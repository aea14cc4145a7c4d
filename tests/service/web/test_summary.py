from __future__ import annotations

from reactor import Signal
from reactor.service import Create, Delete, Update
from reactor.service.web._summary import (
    DiffLine,
    agent_metrics,
    causal_tree,
    operation_diff,
    totals,
)


def _end(agent: str, tokens: tuple[int, int], cost: float | None) -> Signal:
    usage = {"input_tokens": tokens[0], "output_tokens": tokens[1]}
    return Signal("provider:end", {"agent": agent, "usage": usage, "cost_usd": cost})


def test_totals_add_every_calls_tokens_and_cost() -> None:
    signals = [_end("a", (10, 5), 0.25), _end("b", (1, 2), 0.5), Signal("other", 1)]
    assert totals(signals) == (18, 0.75)


def test_one_unknown_price_makes_the_cost_unknown() -> None:
    assert totals([_end("a", (10, 5), 0.25), _end("b", (1, 1), None)]) == (17, None)


def test_agent_metrics_count_each_agents_activations_and_calls() -> None:
    signals = [
        Signal("agent:a:activated"),
        _end("a", (3, 4), 0.1),
        Signal("agent:a:completed"),
        Signal("agent:b:activated"),
        Signal("agent:b:failed"),
        Signal("agent:b:skipped"),
    ]
    first, second = agent_metrics(signals)
    assert (first.agent, first.activated, first.completed, first.input_tokens) == ("a", 1, 1, 3)
    assert (first.output_tokens, first.cost_usd) == (4, 0.1)
    assert (second.agent, second.activated, second.failed, second.skipped) == ("b", 1, 1, 1)


def test_the_causal_tree_hangs_each_signal_under_its_cause_without_deltas() -> None:
    start = Signal("harness:start", id="s1", seq=1)
    child = Signal("agent:a:activated", id="s2", seq=2, caused_by="s1")
    delta = Signal("text:delta", "x", id="s3", seq=3, caused_by="s2")
    grandchild = Signal("agent:a:completed", id="s4", seq=4, caused_by="s2")
    (root,) = causal_tree([start, child, delta, grandchild])
    assert root.signal is start
    (middle,) = root.children
    assert [node.signal.name for node in middle.children] == ["agent:a:completed"]


def test_an_update_shows_what_goes_and_what_comes_and_keeps_unchanged_fields() -> None:
    lines = operation_diff(
        Update("obj_1", {"email": "a@b", "name": "Ada", "new": 1}),
        {"email": "old@b", "name": "Ada"},
    )
    assert lines == [
        DiffLine("-", 'email: "old@b"'),
        DiffLine("+", 'email: "a@b"'),
        DiffLine(" ", 'name: "Ada"'),
        DiffLine("+", "new: 1"),
    ]


def test_a_create_adds_every_field_and_a_delete_removes_them() -> None:
    assert operation_diff(Create("Company", {"name": "Acme"}), None) == [
        DiffLine("+", 'name: "Acme"')
    ]
    assert operation_diff(Delete("obj_1"), {"name": "Acme"}) == [DiffLine("-", 'name: "Acme"')]
