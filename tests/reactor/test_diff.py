from __future__ import annotations

from pathlib import Path

from reactor import (
    MemorySignalStore,
    Reactive,
    Recording,
    ScriptedProvider,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor.typing import Provider
from tests.reactor.cli_support import reactor_cli


def join_graph(prompt: str = "Say something about {{ input }}.") -> Reactive:
    return reactive(
        {
            "a": agent(prompt=prompt, updates="a"),
            "b": agent(prompt="Answer for {{ input }}.", updates="b"),
            "c": agent(
                prompt="Join {{ state.a }} and {{ state.b }}.",
                activate_on=["state:a:changed", "state:b:changed"],
                when="state.a is not none and state.b is not none",
                updates="c",
            ),
        },
        state={"a": None, "b": None, "c": None},
    )


def answers(b: str) -> Provider:
    return ScriptedProvider({"a": ["AAA"], "b": [b], "c": ["joined"]}, latency=0.0)


def record(graph: Reactive, provider: Provider, store: MemorySignalStore) -> Recording:
    result = graph.run_sync(input="x", provider=provider, record=store)
    return store.load(result.run_id)


def test_a_different_answer_is_named_by_its_agent_with_both_texts() -> None:
    store = MemorySignalStore()
    left = record(join_graph(), answers("BBB"), store)
    right = record(join_graph(), answers("XXX"), store)
    divergence = left.diff(right)
    assert divergence is not None
    assert (divergence.kind, divergence.agent) == ("answer", "b")
    assert (divergence.left_text, divergence.right_text) == ("BBB", "XXX")
    assert divergence.left is not None
    assert divergence.left.name == "text:delta"
    text = str(divergence)
    assert "the answer of agent 'b' differs" in text
    assert "left:  'BBB'" in text
    assert "right: 'XXX'" in text


def test_a_changed_prompt_is_shown_as_both_prompts() -> None:
    store = MemorySignalStore()
    left = record(join_graph("Say something about {{ input }}."), answers("B"), store)
    right = record(join_graph("Say nothing about {{ input }}."), answers("B"), store)
    divergence = left.diff(right)
    assert divergence is not None
    assert (divergence.kind, divergence.agent, divergence.field) == (
        "prompt",
        "a",
        "payload.request_hash",
    )
    assert divergence.left_text == "[user] Say something about x."
    assert divergence.right_text == "[user] Say nothing about x."


def test_a_run_result_and_its_recording_are_the_same_log() -> None:
    store = MemorySignalStore()
    result = join_graph().run_sync(input="x", provider=answers("B"), record=store)
    recording = store.load(result.run_id)
    assert result.diff(recording) is None
    assert recording.diff(result) is None
    assert result.state_at(result.signals[-1].seq) == recording.state == dict(result.state)
    assert Recording.from_jsonl(result.to_jsonl()).signals == recording.signals


def test_order_counts_unless_the_comparison_is_causal() -> None:
    store = MemorySignalStore()
    pair = reactive({"a": agent(prompt="a", updates="a"), "b": agent(prompt="b", updates="b")})

    def run(a_latency: float, b_latency: float) -> Recording:
        delays = {"a": a_latency, "b": b_latency}
        provider = ScriptedProvider(
            {"a": ["A"], "b": ["B"]}, latency=lambda request: delays[request.agent]
        )
        return store.load(pair.run_sync(provider=provider, record=store).run_id)

    a_first, b_first = run(0.0, 0.05), run(0.05, 0.0)
    divergence = a_first.diff(b_first)
    assert divergence is not None
    assert divergence.left is not None
    assert divergence.right is not None
    assert (divergence.left.source, divergence.right.source) == ("a", "b")
    assert a_first.diff(b_first, causal=True) is None


def test_reactor_diff_prints_the_root_cause(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with SQLiteSignalStore(db) as store:
        left = join_graph().run_sync(input="x", provider=answers("BBB"), record=store)
        right = join_graph().run_sync(input="x", provider=answers("XXX"), record=store)
    completed = reactor_cli(tmp_path, "diff", left.run_id, right.run_id, "--db", str(db))
    assert completed.returncode == 1, completed.stderr
    assert "the answer of agent 'b' differs" in completed.stdout
    assert "left:  'BBB'" in completed.stdout
    assert "right: 'XXX'" in completed.stdout
    assert completed.stdout.count("Runs diverge") == 1
