from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration import BindingError
from migration._expressions.bindings import resolve
from migration._expressions.values import binding_context, json_equal
from migration._expressions.when import evaluate_when

CONTEXT = binding_context(
    {"name": "World", "count": 3, "flags": {"on": True}, "empty": None},
    {
        "facts": {"value": {"city": "Lisbon", "tags": ["a", "b"]}},
        "check": {"value": False},
    },
)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param("Hello, {{flow.input.name}}!", "Hello, World!", id="flow-input"),
        pytest.param("Hello, {{ workflow.input.name }}!", "Hello, World!", id="workflow-alias"),
        pytest.param("{{facts.value.city}}", "Lisbon", id="node-output"),
        pytest.param("{{facts.value}}", {"city": "Lisbon", "tags": ["a", "b"]}, id="keeps-dict"),
        pytest.param("{{ flow.input.count }}", 3, id="keeps-number"),
        pytest.param("  {{check.value}} ", False, id="keeps-bool-when-alone"),
        pytest.param("{{facts.value.tags.1}}", "b", id="list-index"),
        pytest.param("n={{flow.input.count}}", "n=3", id="number-in-text"),
        pytest.param("{{facts.value}}!", '{"city":"Lisbon","tags":["a","b"]}!', id="json-in-text"),
        pytest.param("on: {{flow.input.flags.on}}", "on: true", id="bool-in-text-is-json"),
        pytest.param("[{{?flow.input.missing}}]", "[]", id="optional-renders-empty"),
        pytest.param("{{?flow.input.missing}}", None, id="optional-alone-is-null"),
        pytest.param("{{?flow.input.name}}", "World", id="optional-present"),
        pytest.param("{{flow.input.missing | default:7}}", 7, id="default-typed"),
        pytest.param("{{flow.input.missing | default: false}}", False, id="default-space"),
        pytest.param('{{flow.input.missing|default :"x"}}!', "x!", id="default-string"),
        pytest.param(
            '{{flow.input.missing | default:{"a": {"b": 1}}}}', {"a": {"b": 1}}, id="nested-json"
        ),
        pytest.param("{{flow.input.empty | default:0}}", 0, id="null-is-missing"),
        pytest.param("{{check.value | default:true}}", False, id="present-false-beats-default"),
        pytest.param("no bindings", "no bindings", id="plain"),
        # The old kernel read paths with JavaScript property access.
        pytest.param("{{ facts.value.tags.length }}", 2, id="list-length"),
        pytest.param("{{flow.input.name.length}} letters", "5 letters", id="string-length"),
    ],
)
def test_bindings_resolve(template: str, expected: Any) -> None:
    assert resolve(template, CONTEXT) == expected


def test_only_strings_are_templated_recursively() -> None:
    value = {"a": ["{{flow.input.name}}", 1, None, {"b": "{{flow.input.count}}"}], "c": True}
    assert resolve(value, CONTEXT) == {"a": ["World", 1, None, {"b": 3}], "c": True}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        pytest.param(
            "{{flow.input.nme}}",
            "Node 'greet': the binding {{flow.input.nme}} has no value (flow.input has no "
            "'nme'). Make it optional with {{?flow.input.nme}}, give it a default with "
            "{{flow.input.nme | default:<json>}}, or check the path.",
            id="missing-key",
        ),
        pytest.param(
            "x {{later.text}}",
            "Node 'greet': the binding {{later.text}} has no value (there is no node or input "
            "named 'later' yet). Make it optional with {{?later.text}}, give it a default "
            "with {{later.text | default:<json>}}, or check the path.",
            id="missing-node",
        ),
        pytest.param(
            "{{flow.input.empty}}",
            "Node 'greet': the binding {{flow.input.empty}} has no value (flow.input.empty "
            "is null). Make it optional with {{?flow.input.empty}}, give it a default with "
            "{{flow.input.empty | default:<json>}}, or check the path.",
            id="null",
        ),
    ],
)
def test_a_strict_binding_without_value_fails(template: str, message: str) -> None:
    with pytest.raises(BindingError) as info:
        resolve({"text": template}, CONTEXT, node="greet")
    assert str(info.value) == message
    assert info.value.node == "greet"


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        pytest.param({"equals": {"var": "check.value", "value": False}}, True, id="equals"),
        pytest.param({"equals": {"var": "check.value", "value": 0}}, False, id="false-is-not-0"),
        pytest.param({"equals": {"var": "flow.input.count", "value": 3.0}}, True, id="3-is-3.0"),
        pytest.param({"equals": {"var": "nowhere.x", "value": None}}, True, id="missing-is-null"),
        pytest.param({"not": {"equals": {"var": "check.value", "value": True}}}, True, id="not"),
        pytest.param(
            {
                "and": [
                    {"equals": {"var": "flow.input.name", "value": "World"}},
                    {"equals": {"var": "facts.value.tags", "value": ["a", "b"]}},
                ]
            },
            True,
            id="and",
        ),
        pytest.param(
            {
                "or": [
                    {"equals": {"var": "flow.input.name", "value": "Mars"}},
                    {"equals": {"var": "flow.input.flags", "value": {"on": True}}},
                ]
            },
            True,
            id="or",
        ),
        pytest.param(None, True, id="no-condition"),
    ],
)
def test_when_expressions(expr: dict[str, Any] | None, expected: bool) -> None:
    assert evaluate_when(expr, CONTEXT) is expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)


@given(json_values)
def test_a_single_binding_keeps_any_json_value(value: Any) -> None:
    context = binding_context({"v": value}, {})
    expected = None if value is None else value
    assert resolve("{{?flow.input.v}}", context) == expected


@given(json_values, json_values)
def test_json_equal_is_symmetric_and_reflexive(left: Any, right: Any) -> None:
    assert json_equal(left, left)
    assert json_equal(left, right) == json_equal(right, left)


def test_a_mappings_own_length_key_wins_over_the_property() -> None:
    context = binding_context({"page": {"length": "A4"}}, {})
    assert resolve("{{flow.input.page.length}}", context) == "A4"
