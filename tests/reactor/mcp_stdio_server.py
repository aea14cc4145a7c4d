"""A small MCP server for the tests, run as a subprocess over stdio.

Its tools report the process they run in, so tests can tell they ran there.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

app = MCPServer("stdio-test")


@app.tool()
def whoami(name: str) -> str:
    """The process id of the server and an environment variable of its process."""
    return f"pid={os.getpid()} {name}={os.environ.get(name, '-')}"


@app.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the stdio tool failed on purpose")


if __name__ == "__main__":
    app.run()
