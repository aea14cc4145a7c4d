"""``reactor db prune`` never creates the database it was asked to prune (in this process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reactor._cli import main


def cli(*args: str) -> int:
    """Run ``reactor ARGS`` in this process: its exit status (argparse's exits too)."""
    try:
        return main(list(args))
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder, the current one, with no database named anywhere."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REACTOR_SERVICE_DB", raising=False)
    return tmp_path


def test_prune_without_db_says_the_default_database_is_not_there_and_creates_none(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("db", "prune", "--older-than", "30d") == 1
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err == (
        "reactor db: error: no database at .reactor/app.db (the default; nothing was "
        "created): name the one whose runs to prune with --db PATH or URL, or REACTOR_DB "
        "(when it is not set, runs recorded by `reactor run` are in .reactor/runs.db)\n"
    )
    assert list(project.iterdir()) == []  # no .reactor/, no app.db


@pytest.mark.parametrize(
    ("named", "who"),
    [
        pytest.param({"argument": "sqlite:///gone.db"}, "named by --db", id="db-option"),
        pytest.param({"variable": "gone.db"}, "named by REACTOR_SERVICE_DB", id="variable"),
    ],
)
def test_prune_of_a_database_that_is_not_there_names_who_named_it(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    named: dict[str, str],
    who: str,
) -> None:
    if "variable" in named:
        monkeypatch.setenv("REACTOR_SERVICE_DB", named["variable"])
    extra = ["--db", named["argument"]] if "argument" in named else []
    assert cli("db", "prune", "--older-than", "1d", *extra) == 1
    assert f"no database at gone.db ({who}; nothing was created)" in capsys.readouterr().err
    assert list(project.iterdir()) == []
