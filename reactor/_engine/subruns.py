"""What a run starts for its agents only when they ask: MCP servers and child runs.

A run that uses neither never makes a :class:`RunExtras`: its cost is paid by the runs
whose agents have ``mcps=`` or call ``ctx.spawn``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactor._agents.spans import caused_by
from reactor._engine.options import RunOptions
from reactor._providers.mcp import MCPPool, MCPServer
from reactor._signals.bus import SignalBus
from reactor._signals.names import SPAWN_END, SPAWN_START

if TYPE_CHECKING:
    from reactor._engine.result import RunResult
    from reactor._providers.tools import Tool

__all__ = ["RunExtras"]


class RunExtras:
    """A run's MCP servers (each started once, closed at its end) and child runs.

    Attributes:
        children: The results of the child runs started with ``ctx.spawn``, by run id.
    """

    def __init__(self, bus: SignalBus, options: RunOptions, run_id: str) -> None:
        self._bus = bus
        self._options = options
        self._run_id = run_id
        self._mcp: MCPPool | None = None
        self.children: dict[str, RunResult] = {}

    async def mcp_tools(
        self, servers: Sequence[MCPServer], env: Mapping[str, str]
    ) -> tuple[Tool, ...]:
        """The tools of ``servers``: each started the first time, closed by :meth:`aclose`."""
        if self._mcp is None:
            bus = self._bus
            self._mcp = MCPPool(lambda name, payload: bus.emit(name, payload, source="mcp"))
        return await self._mcp.tools(servers, env)

    async def spawn(self, graph: Any, input: Any, options: Mapping[str, Any]) -> RunResult:
        """Run ``graph`` as a child run: on the run's provider and store unless told.

        ``spawn:start`` and ``spawn:end {run_id, graph, status}`` frame it in the
        parent's log; the child's own signals start a causal tree of their own.
        """
        bus = self._bus
        name = getattr(graph, "name", None)
        start = bus.emit(SPAWN_START, {"graph": name})
        settings = {"provider": self._options.provider, "record": self._options.record}
        with caused_by(None):
            result: RunResult = await graph.run(
                **{**settings, **options}, input=input, parent_run_id=self._run_id
            )
        self.children[result.run_id] = result
        end = {"run_id": result.run_id, "graph": name, "status": result.status}
        bus.emit(SPAWN_END, end, cause=start)
        return result

    async def aclose(self) -> None:
        """Close the MCP servers the run started."""
        if self._mcp is not None:
            await self._mcp.aclose()
