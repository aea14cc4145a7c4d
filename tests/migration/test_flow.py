"""Flow: building a migrated graph by hand, as the generated code does."""

from __future__ import annotations

from typing import Any

import pytest

from migration import Flow, FlowSpecError, NodeContext
from migration._reactive.flow import done_signal
from reactor import agent, reactive


def shout(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    return {"text": input["text"].upper() + "!" * ctx.attempt}


async def test_a_graph_built_by_hand_runs_with_python_steps() -> None:
    flow = Flow(
        name="hand", nodes=["greet", "loud"], edges=[("greet", "loud")], input={"name": "Ada"}
    )
    graph = reactive(
        {
            "greet": flow.agent("greet", "echo", input={"text": "hi {{flow.input.name}}"}),
            "loud": flow.agent("loud", shout, input={"text": "{{greet.text}}"}),
        },
        state=flow.state,
        **flow.limits(),
    )
    result = await graph.run(input={"name": "Bo"})
    assert result.state["outputs"] == {"greet": {"text": "hi Bo"}, "loud": {"text": "HI BO!"}}


async def test_a_step_can_be_an_agent() -> None:
    flow = Flow(nodes=["a", "b"], edges=[("a", "b")])
    graph = reactive(
        {
            "a": flow.agent("a", "constant", input={"value": 2}),
            "b": flow.agent("b", agent(run=lambda ctx: ctx.state["outputs"]["a"]["value"] * 21)),
        },
        state=flow.state,
    )
    result = await graph.run()
    assert result.state["outputs"]["b"] == 42


def test_every_node_needs_an_agent() -> None:
    flow = Flow(nodes=["a", "b", "c"], edges=[("a", "b"), ("b", "c")])
    with pytest.raises(
        FlowSpecError,
        match=r"^Nodes 'b', 'c' of flow 'flow' have no agent; build one with flow\.agent\(\.\.\.\)",
    ):
        reactive({"a": flow.agent("a", "echo", input={"text": "a"})}, state=flow.state)


def test_steps_are_checked_where_they_are_written() -> None:
    flow = Flow(nodes=["a"])
    with pytest.raises(FlowSpecError, match=r"^Flow 'flow' has no node 'b' \(nodes: a\)\.$"):
        flow.step("b", "echo")
    with pytest.raises(
        FlowSpecError, match=r"^Node 'a': \{\{ x \| nope \}\} uses an unknown filter"
    ):
        flow.step("a", "echo", input={"text": "{{ x | nope }}"})
    with pytest.raises(TypeError, match=r"^Node 'a': work must be a node type name"):
        flow.step("a", 42)  # type: ignore[arg-type]


def test_edges_are_checked_when_the_flow_is_made() -> None:
    with pytest.raises(FlowSpecError, match=r"^Forward edges form a cycle: a -> b -> a\."):
        Flow(nodes=["a", "b"], edges=[("a", "b"), ("b", "a")])


def test_triggers_cover_predecessors_and_loop_reopeners() -> None:
    flow = Flow(
        nodes=["start", "work", "review", "ship"],
        edges=[
            ("start", "work"),
            ("work", "review"),
            ("review", "ship"),
            {"from": "review", "to": "work", "type": "loop", "maxIterations": 3},
        ],
    )
    assert flow.triggers("start") == ["harness:start", "phase:start"]
    assert flow.triggers("work") == [
        "node:start:done",
        "node:work:done",
        "node:review:done",
        "node:ship:done",
    ]
    assert flow.triggers("ship") == ["node:review:done"]
    assert done_signal("ship") == "node:ship:done"
    assert flow.limits() == {"max_depth": 4 + 3 * 3 + 4 + 1, "max_activations": 4 + 3 * 3 + 4 + 1}


def test_a_bad_policy_names_the_node() -> None:
    flow = Flow(nodes=["a"])
    with pytest.raises(FlowSpecError) as info:
        flow.step("a", "echo", policy={"retry": {"maxAttempts": 0}})
    assert info.value.problems == (
        "Node 'a': Input should be greater than or equal to 1 (retry.maxAttempts).",
    )
