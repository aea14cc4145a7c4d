"""Damaged, crafted and foreign run databases: one-line errors, and nothing is changed."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest

from reactor import RecordingError, SQLiteSignalStore
from tests.reactor.cli_support import reactor_cli, write_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = write_project(tmp_path)
    first = reactor_cli(folder, "run", "desk:graph", "--quiet", "--tag", "team=desk")
    assert first.returncode == 0, first.stderr
    return folder


def tamper(project: Path, sql: str, *params: object) -> str:
    """Change the recorded run with ``sql``; return its id."""
    with sqlite3.connect(project / ".reactor" / "runs.db") as conn:
        conn.execute(sql, params)
        return str(conn.execute("SELECT run_id FROM runs").fetchone()[0])


def one_line_error(result: object, command: str) -> str:
    assert getattr(result, "returncode", None) == 1
    stderr = str(getattr(result, "stderr", ""))
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"reactor {command}: error: ")
    assert "Traceback" not in stderr
    return stderr.rstrip("\n").removeprefix(f"reactor {command}: error: ")


# The desk's agents run concurrently: which signal is #3, and where the risk agent's
# state change falls, depends on scheduling (a loaded machine changes it).
@pytest.mark.parametrize(
    ("sql", "message"),
    [
        pytest.param(
            "UPDATE signals SET payload = '{not json' WHERE seq = 1",
            r"signal #1 \('harness:start'\) has a payload that is not JSON \(.*\)",
            id="payload-json",
        ),
        pytest.param(
            "UPDATE signals SET payload = '[1, 2]' WHERE name = 'harness:end'",
            r"signal #20 \('harness:end'\) has a payload that is not an object",
            id="end-not-a-dict",
        ),
        pytest.param(
            "UPDATE signals SET timestamp = 'yesterday' WHERE seq = 3",
            r"signal #3 \('[a-z:_]+'\) has the timestamp 'yesterday', not a number",
            id="text-timestamp",
        ),
        pytest.param(
            "UPDATE signals SET payload = '{\"old\": 1}' WHERE name = 'state:risk:changed'",
            r"signal #\d+ \('state:risk:changed'\) has no key and new value in its payload",
            id="state-change",
        ),
    ],
)
@pytest.mark.parametrize("command", ["show", "replay", "diff"])
def test_a_damaged_row_is_a_one_line_error_naming_the_run(
    project: Path, sql: str, message: str, command: str
) -> None:
    run_id = tamper(project, sql)
    args = ["last", "last"] if command == "diff" else ["last"]
    error = one_line_error(reactor_cli(project, command, *args, "--plain"), command)
    pattern = (
        rf"The recording of '{run_id}' is damaged: {message}\. Record the run again, or delete it\."
    )
    assert re.fullmatch(pattern, error), error


def test_a_text_start_time_is_a_one_line_error_in_runs(project: Path) -> None:
    run_id = tamper(project, "UPDATE runs SET started_at = 'noon'")
    error = one_line_error(reactor_cli(project, "runs"), "runs")
    assert error == (
        f"The recording of {run_id!r} is damaged: its started_at is 'noon', not a time in "
        "seconds. Record the run again, or delete it."
    )


def test_a_missing_table_is_not_a_reactor_database(project: Path) -> None:
    tamper(project, "DROP TABLE run_tags")
    error = one_line_error(reactor_cli(project, "show", "last"), "show")
    assert error == ".reactor/runs.db is not a reactor run database (it has no runs table)."


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("/etc", "/etc is not a reactor run database (it is not a file).", id="dir"),
        pytest.param(
            "notes.txt",
            "notes.txt is not a reactor run database (file is not a database).",
            id="text-file",
        ),
    ],
)
def test_reading_a_file_that_is_not_a_database_changes_nothing(
    project: Path, path: str, message: str
) -> None:
    notes = project / "notes.txt"
    notes.write_text("shopping list\n")
    error = one_line_error(reactor_cli(project, "runs", "--db", path), "runs")
    assert error == message
    assert notes.read_text() == "shopping list\n"
    assert sorted(p.name for p in project.iterdir() if p.name.startswith("notes")) == ["notes.txt"]


def test_inspecting_leaves_the_database_and_its_folder_as_they_were(project: Path) -> None:
    folder = project / ".reactor"
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    for args in (("runs",), ("show", "last"), ("diff", "last", "last"), ("runs", "--json")):
        assert reactor_cli(project, *args).returncode == 0
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    assert after == before
    assert reactor_cli(project, "runs", "--db", "other.db").returncode == 1
    assert not (project / "other.db").exists()


def test_an_older_schema_is_named_with_the_way_to_upgrade(project: Path) -> None:
    tamper(project, "PRAGMA user_version = 1")
    error = one_line_error(reactor_cli(project, "runs"), "runs")
    assert error.startswith(".reactor/runs.db was written by an older reactor (schema 1);")


def test_the_read_only_store_refuses_to_record(project: Path) -> None:
    with SQLiteSignalStore(project / ".reactor" / "runs.db", readonly=True) as store:
        assert len(store.runs()) == 1
        with pytest.raises(RecordingError, match=r"^The signal store .* is open read-only\."):
            store.delete(store.runs()[0].run_id)


def test_a_missing_read_only_database_is_a_recording_error(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    with pytest.raises(
        RecordingError, match=rf"^There is no run database at {missing}; check the path\.$"
    ):
        SQLiteSignalStore(missing, readonly=True)
    assert not missing.exists()


def test_names_and_tags_cannot_drive_the_terminal(project: Path) -> None:
    run_id = tamper(project, "UPDATE runs SET graph = ?", "desk\x1b[2J\x1b[31mred")
    tamper(project, "UPDATE run_tags SET value = ?", "a\rb\u202ec")
    listed = reactor_cli(project, "runs")
    assert "\x1b" not in listed.stdout
    assert "\r" not in listed.stdout
    assert "desk\\x1b[2J\\x1b[31mred" in listed.stdout
    assert "team=a\\x0db\\u202ec" in listed.stdout
    shown = reactor_cli(project, "show", run_id)
    assert "\x1b" not in shown.stdout
    assert f"Run {run_id} of desk\\x1b[2J\\x1b[31mred" in shown.stdout
    as_json = json.loads(reactor_cli(project, "runs", "--json").stdout)
    assert as_json["graph"] == "desk\x1b[2J\x1b[31mred"  # JSON escapes it itself
