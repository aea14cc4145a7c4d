"""`reactor replay` finds the user's own graph, and never runs code a database merely names."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.reactor.cli_support import cli_env, reactor_cli, write_project

SCRIPT = textwrap.dedent(
    """
    from pathlib import Path

    from reactor import ScriptedProvider, SQLiteSignalStore, agent, reactive

    bot = reactive(
        {"echo": agent(prompt="Say {{ input }}", updates="said")},
        state={"said": None},
        name="echo",
    )

    if __name__ == "__main__":
        Path("main-ran.txt").write_text(Path("main-ran.txt").read_text() + "x")
        store = SQLiteSignalStore(".reactor/runs.db")
        bot.run_sync(input="hi", provider=ScriptedProvider({"echo": ["hi"]}), record=store)
        store.close()
    """
)


def run_script(folder: Path, name: str) -> None:
    # The user's script run as a script: its `__main__` block is the point.
    completed = subprocess.run(
        [sys.executable, name],
        cwd=folder,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr


def test_a_script_recorded_through_the_api_replays_without_running_its_main_block(
    tmp_path: Path,
) -> None:
    (tmp_path / "echo.py").write_text(SCRIPT)
    (tmp_path / "main-ran.txt").write_text("")
    run_script(tmp_path, "echo.py")
    result = reactor_cli(tmp_path, "replay", "last", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("Replay matches run_")
    assert (tmp_path / "main-ran.txt").read_text() == "x"  # only the recorded run


def test_a_graph_imported_from_a_module_replays_by_module(tmp_path: Path) -> None:
    (tmp_path / "echo.py").write_text(SCRIPT)
    (tmp_path / "record.py").write_text(
        "from echo import bot\n"
        "from reactor import ScriptedProvider, SQLiteSignalStore\n"
        "store = SQLiteSignalStore('.reactor/runs.db')\n"
        "bot.run_sync(input='hi', provider=ScriptedProvider({'echo': ['hi']}), record=store)\n"
    )
    run_script(tmp_path, "record.py")
    listed = reactor_cli(tmp_path, "runs", "--json")
    assert '"target": "echo:bot"' in listed.stdout
    result = reactor_cli(tmp_path, "replay", "last", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("Replay matches run_")


@pytest.fixture
def received(tmp_path: Path) -> Path:
    """A project with one recorded run, whose database can then be tampered with."""
    folder = write_project(tmp_path)
    first = reactor_cli(folder, "run", "desk:graph", "--quiet")
    assert first.returncode == 0, first.stderr
    return folder


def rename_target(folder: Path, target: str) -> None:
    with sqlite3.connect(folder / ".reactor" / "runs.db") as conn:
        conn.execute("UPDATE runs SET target = ?", (target,))


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("os:abort", id="os-abort"),
        pytest.param("sys:exit", id="sys-exit"),
        pytest.param("pdb:set_trace", id="pdb"),
        pytest.param("json.decoder:JSONDecoder", id="stdlib-submodule"),
        pytest.param("/etc/passwd.py:graph", id="file-elsewhere"),
        pytest.param("nothing_here:graph", id="missing"),
    ],
)
def test_a_target_outside_the_project_is_refused_not_imported(received: Path, target: str) -> None:
    rename_target(received, target)
    result = reactor_cli(received, "replay", "last", "--quiet")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"reactor replay: error: the recording of run_{lines[0].split('run_')[1][:28]} names "
        f"the graph {target!r}, which is not a file in this directory"
    )
    assert "--graph MODULE:GRAPH" in lines[0]


def test_a_changed_graph_file_is_refused_and_graph_overrides(received: Path) -> None:
    desk = received / "desk.py"
    desk.write_text(desk.read_text() + "\n# edited since the run\n")
    result = reactor_cli(received, "replay", "last", "--quiet")
    assert result.returncode == 1
    assert "names the graph 'desk:graph', but it has changed since the run" in result.stderr
    forced = reactor_cli(received, "replay", "last", "--graph", "desk:graph", "--quiet")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert forced.stdout.splitlines()[-1].startswith("Replay matches run_")


def test_a_database_from_another_folder_does_not_import_its_graph(
    received: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "desk.py").write_text((received / "desk.py").read_text())
    db = str(received / ".reactor" / "runs.db")
    rename_target(received, f"{received / 'desk.py'}:graph")
    result = reactor_cli(elsewhere, "replay", "last", "--db", db, "--quiet", "--no-record")
    assert result.returncode == 1
    assert "which is not a file in this directory" in result.stderr
