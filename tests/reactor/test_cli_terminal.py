"""On a terminal the CLI draws with rich; with --plain, piped, or without rich, plain text.

What a terminal gets is drawn by a real process on a pseudo-terminal
(:func:`reactor_on_a_terminal`); what a pipe gets, by the command in this process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reactor.cli_support import (
    WITHOUT_RICH,
    reactor_cli,
    reactor_on_a_terminal,
    reactor_process,
    write_project,
)

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_project(tmp_path_factory.mktemp("terminal"))
    first = reactor_cli(folder, "run", "desk:graph", "--quiet", "--tag", "env=prod")
    assert first.returncode == 0, first.stderr
    return folder


def test_runs_is_a_rich_table_on_a_terminal(project: Path) -> None:
    status, drawn = reactor_on_a_terminal(project, "runs")
    assert status == 0
    header = next(line for line in drawn.splitlines() if "RUN" in line)
    assert "\x1b[1m" in header  # bold headings
    assert "━" in drawn or "─" in drawn  # the rule under them
    plain = reactor_cli(project, "runs").stdout
    assert "\x1b" not in plain
    assert "─" not in plain


def test_plain_on_a_terminal_prints_what_a_pipe_gets(project: Path) -> None:
    status, drawn = reactor_on_a_terminal(project, "runs", "--plain")
    assert status == 0
    assert drawn.replace("\r\n", "\n") == reactor_cli(project, "runs").stdout


def test_show_draws_the_causal_tree_with_rich(project: Path) -> None:
    status, drawn = reactor_on_a_terminal(project, "show", "last")
    assert status == 0
    text = drawn.replace("\r\n", "\n")
    assert "Causal tree" in text
    assert "harness:start  [harness, +0ms]" in text
    assert "\x1b[32mcompleted" in text  # the status, in green


def test_a_run_on_a_terminal_shows_live_progress(project: Path) -> None:
    status, drawn = reactor_on_a_terminal(project, "run", "desk:graph", "--no-record")
    assert status == 0, drawn
    assert any(frame in drawn for frame in SPINNER)
    assert "✓ completed in " in drawn
    assert "running: " in drawn


def test_without_rich_a_terminal_gets_plain_text(project: Path) -> None:
    status, drawn = reactor_on_a_terminal(project, "runs", python=WITHOUT_RICH)
    assert status == 0
    assert drawn.replace("\r\n", "\n") == reactor_cli(project, "runs").stdout
    status, drawn = reactor_on_a_terminal(project, "show", "last", python=WITHOUT_RICH)
    assert status == 0
    # Under the branch of whichever of analyst and risk finished last (they run at once).
    assert "│   └── agent:trader:activated" in drawn
    status, drawn = reactor_on_a_terminal(
        project, "run", "desk:graph", "--no-record", python=WITHOUT_RICH
    )
    assert status == 0, drawn
    assert "✓ completed in " in drawn
    assert not any(frame in drawn for frame in SPINNER)


def test_without_rich_a_pipe_gets_the_same_as_with_it(project: Path) -> None:
    # A new Python, where `import rich` fails: this one has rich imported already.
    printed = reactor_process(project, "show", "last", python=WITHOUT_RICH)
    assert printed.returncode == 0
    assert printed.stdout == reactor_cli(project, "show", "last").stdout
