"""MCP servers: their tools offered to the model beside Python tools.

``MCPServer(name, transport="inprocess", server=app)`` connects to an MCP server app
(the official ``mcp`` SDK's ``MCPServer``, formerly ``FastMCP``, or a low-level
``Server``) in the same process; ``MCPServer(name, transport="stdio", command=...,
args=[...])`` starts a subprocess and talks to it over its stdin and stdout. Both go
through the SDK's ``mcp.Client``: the server's tools are listed when it connects and
each becomes a :class:`~reactor.Tool` named ``mcp__<server>__<tool>``, called through
the server. ``mcp:connect``, ``mcp:call``, ``mcp:result`` and ``mcp:error`` signals
record what happens.

The SDK is imported when a server connects, not before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

import pydantic

from reactor._providers.toolrun import ToolFailure
from reactor._providers.tools import Tool, ToolContext
from reactor._signals.names import MCP_CALL, MCP_CONNECT, MCP_ERROR, MCP_RESULT, error_info
from reactor.exceptions import AgentConfigError, MCPServerError
from reactor.exceptions._extras import importing

__all__ = ["MCPPool", "MCPServer", "MCPTool", "connect_servers"]

Transport = Literal["inprocess", "stdio"]
Emit = Callable[[str, Any], object]
"""How MCP signals are emitted: ``emit(name, payload)``."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_TOOL = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class MCPServer:
    """An MCP server whose tools an agent may call.

    Servers connect when a run first needs them (once per run, closed when it ends) or
    for each ``agent.prompt()`` outside a run, and close on exit, cancellation included.

    Args:
        name: Names the server in tool names (``mcp__<name>__<tool>``), signals and
            errors: letters, digits, ``_`` and ``-``.
        transport: ``"inprocess"`` (an app object in this process) or ``"stdio"`` (a
            subprocess speaking MCP over stdin/stdout).
        server: For ``inprocess``: the app, ``mcp.server.mcpserver.MCPServer(...)``
            (``FastMCP`` before mcp 2) or an ``mcp.server.Server``.
        command: For ``stdio``: the executable to start.
        args: For ``stdio``: its arguments.
        env: For ``stdio``: variables for its environment (the agent's ``env`` is added
            over them; the SDK passes a safe subset of this process's environment).
        cwd: For ``stdio``: its working directory.

    Raises:
        AgentConfigError: The name or transport is invalid, or the transport's
            settings are missing or given to the other transport.
    """

    name: str
    transport: Transport
    server: Any
    command: str | None
    args: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None

    def __init__(
        self,
        name: str,
        transport: Transport = "inprocess",
        *,
        server: Any = None,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise AgentConfigError(
                f"MCPServer name {name!r} is invalid: it becomes part of tool names, so use "
                "1-40 letters, digits, '_' or '-'."
            )
        if transport == "inprocess":
            if server is None or command is not None or args:
                raise AgentConfigError(
                    f"MCPServer {name!r} is in-process: give server=<the MCP app> (and no "
                    "command= or args=, which are for transport='stdio')."
                )
        elif transport == "stdio":
            if not isinstance(command, str) or not command or server is not None:
                raise AgentConfigError(
                    f"MCPServer {name!r} uses stdio: give command= (and args=), not server=, "
                    "which is for transport='inprocess'."
                )
        else:
            raise AgentConfigError(
                f"MCPServer {name!r} has unknown transport {transport!r}; use 'inprocess' or "
                "'stdio'."
            )
        for field, value in (
            ("name", name),
            ("transport", transport),
            ("server", server),
            ("command", command),
            ("args", tuple(str(arg) for arg in args)),
            ("env", dict(env or {})),
            ("cwd", cwd),
        ):
            object.__setattr__(self, field, value)

    def __repr__(self) -> str:
        where = self.command if self.transport == "stdio" else type(self.server).__name__
        return f"MCPServer({self.name!r}, transport={self.transport!r}, {where})"


class _AnyArguments(pydantic.BaseModel):
    """MCP tools' arguments are checked by their server."""

    model_config = pydantic.ConfigDict(extra="allow")


@dataclasses.dataclass(frozen=True)
class MCPTool(Tool):
    """A tool of an MCP server, called through the server.

    Attributes:
        server: The server's name.
        remote: The tool's name on the server.
    """

    server: str = ""
    remote: str = ""

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        """Call the tool on its server (its arguments are checked there)."""
        return await self.fn(**dict(arguments))


async def _open(stack: contextlib.AsyncExitStack, server: MCPServer, env: Mapping[str, str]) -> Any:
    with importing("mcp", what="MCPServer"):
        from mcp import Client, StdioServerParameters

    if server.transport == "stdio":
        assert server.command is not None
        target: Any = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env={**server.env, **env} or None,
            cwd=server.cwd,
        )
    else:
        target = server.server
    try:
        client = await stack.enter_async_context(Client(target))
        return client, (await client.list_tools()).tools
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise MCPServerError(
            f"MCP server {server.name!r} could not start: {_describe(exc)}. Check its "
            + (
                f"command ({server.command} {' '.join(server.args)})."
                if server.transport == "stdio"
                else "app: it must be an mcp MCPServer (FastMCP) or Server instance."
            ),
            server=server.name,
        ) from exc


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _tools(server: MCPServer, client: Any, listed: Sequence[Any], emit: Emit) -> list[Tool]:
    tools: list[Tool] = []
    for listing in listed:
        name = f"mcp__{server.name}__{listing.name}"
        if not _TOOL.match(name):
            raise MCPServerError(
                f"MCP server {server.name!r} offers tool {listing.name!r}, whose name "
                f"{name!r} is not a valid tool name (1-64 letters, digits, '_' or '-'): "
                "shorten the server's name or the tool's.",
                server=server.name,
            )
        schema = dict(listing.input_schema or {"type": "object", "properties": {}})
        schema.pop("title", None)
        tools.append(
            MCPTool(
                name=name,
                description=listing.description or "",
                input_schema=schema,
                fn=_caller(server.name, listing.name, client, emit),
                arguments=_AnyArguments,
                server=server.name,
                remote=listing.name,
            )
        )
    return tools


def _caller(server: str, tool: str, client: Any, emit: Emit) -> Callable[..., Any]:
    async def call(**arguments: Any) -> Any:
        emit(MCP_CALL, {"server": server, "tool": tool, "input": arguments})
        started = time.perf_counter()
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as exc:
            emit(MCP_ERROR, {"server": server, "tool": tool, "error": error_info(exc)})
            raise ToolFailure(f"MCP server {server!r} failed to call {tool!r}: {exc}") from exc
        text = "".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            error = {"type": "ToolError", "message": text}
            emit(MCP_ERROR, {"server": server, "tool": tool, "error": error})
            raise ToolFailure(text or f"MCP tool {tool!r} failed.")
        value = result.structured_content
        if isinstance(value, dict) and set(value) == {"result"}:
            value = value["result"]
        elif value is None:
            value = text
        duration = round((time.perf_counter() - started) * 1000, 3)
        emit(
            MCP_RESULT,
            {"server": server, "tool": tool, "result": value, "duration_ms": duration},
        )
        return value

    return call


@contextlib.asynccontextmanager
async def connect_servers(
    servers: Sequence[MCPServer], *, env: Mapping[str, str], emit: Emit
) -> AsyncIterator[tuple[Tool, ...]]:
    """Connect to ``servers`` for the block; yield their tools; close them on exit.

    Raises:
        MCPServerError: A server failed to start or to list its tools (it is named).
    """
    async with contextlib.AsyncExitStack() as stack:
        tools: list[Tool] = []
        for server in servers:
            client, listed = await _open(stack, server, env)
            found = _tools(server, client, listed, emit)
            emit(
                MCP_CONNECT,
                {
                    "server": server.name,
                    "transport": server.transport,
                    "tools": [tool.name for tool in found],
                },
            )
            tools.extend(found)
        yield tuple(tools)


class MCPPool:
    """The MCP servers of one run: each started once, when first needed, and closed at the end.

    A server's connection belongs to a task of its own (the SDK's connections must be
    closed by the task that opened them), which holds it open until :meth:`aclose`.
    """

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._open: dict[
            tuple[int, tuple[tuple[str, str], ...]], asyncio.Future[tuple[Tool, ...]]
        ] = {}
        self._holders: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    async def tools(self, servers: Sequence[MCPServer], env: Mapping[str, str]) -> tuple[Tool, ...]:
        """The tools of ``servers`` (started now if this run has not started them yet)."""
        found: list[Tool] = []
        for server in servers:
            stdio_env = tuple(sorted(env.items())) if server.transport == "stdio" else ()
            key = (id(server), stdio_env)
            ready = self._open.get(key)
            if ready is None:
                ready = self._open[key] = asyncio.get_running_loop().create_future()
                self._holders.append(asyncio.create_task(self._hold(server, env, ready)))
            found.extend(await asyncio.shield(ready))
        return tuple(found)

    async def _hold(
        self, server: MCPServer, env: Mapping[str, str], ready: asyncio.Future[tuple[Tool, ...]]
    ) -> None:
        try:
            async with connect_servers([server], env=env, emit=self._emit) as tools:
                ready.set_result(tools)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    exc
                    if isinstance(exc, Exception)
                    else MCPServerError(
                        f"MCP server {server.name!r} was stopped while it started.",
                        server=server.name,
                    )
                )
            if not isinstance(exc, Exception):
                raise

    async def aclose(self) -> None:
        """Close every server this run started."""
        self._stop.set()
        holders, self._holders = self._holders, []
        await asyncio.gather(*holders, return_exceptions=True)
        for ready in self._open.values():
            if ready.done() and not ready.cancelled():
                ready.exception()  # retrieved: a failed start was reported to its caller
        self._open.clear()
