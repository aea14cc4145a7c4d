from __future__ import annotations

import re
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from migration import EdgeSpec, FlowSpec, FlowSpecError, NodeSpec
from reactor import agent
from tests.migration.nodes import FLOWS
from tests.migration.support import run_both


@pytest.mark.parametrize("path", sorted(FLOWS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_fixture_flow_loads(path: Path) -> None:
    spec = FlowSpec.load(path)
    assert spec.nodes
    assert spec.policy.fail_fast is True


def test_the_file_shape_maps_onto_the_model() -> None:
    spec = FlowSpec.load(FLOWS / "05-flow-when-policy.yaml")
    assert spec.name == "api-health-check"
    assert spec.description == "Health check pipeline demonstrating when conditions and policies"
    assert spec.input["services"]["legacy"]["enabled"] is False
    ping_auth = spec.node("ping_auth")
    assert ping_auth.type == "tutorial.flaky"
    assert ping_auth.policy.retry.max_attempts == 3
    assert ping_auth.policy.retry.backoff_ms == 100
    assert ping_auth.when == {"equals": {"var": "auth_enabled.value", "value": True}}
    ping_payments = spec.node("ping_payments")
    assert ping_payments.policy.timeout_ms == 10
    assert ping_payments.policy.continue_on_error is True
    last = spec.edges[-1]
    assert (last.source, last.target, last.type) == ("legacy_enabled", "health_report", "forward")
    assert last.key == "legacy_enabled->health_report"


def test_unknown_keys_are_ignored_with_a_debug_log() -> None:
    with capture_logs() as logs:
        spec = FlowSpec.load(
            {
                "flow": {"name": "old", "layout": "tb"},
                "nodes": [{"id": "a", "type": "echo"}],
                "edges": [],
            }
        )
    assert spec.name == "old"
    assert {
        "event": "ignored flow key",
        "key": "'layout'",
        "where": "flow",
        "log_level": "debug",
    } in logs


def test_node_packs_and_initial_state_are_read() -> None:
    spec = FlowSpec.load(FLOWS / "05-flow-when-policy.yaml")
    assert spec.node_packs == ("core", "tutorial")
    assert spec.state.initial == {}


def test_a_path_yaml_text_a_mapping_and_a_model_all_load() -> None:
    path = FLOWS / "02-flow-edges.yaml"
    from_path = FlowSpec.load(path)
    assert FlowSpec.load(str(path)) == from_path
    assert FlowSpec.load(path.read_text()) == from_path
    assert FlowSpec.load(from_path) is from_path
    assert FlowSpec.load(from_path.model_dump()) == from_path


def test_workflow_is_an_alias_of_flow() -> None:
    spec = FlowSpec.load(
        """
workflow:
  name: aliased
  policy: {failFast: false}
nodes:
  - {id: a, type: echo, input: {text: hi}}
edges: []
"""
    )
    assert spec.name == "aliased"
    assert spec.policy.fail_fast is False
    assert spec.edges == ()


def test_a_missing_file_says_so() -> None:
    with pytest.raises(FileNotFoundError, match=r"^No flow file at 'nowhere/flow\.yaml'\.$"):
        FlowSpec.load("nowhere/flow.yaml")


def test_duplicate_ids_name_the_node() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            {
                "flow": {"name": "dup"},
                "nodes": [{"id": "a", "type": "echo"}, {"id": "a", "type": "constant"}],
                "edges": [],
            }
        )
    assert str(info.value) == (
        "Node 'a' is defined twice (nodes #1 and #2); give each node its own id."
    )
    assert info.value.node == "a"
    assert info.value.flow == "dup"


def test_an_edge_to_an_unknown_node_suggests_the_close_one() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            {
                "flow": {"name": "typo"},
                "nodes": [{"id": "fetch", "type": "echo"}, {"id": "parse", "type": "echo"}],
                "edges": [{"from": "fetch", "to": "prase"}],
            }
        )
    assert str(info.value) == (
        "Edge fetch->prase: to 'prase' is not a node (did you mean 'parse'? nodes: fetch, "
        "parse); fix the id or add the node."
    )
    assert info.value.edge == "fetch->prase"


def test_a_cycle_of_forward_edges_is_spelled_out() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            {
                "nodes": [{"id": n, "type": "echo"} for n in ("a", "b", "c")],
                "edges": [("a", "b"), ("b", "c"), ("c", "a")],
            }
        )
    assert str(info.value) == (
        "Forward edges form a cycle: a -> b -> c -> a. Forward edges must not loop back; make "
        "edge c->a a loop edge (type: loop, with maxIterations and usually a when), or remove it."
    )
    assert info.value.edge == "c->a"


def test_a_loop_edge_needs_max_iterations() -> None:
    with pytest.raises(
        FlowSpecError,
        match=r"^Edge b->a is a loop edge without maxIterations; add maxIterations: <n> to "
        r"bound how many times it re-runs 'a'\.$",
    ):
        FlowSpec.load(
            {
                "nodes": [{"id": "a", "type": "echo"}, {"id": "b", "type": "echo"}],
                "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "a", "type": "loop"}],
            }
        )


def cycle(*, type: str | None = None, closing: bool = True) -> dict[str, object]:
    """draft -> review -> publish, and an edge with maxIterations back to draft (or not)."""
    back: dict[str, object] = {"from": "review", "to": "draft", "maxIterations": 3}
    if type is not None:
        back["type"] = type
    if not closing:
        back = {"from": "draft", "to": "publish", "maxIterations": 3}
    return {
        "flow": {"name": "cycle"},
        "nodes": [
            {"id": "draft", "type": "echo", "input": {"text": "x{{?draft.text}}"}},
            {"id": "review", "type": "constant", "input": {"value": "{{ draft.text = 'xxx' }}"}},
            {"id": "publish", "type": "echo", "input": {"text": "{{ draft.text }}"}},
        ],
        "edges": [
            {"from": "draft", "to": "review"},
            {"from": "review", "to": "publish", "when": "review.value"},
            {**back, "when": "$not(review.value)"} if closing else back,
        ],
    }


async def test_max_iterations_on_an_edge_that_closes_a_cycle_makes_it_a_loop_edge() -> None:
    spec = FlowSpec.load(cycle())
    assert [(edge.key, edge.type) for edge in spec.edges] == [
        ("draft->review", "forward"),
        ("review->publish", "forward"),
        ("review->draft", "loop"),
    ]
    both = await run_both(cycle())
    both.assert_agree()
    assert both.reactive == {
        "draft": {"text": "xxx"},
        "review": {"value": True},
        "publish": {"text": "xxx"},
    }


def test_max_iterations_alone_makes_no_loop_of_an_edge_that_closes_none() -> None:
    spec = FlowSpec.load(cycle(closing=False))
    assert [edge.type for edge in spec.edges] == ["forward", "forward", "forward"]


def test_a_cycle_of_edges_said_to_be_forward_is_refused() -> None:
    with pytest.raises(FlowSpecError, match=r"^Forward edges form a cycle: draft -> review -> "):
        FlowSpec.load(cycle(type="forward"))


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            """
flow:
  name: messy
nodes:
  - id: a
    type: echo
    polcy: {continueOnError: true}
    input: {text: "{{ flow.input.x | default: nope }}"}
  - id: b
    type: echo
    policy: {retry: {maxAttempts: 0}}
edges:
  - from: a
    to: b
    when: {equal: {var: a.text, value: 1}}
  - {from: b, to: a, type: sideways}
"""
        )
    assert info.value.problems == (
        "Node 'a': unknown key 'polcy'; did you mean 'policy'?",
        "Node 'b': policy.retry.maxAttempts: Input should be greater than or equal to 1 (got 0).",
        "Edge b->a: type: Input should be 'forward' or 'loop' (got 'sideways').",
        "Node 'a': {{ flow.input.x | default: nope }} has a default that is not JSON: 'nope'; "
        'quote strings as in default:"text", or use a number, true, false, null, [...] or {...}.',
        "Edge a->b when: unknown condition 'equal'; use {equals: {var, value}}, {not: expr}, "
        '{and: [...]}, {or: [...]} or an expression string such as "node.value = true".',
    )
    assert str(info.value).startswith("Flow 'messy' has 5 problems:\n  - Node 'a': unknown key")


def test_bindings_and_conditions_are_checked_before_running() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            {
                "nodes": [
                    {"id": "a", "type": "echo", "input": {"text": "{{ x | default: nope }}"}},
                    {"id": "b", "type": "echo", "input": {"text": ["{{ a.text | upper }}"]}},
                ],
                "edges": [{"from": "a", "to": "b", "when": {"equal": {"var": "a.text"}}}],
            }
        )
    assert info.value.problems == (
        "Node 'a': {{ x | default: nope }} has a default that is not JSON: 'nope'; quote "
        'strings as in default:"text", or use a number, true, false, null, [...] or {...}.',
        "Node 'b': {{ a.text | upper }} uses an unknown filter 'upper': the only filter is "
        'default:<json>, e.g. {{path | default:"none"}}.',
        "Edge a->b when: unknown condition 'equal'; use {equals: {var, value}}, {not: expr}, "
        '{and: [...]}, {or: [...]} or an expression string such as "node.value = true".',
    )
    assert info.value.node == "a"


@pytest.mark.parametrize(
    ("node_id", "problem"),
    [
        pytest.param(
            "flow",
            "Node 'flow': the id is reserved for flow inputs ({{flow.input.*}}); rename the node.",
            id="reserved",
        ),
        pytest.param(
            "a.b",
            "Node 'a.b' (node #1): ids start with a letter or '_' and use only letters, digits, "
            "'_' and '-' (bindings read them as {{id.key}}); rename it.",
            id="dotted",
        ),
    ],
)
def test_node_ids_must_be_usable_in_bindings(node_id: str, problem: str) -> None:
    with pytest.raises(FlowSpecError, match=f"^{re.escape(problem)}$"):
        FlowSpec.load({"nodes": [{"id": node_id, "type": "echo"}], "edges": []})


def test_a_flow_without_nodes_is_refused() -> None:
    with pytest.raises(FlowSpecError, match=r"^The flow has no nodes:; add at least one node\.$"):
        FlowSpec.load("flow: {name: empty}\nedges: []")


def test_a_python_definition_becomes_agent_nodes() -> None:
    spec = FlowSpec.load(
        {
            "name": "py",
            "agents": {"a": agent(run=lambda ctx: 1), "b": agent(run=lambda ctx: 2)},
            "edges": [("a", "b")],
            "policies": {"b": {"retry": {"maxAttempts": 2}}},
        }
    )
    assert [node.type for node in spec.nodes] == ["reactor.agent", "reactor.agent"]
    assert spec.node("b").policy.retry.max_attempts == 2
    assert spec.edges == (EdgeSpec.model_validate({"from": "a", "to": "b"}),)
    assert "agent" not in spec.node("a").model_dump()


def test_a_python_definition_leaves_wiring_to_the_edges() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            {
                "agents": {
                    "a": agent(run=lambda ctx: 1, activate_on="user:go"),
                    "b": agent(run=lambda ctx: 2, emits="b:done"),
                    "c": "not an agent",
                },
                "edges": [],
            }
        )
    assert info.value.problems == (
        "Agent 'a' has activate_on=['user:go']; in an edge-based definition the edges say when "
        "it runs, so leave activate_on out.",
        "Agent 'b' declares emits= or updates=; a node's output is recorded under outputs.b "
        "and announced as node:b:done, so leave them out.",
        "Agent 'c' is not an agent; build it with agent(...).",
    )


def test_node_specs_are_immutable() -> None:
    node = NodeSpec(id="a", type="echo")
    with pytest.raises(ValueError, match="frozen"):
        node.id = "b"


def test_field_and_edge_problems_are_reported_together() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            {
                "nodes": [
                    {"id": "a", "type": "echo", "policy": {"timeoutMs": -1}},
                    {"id": "a", "type": "echo"},
                ],
                "edges": [("a", "b")],
            }
        )
    assert info.value.problems == (
        "Node 'a': policy.timeoutMs: Input should be greater than 0 (got -1).",
        "Node 'a' is defined twice (nodes #1 and #2); give each node its own id.",
        "Edge a->b: to 'b' is not a node (nodes: a); fix the id or add the node.",
    )
