"""Running a model's tool calls: concurrently, with hooks, errors reported to the model.

Shared by every provider that runs a tool-use loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

from reactor._providers.base import ToolCall, ToolResult
from reactor._providers.tools import Tool
from reactor._signal import to_jsonable

__all__ = ["AfterTool", "BeforeTool", "RecordedToolError", "execute_tool_calls"]


class RecordedToolError(Exception):
    """A tool's error as a log recorded it, given back as it was (a resumed call)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


BeforeTool: TypeAlias = Callable[[ToolCall], "ToolCall | Awaitable[ToolCall | None] | None"]
"""``before_tool(call)``: return the call (possibly changed) to run it, ``None`` to block it."""

AfterTool: TypeAlias = Callable[
    [ToolCall, ToolResult], "ToolResult | Awaitable[ToolResult | None] | None"
]
"""``after_tool(call, result)``: return a replacement result, or ``None`` to keep it."""


async def execute_tool_calls(
    calls: Sequence[ToolCall],
    tools: Sequence[Tool],
    *,
    before: Sequence[BeforeTool] = (),
    after: Sequence[AfterTool] = (),
) -> list[ToolResult]:
    """Run the model's tool calls, concurrently, and return their results in call order.

    Each call passes the ``before`` hooks in order (any returning ``None`` blocks it),
    runs (a tool that raises, exits, returns what cannot be sent back, an unknown tool,
    or invalid arguments become an error result for the model, never an exception),
    then its result, blocked or not, passes the ``after`` hooks. Plain functions run in
    worker threads, so the calls of one turn run at once either way.

    Raises:
        Exception: A hook raised: the first such error, as it was raised (the other
            calls are waited for, not cancelled).
    """
    by_name = {tool.name: tool for tool in tools}

    async def run(call: ToolCall) -> ToolResult:
        result: ToolResult | None = None
        for before_hook in before:
            changed = before_hook(call)
            if inspect.isawaitable(changed):
                changed = await changed
            if changed is None:
                result = ToolResult(
                    call.id, call.name, None, error="Blocked by a before_tool hook."
                )
                break
            call = changed
        if result is None:
            result = await _invoke(call, by_name.get(call.name), by_name)
        for after_hook in after:
            replaced = after_hook(call, result)
            if inspect.isawaitable(replaced):
                replaced = await replaced
            if replaced is not None:
                result = replaced
        return result

    if len(calls) == 1:
        return [await run(calls[0])]
    outcomes = await asyncio.gather(*(run(call) for call in calls), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return [outcome for outcome in outcomes if isinstance(outcome, ToolResult)]


async def _invoke(call: ToolCall, tool: Tool | None, tools: dict[str, Tool]) -> ToolResult:
    if tool is None:
        known = ", ".join(tools) or "none"
        return ToolResult(
            call.id, call.name, None, error=f"Unknown tool {call.name!r} (tools: {known})."
        )
    try:
        value = await tool.invoke(call.input)
    except RecordedToolError as exc:
        return ToolResult(call.id, call.name, None, error=exc.error)
    except (Exception, SystemExit) as exc:  # a tool that exits must not end the app
        return ToolResult(call.id, call.name, None, error=f"{type(exc).__name__}: {exc}")
    try:
        to_jsonable(value)
    except (ValueError, TypeError) as exc:
        return ToolResult(
            call.id,
            call.name,
            None,
            error=f"The tool returned a value that cannot be sent back as JSON ({exc}).",
        )
    return ToolResult(call.id, call.name, value)
