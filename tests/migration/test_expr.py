"""Expressions: the kernel's JSONata subset, parsed once, evaluated like JSONata."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration import FlowSpec, FlowSpecError
from migration._expressions.expr import ExpressionError, evaluate, parse, roots
from migration._expressions.values import MISSING
from migration._expressions.when import evaluate_when
from tests.migration.support import flow, node

CONTEXT: dict[str, Any] = {
    "reviewer": {"structuredOutput": {"passed": True, "score": 0.8, "notes": ""}},
    "plan": {"tasks": [{"title": "a", "done": True}, {"title": "b", "done": False}]},
    "flow": {"input": {"x": 3, "name": "Ada", "owner": None, "tags": []}},
    "state": {"stage": "review", "count": 0},
    "my-node": {"ok": 1},
}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("reviewer.structuredOutput.passed", True, id="path"),
        pytest.param("reviewer.structuredOutput.passed = true", True, id="equals"),
        pytest.param("reviewer.structuredOutput.passed != true", False, id="not-equals"),
        pytest.param("flow.input.x = 3.0", True, id="number-equals"),
        pytest.param("flow.input.x = '3'", False, id="string-is-not-number"),
        pytest.param("reviewer.structuredOutput.passed = 1", False, id="true-is-not-1"),
        pytest.param("flow.input.x < 4 and flow.input.x <= 3", True, id="less"),
        pytest.param("flow.input.x > 3 or flow.input.x >= 3", True, id="greater"),
        pytest.param("flow.input.name < 'Bob'", True, id="strings-order"),
        pytest.param("flow.input.name < 4", False, id="string-and-number-do-not-order"),
        pytest.param("flow.input.missing < 4", MISSING, id="undefined-does-not-order"),
        pytest.param("flow.input.missing = null", False, id="undefined-is-not-null"),
        pytest.param("flow.input.owner = null", True, id="null-equals-null"),
        pytest.param("flow.input.missing != null", False, id="undefined-never-compares"),
        pytest.param("$exists(flow.input.owner)", True, id="null-exists"),
        pytest.param("$exists(flow.input.missing)", False, id="missing-does-not"),
        pytest.param("$not(reviewer.structuredOutput.notes)", True, id="empty-string-false"),
        pytest.param("$not(flow.input.tags)", True, id="empty-list-false"),
        pytest.param("$not(state.count)", True, id="zero-false"),
        pytest.param("$not(flow.input.missing)", MISSING, id="not-undefined"),
        pytest.param("state.stage = 'review' and $not(state.count > 0)", True, id="state"),
        pytest.param("(false or true) and (true and (null or 1))", True, id="parentheses"),
        pytest.param("plan.tasks.title", ["a", "b"], id="path-maps-lists"),
        pytest.param("plan.tasks.done = [true, false]", MISSING, id="no-array-literals"),
        pytest.param("`my-node`.ok = 1", True, id="backticks"),
        pytest.param("\"tab\\there\" = 'tab\\u0009here'", True, id="escapes"),
        pytest.param("-1.5e1 < 0", True, id="negative-number"),
    ],
)
def test_expressions_evaluate_like_jsonata(text: str, value: Any) -> None:
    try:
        tree = parse(text)
    except ExpressionError:
        assert value is MISSING
        return
    assert evaluate(tree, CONTEXT) == value


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        pytest.param("a = ", "the expression ends too early (column 4)", 4, id="early-end"),
        pytest.param("a == 1", "unexpected '=' at column 4", 4, id="double-equals"),
        pytest.param("a = 1 = 2", "unexpected '=' at column 7", 7, id="chained"),
        pytest.param("a and and b", "unexpected 'and' at column 7", 7, id="keyword"),
        pytest.param("a # b", "unexpected character '#' at column 3", 3, id="character"),
        pytest.param(
            "$count(a)",
            "unknown function $count at column 1; conditions know $not(...) and $exists(...)",
            1,
            id="function",
        ),
        pytest.param("$not(a, b)", "$not takes one argument, got 2 (column 1)", 1, id="arity"),
        pytest.param("'a\\q'", "unknown escape \\q in a string", 3, id="escape"),
        pytest.param("  ", "the expression is empty", 1, id="empty"),
    ],
)
def test_parse_errors_name_the_column(text: str, message: str, column: int) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    assert str(info.value) == message
    assert info.value.column == column


def test_expressions_are_parsed_once() -> None:
    assert parse("a.b = 1") is parse("a.b = 1")


def test_roots_are_what_an_expression_reads() -> None:
    assert roots(parse("$not(a.b) and (c = flow.input.x or $exists(`d-e`.f))")) == {
        "a",
        "c",
        "flow",
        "d-e",
    }


def test_conditions_in_a_flow_are_checked_at_load_with_the_column() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(
            flow(
                [node("a"), node("b", when="a.text = 'x' and")],
                [{"from": "a", "to": "b", "when": "$nope(a.text)"}],
            )
        )
    assert info.value.problems == (
        "Node 'b' when: \"a.text = 'x' and\" is not a valid condition: the expression ends too "
        "early (column 17).",
        "Edge a->b when: '$nope(a.text)' is not a valid condition: unknown function $nope at "
        "column 1; conditions know $not(...) and $exists(...).",
    )


def test_bad_expression_bindings_are_checked_at_load() -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(flow([node("a", input={"text": "{{ a.text = }}"})]))
    assert info.value.problems == (
        "Node 'a': {{ a.text = }} is neither a path nor an expression: the expression ends too "
        "early (column 9). Write {{path}}, {{?path}}, {{path | default:<json>}}, or an "
        "expression such as {{ node.score >= 0.5 }}.",
    )


def test_strings_and_mappings_combine_in_conditions() -> None:
    context = {"a": {"v": 2}, "flow": {"input": {}}}
    assert evaluate_when({"and": ["a.v > 1", {"equals": {"var": "a.v", "value": 2}}]}, context)
    assert not evaluate_when({"not": "a.v = 2"}, context)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
        max_leaves=6,
    )
)
def test_a_value_equals_itself_and_exists(value: Any) -> None:
    context = {"v": value}
    assert evaluate(parse("v = v"), context) is True
    assert evaluate(parse("v != v"), context) is False
    assert evaluate(parse("$exists(v)"), context) is True
