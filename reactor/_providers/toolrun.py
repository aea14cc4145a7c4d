"""Running a model's tool calls: concurrently, with hooks, errors reported to the model.

Shared by every provider that runs a tool-use loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

from reactor._providers.base import ToolCall, ToolResult
from reactor._providers.hooks import Deny, PostToolUse, PreToolUse, call_hook, from_before_tool
from reactor._providers.tools import Tool, ToolContext, current_tool_keys
from reactor._signals.signal import to_jsonable
from reactor.exceptions import ToolNotRecordedError

__all__ = [
    "AfterTool",
    "BeforeTool",
    "RecordedToolError",
    "ToolFailure",
    "execute_tool_calls",
]


class ToolFailure(Exception):
    """A tool's error, to give the model exactly as it is (no exception type before it)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class RecordedToolError(ToolFailure):
    """A tool's error as a log recorded it, given back as it was (a resumed call)."""


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
    pre: Sequence[PreToolUse] = (),
    post: Sequence[PostToolUse] = (),
) -> list[ToolResult]:
    """Run the model's tool calls, concurrently, and return their results in call order.

    Each call passes the ``pre`` hooks (``pre_tool_use``), then the ``before`` hooks
    (``before_tool``: ``None`` blocks), in order: a :class:`Deny` (or a blocking
    ``None``) stops it with the reason as its error, a dict replaces its input. Then it
    runs (a tool that raises, exits, returns what cannot be sent back, an unknown tool,
    or invalid arguments become an error result for the model, never an exception),
    and its result, denied or not, passes the ``post`` then the ``after`` hooks. Plain
    functions run in worker threads, so the calls of one turn run at once either way.

    Raises:
        Exception: A hook raised: the first such error, as it was raised (the other
            calls are waited for, not cancelled).
    """
    by_name = {tool.name: tool for tool in tools}
    checks = (*pre, *map(from_before_tool, before)) if before else tuple(pre)
    finishes = (*post, *after)
    keys = current_tool_keys()
    contexts = {id(call): keys.context(call.name, call.id) for call in calls}  # in call order

    async def run(call: ToolCall) -> ToolResult:
        context = contexts[id(call)]  # by the call the model made, before any hook
        call, result = await _checked(checks, call)
        if result is None:
            result = await _invoke(call, by_name.get(call.name), by_name, context)
        return await _finished(finishes, call, result)

    if len(calls) == 1:
        return [await run(calls[0])]
    outcomes = await asyncio.gather(*(run(call) for call in calls), return_exceptions=True)
    results: list[ToolResult] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        results.append(outcome)
    return results


async def _checked(
    checks: Sequence[PreToolUse], call: ToolCall
) -> tuple[ToolCall, ToolResult | None]:
    """The call as the ``pre`` hooks leave it, and its result if one of them denied it."""
    for check in checks:
        verdict = await call_hook(check, call)
        if verdict is None:
            verdict = Deny(
                "Blocked by a pre_tool_use hook (it returned None; a hook returns the "
                "call to let it run)."
            )
        if isinstance(verdict, Deny):
            return call, ToolResult(call.id, call.name, None, error=verdict.reason)
        if isinstance(verdict, ToolCall):
            call = verdict
        elif isinstance(verdict, Mapping):
            call = ToolCall(call.id, call.name, dict(verdict))
        else:
            raise TypeError(
                f"A pre_tool_use hook returned {verdict!r} for tool {call.name!r}; "
                "return the call to run it, a dict to replace its input, or "
                "Deny(reason) (or None) to refuse it."
            )
    return call, None


async def _finished(
    finishes: Sequence[PostToolUse], call: ToolCall, result: ToolResult
) -> ToolResult:
    """The result as the ``post`` hooks leave it (a plain value replaces it)."""
    for finish in finishes:
        replaced = await call_hook(finish, call, result)
        if isinstance(replaced, ToolResult):
            result = replaced
        elif replaced is not None:  # a plain value is the tool's new result
            result = _checked_result(call, replaced)
    return result


async def _invoke(
    call: ToolCall, tool: Tool | None, tools: dict[str, Tool], context: ToolContext
) -> ToolResult:
    if tool is None:
        known = ", ".join(tools) or "none"
        return ToolResult(
            call.id, call.name, None, error=f"Unknown tool {call.name!r} (tools: {known})."
        )
    try:
        value = await tool.invoke(call.input, context)
    except ToolNotRecordedError:  # an evaluation refused it: the activation fails
        raise
    except ToolFailure as exc:
        return ToolResult(call.id, call.name, None, error=exc.error)
    except (Exception, SystemExit) as exc:  # a tool that exits must not end the app
        return ToolResult(call.id, call.name, None, error=f"{type(exc).__name__}: {exc}")
    return _checked_result(call, value)


def _checked_result(call: ToolCall, value: Any) -> ToolResult:
    """``value`` as the call's result, or an error result if it cannot be sent back."""
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
