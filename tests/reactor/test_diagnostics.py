"""The library's own log lines in an application that configured no logging."""

from __future__ import annotations

import subprocess
import sys

APP = """
from migration import FlowSpec
from reactor import agent, run_reactive
import asyncio

FlowSpec.load({"flow": {"name": "f", "nodePacks": ["core"]}, "nodes": [], "edges": []})
asyncio.run(run_reactive(agent(name="a", run=lambda ctx: ctx.emit("undeclared"))))
print("done")
"""


def test_quiet_by_default_with_warnings_on_stderr() -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", APP], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"  # nothing of the library's on the app's stdout
    assert "ignored flow key" not in result.stderr  # debug notes stay quiet
    assert "undeclared emit agent='a' signal='undeclared'" in result.stderr  # warnings show
