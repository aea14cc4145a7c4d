"""check(): both executors, one verdict, a readable report (`reactor migrate --check`)."""

from __future__ import annotations

import pytest

from migration import (
    FlowRunError,
    FlowSpec,
    NodeRegistry,
    UnknownNodeTypeError,
    check,
    check_sync,
)
from migration._convert.check import compare, scripted_provider
from reactor import ProviderRequest, ScriptedProvider
from tests.migration import nodes
from tests.migration.support import flow, node


async def test_a_fixture_agrees_and_the_report_lists_every_node() -> None:
    result = await check(nodes.FLOWS / "02-flow-edges.yaml")
    assert result.agrees
    assert result.differences == ()
    assert (
        str(result)
        == result.report()
        == (
            "Flow 'flow-edges': the edge-based and the reactive run agree on all 3 nodes.\n"
            '  start   {"text": "Start"}\n'
            '  middle  {"text": "Middle"}\n'
            '  end     {"text": "End"}'
        )
    )


def test_check_sync_is_for_the_cli() -> None:
    result = check_sync(
        nodes.FLOWS / "05-flow-when-policy.yaml", registry=nodes.registry(), input={}
    )
    assert result.agrees, result.report()
    assert result.edge_outputs == result.reactive_outputs


async def test_check_sync_refuses_a_running_loop() -> None:
    with pytest.raises(RuntimeError, match=r"^check_sync\(\) cannot be used inside a running"):
        check_sync(nodes.FLOWS / "01-flow-hello.yaml")


async def test_llm_nodes_get_deterministic_scripted_answers_by_default() -> None:
    spec = flow(
        [
            node("ask", "claude.agent", input={"prompt": "hi"}),
            node(
                "extract",
                "claude.agent",
                input={"prompt": "{{ask.text}}"},
                config={
                    "schema": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}, "tags": {"type": "array"}},
                    }
                },
            ),
        ],
        [("ask", "extract")],
    )
    result = await check(spec)
    assert result.agrees, result.report()
    assert result.reactive_outputs["ask"]["text"] == "(scripted answer of ask)"
    assert result.reactive_outputs["extract"]["structured_output"] == {"n": 0, "tags": []}


async def test_a_provider_factory_gives_each_run_a_fresh_provider() -> None:
    spec = flow([node("ask", "claude.agent", input={"prompt": "hi"})])
    result = await check(spec, provider=lambda: ScriptedProvider({"ask": ["one answer"]}))
    assert result.agrees
    shared = ScriptedProvider({"ask": ["one answer"]})
    used_up = await check(spec, provider=shared)
    assert not used_up.agrees
    assert "ScriptExhaustedError" in used_up.report()


def test_a_disagreement_names_the_node_and_both_outputs() -> None:
    spec = FlowSpec.load(flow([node("a"), node("b")]))
    result = compare(spec, {"a": {"text": "a"}, "b": {"text": "b"}}, {"a": {"text": "A"}})
    assert not result.agrees
    assert result.report() == (
        "Flow 'test': the edge-based and the reactive run DISAGREE on 2 of 2 nodes.\n"
        "  node 'a':\n"
        '    edge-based: {"text": "a"}\n'
        '    reactive:   {"text": "A"}\n'
        "  node 'b':\n"
        '    edge-based: {"text": "b"}\n'
        "    reactive:   (no output)"
    )


def test_runs_that_stop_at_different_nodes_disagree() -> None:
    spec = FlowSpec.load(flow([node("a"), node("b")]))
    result = compare(
        spec,
        {"a": {"failed": True}},
        {"b": {"failed": True}},
        FlowRunError("a failed", node="a", outputs={}),
        FlowRunError("b failed", node="b", outputs={}),
    )
    assert not result.agrees
    assert result.report().endswith(
        "  The edge-based run stopped: FlowRunError: a failed\n"
        "  The reactive run stopped: FlowRunError: b failed"
    )


async def test_runs_that_stop_at_the_same_node_agree() -> None:
    spec = flow([node("a"), node("boom", "control.fail", input={"message": "x"})], [("a", "boom")])
    result = await check(spec)
    assert result.agrees, result.report()
    assert isinstance(result.edge_error, FlowRunError)
    assert result.report().splitlines()[-1] == (
        "  The reactive run stopped: FlowRunError: Node 'boom' (control.fail) failed after 1 "
        "attempt: FlowFailError: x. The flow stopped (policy.failFast); set "
        "policy.continueOnError on the node, or failFast: false on the flow, to record the "
        "failure and go on."
    )


async def test_order_warnings_are_part_of_the_report() -> None:
    result = await check(flow([node("a", input={"text": "{{?b.text}}"}), node("b")]))
    assert result.warnings == (
        "Node 'a' reads 'b', which is not upstream of it: the reactive graph may run them in "
        "either order. Add an edge b->a if 'a' needs that output.",
    )
    assert result.report().endswith(f"  Warning: {result.warnings[0]}")


async def test_unknown_types_are_reported_before_running() -> None:
    with pytest.raises(UnknownNodeTypeError):
        await check(nodes.FLOWS / "05-flow-when-policy.yaml", registry=NodeRegistry())


async def test_the_default_provider_answers_any_node() -> None:
    provider = scripted_provider()
    request = ProviderRequest.build(
        agent="n",
        system=None,
        prompt="p",
        output_schema={
            "$defs": {"Inner": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
            "type": "object",
            "properties": {
                "inner": {"$ref": "#/$defs/Inner"},
                "kind": {"enum": ["a", "b"]},
                "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                "name": {"type": "string", "default": "x"},
            },
        },
    )
    events = [event async for event in provider.stream(request)]
    assert events[-1].output == {"inner": {"ok": False}, "kind": "a", "score": 0, "name": "x"}  # type: ignore[union-attr]
