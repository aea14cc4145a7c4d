from __future__ import annotations

import asyncio
import threading

import pytest
import structlog

from reactor import ToolCall, ToolResult, agent, reactive, tool
from reactor._providers.toolrun import execute_tool_calls
from reactor.testing import ToolUse, fake_anthropic, turn


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
    arrived: list[int] = []
    all_in = asyncio.Event()

    @tool
    async def meet_double(x: int) -> int:
        """Double x once all four calls are in: only possible if they run at once."""
        arrived.append(x)
        if len(arrived) == 4:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 60)  # one at a time, the first never returns
        await asyncio.sleep(0.01 * (3 - x))  # the last call finishes first
        return 2 * x

    calls = [ToolCall(f"c{i}", "meet_double", {"x": i}) for i in range(4)]
    results = await execute_tool_calls(calls, [meet_double])
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


async def test_plain_function_tools_run_at_once_in_worker_threads() -> None:
    barrier = threading.Barrier(3, timeout=60)

    @tool
    def meet(x: int) -> int:
        """Wait for the other two calls: only possible if all three run at once."""
        barrier.wait()
        return x

    calls = [ToolCall(f"c{i}", "meet", {"x": i}) for i in range(3)]
    results = await execute_tool_calls(calls, [meet])
    assert [(r.result, r.error) for r in results] == [(0, None), (1, None), (2, None)]


async def test_a_blocking_tool_does_not_hold_back_the_run_timeout() -> None:
    started = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def block(x: int) -> int:
        """Block until released."""
        started.set()
        release.wait(timeout=60)
        finished.set()
        return x

    graph = reactive({"a": agent(prompt="go", tools=[block])})
    provider = fake_anthropic([turn(ToolUse("t1", "block", {"x": 1})), "done"])
    with structlog.testing.capture_logs() as logs:
        result = await graph.run(provider=provider, timeout=3)  # the tool starts well before
    assert result.status == "timeout"
    assert started.is_set()
    assert not finished.is_set()  # the run ended while the tool was still blocked
    release.set()
    (warning,) = [e for e in logs if e["event"] == "tool 'block' abandoned in its worker thread"]
    assert (warning["agent"], warning["run_id"]) == ("a", result.run_id)


async def test_a_tool_result_that_cannot_be_sent_is_an_error_for_the_model() -> None:
    @tool
    def loop() -> dict[str, object]:
        """Return a dict that contains itself."""
        found: dict[str, object] = {}
        found["self"] = found
        return found

    [result] = await execute_tool_calls([ToolCall("c", "loop", {})], [loop])
    assert result.result is None
    assert result.error is not None
    assert result.error.startswith("The tool returned a value that cannot be sent back as JSON")


async def test_a_tool_that_exits_is_an_error_for_the_model() -> None:
    @tool
    async def leave() -> None:
        """Exit."""
        raise SystemExit(3)

    [result] = await execute_tool_calls([ToolCall("c", "leave", {})], [leave])
    assert result.error == "SystemExit: 3"


async def test_the_first_failing_hook_is_raised_as_itself() -> None:
    def refuse(call: ToolCall) -> ToolCall:
        raise PermissionError(f"no {call.id}")

    calls = [ToolCall(f"c{i}", "slow_double", {"x": i}) for i in range(2)]
    with pytest.raises(PermissionError, match=r"^no c0$"):
        await execute_tool_calls(calls, [slow_double], before=[refuse])


async def test_a_post_hook_returning_a_plain_value_replaces_the_result_of_each_call() -> None:
    from reactor import Hooks
    from reactor.testing import FakeAnthropic

    def rounded(call: ToolCall, result: ToolResult) -> object:
        return f"~{result.result}" if call.name == "slow_double" else None

    fake = FakeAnthropic(
        turn(ToolUse("t1", "slow_double", {"x": 2}), ToolUse("t2", "slow_double", {"x": 5})),
        "done",
    )
    doubler = agent(
        name="doubler",
        tools=[slow_double],
        hooks=Hooks(post_tool_use=[rounded]),
        provider=fake.provider(),
    )
    assert await doubler.prompt("double 2 and 5") == "done"
    results = fake.bodies[1]["messages"][-1]["content"]
    assert [(r["tool_use_id"], r["content"]) for r in results] == [("t1", "~4"), ("t2", "~10")]


async def test_a_pre_hook_returning_none_refuses_the_call_as_before_tool_does() -> None:
    ran: list[int] = []

    @tool
    def counted(x: int) -> int:
        """Count a call."""
        ran.append(x)
        return x

    def silent(call: ToolCall) -> None:
        return None

    call = ToolCall("t1", "counted", {"x": 1})
    [as_pre] = await execute_tool_calls([call], [counted], pre=[silent])
    [as_before] = await execute_tool_calls([call], [counted], before=[silent])
    assert as_pre.error == (
        "Blocked by a pre_tool_use hook (it returned None; a hook returns the call to let it run)."
    )
    assert as_before.error == "Blocked by a before_tool hook."
    assert ran == []
    allowed = await execute_tool_calls(
        [ToolCall("t2", "counted", {"x": 2})], [counted], pre=[lambda call: call]
    )
    assert [r.result for r in allowed] == [2]
    assert ran == [2]
