"""Running the `reactor` command as a user does, in a project folder.

:func:`reactor_cli` runs it in this process, as a fresh one would (the environment,
the working directory, logging, settings and the project's modules are the call's own
and put back after it): most tests check what the command parses and prints, and a
new interpreter per call cost a third of the suite's time. :func:`reactor_process`
and :func:`reactor_on_a_terminal` start a real ``python -m reactor`` for the tests
where the process is the point: a pseudo-terminal, a Python without rich, a closed
pipe, a signal, ``serve`` and ``worker`` (which set up the process's logging,
excepthooks and collector).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import pty
import select
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import structlog

from reactor._cli import main
from reactor._signals.settings import settings

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


class CliResult(NamedTuple):
    """What a command did: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def reactor_cli(project: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    """Run ``reactor ARGS`` in this process, in ``project``, as a fresh process would."""
    out, err = io.StringIO(), io.StringIO()
    with (
        _as_a_fresh_process(project, cli_env() if env is None else env),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's --help and usage errors
            status = _exit_status(exit_)
    return CliResult(status, out.getvalue(), err.getvalue())


def _exit_status(exit_: SystemExit) -> int:
    if exit_.code is None or isinstance(exit_.code, int):
        return exit_.code or 0
    print(exit_.code, file=sys.stderr)  # as the interpreter does with a message
    return 1


@contextlib.contextmanager
def _as_a_fresh_process(project: Path, env: dict[str, str]) -> Iterator[None]:
    """The process as ``python -W error -m reactor`` in ``project`` would find it, then as it was.

    What a command changes in its process is put back: the environment, the working
    directory, ``sys.path`` (the CLI puts the project on it), the project's modules
    (imported afresh by each call, as a new process does), structlog's and the root
    logger's configuration, the levels of loggers, the excepthooks and the cached
    settings.
    """
    saved_environ, saved_cwd, saved_path = dict(os.environ), os.getcwd(), list(sys.path)
    saved_modules = set(sys.modules)
    saved_structlog = structlog.get_config()
    root = logging.getLogger()
    saved_handlers, saved_levels = list(root.handlers), _logger_levels()
    saved_hooks = (sys.excepthook, threading.excepthook)
    saved_stdin, saved_bytecode = sys.stdin, sys.dont_write_bytecode
    os.environ.clear()
    os.environ.update(env)
    os.chdir(project)
    settings.cache_clear()
    structlog.reset_defaults()
    importlib.invalidate_caches()  # files the test just wrote are found
    sys.stdin = io.StringIO()  # nobody types: as `subprocess.run` under pytest
    sys.dont_write_bytecode = True  # the project's folder holds what the test put there
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # as `python -W error`
            try:
                yield
            finally:
                logging.captureWarnings(False)
    finally:
        sys.stdin, sys.dont_write_bytecode = saved_stdin, saved_bytecode
        sys.excepthook, threading.excepthook = saved_hooks
        root.handlers[:] = saved_handlers
        for name, level in _logger_levels().items():
            if level != saved_levels.get(name, logging.NOTSET):
                _logger(name).setLevel(saved_levels.get(name, logging.NOTSET))
        structlog.configure(**saved_structlog)
        settings.cache_clear()
        _forget_project_modules(project, saved_modules, set(sys.path) - set(saved_path))
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)


def _logger_levels() -> dict[str, int]:
    loggers = logging.Logger.manager.loggerDict.items()
    levels = {name: found.level for name, found in loggers if isinstance(found, logging.Logger)}
    levels[""] = logging.getLogger().level
    return levels


def _logger(name: str) -> logging.Logger:
    return logging.getLogger(name or None)


def _forget_project_modules(project: Path, before: set[str], folders: set[str]) -> None:
    """Drop the modules the call imported from the project (or a script's folder)."""
    places = [Path(folder).resolve() for folder in (str(project), *folders) if folder]
    repo = REPO.resolve()
    for name in set(sys.modules) - before:
        file = getattr(sys.modules[name], "__file__", None)
        if not file:
            continue
        where = Path(file).resolve()
        if where.is_relative_to(repo):  # reactor's own modules and the tests' helpers stay
            continue
        if any(where.is_relative_to(place) for place in places):
            del sys.modules[name]


def reactor_process(
    project: Path,
    *args: str,
    env: dict[str, str] | None = None,
    python: tuple[str, ...] = RUN_MODULE,
) -> subprocess.CompletedProcess[str]:
    """Run ``reactor ARGS`` in a new Python, for a test where the process is the point."""
    return subprocess.run(
        [sys.executable, "-W", "error", *python, *args],
        cwd=project,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
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
        ready, _, _ = select.select([controller], [], [], 120)
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
    return process.wait(timeout=120), b"".join(chunks).decode()


def write_project(folder: Path) -> Path:
    (folder / "desk.py").write_text(GRAPH_MODULE)
    return folder
