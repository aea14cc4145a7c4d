"""Jinja's blocks in a flow's strings: ``{% if %}`` and ``{% for %}``, or a refusal at load."""

from __future__ import annotations

from typing import Any

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migration import FlowSpec, FlowSpecError
from migration._expressions.bindings import bound_nodes, resolve
from reactor import ProviderRequest, ScriptedProvider
from tests.migration.support import flow, node, run_both

PROMPT = """Task: {{ flow.input.task }}
{% if state.reviewFeedback %}
Passed: {{ state.reviewFeedback.passed }}
{% for issue in state.reviewFeedback.issues %}
- {{ issue }}
{% endfor %}
{% else %}
This is the first iteration. No previous feedback.
{% endif %}
Write the code."""


def coder(initial: dict[str, Any]) -> dict[str, Any]:
    return flow(
        [node("coder", "claude.agent", input={"prompt": PROMPT})],
        input={"task": "parse dates"},
        state={"initial": initial},
    )


def prompts() -> tuple[ScriptedProvider, list[str]]:
    seen: list[str] = []

    def answer(request: ProviderRequest) -> str:
        seen.append(request.messages[-1].content)
        return "the code"

    return ScriptedProvider(default=answer), seen


@pytest.mark.parametrize(
    ("feedback", "expected"),
    [
        pytest.param(
            None,
            "Task: parse dates\n\nThis is the first iteration. No previous feedback.\n\n"
            "Write the code.",
            id="no-feedback",
        ),
        pytest.param(
            {"passed": False, "issues": ["no tests", "a typo"]},
            "Task: parse dates\n\nPassed: false\n\n- no tests\n\n- a typo\n\n\nWrite the code.",
            id="feedback",
        ),
    ],
)
async def test_a_prompt_with_blocks_renders_the_branch_taken_in_both_executors(
    feedback: dict[str, Any] | None, expected: str
) -> None:
    provider, seen = prompts()
    both = await run_both(coder({"reviewFeedback": feedback}), provider=lambda: provider)
    both.assert_agree()
    assert seen == [expected, expected]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            "a\nb\n{% set x = 1 %}",
            "line 3: {% set x = 1 %} is a statement flows do not run; their strings take "
            "{% if %}, {% elif %}, {% else %}, {% endif %}, {% for x in list %}, {% endfor %} "
            "and {# comments #}",
            id="unsupported",
        ),
        pytest.param(
            "x\n{% if state.ok %}y",
            "line 2: {% if state.ok %} is never closed; add {% endif %} where the block ends",
            id="unclosed",
        ),
        pytest.param(
            "{% for i in state.items %}\n{% endif %}",
            "line 2: {% endif %} closes no {% if %}; {% endfor %} closes the open one",
            id="stray-end",
        ),
        pytest.param(
            "{% if not state.ok %}{% endif %}",
            "line 1: {% if not state.ok %}: its condition 'not state.ok' is not an expression "
            "of the flow's dialect (unexpected 'state' at column 5); write it as a when "
            "condition is written: a path, =, !=, <, and, or, $not(...), $exists(...)",
            id="jinja-condition",
        ),
    ],
)
def test_a_block_flows_do_not_run_is_refused_at_load_with_its_line(text: str, problem: str) -> None:
    spec = flow([node("n", "claude.agent", input={"prompt": text})])
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(spec)
    assert str(info.value) == f"Node 'n' input.prompt: {problem}."


def test_reads_in_blocks_order_the_reactive_graph_and_loop_names_are_the_loops() -> None:
    text = (
        "{% if a.ok %}{% for t in b.tasks %}{{ t.title }} {{ loop.index }}{% endfor %}{% endif %}"
    )
    assert bound_nodes({"prompt": text}) == {"a", "b"}


def test_a_for_goes_through_a_list_and_nothing_for_undefined() -> None:
    each = "{{ x }}{% if loop.last %}.{% else %},{% endif %}"
    text = f"{{% for x in xs %}}{each}{{% else %}}none{{% endfor %}}"
    assert resolve(text, {"xs": ["a", "b"]}) == "a,b."
    assert resolve(text, {"xs": None}) == "none"
    assert resolve(text, {}) == "none"


WORDS = st.sampled_from(["a", "b ", " c", "\n", "  \n  ", "d\n"])


@st.composite
def templates(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "binding", "if", "for"] if depth < 2 else ["text"]))
        left, right = draw(st.sampled_from(["", "-"])), draw(st.sampled_from(["", "-"]))
        if kind == "text":
            parts.append(draw(WORDS))
        elif kind == "binding":
            parts.append("{{ word }}")
        elif kind == "if":
            flag = draw(st.sampled_from(["yes", "no"]))
            then, other = draw(templates(depth + 1)), draw(templates(depth + 1))
            parts.append(
                f"{{%{left} if {flag} {right}%}}{then}{{% else {right}%}}{other}{{%{left} endif %}}"
            )
        else:
            body = draw(templates(depth + 1))
            parts.append(f"{{%{left} for word in words {right}%}}{body}{{%{left} endfor {right}%}}")
    return "".join(parts)


@settings(max_examples=200)
@given(templates())
def test_blocks_mean_what_jinja_means(inner: str) -> None:
    text = f"{{% if yes %}}{inner}{{% endif %}}"  # a string alone a binding keeps its type
    values = {"yes": True, "no": False, "word": "w", "words": ["x", "y"]}
    expected = jinja2.Environment(keep_trailing_newline=True).from_string(text).render(values)
    assert resolve(text, values) == expected
