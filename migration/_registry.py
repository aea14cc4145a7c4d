"""Node types: what a node of a given ``type`` does with its (bound) input.

A :class:`NodeRegistry` starts with the built-in types; ``register`` adds yours. A
type is a function ``fn(input)`` or ``fn(input, ctx)`` (sync or async) returning the
node's output; ``ctx`` is a :class:`NodeContext`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from migration._bindings import check_when, evaluate_when, json_equal
from migration._errors import FlowFailError, UnknownNodeTypeError
from migration._llm import ask
from reactor import NoProviderError
from reactor.typing import Provider

__all__ = ["NodeContext", "NodeFunction", "NodeRegistry"]

NodeFunction = Callable[..., Any]
"""A node type: ``fn(input)`` or ``fn(input, ctx)``, sync or async, returning the output."""

LLM_TYPES = ("claude.agent", "anthropic.text")


@dataclasses.dataclass(frozen=True)
class NodeContext:
    """What a node type receives besides its input (when it takes a second argument).

    Attributes:
        node: The node's id (also the ``agent`` of its provider requests).
        type: The node's type.
        config: The node's ``config`` mapping.
        flow_input: The flow's input (defaults merged with the run's input).
        bindings: The binding context: node outputs so far, ``flow.input``,
            ``workflow.input`` (``control.if`` evaluates conditions against it).
        provider: The provider for model calls (the node's run's), if any.
        attempt: Which attempt this is, from 1 (``policy.retry``).
    """

    node: str
    type: str
    config: Mapping[str, Any]
    flow_input: Mapping[str, Any]
    bindings: Mapping[str, Any]
    provider: Provider | None
    attempt: int = 1


@dataclasses.dataclass(frozen=True)
class _NodeType:
    fn: NodeFunction
    takes_context: bool


class NodeRegistry:
    """Node types by name; a new registry already holds the built-in ones.

    Built-ins: ``echo`` (``{text}`` -> ``{text}``), ``constant`` (``{value}`` ->
    ``{value}``), ``condition.equals`` (``{left, right}`` -> ``{value}``, compared as
    JSON values), ``control.if`` (``{condition: WhenExpr}`` -> ``{condition}``),
    ``control.switch`` (``{value, cases: [{when, route}]}`` -> ``{route, value}``,
    route ``"default"`` when no case matches), ``control.noop`` (``{value}`` ->
    ``{value}``), ``control.fail`` (``{message}``: fails the node), ``control.wait``
    (``{ms}`` -> ``{waitedMs}``, cancellable), and the LLM node ``claude.agent``
    (alias ``anthropic.text``): input ``prompt`` and optional ``system``; config
    ``schema`` (or ``outputSchema``) for structured output, ``model``, ``options``;
    output ``{text, structured_output?, usage}``.

    ::

        registry = NodeRegistry()
        registry.register("http.get", fetch)              # fetch(input) or fetch(input, ctx)
    """

    def __init__(self) -> None:
        self._types: dict[str, _NodeType] = {}
        for name, fn in _BUILTINS.items():
            self.register(name, fn)

    def register(self, type: str, fn: NodeFunction, *, replace: bool = False) -> NodeFunction:
        """Add node type ``type``, run by ``fn(input)`` or ``fn(input, ctx)``; return ``fn``.

        Raises:
            TypeError: ``fn`` is not callable.
            ValueError: ``type`` is registered already and ``replace`` is false.
        """
        if not callable(fn):
            raise TypeError(f"Node type {type!r} needs a function fn(input[, ctx]), got {fn!r}.")
        if type in self._types and not replace:
            raise ValueError(
                f"Node type {type!r} is registered already; pass replace=True to override it."
            )
        self._types[type] = _NodeType(fn, _takes_context(fn))
        return fn

    def __contains__(self, type: object) -> bool:
        return type in self._types

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._types))

    def __len__(self) -> int:
        return len(self._types)

    def function(self, type: str) -> NodeFunction:
        """The function registered for ``type``.

        Raises:
            UnknownNodeTypeError: No such type.
        """
        return self._get(type, None).fn

    def require(self, types: Mapping[str, str]) -> None:
        """Check that every ``{node_id: type}`` is registered.

        Raises:
            UnknownNodeTypeError: Naming every unknown type, its nodes, and the known
                types.
        """
        unknown: dict[str, list[str]] = {}
        for node, type in types.items():
            if type not in self._types:
                unknown.setdefault(type, []).append(node)
        if unknown:
            first, nodes = next(iter(unknown.items()))
            listed = "; ".join(
                f"{t!r} (node{'s' if len(n) > 1 else ''} {', '.join(map(repr, n))})"
                for t, n in unknown.items()
            )
            raise UnknownNodeTypeError(
                f"Unknown node type{'s' if len(unknown) > 1 else ''}: {listed}. Known types: "
                f"{', '.join(self)}. Register yours with registry.register(type, fn) and pass "
                "registry=.",
                type=first,
                node=nodes[0],
                known=list(self),
            )

    async def call(self, type: str, input: Any, ctx: NodeContext) -> Any:
        """Run node type ``type`` on ``input``; await it if it is async."""
        node_type = self._get(type, ctx.node)
        result = node_type.fn(input, ctx) if node_type.takes_context else node_type.fn(input)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _get(self, type: str, node: str | None) -> _NodeType:
        found = self._types.get(type)
        if found is None:
            self.require({node or "?": type})
        assert found is not None
        return found

    def copy(self) -> NodeRegistry:
        """A new registry with the same types."""
        clone = NodeRegistry()
        clone._types = dict(self._types)
        return clone

    def __repr__(self) -> str:
        return f"<NodeRegistry {len(self)} types>"


def _takes_context(fn: NodeFunction) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature take the input only
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in positional)


# -- built-in types -------------------------------------------------------------------


def _mapping(input: Any, type: str) -> Mapping[str, Any]:
    if not isinstance(input, Mapping):
        raise TypeError(f"The {type} node type needs a mapping as input, got {input!r}.")
    return input


def _echo(input: Any) -> dict[str, Any]:
    text = _mapping(input, "echo").get("text")
    if not isinstance(text, str):
        raise TypeError(f"An echo node needs input.text as a string, got {text!r}.")
    return {"text": text}


def _constant(input: Any) -> dict[str, Any]:
    return {"value": _mapping(input, "constant").get("value")}


def _equals(input: Any) -> dict[str, Any]:
    data = _mapping(input, "condition.equals")
    return {"value": json_equal(data.get("left"), data.get("right"))}


def _condition(expr: Any, ctx: NodeContext, where: str) -> bool:
    problems = check_when(expr, where)
    if problems:
        raise ValueError(problems[0])
    return evaluate_when(expr, ctx.bindings)


def _if(input: Any, ctx: NodeContext) -> dict[str, Any]:
    condition = _mapping(input, "control.if").get("condition")
    return {"condition": _condition(condition, ctx, "control.if input.condition")}


def _switch(input: Any, ctx: NodeContext) -> dict[str, Any]:
    data = _mapping(input, "control.switch")
    cases = data.get("cases") or []
    if not isinstance(cases, list):
        raise TypeError(f"A control.switch node needs input.cases as a list, got {cases!r}.")
    for index, case in enumerate(cases):
        if not isinstance(case, Mapping) or not isinstance(case.get("route"), str):
            raise TypeError(f"control.switch case {index} needs {{when, route}}, got {case!r}.")
        if _condition(case.get("when"), ctx, f"control.switch case {index} when"):
            return {"route": case["route"], "value": data.get("value")}
    return {"route": "default", "value": data.get("value")}


def _noop(input: Any) -> dict[str, Any]:
    return {"value": _mapping(input, "control.noop").get("value")}


def _fail(input: Any, ctx: NodeContext) -> Any:
    message = _mapping(input, "control.fail").get("message") or "control.fail"
    raise FlowFailError(str(message), node=ctx.node)


async def _wait(input: Any) -> dict[str, Any]:
    ms = _mapping(input, "control.wait").get("ms", 0)
    if isinstance(ms, bool) or not isinstance(ms, int | float) or ms < 0:
        raise TypeError(f"A control.wait node needs input.ms as a number >= 0, got {ms!r}.")
    if ms:
        await asyncio.sleep(ms / 1000)
    return {"waitedMs": ms}


async def _llm(input: Any, ctx: NodeContext) -> dict[str, Any]:
    data = _mapping(input, ctx.type)
    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise TypeError(f"A {ctx.type} node needs input.prompt as a string, got {prompt!r}.")
    if ctx.provider is None:
        raise NoProviderError(
            f"Node {ctx.node!r} ({ctx.type}) has no provider to run its prompt on. Pass "
            "provider= (e.g. ScriptedProvider({...}) offline, AnthropicProvider() for Claude) "
            "to run_edge_harness(), harness_to_reactive() or the graph's run().",
            agent=ctx.node,
        )
    config = ctx.config
    schema = config.get("schema", config.get("outputSchema"))
    options = dict(config.get("options") or {})
    if "model" in config:
        options["model"] = config["model"]
    reply = await ask(
        ctx.provider,
        agent=ctx.node,
        prompt=prompt,
        system=data.get("system", config.get("system")),
        output_schema=schema,
        options=options,
    )
    output: dict[str, Any] = {"text": reply.text}
    if schema is not None:
        structured = reply.output
        if isinstance(structured, str):
            try:
                structured = json.loads(structured)
            except json.JSONDecodeError:
                raise ValueError(
                    f"Node {ctx.node!r} asked for structured output, but the answer is not "
                    f"JSON: {structured[:200]!r}."
                ) from None
        output["structured_output"] = structured
    output["usage"] = reply.usage
    return output


_BUILTINS: dict[str, NodeFunction] = {
    "echo": _echo,
    "constant": _constant,
    "condition.equals": _equals,
    "control.if": _if,
    "control.switch": _switch,
    "control.noop": _noop,
    "control.fail": _fail,
    "control.wait": _wait,
    "claude.agent": _llm,
    "anthropic.text": _llm,
}
