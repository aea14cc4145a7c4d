"""Hostile flows end quickly with a short, clear FlowSpecError, never a crash or a hang."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from migration import FlowSpec, FlowSpecError, NodeRegistry, check, run_edge_harness
from reactor import RunTimeoutError
from tests.migration.support import flow, node


def alias_bomb(levels: int = 9) -> str:
    """A few hundred bytes of YAML whose aliases expand to 9**levels strings."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nflow: {{name: *a{levels - 1}}}\nnodes: [{{id: x, type: echo}}]\n"


def chain(size: int, *, back: bool = False) -> dict[str, Any]:
    edges: list[dict[str, Any]] = [{"from": f"n{i}", "to": f"n{i + 1}"} for i in range(size - 1)]
    if back:
        edges.append({"from": f"n{size - 1}", "to": "n0"})
    return flow([node(f"n{i}") for i in range(size)], edges)


@pytest.mark.timeout(30)
def test_a_file_that_is_not_utf8_says_where(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("flow: {name: café}\nnodes: []\nedges: []\n".encode("latin-1"))
    with pytest.raises(
        FlowSpecError,
        match=rf"^The flow file {re.escape(repr(str(path)))} is not UTF-8 text: byte 0xe9 at "
        r"line 1, column 17 cannot be decoded\. Save the file as UTF-8\.$",
    ):
        FlowSpec.load(path)


@pytest.mark.timeout(30)
def test_a_byte_order_mark_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfflow: {name: bom}\nnodes: [{id: a, type: echo}]\nedges: []\n")
    assert FlowSpec.load(path).name == "bom"


@pytest.mark.timeout(30)
def test_deep_nesting_is_refused_before_it_is_built() -> None:
    text = "flow: {name: deep}\nnodes: [{id: x, type: echo, input: {text: " + "[" * 900
    text += "]" * 900 + "}}]\nedges: []\n"
    with pytest.raises(
        FlowSpecError,
        match=r"^The flow nests mappings and lists more than 64 levels deep \(line 2, column "
        r"\d+\); flatten it\.$",
    ):
        FlowSpec.load(text)


@pytest.mark.timeout(30)
def test_an_alias_bomb_is_refused_quickly_with_a_short_message() -> None:
    text = alias_bomb()
    assert len(text) < 700
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(text)
    assert str(info.value) == (
        "The flow expands to more than 200,000 values (YAML aliases repeat what they point "
        "to); write it out without nested aliases."
    )


@pytest.mark.timeout(30)
def test_aliases_that_stay_small_are_fine() -> None:
    spec = FlowSpec.load(
        "defaults: &text {text: hi}\nflow: {name: aliased}\n"
        "nodes: [{id: a, type: echo, input: *text}, {id: b, type: echo, input: *text}]\n"
        "edges: []\n"
    )
    assert spec.node("b").input == {"text": "hi"}


@pytest.mark.timeout(30)
def test_python_data_gets_the_same_limits() -> None:
    deep: Any = "leaf"
    for _ in range(900):
        deep = [deep]
    with pytest.raises(FlowSpecError, match=r"^The flow nests mappings and lists more than 64"):
        FlowSpec.load(flow([node("x", input={"text": deep})]))
    shared: Any = ["lol"] * 9
    for _ in range(8):
        shared = [shared] * 9
    with pytest.raises(FlowSpecError, match=r"^The flow holds more than 200,000 values"):
        FlowSpec.load(flow([node("x", input={"text": shared})]))


@pytest.mark.timeout(30)
def test_messages_about_values_stay_short() -> None:
    big = {f"key{i}": "x" * 1000 for i in range(1000)}
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load({"flow": {"name": big}, "nodes": [node("a")], "edges": []})
    assert len(str(info.value)) < 300
    assert str(info.value).startswith("flow: name: Input should be a valid string (got {")


@pytest.mark.timeout(60)
async def test_a_chain_of_a_thousand_nodes_loads_and_runs() -> None:
    spec = FlowSpec.load(chain(1000))
    assert spec.topology.order[:2] == ("n0", "n1")
    assert len(spec.topology.order) == 1000
    assert spec.order_warnings() == []
    outputs = await run_edge_harness(spec, registry=NodeRegistry())
    assert list(outputs)[-1] == "n999"


@pytest.mark.timeout(60)
def test_a_cycle_through_a_thousand_nodes_is_spelled_out_short() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(chain(1000, back=True))
    assert str(info.value) == (
        "Forward edges form a cycle: n0 -> n1 -> n2 -> n3 -> n4 -> ... (991 more) ... -> "
        "n996 -> n997 -> n998 -> n999 -> n0. Forward edges must not loop back; make edge "
        "n999->n0 a loop edge (type: loop, with maxIterations and usually a when), or remove it."
    )
    assert info.value.edge == "n999->n0"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("when", "problem"),
    [
        pytest.param(
            "(" * 900 + "a" + ")" * 900,
            "parentheses nest more than 32 deep (column 33)",
            id="parentheses",
        ),
        pytest.param(
            "$not(" * 200 + "a" + ")" * 200,
            "parentheses nest more than 32 deep (column 165)",
            id="calls",
        ),
        pytest.param(
            " or ".join(["a"] * 600),
            "the expression is 2,996 characters long; the limit is 2,000",
            id="length",
        ),
    ],
)
def test_expressions_are_bounded(when: str, problem: str) -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(flow([node("a", when=when)]))
    (found,) = info.value.problems
    assert found.endswith(f"is not a valid condition: {problem}.")
    assert len(found) < 5000


@pytest.mark.timeout(30)
async def test_a_long_flat_condition_evaluates_without_recursion() -> None:
    when = " and ".join(["x"] * 300)
    spec = flow([node("x", "constant", input={"value": 1}), node("a", when=when)], [("x", "a")])
    outputs = await run_edge_harness(spec, registry=NodeRegistry())
    assert outputs["a"] == {"text": "a"}


@pytest.mark.timeout(60)
async def test_nan_outputs_are_refused_by_the_reactive_log_and_the_check_says_so() -> None:
    registry = NodeRegistry()
    registry.register("math.nan", lambda input: {"value": math.nan, "list": [math.nan, 1.0]})
    result = await check(flow([node("a", "math.nan")]), registry=registry)
    assert not result.agrees  # the log holds no NaN: the state write is refused at the door
    assert "PayloadError: state.outputs.a.value cannot be recorded: it is nan" in result.report()


@pytest.mark.timeout(60)
async def test_the_check_has_a_timeout() -> None:
    spec = flow([node("slow", "control.wait", input={"ms": 60_000})], name="slow")
    with pytest.raises(
        RunTimeoutError,
        match=r"^The check of flow 'slow' did not finish within 0\.2 s; a node may be waiting "
        r"or looping\. Give it more time, or look at the slow node\.$",
    ):
        await check(spec, timeout=0.2)


@pytest.mark.timeout(30)
def test_a_file_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * 4_000_000 + "\n")
    with pytest.raises(
        FlowSpecError,
        match=rf"^The flow file {re.escape(repr(str(path)))} is 4,000,003 bytes; the limit is "
        r"4,000,000\. Split it, or check that it is the file you meant\.$",
    ):
        FlowSpec.load(path)


def test_on_yes_and_no_are_words_as_in_yaml_1_2() -> None:
    from migration._spec.limits import load_yaml

    assert load_yaml("on: push\nyes: 1\nother: no\nflag: true\noff_flag: False\n") == {
        "on": "push",
        "yes": 1,
        "other": "no",
        "flag": True,
        "off_flag": False,
    }


async def test_a_flow_input_keyed_on_runs_as_written() -> None:
    spec = FlowSpec.load(
        "flow:\n  name: x\n  input:\n    on: push\nnodes:\n  - id: a\n    type: echo\n"
        "    input: {text: '{{flow.input.on}}'}\nedges: []\n"
    )
    assert (await run_edge_harness(spec))["a"] == {"text": "push"}
