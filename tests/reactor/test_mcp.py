"""MCP servers through the official SDK: in-process apps and stdio subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer as MCPApp

import reactor
from reactor import AgentConfigError, MCPServer, MCPServerError, agent, reactive
from reactor.testing import FakeAnthropic, Hang, ToolUse, turn

SERVER_SCRIPT = Path(__file__).with_name("mcp_stdio_server.py")


def calculator(calls: list[tuple[int, int]], lifetime: list[str] | None = None) -> MCPApp:
    @contextlib.asynccontextmanager
    async def lifespan(app: MCPApp) -> AsyncIterator[None]:
        if lifetime is not None:
            lifetime.append("open")
        try:
            yield
        finally:
            if lifetime is not None:
                lifetime.append("closed")

    app = MCPApp("calc", lifespan=lifespan)

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        calls.append((a, b))
        return a + b

    return app


def tool_result(body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = body["messages"][-1]["content"][0]
    return result


def local_price(symbol: str) -> float:
    """A Python tool beside the MCP ones."""
    return 1.0


async def test_an_in_process_mcp_tool_is_offered_and_called_through_the_server() -> None:
    calls: list[tuple[int, int]] = []
    server = MCPServer("calc", transport="inprocess", server=calculator(calls))
    fake = FakeAnthropic(turn(ToolUse("t1", "mcp__calc__add", {"a": 2, "b": 3})), "It is 5.")
    adder = agent(name="adder", tools=[local_price], mcps=[server], provider=fake.provider())
    async with reactor.trace() as trace:
        assert await adder.prompt("2 + 3?") == "It is 5."
    assert calls == [(2, 3)]
    offered = {tool["name"]: tool for tool in fake.bodies[0]["tools"]}
    assert sorted(offered) == ["local_price", "mcp__calc__add"]
    assert offered["mcp__calc__add"]["description"] == "Add two numbers."
    assert offered["mcp__calc__add"]["input_schema"]["required"] == ["a", "b"]
    assert tool_result(fake.bodies[1]) == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "5",
    }
    names = [s.name for s in trace.signals if s.name.startswith("mcp:")]
    assert names == ["mcp:connect", "mcp:call", "mcp:result"]
    [call] = [s.payload for s in trace.signals if s.name == "mcp:call"]
    assert call == {
        "server": "calc",
        "tool": "add",
        "input": {"a": 2, "b": 3},
    }


async def test_a_stdio_server_runs_as_a_subprocess_with_the_agents_env() -> None:
    server = MCPServer(
        "proc",
        transport="stdio",
        command=sys.executable,
        args=[str(SERVER_SCRIPT)],
        env={"REGION": "server-default", "MODE": "test"},
    )

    def brain(body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 1:
            return turn(ToolUse("t1", "mcp__proc__whoami", {"name": "REGION"}))
        return tool_result(body)["content"]

    fake = FakeAnthropic(brain=brain)
    probe = agent(name="probe", mcps=[server], env={"REGION": "eu"}, provider=fake.provider())
    answer = await probe.prompt("Who runs you?")
    pid, region = answer.split()
    assert pid.startswith("pid=")
    assert int(pid[4:]) != os.getpid()
    assert region == "REGION=eu"
    assert "REGION" not in os.environ


async def test_a_failing_mcp_tool_is_an_error_the_model_sees() -> None:
    server = MCPServer("proc", transport="stdio", command=sys.executable, args=[str(SERVER_SCRIPT)])
    fake = FakeAnthropic(turn(ToolUse("t1", "mcp__proc__fail", {})), "Sorry.")
    async with reactor.trace() as trace:
        await agent(name="a", mcps=[server], provider=fake.provider()).prompt("Try.")
    sent = tool_result(fake.bodies[1])
    assert sent["is_error"] is True
    assert "fail" in sent["content"]
    assert [s.name for s in trace.signals if s.name.startswith("mcp:")][-1] == "mcp:error"


async def test_a_server_that_fails_to_start_is_named_in_the_error() -> None:
    broken = MCPServer(
        "broken", transport="stdio", command=sys.executable, args=["-c", "raise SystemExit(3)"]
    )
    fake = FakeAnthropic("unused")
    with pytest.raises(MCPServerError, match=r"^MCP server 'broken' could not start: ") as info:
        await agent(name="a", mcps=[broken], provider=fake.provider()).prompt("hi")
    assert info.value.server == "broken"
    assert fake.requests == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"name": "has space", "server": object()}, r"name 'has space' is invalid", id="name"
        ),
        pytest.param({"name": "a"}, r"^MCPServer 'a' is in-process: give server=", id="no-app"),
        pytest.param(
            {"name": "a", "transport": "stdio"},
            r"^MCPServer 'a' uses stdio: give command=",
            id="no-cmd",
        ),
        pytest.param(
            {"name": "a", "transport": "http", "server": object()},
            r"^MCPServer 'a' has unknown transport 'http'; use 'inprocess' or 'stdio'\.$",
            id="transport",
        ),
    ],
)
def test_a_misdefined_server_is_refused_when_it_is_defined(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(AgentConfigError, match=message):
        MCPServer(**kwargs)


async def test_in_a_run_a_server_starts_once_and_closes_when_the_run_ends() -> None:
    calls: list[tuple[int, int]] = []
    lifetime: list[str] = []
    server = MCPServer("calc", server=calculator(calls, lifetime))

    def brain(body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 1:
            return turn(ToolUse("t1", "mcp__calc__add", {"a": 1, "b": 1}))
        return tool_result(body)["content"]

    graph = reactive(
        {
            "first": agent(prompt="Add.", mcps=[server], updates="first"),
            "second": agent(prompt="Add.", mcps=[server], updates="second"),
        },
        state={"first": None, "second": None},
    )
    result = await graph.run(provider=FakeAnthropic(brain=brain).provider())
    assert result.state == {"first": "2", "second": "2"}
    assert calls == [(1, 1), (1, 1)]
    assert lifetime == ["open", "closed"]
    assert len(result.select("mcp:connect")) == 1
    assert len(result.select("mcp:result")) == 2


async def test_a_cancelled_prompt_closes_its_servers() -> None:
    lifetime: list[str] = []
    started = asyncio.Event()

    def brain(body: dict[str, Any]) -> Any:
        started.set()
        return Hang(turn("thinking..."))

    server = MCPServer("calc", server=calculator([], lifetime))
    slow = agent(name="slow", mcps=[server], provider=FakeAnthropic(brain=brain).provider())
    task = asyncio.create_task(slow.prompt("Take your time."))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lifetime == ["open", "closed"]
