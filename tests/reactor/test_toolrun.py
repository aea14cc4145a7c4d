from __future__ import annotations

import asyncio

from reactor import ToolCall, ToolResult, tool
from reactor._providers.toolrun import execute_tool_calls


@tool
async def slow_double(x: int) -> int:
    """Double x, slowly."""
    await asyncio.sleep(0.05)
    return 2 * x


@tool
def explode(x: int) -> int:
    """Always fails."""
    raise RuntimeError(f"no {x}")


async def test_calls_run_concurrently_and_keep_their_order() -> None:
    calls = [ToolCall(f"c{i}", "slow_double", {"x": i}) for i in range(4)]
    started = asyncio.get_running_loop().time()
    results = await execute_tool_calls(calls, [slow_double])
    assert asyncio.get_running_loop().time() - started < 0.15
    assert [(r.id, r.result, r.error) for r in results] == [
        ("c0", 0, None),
        ("c1", 2, None),
        ("c2", 4, None),
        ("c3", 6, None),
    ]


async def test_failures_become_error_results_for_the_model() -> None:
    results = await execute_tool_calls(
        [
            ToolCall("a", "explode", {"x": 1}),
            ToolCall("b", "missing", {}),
            ToolCall("c", "slow_double", {"x": "not a number"}),
        ],
        [explode, slow_double],
    )
    assert results[0] == ToolResult("a", "explode", None, error="RuntimeError: no 1")
    assert results[1].error == "Unknown tool 'missing' (tools: explode, slow_double)."
    assert results[2].error is not None
    assert results[2].error.startswith("ValidationError: ")


async def test_before_hooks_can_change_or_block_calls_and_after_hooks_replace_results() -> None:
    seen: list[str] = []

    def only_small(call: ToolCall) -> ToolCall | None:
        return (
            None
            if call.input["x"] > 10
            else ToolCall(call.id, call.name, {"x": call.input["x"] + 1})
        )

    async def audit(call: ToolCall, result: ToolResult) -> ToolResult | None:
        seen.append(f"{call.id}={result.result}")
        return None

    def redact(call: ToolCall, result: ToolResult) -> ToolResult | None:
        return ToolResult(result.id, result.name, "redacted") if call.id == "a" else None

    results = await execute_tool_calls(
        [ToolCall("a", "slow_double", {"x": 1}), ToolCall("b", "slow_double", {"x": 50})],
        [slow_double],
        before=[only_small],
        after=[audit, redact],
    )
    assert [(r.result, r.error) for r in results] == [
        ("redacted", None),
        (None, "Blocked by a before_tool hook."),
    ]
    assert sorted(seen) == ["a=4", "b=None"]
