from __future__ import annotations

import asyncio
from typing import Any

import pytest

from migration import FlowFailError, NodeContext, NodeRegistry, UnknownNodeTypeError
from migration._expressions.values import binding_context

BUILTINS = [
    "anthropic.text",
    "claude.agent",
    "condition.equals",
    "constant",
    "control.fail",
    "control.foreach",
    "control.if",
    "control.noop",
    "control.switch",
    "control.wait",
    "echo",
    "system.state.get",
    "system.state.set",
]


def context(node: str = "n", **outputs: Any) -> NodeContext:
    return NodeContext(
        node=node,
        type="?",
        config={},
        flow_input={},
        bindings=binding_context({"kind": "bug"}, outputs),
        provider=None,
    )


def test_a_new_registry_holds_the_builtins() -> None:
    assert list(NodeRegistry()) == BUILTINS
    assert "echo" in NodeRegistry()
    assert len(NodeRegistry()) == len(BUILTINS)


@pytest.mark.parametrize(
    ("type", "input", "output"),
    [
        pytest.param("echo", {"text": "hi"}, {"text": "hi"}, id="echo"),
        pytest.param("constant", {"value": [1, {"a": 2}]}, {"value": [1, {"a": 2}]}, id="constant"),
        pytest.param("condition.equals", {"left": 1, "right": 1.0}, {"value": True}, id="eq-num"),
        pytest.param(
            "condition.equals", {"left": True, "right": 1}, {"value": False}, id="eq-bool"
        ),
        pytest.param(
            "condition.equals",
            {"left": {"a": [1]}, "right": {"a": [1]}},
            {"value": True},
            id="eq-obj",
        ),
        pytest.param("control.noop", {"value": 3}, {"value": 3}, id="noop"),
        pytest.param("control.noop", {}, {"value": None}, id="noop-empty"),
        pytest.param("control.wait", {"ms": 1}, {"waitedMs": 1}, id="wait"),
        pytest.param(
            "control.if",
            {"condition": {"equals": {"var": "flow.input.kind", "value": "bug"}}},
            {"condition": True},
            id="if",
        ),
        pytest.param(
            "control.switch",
            {
                "value": 7,
                "cases": [
                    {
                        "when": {"equals": {"var": "flow.input.kind", "value": "feature"}},
                        "route": "f",
                    },
                    {"when": {"equals": {"var": "flow.input.kind", "value": "bug"}}, "route": "b"},
                ],
            },
            {"route": "b", "value": 7},
            id="switch",
        ),
        pytest.param(
            "control.switch",
            {"value": 1, "cases": []},
            {"route": "default", "value": 1},
            id="switch-default",
        ),
    ],
)
async def test_builtin_types(type: str, input: dict[str, Any], output: dict[str, Any]) -> None:
    assert await NodeRegistry().call(type, input, context()) == output


async def test_control_fail_fails_with_its_message() -> None:
    with pytest.raises(FlowFailError, match=r"^stop here$") as info:
        await NodeRegistry().call("control.fail", {"message": "stop here"}, context("guard"))
    assert info.value.node == "guard"


@pytest.mark.parametrize(
    ("type", "input", "message"),
    [
        pytest.param(
            "echo", {"text": 3}, "An echo node needs input.text as a string, got 3.", id="echo"
        ),
        pytest.param(
            "echo", "hi", "The echo node type needs a mapping as input, got 'hi'.", id="mapping"
        ),
        pytest.param(
            "control.wait",
            {"ms": -1},
            "A control.wait node needs input.ms as a number >= 0, got -1.",
            id="wait",
        ),
        pytest.param(
            "control.if",
            {"condition": {"bogus": 1}},
            "control.if input.condition: unknown condition 'bogus'; use {equals: {var, value}}, "
            "{not: expr}, {and: [...]}, {or: [...]} or an expression string such as "
            '"node.value = true".',
            id="if",
        ),
    ],
)
async def test_builtins_check_their_input(type: str, input: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        await NodeRegistry().call(type, input, context())
    assert str(info.value) == message


async def test_control_wait_is_cancellable() -> None:
    task = asyncio.create_task(NodeRegistry().call("control.wait", {"ms": 60_000}, context()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_user_types_may_be_sync_or_async_and_take_a_context() -> None:
    registry = NodeRegistry()

    def upper(input: dict[str, Any]) -> dict[str, Any]:
        return {"text": input["text"].upper()}

    async def who(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"node": ctx.node, "attempt": ctx.attempt}

    assert registry.register("text.upper", upper) is upper
    registry.register("who", who)
    registry.register("varargs", lambda *args: {"got": len(args)})
    assert await registry.call("text.upper", {"text": "hi"}, context()) == {"text": "HI"}
    assert await registry.call("who", {}, context("me")) == {"node": "me", "attempt": 1}
    assert await registry.call("varargs", {}, context()) == {"got": 2}


def test_registering_twice_needs_replace() -> None:
    registry = NodeRegistry()
    with pytest.raises(
        ValueError, match=r"^Node type 'echo' is registered already; pass replace=True"
    ):
        registry.register("echo", lambda input: input)
    registry.register("echo", lambda input: {"echoed": input}, replace=True)
    with pytest.raises(TypeError, match=r"^Node type 'x' needs a function"):
        registry.register("x", 3)  # type: ignore[arg-type]


def test_a_copy_is_independent() -> None:
    registry = NodeRegistry()
    clone = registry.copy()
    clone.register("mine", lambda input: input)
    assert "mine" in clone
    assert "mine" not in registry


async def test_an_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNodeTypeError) as info:
        await NodeRegistry().call("http.get", {}, context("fetch"))
    assert str(info.value) == (
        "Unknown node type: 'http.get' (node 'fetch'). Known types: "
        + ", ".join(BUILTINS)
        + ". Register yours with registry.register(type, fn) and pass registry= (or reactor "
        "migrate --registry MODULE:ATTR), or install a package that provides it (entry point "
        "group reactor.node_types)."
    )
    assert info.value.known == tuple(BUILTINS)
