from __future__ import annotations

import pytest

from reactor import Signal
from reactor.service import Create, Delete, Update
from reactor.service.web._summary import (
    Answer,
    DiffLine,
    active_agents,
    agent_metrics,
    answered_prompts,
    causal_tree,
    label,
    operation_diff,
)


def _end(agent: str, tokens: tuple[int, int], cost: float | None) -> Signal:
    usage = {"input_tokens": tokens[0], "output_tokens": tokens[1]}
    return Signal("provider:end", {"agent": agent, "usage": usage, "cost_usd": cost})


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


def _prompt(prompt_id: str, seq: int, caused_by: str = "s2") -> Signal:
    payload = {"prompt_id": prompt_id, "agent": "approve", "question": "Ship?", "choices": ["y"]}
    return Signal("session:prompt", payload, id=f"p{seq}", seq=seq, caused_by=caused_by)


def test_a_reply_hangs_under_the_prompt_it_answers() -> None:
    start = Signal("harness:start", id="s1", seq=1)
    asked = Signal("agent:approve:activated", id="s2", seq=2, caused_by="s1")
    prompt = _prompt("prompt_3", 3)
    answer = {"prompt_id": "prompt_3", "answer": "y"}
    reply = Signal("session:reply", answer, id="s4", seq=4, source="user:bob")
    (root,) = causal_tree([start, asked, prompt, reply])
    (activation,) = root.children
    (shown_prompt,) = activation.children
    assert [node.signal for node in shown_prompt.children] == [reply]


def test_a_reply_to_no_known_prompt_stays_a_root() -> None:
    reply = Signal("session:reply", {"prompt_id": "gone", "answer": "y"}, id="s1", seq=1)
    assert [node.signal for node in causal_tree([reply])] == [reply]


def test_an_agent_is_active_from_its_activation_until_it_finishes() -> None:
    signals = [
        Signal("harness:start"),
        Signal("agent:a:activated"),
        Signal("agent:b:activated"),
        Signal("agent:b:activated"),
        Signal("agent:c:activated"),
    ]
    assert active_agents(signals) == {"a", "b", "c"}
    signals += [Signal("agent:a:completed"), Signal("agent:b:failed"), Signal("agent:c:cancelled")]
    assert active_agents(signals) == {"b"}
    assert active_agents([*signals, Signal("harness:end")]) == set()


def test_answered_prompts_say_who_answered_and_what() -> None:
    reply = Signal("session:reply", {"prompt_id": "p1", "answer": "y"}, seq=5, source="user:bob")
    timeout = Signal("session:timeout", {"prompt_id": "p2"}, seq=6)
    answered = answered_prompts(
        [_prompt("p1", 1), _prompt("p2", 2), _prompt("p3", 3), reply, timeout]
    )
    assert answered == [
        Answer("p1", "Ship?", "approve", "y", "user:bob", 5),
        Answer("p2", "Ship?", "approve", None, None, 6),
    ]


@pytest.mark.parametrize(
    ("tags", "given", "expected"),
    [
        pytest.param({"desk": "fx", "service": "graph:g"}, {"a": 1}, "desk=fx", id="own-tags"),
        pytest.param({"nightly": ""}, None, "nightly", id="bare-tag"),
        pytest.param(
            {"reaction": "enrich", "object": "obj_1", "event": "object:Person:created"},
            {"id": "obj_1"},
            "Person obj_1, created",
            id="reaction",
        ),
        pytest.param(
            {"reaction": "price", "object": "obj_2", "event": "object:Quote:updated"},
            {"id": "obj_2", "type": "Quote", "version": 3, "data": {"symbol": "NVDA"}},
            "Quote NVDA, updated (v3)",
            id="reaction-titled",
        ),
        pytest.param(
            {"service": "graph:g", "trigger": "api", "user": "bob"},
            {"symbol": "NVDA", "qty": 10, "limits": [1, 2], "one": [3], "risk": {"max": 1}},
            "symbol=NVDA, qty=10, limits=[2 items], one=[1 item], risk={…}",
            id="input-object",
        ),
        pytest.param({}, "v3", "v3", id="input-text"),
        pytest.param({}, ["a", 1], '["a",1]', id="input-list"),
        pytest.param({}, None, "", id="nothing"),
        pytest.param({}, "x" * 200, "x" * 79 + "…", id="shortened"),
    ],
)
def test_a_runs_label_is_its_own_tags_or_its_input(
    tags: dict[str, str], given: object, expected: str
) -> None:
    assert label(tags, given) == expected
