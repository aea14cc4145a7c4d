"""The built-in node types, in the two packs the old kernel shipped: ``core`` and ``claude``.

``core``: ``echo``, ``constant``, ``condition.equals``, ``control.if``,
``control.switch``, ``control.noop``, ``control.fail``, ``control.wait``,
``control.foreach``, ``system.state.get`` and ``system.state.set``. ``claude``: the
LLM node ``claude.agent`` (alias ``anthropic.text``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from migration._expressions.errors import FlowFailError
from migration._expressions.values import MISSING, json_equal, lookup, shorten
from migration._expressions.when import check_when, evaluate_when
from migration._nodes.context import BodyRun, NodeContext, NodeFunction, each_item
from migration._nodes.llm import ask
from migration._spec.models import FOREACH_TYPE
from reactor import NoProviderError
from reactor._signals.diagnostics import log

__all__ = ["BUILTIN_PACKS"]


def _mapping(input: Any, type: str) -> Mapping[str, Any]:
    if not isinstance(input, Mapping):
        raise TypeError(f"The {type} node type needs a mapping as input, got {shorten(input)}.")
    return input


def _echo(input: Any) -> dict[str, Any]:
    text = _mapping(input, "echo").get("text")
    if not isinstance(text, str):
        raise TypeError(f"An echo node needs input.text as a string, got {shorten(text)}.")
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
        raise TypeError(f"A control.switch node needs input.cases as a list, got {shorten(cases)}.")
    for index, case in enumerate(cases):
        if not isinstance(case, Mapping) or not isinstance(case.get("route"), str):
            raise TypeError(
                f"control.switch case {index} needs {{when, route}}, got {shorten(case)}."
            )
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
        raise TypeError(f"A control.wait node needs input.ms as a number >= 0, got {shorten(ms)}.")
    if ms:
        await asyncio.sleep(ms / 1000)
    return {"waitedMs": ms}


async def _foreach(input: Any, ctx: NodeContext) -> dict[str, Any]:
    data = _mapping(input, FOREACH_TYPE)
    items = data.get("items", data.get("list"))
    if not isinstance(items, list):
        raise TypeError(
            f"A {FOREACH_TYPE} node needs input.items as a list, got {shorten(items)}; "
            'bind it to one, as in items: "{{ plan.tasks }}".'
        )
    name = data.get("as", "item")

    async def one(item: Any, state: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        run: BodyRun = await ctx.run_body({name: item}, state=state)
        return {"item": item, "outputs": run.outputs}, run.writes

    iterations, writes = await each_item(
        items, one, state=ctx.current_state(), concurrency=data.get("concurrency")
    )
    for path, value in writes:
        ctx.set_state(path, value)
    return {"iterations": iterations}


def _state_key(input: Any, type: str) -> str:
    key = _mapping(input, type).get("key")
    if not isinstance(key, str) or not key:
        raise TypeError(f"A {type} node needs input.key as a dotted path, got {shorten(key)}.")
    return key


def _state_get(input: Any, ctx: NodeContext) -> dict[str, Any]:
    value = lookup(ctx.state, _state_key(input, "system.state.get"))
    return {"value": None if value is MISSING else value}


def _state_set(input: Any, ctx: NodeContext) -> dict[str, Any]:
    key = _state_key(input, "system.state.set")
    ctx.set_state(key, input.get("value"))
    return {"ok": True}


_IGNORED_OPTIONS = ("outputSchema", "outputFormat", "systemPrompt", "model")


async def _llm(input: Any, ctx: NodeContext) -> dict[str, Any]:
    data = _mapping(input, ctx.type)
    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise TypeError(f"A {ctx.type} node needs input.prompt as a string, got {shorten(prompt)}.")
    if ctx.provider is None:
        raise NoProviderError(
            f"Node {ctx.node!r} ({ctx.type}) has no provider to run its prompt on. Pass "
            "provider= (e.g. ScriptedProvider({...}) offline, AnthropicProvider() for Claude) "
            "to run_edge_harness(), harness_to_reactive() or the graph's run().",
            agent=ctx.node,
        )
    config = ctx.config
    found = data.get("options")
    session: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    schema = _schema(session) or _schema(config) or config.get("schema")
    options = dict(config.get("options") or {})
    model = session.get("model", config.get("model"))
    if model is not None:
        options["model"] = model
    dropped = sorted(set(session) - set(_IGNORED_OPTIONS))
    if dropped:
        log("migration", "debug", "agent session options not used", node=ctx.node, options=dropped)
    system = data.get("system", session.get("systemPrompt", config.get("system")))
    reply = await ask(
        ctx.provider,
        agent=ctx.node,
        prompt=prompt,
        system=system if isinstance(system, str) else None,
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
        output["structuredOutput"] = structured
        output["structured_output"] = structured
    output["usage"] = reply.usage
    return output


def _schema(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """``outputSchema``, or ``outputFormat: {type: json_schema, schema}``, of some options."""
    if isinstance(options.get("outputSchema"), Mapping):
        return dict(options["outputSchema"])
    found = options.get("outputFormat")
    if isinstance(found, Mapping) and isinstance(found.get("schema"), Mapping):
        return dict(found["schema"])
    return None


BUILTIN_PACKS: dict[str, dict[str, NodeFunction]] = {
    "core": {
        "echo": _echo,
        "constant": _constant,
        "condition.equals": _equals,
        "control.if": _if,
        "control.switch": _switch,
        "control.noop": _noop,
        "control.fail": _fail,
        "control.wait": _wait,
        FOREACH_TYPE: _foreach,
        "system.state.get": _state_get,
        "system.state.set": _state_set,
    },
    "claude": {"claude.agent": _llm, "anthropic.text": _llm},
}
"""The built-in node types, by pack."""
