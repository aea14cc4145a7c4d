from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from reactor import (
    AgentConfigError,
    GraphValidationError,
    ScriptedProvider,
    Tool,
    agent,
    reactive,
    tool,
)


class Out(BaseModel):
    value: int


class Opaque:
    """A type pydantic has no schema for."""


def noop(ctx: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"prompt": "x", "run": noop}, r"not several\.$", id="both"),
        pytest.param(
            {"run": noop, "activate_on": "a**b"},
            r"^Agent 'a': bad activate_on pattern: Invalid pattern 'a\*\*b'",
            id="bad-pattern",
        ),
        pytest.param(
            {"prompt": "{{ state.x "},
            r"^Agent 'a': the prompt template has a syntax error on line 1",
            id="template-syntax",
        ),
        pytest.param(
            {"prompt": "x", "system": "{% if %}"},
            r"^Agent 'a': the system template has a syntax error",
            id="system-syntax",
        ),
        pytest.param(
            {"run": noop, "concurrency": "eager"},
            r"^Agent 'a': unknown concurrency 'eager'; "
            r"use one of parallel, serial, skip, latest\.$",
            id="concurrency",
        ),
        pytest.param(
            {"run": noop, "when": "state.x >"},
            r"^Agent 'a': the `when` expression 'state\.x >' has a syntax error",
            id="when-syntax",
        ),
        pytest.param(
            {"run": noop, "output": Opaque},
            r"output must be a pydantic model or a type pydantic validates",
            id="output",
        ),
        pytest.param(
            {"run": noop, "emits": ["trade:*"]},
            r"emits must list concrete signal names",
            id="emits-pattern",
        ),
        pytest.param(
            {"run": noop, "max_activations": 0}, r"max_activations must be None", id="limit"
        ),
        pytest.param(
            {"run": noop, "updates": "a:b"}, r"updates must name a top-level state key", id="key"
        ),
        pytest.param(
            {"run": noop, "system": "x"}, r"system= is for prompt agents", id="run-with-system"
        ),
        pytest.param(
            {"prompt": "x", "provider": object()}, r"provider must have a stream", id="provider"
        ),
        pytest.param({"prompt": "x", "output_retries": -1}, r"output_retries", id="retries"),
    ],
)
def test_invalid_definitions_name_the_agent_and_the_fix(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(AgentConfigError, match=message) as info:
        agent(name="a", **kwargs)
    assert info.value.agent == "a"


def test_async_guards_are_rejected() -> None:
    async def guard(ctx: Any) -> bool:
        return True

    with pytest.raises(AgentConfigError, match=r"when must be synchronous"):
        agent(name="a", run=noop, when=guard)


def test_invalid_names_are_rejected() -> None:
    with pytest.raises(AgentConfigError, match=r"Agent name 'a:b' is invalid"):
        agent(name="a:b", run=noop)


def test_an_unnamed_agent_reports_its_problems_under_the_key_that_names_it() -> None:
    defined = agent(prompt="x", run=noop)  # no name yet: nothing to call it by
    with pytest.raises(GraphValidationError, match=r"Agent 'trader': give exactly one of"):
        reactive({"trader": defined})
    with pytest.raises(AgentConfigError, match=r"^Agent 'solo': give exactly one of"):
        defined.named("solo")


def test_unknown_options_are_named_with_the_option_meant() -> None:
    with pytest.raises(
        AgentConfigError,
        match=r"^Agent 'a': unknown option 'activateOn'; did you mean 'activate_on'\? ",
    ):
        agent(name="a", run=noop, activateOn="x")  # type: ignore[arg-type]


def test_every_definition_problem_is_reported_at_once() -> None:
    with pytest.raises(AgentConfigError, match=r"^Agent 'a' has 3 problems:\n") as info:
        agent(name="a", run=noop, updates="a:b", concurrency="eager", max_activations=0)  # type: ignore[arg-type]
    assert "updates must name a top-level state key" in str(info.value)
    assert "unknown concurrency 'eager'" in str(info.value)
    assert "max_activations must be None or an integer >= 1" in str(info.value)


def test_definition_keeps_its_declarations() -> None:
    provider = ScriptedProvider()
    a = agent(
        name="a",
        prompt="Hi {{ input }}",
        activate_on=["x", "y:*"],
        emits="done",
        output=Out,
        provider=provider,
        options={"model": "m"},
    )
    assert (a.activate_on, a.emits, a.provider, a.options) == (
        ("x", "y:*"),
        ("done",),
        provider,
        {"model": "m"},
    )
    assert a.is_llm
    assert a.output_schema == Out.model_json_schema()
    assert agent(run=noop).activate_on == ("harness:start",)


def test_tools_get_name_description_and_schema_from_the_function() -> None:
    def get_price(symbol: str, days: int = 1) -> float:
        """Return the average price of a stock.

        Args:
            symbol: The ticker, e.g. AAPL.
            days: How many days to average
                over.
        """
        return 1.0

    a = agent(name="a", prompt="x", tools=[get_price])
    (built,) = a.tools
    assert isinstance(built, Tool)
    assert built.definition() == {
        "name": "get_price",
        "description": "Return the average price of a stock.",
        "input_schema": {
            "type": "object",
            "properties": {
                "symbol": {
                    "type": "string",
                    "title": "Symbol",
                    "description": "The ticker, e.g. AAPL.",
                },
                "days": {
                    "type": "integer",
                    "title": "Days",
                    "default": 1,
                    "description": "How many days to average over.",
                },
            },
            "required": ["symbol"],
        },
    }


async def test_tools_validate_arguments_and_await_async_functions() -> None:
    @tool(name="lookup", description="Find a thing.")
    async def find(key: str, limit: int = 3) -> dict[str, Any]:
        return {"key": key, "limit": limit}

    assert await find.invoke({"key": "k", "limit": "5"}) == {"key": "k", "limit": 5}
    with pytest.raises(ValueError, match="key"):
        await find.invoke({})


def test_tools_with_varargs_are_rejected() -> None:
    def bad(*names: str) -> None:
        return None

    with pytest.raises(AgentConfigError, match=r"takes \*names"):
        agent(name="a", prompt="x", tools=[bad])


def test_a_definitions_problems_are_raised_once_it_is_named() -> None:
    from reactor import AgentConfigError, GraphValidationError

    unnamed = agent(prompt="{{ x", bogus=1)  # type: ignore[arg-type]
    assert unnamed.problems
    with pytest.raises(GraphValidationError, match=r"\n  - Agent 'a' has 2 problems:"):
        reactive({"a": unnamed})
    with pytest.raises(AgentConfigError, match=r"^Agent 'b' has 2 problems:"):
        agent(name="b", prompt="{{ x", bogus=1)  # type: ignore[arg-type]
