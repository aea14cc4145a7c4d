"""Node types the tests register: importable, so generated code can import them too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from migration import NodeContext, NodeRegistry

FLOWS = Path(__file__).parent / "data" / "flows"
DIALECT = Path(__file__).parent / "data" / "dialect"


def flaky(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    """tutorial.flaky: fails its first attempt (a flaky network), then answers."""
    if ctx.attempt < 2:
        raise ConnectionError(f"{input['label']}: connection reset")
    return {"label": input["label"], "ok": True, "attempts": ctx.attempt}


async def delay(input: dict[str, Any]) -> dict[str, Any]:
    """tutorial.delay: waits input.ms milliseconds (cancellable)."""
    await asyncio.sleep(input["ms"] / 1000)
    return {"waited": input["ms"]}


def add(input: dict[str, Any]) -> dict[str, Any]:
    """math.add: the sum of input.values (numbers)."""
    return {"value": sum(input.get("values", []))}


def fails_until(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    """test.fails_until: fails attempts before input.succeed_on (never if it is 0)."""
    succeed_on = input.get("succeed_on", 0)
    if not succeed_on or ctx.attempt < succeed_on:
        raise RuntimeError(f"attempt {ctx.attempt} failed")
    return {"attempt": ctx.attempt}


def registry() -> NodeRegistry:
    """The built-ins plus the test types."""
    types = NodeRegistry()
    types.register("tutorial.flaky", flaky)
    types.register("tutorial.delay", delay)
    types.register("math.add", add)
    types.register("test.fails_until", fails_until)
    return types


def grow(input: dict[str, Any]) -> dict[str, Any]:
    """text.grow: the word, then one "+" more on each run (loops read their last output)."""
    text = f"{input['previous']}+" if input.get("previous") else input["text"]
    return {"text": text, "size": len(text)}


def bump(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    """state.bump: add one to state.<key> (a number) through the node context."""
    value = ctx.state.get(input["key"], 0) + 1
    ctx.set_state(input["key"], value)
    return {"value": value}


def dialect_registry() -> NodeRegistry:
    """The test types plus the ones the dialect flows use."""
    types = registry()
    types.register("text.grow", grow)
    types.register("state.bump", bump)
    return types
