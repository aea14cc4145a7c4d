"""to_python(): the generated module runs, and agrees with the edge-based executor."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from migration import FlowSpec, NodeRegistry, run_edge_harness, to_python
from migration._edge.edge import execute
from reactor import Reactive, ScriptedProvider, agent
from tests.migration import nodes
from tests.migration.support import flow, node
from tests.migration.test_convert import counter_loop


def load(source: str) -> dict[str, Any]:
    """Run a generated module as if saved in the current folder (where to_python puts it)."""
    namespace: dict[str, Any] = {"__name__": "generated", "__file__": str(Path.cwd() / "gen.py")}
    exec(compile(source, "<generated>", "exec"), namespace)
    return namespace


async def outputs_of(source: str, **run: Any) -> dict[str, Any]:
    graph = load(source)["graph"]
    assert isinstance(graph, Reactive)
    result = await graph.run(**run)
    assert result.status == "completed", result.error
    return dict(result.state["outputs"])


@pytest.mark.parametrize("path", sorted(nodes.FLOWS.glob("*.yaml")), ids=lambda p: p.stem)
async def test_generated_code_for_every_fixture_runs_and_agrees(path: Path) -> None:
    registry = nodes.registry()
    source = to_python(path, registry=registry)
    assert await outputs_of(source) == await run_edge_harness(path, registry=registry)


def test_custom_types_are_imported_when_they_can_be() -> None:
    source = to_python(nodes.FLOWS / "05-flow-when-policy.yaml", registry=nodes.registry())
    assert "from tests.migration.nodes import delay\n" in source
    assert 'registry.register("tutorial.flaky", flaky)\n' in source


def test_custom_types_that_cannot_be_imported_become_stubs() -> None:
    registry = NodeRegistry()
    registry.register("local.thing", lambda input: input)
    source = to_python(flow([node("a", "local.thing"), node("b", "http.get")]), registry=registry)
    assert (
        "def http_get(input: dict[str, Any], node: NodeContext) -> Any:\n"
        '    """Node type "http.get" (used by node "b"): write it here."""\n'
        "    raise NotImplementedError(\"Write node type 'http.get'.\")\n"
    ) in source
    assert 'registry.register("local.thing", local_thing)\n' in source
    graph = load(source)["graph"]
    result = asyncio.run(graph.run())
    assert result.status == "failed"
    assert "Write node type 'local.thing'." in str(result.error)


def test_the_generated_module_reads_like_hand_written_code() -> None:
    source = to_python(nodes.FLOWS / "04-flow-bindings.yaml")
    assert source == GENERATED_BINDINGS


GENERATED_BINDINGS = '''\
"""flow-bindings: migrated from an edge-based flow by `reactor migrate`.

The edges are in Flow(edges=...), and only there. Each node is an agent: it
activates on flow.triggers(id) (its predecessors' node:<id>:done), and its
guard, flow.ready(id), lets it run once all of its incoming edges are resolved;
both come from the edges. Its output is recorded in the run's state under
outputs.<id>:

    result = graph.run_sync()   # LLM nodes need provider=...
    print(result.state["outputs"])
"""

from __future__ import annotations

from migration import Flow, NodeRegistry
from reactor import agent, reactive

registry = NodeRegistry()

flow = Flow(
    name="flow-bindings",
    nodes=["facts", "say"],
    edges=[{"from": "facts", "to": "say"}],
    input={},
    fail_fast=True,
    registry=registry,
)

agents = {
    # The flow's phase: it starts the nodes and ends when they have resolved.
    "flow": flow.phase(),
    "facts": agent(
        run=flow.step(
            "facts",
            "constant",
            input={"value": {"city": "Lisbon", "country": "Portugal"}},
        ),
        activate_on=flow.triggers("facts"),
        when=flow.ready("facts"),
        emits=["node:facts:done"],
    ),
    "say": agent(
        run=flow.step(
            "say",
            "echo",
            input={
                "text": "City: {{facts.value.city}}, Country: {{facts.value.country}}",
            },
        ),
        activate_on=flow.triggers("say"),
        when=flow.ready("say"),
        emits=["node:say:done"],
    ),
}

graph = reactive(
    agents,
    state=flow.state,
    name="flow-bindings",
    input={},
    fail_fast=True,
    max_depth=5,
    max_activations=5,
)
'''


@pytest.mark.parametrize("stubs", [False, True], ids=["imported-types", "stubs"])
def test_generated_code_is_formatted_and_lint_clean(tmp_path: Path, stubs: bool) -> None:
    target = tmp_path / "generated.py"
    registry = NodeRegistry() if stubs else nodes.registry()
    target.write_text(to_python(counter_loop(max_iterations=5), registry=registry))
    ruff = [sys.executable, "-m", "ruff"]
    formatted = subprocess.run(
        [*ruff, "format", "--isolated", "--diff", str(target)], capture_output=True, text=True
    )
    assert formatted.returncode == 0, formatted.stdout
    checked = subprocess.run(
        [*ruff, "check", "--select", "E,F,W,I,B,UP", "--isolated", str(target)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout


async def test_a_loop_flow_generates_a_loop_graph() -> None:
    spec = counter_loop(max_iterations=5)
    source = to_python(spec, registry=nodes.registry())
    assert 'warnings.simplefilter("ignore", CycleWarning)' in source
    assert await outputs_of(source) == await run_edge_harness(spec, registry=nodes.registry())


async def test_policies_conditions_and_llm_nodes_survive_generation() -> None:
    spec = flow(
        [
            node("ask", "claude.agent", input={"prompt": "About {{flow.input.topic}}"}),
            node(
                "maybe",
                when={"equals": {"var": "flow.input.topic", "value": "bees"}},
                policy={"retry": {"maxAttempts": 2}, "continueOnError": True},
            ),
            node("boom", "control.fail", input={"message": "x"}, policy={"continueOnError": True}),
        ],
        [
            ("ask", "maybe"),
            {
                "from": "ask",
                "to": "boom",
                "when": {"not": {"equals": {"var": "ask.text", "value": ""}}},
            },
        ],
        input={"topic": "bees"},
    )
    source = to_python(spec)
    assert 'policy={"retry": {"maxAttempts": 2}, "continueOnError": True},' in source

    def provider() -> ScriptedProvider:
        return ScriptedProvider({"ask": ["Bees!"]})

    expected = await run_edge_harness(spec, provider=provider())
    assert await outputs_of(source, provider=provider()) == expected
    assert expected["boom"]["failed"] is True


def test_order_warnings_head_the_generated_module() -> None:
    spec = flow([node("a", input={"text": "{{b.text}}"}), node("b")])
    source = to_python(spec)
    assert (
        "\"\"\"\n\n# Warning: Node 'a' reads 'b', which is not upstream of it: the reactive graph "
        "may run\n#   them in either order. Add an edge b->a if 'a' needs that output.\n\n"
    ) in source


def test_python_definitions_are_python_already() -> None:
    with pytest.raises(TypeError, match=r"^to_python\(\) writes Python for FlowSpec files"):
        to_python({"agents": {"a": agent(run=lambda ctx: 1)}, "edges": []})


@pytest.mark.parametrize("path", sorted(nodes.DIALECT.glob("*.yaml")), ids=lambda p: p.stem)
async def test_generated_code_for_every_dialect_flow_runs_and_agrees(path: Path) -> None:
    from tests.migration.test_dialect import review_provider

    source = to_python(path, registry=nodes.dialect_registry())
    graph = load(source)["graph"]
    result = await graph.run(provider=review_provider())
    assert result.status == "completed", result.error
    edge = await execute(FlowSpec.load(path), None, nodes.dialect_registry(), review_provider())
    assert result.state["outputs"] == edge.outputs
    assert result.state["state"] == edge.state


def test_foreach_bodies_state_and_expressions_read_plainly(tmp_path: Path) -> None:
    source = to_python(nodes.DIALECT / "foreach.yaml", registry=nodes.dialect_registry())
    assert (
        '    state={"seen": {}},\n    bodies={"each_word": ["draft", "grade", "note"]},\n' in source
    )
    assert (
        "# The body of foreach node 'each_word': it runs these nodes once per item.\n"
        "flow.step(\n"
        '    "draft",\n'
        '    "text.grow",\n'
    ) in source
    assert '"when": "$not(grade.value)",' in source
    assert '"draft": agent(' not in source
    target = tmp_path / "generated.py"
    target.write_text(source)
    ruff = [sys.executable, "-m", "ruff"]
    formatted = subprocess.run(
        [*ruff, "format", "--isolated", "--diff", str(target)], capture_output=True, text=True
    )
    assert formatted.returncode == 0, formatted.stdout
    checked = subprocess.run(
        [*ruff, "check", "--select", "E,F,W,I,B,UP", "--isolated", str(target)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout
