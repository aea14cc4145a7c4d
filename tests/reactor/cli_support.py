"""Running the `reactor` command as a user does: a subprocess in a project folder."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).parents[2]

GRAPH_MODULE = textwrap.dedent(
    """
    from pydantic import BaseModel
    from reactor import ScriptedProvider, agent, reactive


    class Desk(BaseModel):
        analysis: str | None = None
        risk: str | None = None
        decision: str | None = None


    graph = reactive(
        {
            "analyst": agent(prompt="Analyze {{ input.symbol }}", updates="analysis"),
            "risk": agent(prompt="Risk of {{ input.symbol }}", updates="risk"),
            "trader": agent(
                run=lambda ctx: "buy" if ctx.state.analysis == "up" else "hold",
                activate_on=["state:analysis:changed", "state:risk:changed"],
                when="state.analysis and state.risk",
                updates="decision",
            ),
        },
        state=Desk,
        name="desk",
        input={"symbol": "AAPL"},
    )


    def scripted_provider():
        return ScriptedProvider(
            {"analyst": ["up"], "risk": ["low"]},
            latency=lambda request: 0.02 if request.agent == "analyst" else 0.01,
        )
    """
)


RUN_MODULE = ("-m", "reactor")

WITHOUT_RICH = (
    "-c",
    "import sys; sys.modules['rich'] = None; from reactor._cli import main; "
    "raise SystemExit(main(sys.argv[1:]))",
)
"""Run the CLI in a Python where `import rich` fails, as without the `cli` extra."""


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no forced colours, no database chosen."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "REACTOR_DB", "COLUMNS")
    }
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def reactor_cli(
    project: Path,
    *args: str,
    env: dict[str, str] | None = None,
    python: tuple[str, ...] = RUN_MODULE,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", *python, *args],
        cwd=project,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def reactor_on_a_terminal(
    project: Path, *args: str, columns: int = 160, python: tuple[str, ...] = RUN_MODULE
) -> tuple[int, str]:
    """Run the command with stdout and stderr on a pseudo-terminal; return what it drew."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-W", "error", *python, *args],
        cwd=project,
        env=cli_env(COLUMNS=str(columns), TERM="xterm-256color"),
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            process.kill()
            break
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the command exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    return process.wait(timeout=60), b"".join(chunks).decode()


def write_project(folder: Path) -> Path:
    (folder / "desk.py").write_text(GRAPH_MODULE)
    return folder
