"""The kernel's later dialect: every feature agrees between the two executors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from migration import (
    BindingError,
    FlowRunError,
    FlowSpec,
    FlowSpecError,
    NodeContext,
    NodeRegistry,
    check,
    harness_to_reactive,
    run_edge_harness,
)
from migration._expressions.bindings import resolve
from reactor import ProviderRequest, ScriptedProvider
from tests.migration import nodes
from tests.migration.support import flow, node, run_both


def review_provider() -> ScriptedProvider:
    """Plans two tasks; the reviewer passes code once the coder has added tests."""

    def code(request: ProviderRequest) -> str:
        return "code with tests" if "add tests" in request.prompt else "code"

    def review(request: ProviderRequest) -> dict[str, Any]:
        passed = "with tests" in request.prompt
        notes = "fine" if passed else "add tests"
        return {
            "passed": passed,
            "notes": notes,
            "feedback": notes,
            "issues": [] if passed else [notes],
        }

    plan = {"tasks": [{"title": "parse args"}, {"title": "save file"}]}
    return ScriptedProvider({"plan": [plan], "planner": [plan], "coder": code, "reviewer": review})


@pytest.mark.parametrize(
    "name", ["agent-loop", "bindings", "expressions", "foreach", "review-loop", "state"], ids=str
)
async def test_every_dialect_flow_agrees(name: str) -> None:
    result = await check(
        nodes.DIALECT / f"{name}.yaml",
        registry=nodes.dialect_registry,
        provider=review_provider,
    )
    assert result.agrees, result.report()
    assert result.edge_error is None
    assert not any(
        isinstance(value, dict) and value.get("failed") for value in result.edge_outputs.values()
    )


async def test_expression_conditions_route_and_gate() -> None:
    outputs = await run_edge_harness(nodes.DIALECT / "expressions.yaml")
    assert outputs["urgent"] == {"text": "urgent bug"}
    assert outputs["minor"] == {"skipped": True, "reason": "when"}
    assert outputs["scored"] == {"text": "score 0.72"}
    assert outputs["staged"] == {"text": "staged"}
    assert outputs["owner_known"] == {"text": "the owner key is there, and null"}
    assert outputs["nobody"] == {"skipped": True, "reason": "when"}
    assert outputs["answer"] == {"skipped": True, "reason": "edges"}
    assert outputs["done"] == {"text": "filed"}
    assert outputs["legacy"] == {"text": "the first dialect still works"}


async def test_expression_bindings_sit_beside_paths() -> None:
    outputs = await run_edge_harness(nodes.DIALECT / "bindings.yaml")
    assert outputs["facts"]["value"] == {
        "adult": True,
        "over_limit": True,
        "roles": ["admin", "dev"],
        "missing": None,
        "nickname": "none",
        "optional": None,
    }
    assert outputs["greet"]["text"] == (
        'Hi Ada: adult=true, admin=false, roles=["admin","dev"], nick=none, nothing=.'
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("{{ plan.tasks.title }}", ["a", "b"], id="path-over-a-list"),
        pytest.param("{{ plan.tasks.0.title }}", "a", id="index"),
        pytest.param("{{ $exists(plan.tasks) }}", True, id="expression"),
        pytest.param("{{ plan.missing = null }}", False, id="undefined-is-not-null"),
        pytest.param("n={{ plan.missing != 1 }}", "n=false", id="in-text"),
        pytest.param("{{ $not(plan.missing) }}", None, id="undefined-whole"),
    ],
)
def test_bindings_read_lists_like_the_later_dialect(text: str, expected: Any) -> None:
    context = {"plan": {"tasks": [{"title": "a"}, {"title": "b"}]}}
    assert resolve(text, context) == expected


def test_a_path_is_still_strict() -> None:
    with pytest.raises(BindingError, match=r"^The binding \{\{plan\.tasks\.name\}\} has no value"):
        resolve("{{ plan.tasks.name }}", {"plan": {"tasks": [{"title": "a"}]}})


async def test_state_starts_from_initial_and_nodes_write_it() -> None:
    both = await run_both(nodes.DIALECT / "state.yaml", registry=nodes.dialect_registry())
    both.assert_agree()
    assert both.result.state["state"] == {
        "attempts": 2,
        "status": "open",
        "history": {"first": "open after 2"},
    }
    assert both.reactive["closed"] == {"text": "open: open after 2"}


async def test_each_run_starts_from_the_initial_state() -> None:
    graph = harness_to_reactive(nodes.DIALECT / "state.yaml", registry=nodes.dialect_registry())
    first, second = await graph.run(), await graph.run()
    assert first.state["state"] == second.state["state"]
    assert FlowSpec.load(nodes.DIALECT / "state.yaml").state.initial["attempts"] == 0


async def test_a_failed_attempt_drops_its_state_writes() -> None:
    def write_then_fail(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        ctx.set_state("log", f"attempt {ctx.attempt}")
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return {"attempt": ctx.attempt}

    registry = NodeRegistry()
    registry.register("test.write_then_fail", write_then_fail)
    spec = flow(
        [node("w", "test.write_then_fail", policy={"retry": {"maxAttempts": 2}})],
        state={"initial": {"log": None}},
    )
    result = await check(spec, registry=registry)
    assert result.agrees, result.report()
    assert result.reactive_state == {"log": "attempt 2"}


async def test_the_check_compares_the_final_state() -> None:
    calls: list[int] = []

    def count(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        calls.append(1)
        ctx.set_state("calls", len(calls))
        return {"ok": True}

    registry = NodeRegistry()
    registry.register("test.count", count)
    result = await check(flow([node("c", "test.count")]), registry=registry)
    assert not result.agrees
    assert result.differences == ()
    assert result.report() == (
        "Flow 'test': the edge-based and the reactive run DISAGREE on 0 of 1 node and on the "
        "flow state.\n"
        "  the flow state:\n"
        '    edge-based: {"calls": 1}\n'
        '    reactive:   {"calls": 2}'
    )


def test_a_state_path_must_be_names() -> None:
    ctx = NodeContext(node="n", type="t", config={}, flow_input={}, bindings={}, provider=None)
    with pytest.raises(ValueError, match=r"^Node 'n': a state path is names joined by dots"):
        ctx.set_state("a..b", 1)


async def test_structured_output_from_inline_options_config_and_files(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "ok.json").write_text('{"type": "object", "properties": {}}')
    (tmp_path / "ask.txt").write_text("Is it fine?")
    fmt = {"type": "json_schema", "schema": schema}
    ok = {"outputSchemaFile": "schemas/ok.json"}
    path = tmp_path / "flow.yaml"
    path.write_text(
        json.dumps(
            flow(
                [
                    node(
                        "inline",
                        "claude.agent",
                        input={"prompt": "a", "options": {"outputSchema": schema}},
                    ),
                    node(
                        "format",
                        "claude.agent",
                        input={"prompt": "b", "options": {"outputFormat": fmt}},
                    ),
                    node("file", "claude.agent", input={"promptFile": "ask.txt", "options": ok}),
                    node("config", "anthropic.text", config=ok, input={"prompt": "c"}),
                    node(
                        "plain", "claude.agent", input={"prompt": "d", "options": {"maxTurns": 3}}
                    ),
                ],
                name="structured",
            )
        )
    )
    spec = FlowSpec.load(path)
    assert spec.node("file").input == {
        "prompt": "Is it fine?",
        "options": {"outputSchema": {"type": "object", "properties": {}}},
    }
    assert spec.node("config").config == {"outputSchema": {"type": "object", "properties": {}}}
    providers: list[ScriptedProvider] = []

    def provider() -> ScriptedProvider:
        providers.append(
            ScriptedProvider(default=lambda r: {"ok": True} if r.output_schema else "t")
        )
        return providers[-1]

    result = await check(spec, provider=provider)
    assert result.agrees, result.report()
    outputs = result.reactive_outputs
    assert outputs["inline"]["structuredOutput"] == {"ok": True}
    assert outputs["format"]["structuredOutput"] == {"ok": True}
    assert outputs["file"]["structured_output"] == {"ok": True}
    assert "structuredOutput" not in outputs["plain"]
    requests = {r.agent: r for r in providers[-1].requests}
    assert requests["inline"].output_schema == schema
    assert requests["file"].prompt == "Is it fine?"
    assert requests["plain"].options == {}


def test_a_missing_schema_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(
        "flow: {name: missing}\n"
        "nodes:\n"
        "  - {id: judge, type: claude.agent, input: {prompt: p, options: {outputSchemaFile: "
        "schemas/verdict.json}}}\n"
        "edges: []\n"
    )
    looked = tmp_path / "schemas" / "verdict.json"
    with pytest.raises(
        FlowSpecError,
        match=rf"^Node 'judge' input\.options\.outputSchemaFile: 'schemas/verdict\.json' was not "
        rf"found \(looked at {re.escape(repr(str(looked)))}\); a relative name starts from the "
        r"flow file's folder\.$",
    ):
        FlowSpec.load(path)


def test_a_schema_file_must_hold_a_schema(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text("[1, 2]")
    spec = flow(
        [
            node(
                "j",
                "claude.agent",
                input={
                    "prompt": "p",
                    "options": {
                        "outputSchemaFile": str(tmp_path / "list.json"),
                        "outputSchema": {},
                    },
                },
            )
        ]
    )
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(spec)
    assert info.value.problems == (
        f"Node 'j' input.options.outputSchemaFile: {str(tmp_path / 'list.json')!r} must hold a "
        "JSON schema object.",
        "Node 'j' input.options: give outputSchema or outputSchemaFile, not both.",
    )


async def test_node_packs_must_be_available() -> None:
    spec = flow([node("a")], nodePacks=["core", "claude", "tutorial", "ops"])
    with pytest.raises(
        FlowSpecError,
        match=r"^Node packs 'tutorial', 'ops' are not available \(available: claude, core\)\. "
        r"Install a package that provides them \(entry point group reactor\.node_types\), or "
        r"pass a registry that has its types \(--registry MODULE:ATTR\)\.$",
    ):
        await run_edge_harness(spec, registry=NodeRegistry())
    registry = nodes.registry()
    registry.add_pack("ops", {"ops.ping": lambda input: {"pong": True}})
    assert {"tutorial", "ops", "math", "test"} <= set(registry.packs)
    outputs = await run_edge_harness(spec, registry=registry)
    assert outputs == {"a": {"text": "a"}}


async def test_a_flow_without_edges_is_refused() -> None:
    with pytest.raises(
        FlowSpecError,
        match=r"^The flow has no edges:; the edge-based format requires it\. Add the edges "
        r"between the nodes, or edges: \[\] if they do not depend on each other\.$",
    ):
        await run_edge_harness("flow: {name: loose}\nnodes: [{id: a, type: echo}]\n")


async def test_a_body_failure_names_the_body_node() -> None:
    spec = flow(
        [
            node("each", "control.foreach", input={"items": [1], "body": ["boom"]}),
            node("boom", "control.fail", input={"message": "bad item"}),
        ]
    )
    with pytest.raises(FlowRunError) as info:
        await run_edge_harness(spec)
    assert str(info.value).startswith(
        "Node 'each' (control.foreach) failed after 1 attempt: FlowRunError: its body node "
        "'boom' failed: FlowFailError: bad item. The flow stopped (policy.failFast)"
    )
    assert info.value.node == "each"


async def test_a_list_length_binding_reads_as_the_old_kernel_read_it() -> None:
    spec = flow(
        [
            node("count", input={"text": "{{ flow.input.files.length }} files"}),
            node("size", "constant", input={"value": "{{flow.input.files.length}}"}),
        ],
        input={"files": ["a.py", "b.py", "c.py"]},
    )
    both = await run_both(spec)
    assert both.edge["count"] == {"text": "3 files"}
    assert both.edge["size"] == {"value": 3}
    assert both.reactive == both.edge
