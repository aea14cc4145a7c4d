"""``reactor eval`` and ``reactor runs tag``: recorded runs as a regression suite, by command."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import pytest

from reactor import SQLiteSignalStore
from reactor._cli import main
from tests.reactor.cli_support import reactor_process

DESK = textwrap.dedent(
    """
    from reactor import ScriptedProvider, agent, reactive

    TRENDS = {"AAPL": "up", "MSFT": "down", "NVDA": "up"}


    def desk(prompt="Is {{ input.symbol }} trending up or down? One word.", name="desk"):
        return reactive(
            {
                "analyst": agent(prompt=prompt, updates="trend"),
                "trader": agent(
                    run=lambda ctx: "buy" if ctx.state["trend"] == "up" else "hold",
                    activate_on="state:trend:changed",
                    updates="decision",
                ),
            },
            state={"trend": None, "decision": None},
            name=name,
        )


    graph = desk()
    renamed = desk(name="desk-2")
    imposter = reactive(  # another graph, under the same name
        {"forecaster": agent(prompt="Weather in {{ input.symbol }}?", updates="trend")},
        state={"trend": None},
        name="desk",
    )


    def answer(request):
        symbol = next(symbol for symbol in TRENDS if symbol in request.prompt)
        return "down" if "pessimist" in request.prompt else TRENDS[symbol]


    def market():
        return ScriptedProvider({"analyst": answer})


    def kept_decision(old, new):
        return old.state["decision"] == new.state["decision"]


    def always(old, new):
        return True


    def never(old, new):
        return 0.0


    def one_argument(old):
        return True


    def same_types(old, new):
        # The recording's state and the new run's are the same kind of data.
        return type(old.state) is type(new.state) is dict and old.state == new.state


    def rings_a_bell(old, new):
        raise ValueError("a bell \\x07 and a null \\x00 in a message")


    not_callable = 42
    """
)

PESSIMIST = textwrap.dedent(
    """
    from desk import desk

    graph = desk("You are a pessimist. Is {{ input.symbol }} trending up or down? One word.")
    """
)

SYMBOLS = ("AAPL", "MSFT", "NVDA")


def cli(*args: str) -> int:
    """Run ``reactor ARGS`` in this process: its exit status (argparse's exits too)."""
    try:
        return main(list(args))
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A project with the desk and a changed desk, and a run recorded per symbol."""
    (tmp_path / "desk.py").write_text(DESK)
    (tmp_path / "pessimist.py").write_text(PESSIMIST)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REACTOR_DB", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI puts the project on it
    before = set(sys.modules)
    ids = {}
    for symbol in SYMBOLS:
        status = cli(
            "run", "desk.py:graph", "--provider", "desk.py:market", "--quiet", "--plain",
            "--input", json.dumps({"symbol": symbol}),
        )  # fmt: skip
        assert status == 0
        with SQLiteSignalStore(tmp_path / ".reactor" / "runs.db") as store:
            ids[symbol] = store.resolve("last")
    yield ids
    for name in set(sys.modules) - before:  # the project's modules, imported by the CLI
        if str(getattr(sys.modules[name], "__file__", "")).startswith(str(tmp_path)):
            del sys.modules[name]


def content(path: str) -> list[str]:
    """Everything a SQLite file holds, as SQL (not its bytes: SQLite itself may move a
    write-ahead log's pages into the file whenever its last connection closes)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return list(conn.iterdump())


def rows(out: str) -> dict[str, list[str]]:
    """The report's rows, by recorded run id: the cells up to WHAT, then WHAT."""
    found = {}
    for line in out.splitlines():
        if line.startswith("run_"):
            cells = line.split()
            found[cells[0]] = [*cells[1:4], " ".join(cells[10:])]
    return found


def recorded_runs(path: str = ".reactor/runs.db") -> int:
    with SQLiteSignalStore(Path(path)) as store:
        return len(store.runs())


def test_an_unchanged_graph_passes_every_run(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("eval", "--graph", "desk.py:graph") == 0
    out = capsys.readouterr().out
    cases = rows(out)
    assert sorted(cases) == sorted(project.values())
    assert {case[1] for case in cases.values()} == {"same"}
    assert {case[2] for case in cases.values()} == {"yes"}
    assert "3 cases: 3 same, 0 changed, 0 diverged, 0 failed; 3 passed, 0 did not" in out


def test_a_changed_prompt_diverges_without_a_provider(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("eval", "--graph", "pessimist.py:graph", "--provider", "none") == 1
    cases = rows(capsys.readouterr().out)
    assert sorted(cases) == sorted(project.values())
    for status, passed, what in (case[1:] for case in cases.values()):
        assert (status, passed) == ("diverged", "no")
        assert "agent 'analyst'" in what
        assert "messages[0].content" in what


def test_no_provider_is_the_default(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("eval", "--graph", "pessimist.py:graph") == 1
    out = capsys.readouterr().out
    assert "--provider none: it ends diverged" in out
    assert "0 model calls" in out


@pytest.mark.parametrize(
    ("scorer", "status", "passing"),
    [
        pytest.param("decision_kept(decision)", 1, {"MSFT"}, id="builtin-by-name"),
        pytest.param("desk.py:kept_decision", 1, {"MSFT"}, id="module-function"),
        pytest.param("desk.py:never", 1, set(), id="a-zero-score-fails"),
        pytest.param("desk.py:always", 0, set(SYMBOLS), id="changed-but-passing"),
    ],
)
def test_a_provider_answers_changed_requests_and_scorers_decide(
    project: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    scorer: str,
    status: int,
    passing: set[str],
) -> None:
    capsys.readouterr()
    ran = cli(
        "eval", "--graph", "pessimist.py:graph", "--provider", "desk.py:market",
        "--scorer", scorer,
    )  # fmt: skip
    assert ran == status
    out = capsys.readouterr().out
    cases = rows(out)
    assert {case[1] for case in cases.values()} == {"changed"}
    assert {symbol for symbol in SYMBOLS if cases[project[symbol]][2] == "yes"} == passing
    assert "3 model calls" in out


def test_reports_are_written_as_junit_xml_and_json(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    ran = cli(
        "eval", "--graph", "pessimist.py:graph", "--provider", "desk.py:market",
        "--scorer", "decision_kept(decision)", "--junit", "eval.xml", "--json", "eval.json",
    )  # fmt: skip
    assert ran == 1
    suite = ElementTree.parse("eval.xml").getroot()
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    cases = {str(case.get("name")): case for case in suite.iter("testcase")}
    assert sorted(cases) == sorted(project.values())
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {project["AAPL"], project["NVDA"]}
    report = json.loads(Path("eval.json").read_text())
    assert report["summary"]["cases"] == 3
    assert (report["summary"]["changed"], report["summary"]["passed"]) == (3, 1)
    assert {case["run_id"] for case in report["cases"]} == set(project.values())
    out = capsys.readouterr().out
    assert "JUnit XML written to eval.xml" in out
    assert "JSON written to eval.json" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--bogus"], "unrecognized arguments: --bogus", id="unknown-option"),
        pytest.param(["--since", "7x"], "'7x' is not a duration", id="bad-since"),
        pytest.param(["--limit", "0"], "must be a whole number of at least 1", id="bad-limit"),
        pytest.param(
            ["--scorer", "nowhere:check"], "cannot import 'nowhere'", id="scorer-not-found"
        ),
        pytest.param(
            ["--scorer", "desk.py:missing"], "has no attribute 'missing'", id="scorer-missing"
        ),
        pytest.param(
            ["--scorer", "desk.py:not_callable"],
            "is int, not a function scorer(old, new)",
            id="scorer-not-callable",
        ),
        pytest.param(
            ["--scorer", "desk.py:one_argument"],
            "cannot be called as scorer(old, new) (it takes (old))",
            id="scorer-wrong-arguments",
        ),
        pytest.param(
            ["--scorer", "reactor.eval:decision_kept"],
            "makes scorers, it is not one; write --scorer 'decision_kept(...)'",
            id="scorer-factory",
        ),
        pytest.param(
            ["--scorer", "decision_kep(decision)"], "no scorer 'decision_kep'", id="scorer-typo"
        ),
        pytest.param(
            ["--scorer", "cost_within(0)"], "cost_within takes a positive ratio", id="bad-ratio"
        ),
        pytest.param(["--provider", "nowhere:p"], "cannot import 'nowhere'", id="provider"),
        pytest.param(
            ["--junit", "missing/eval.xml"], "the folder missing does not exist", id="junit-dir"
        ),
        pytest.param(
            ["--tag", "dataset=none"],
            "no runs of graph 'desk' that finished (completed, or ended by end_when) tagged "
            "'dataset=none' in .reactor/runs.db (runs made by evaluations are left out); list "
            "what is recorded with `reactor runs --graph desk --tag dataset=none`",
            id="no-runs-selected",
        ),
        pytest.param(["--db", "other.db"], "no run database at other.db", id="no-database"),
    ],
)
def test_usage_errors_exit_2_and_run_nothing(
    project: dict[str, str], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    capsys.readouterr()
    assert cli("eval", "--graph", "desk.py:graph", *args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("reactor eval: error: ")
    assert message in captured.err
    assert captured.out == ""
    assert recorded_runs() == 3


def test_a_graph_that_cannot_be_imported_is_a_usage_error(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("eval", "--graph", "nowhere.py:graph") == 2
    assert "cannot import 'nowhere.py': no such file" in capsys.readouterr().err
    assert cli("eval") == 2
    assert capsys.readouterr().err == (
        "reactor eval: error: give the graph to evaluate: --graph MODULE:GRAPH, or --app with "
        "--agent\n"
    )


def test_graph_name_selects_the_runs_recorded_under_another_name(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("eval", "--graph", "desk.py:renamed") == 2
    assert "no runs of graph 'desk-2'" in capsys.readouterr().err
    assert cli("eval", "--graph", "desk.py:renamed", "--graph-name", "desk") == 0
    assert sorted(rows(capsys.readouterr().out)) == sorted(project.values())


def test_runs_an_evaluation_made_are_not_evaluated_again(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("eval", "--graph", "desk.py:graph", "--into", ".reactor/runs.db") == 0
    assert recorded_runs() == 6
    capsys.readouterr()
    assert cli("eval", "--graph", "desk.py:graph", "--status", "any") == 0
    assert sorted(rows(capsys.readouterr().out)) == sorted(project.values())


def test_new_runs_go_to_a_scratch_store_beside_and_the_runs_read_stay_as_they_are(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = content(".reactor/runs.db")
    capsys.readouterr()
    assert cli("eval", "--graph", "pessimist.py:graph", "--provider", "desk.py:market") == 0
    out = capsys.readouterr().out
    assert content(".reactor/runs.db") == before  # only read
    assert recorded_runs(".reactor/runs-eval.db") == 6  # the three evaluated, and their cases
    new_run = next(line.split()[1] for line in out.splitlines() if line.startswith(project["MSFT"]))
    hint = next(line for line in out.splitlines() if line.startswith("compare a case:"))
    assert "--db .reactor/runs-eval.db" in hint
    capsys.readouterr()
    diff = ["diff", project["MSFT"], new_run, "--db", ".reactor/runs-eval.db", "--plain"]
    assert cli(*diff) == 1  # both runs are there, and they differ
    assert "differ" in capsys.readouterr().out
    assert cli("eval", "--graph", "desk.py:graph", "--into", "elsewhere/cases.db") == 0
    assert recorded_runs("elsewhere/cases.db") == 6


def test_limit_takes_the_newest_and_since_the_recent(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("eval", "--graph", "desk.py:graph", "--limit", "2") == 0
    assert sorted(rows(capsys.readouterr().out)) == sorted([project["MSFT"], project["NVDA"]])
    with sqlite3.connect(".reactor/runs.db") as db:  # AAPL's run began ten days ago
        db.execute(
            "UPDATE runs SET started_at = ? WHERE run_id = ?",
            (time.time() - 10 * 86400, project["AAPL"]),
        )
    db.close()
    assert cli("eval", "--graph", "desk.py:graph", "--since", "7d") == 0
    assert sorted(rows(capsys.readouterr().out)) == sorted([project["MSFT"], project["NVDA"]])
    assert cli("eval", "--graph", "desk.py:graph", "--since", "2w") == 0
    assert sorted(rows(capsys.readouterr().out)) == sorted(project.values())


def test_a_tag_makes_a_dataset_to_evaluate(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    aapl, nvda = project["AAPL"], project["NVDA"]
    assert cli("runs", "tag", aapl[:24], nvda, "dataset=golden", "owner=") == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{aapl} (desk): dataset=golden, owner",
        f"{nvda} (desk): dataset=golden, owner",
        "evaluate them: reactor eval --graph MODULE:GRAPH --tag dataset=golden",
    ]
    assert cli("eval", "--graph", "desk.py:graph", "--tag", "dataset=golden") == 0
    assert sorted(rows(capsys.readouterr().out)) == sorted([aapl, nvda])
    assert cli("runs", "tag", aapl, "--remove", "dataset") == 0
    assert capsys.readouterr().out.splitlines() == [f"{aapl} (desk): owner"]
    assert cli("eval", "--graph", "desk.py:graph", "--tag", "dataset=golden") == 0
    assert list(rows(capsys.readouterr().out)) == [nvda]
    assert cli("eval", "--graph", "desk.py:graph", "--tag", "owner", "--tag", "dataset") == 0
    assert list(rows(capsys.readouterr().out)) == [nvda]


def test_runs_tag_changes_nothing_when_a_run_is_unknown(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("runs", "tag", project["AAPL"], "run_nope", "dataset=golden") == 1
    assert "No run 'run_nope'" in capsys.readouterr().err
    with SQLiteSignalStore(Path(".reactor/runs.db")) as store:
        assert store.runs(tag="dataset") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["last"], "give the tags to set (KEY=VALUE) or to remove", id="no-tags"),
        pytest.param(["dataset=golden"], "name the runs to tag", id="no-runs"),
        pytest.param(["last", "=golden"], "a tag needs a key", id="no-key"),
    ],
)
def test_runs_tag_usage_errors_exit_2(
    project: dict[str, str], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    capsys.readouterr()
    assert cli("runs", "tag", *args) == 2
    assert capsys.readouterr().err.startswith(f"reactor runs tag: error: {message}")


def test_runs_without_tag_still_lists(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("runs", "--graph", "desk", "--limit", "2", "--plain") == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["RUN", project["NVDA"], project["MSFT"]]


def test_the_exit_status_reaches_the_shell(project: dict[str, str], tmp_path: Path) -> None:
    # A real process: the status a shell sees is the point.
    changed = reactor_process(tmp_path, "eval", "--graph", "pessimist.py:graph")
    assert changed.returncode == 1, changed.stderr
    assert changed.stderr == ""
    same = reactor_process(tmp_path, "eval", "--graph", "desk.py:graph", "--json", "eval.json")
    assert same.returncode == 0, same.stderr
    assert json.loads((tmp_path / "eval.json").read_text())["summary"]["same"] == 3


ENDING = textwrap.dedent(
    """
    from reactor import ScriptedProvider, agent, reactive

    graph = reactive(
        {"analyst": agent(prompt="Trend of {{ input }}? One word.", updates="trend")},
        state={"trend": None},
        end_when=lambda run: run.state.trend is not None,
        name="ending",
    )


    def market():
        return ScriptedProvider({"analyst": lambda request: "up"})
    """
)


def test_runs_that_ended_by_end_when_are_finished_runs_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ending.py").write_text(ENDING)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REACTOR_DB", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        for day in ("mon", "tue"):
            assert cli("run", "ending.py:graph", "--provider", "ending.py:market",
                       "--quiet", "--plain", "--input", json.dumps(day)) == 0  # fmt: skip
        with SQLiteSignalStore(tmp_path / ".reactor" / "runs.db") as store:
            assert {info.status for info in store.runs()} == {"ended"}
        capsys.readouterr()
        assert cli("eval", "--graph", "ending.py:graph", "--plain") == 0  # finished: selected
        assert "2 cases: 2 same" in capsys.readouterr().out
        assert cli("eval", "--graph", "ending.py:graph", "--status", "completed") == 2
        assert "no runs of graph 'ending' with status 'completed'" in capsys.readouterr().err
    finally:
        sys.modules.pop("ending", None)


def test_recordings_of_another_graph_are_refused_and_nothing_is_recorded(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("eval", "--graph", "desk.py:imposter") == 2
    error = capsys.readouterr().err
    assert error.startswith(f"reactor eval: error: Run {project['NVDA']} (graph 'desk') was ")
    assert error.endswith(
        "recorded by another graph: its agents 'analyst', 'trader' are not in desk, whose "
        "agents are forecaster. Nothing was run. Evaluate it with the graph it was recorded "
        "with, or pass any_graph=True (reactor eval --any-graph) to run it on this one anyway\n"
    )
    assert recorded_runs(".reactor/runs-eval.db") == 0
    assert cli("eval", "--graph", "desk.py:imposter", "--any-graph") == 1
    assert "3 cases: 0 same" in capsys.readouterr().out


def test_a_changed_prompt_is_never_refused_as_another_graph(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("eval", "--graph", "pessimist.py:graph") == 1  # diverged: no provider
    assert "3 diverged" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("sql", "damage"),
    [
        pytest.param(
            "UPDATE signals SET payload = json_set(payload, '$.usage', 'lots') "
            "WHERE name = 'provider:end'",
            "('provider:end') has the usage 'lots', not token counts",
            id="usage",
        ),
        pytest.param(
            "UPDATE signals SET payload = '[1,2,3]' WHERE name = 'text:delta'",
            "('text:delta') has the payload [1, 2, 3], not an object",
            id="delta-list",
        ),
        pytest.param(
            "UPDATE signals SET payload = NULL WHERE name = 'text:delta'",
            "('text:delta') has the payload None, not an object",
            id="null",
        ),
    ],
)
def test_a_damaged_recording_is_one_line_and_runs_nothing(
    project: dict[str, str], capsys: pytest.CaptureFixture[str], sql: str, damage: str
) -> None:
    with sqlite3.connect(".reactor/runs.db") as db:
        db.execute(sql + " AND run_id = ?", (project["MSFT"],))
    capsys.readouterr()
    assert cli("eval", "--graph", "desk.py:graph") == 1
    error = capsys.readouterr().err
    assert re.fullmatch(
        rf"reactor eval: error: The recording of '{project['MSFT']}' is damaged: signal #\d+ "
        rf"{re.escape(damage)}\. Record the run again, or delete it\.\n",
        error,
    ), error
    assert recorded_runs(".reactor/runs-eval.db") == 0


def test_scorers_get_the_same_types_from_the_recording_and_the_new_run(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("eval", "--graph", "desk.py:graph", "--scorer", "desk.py:same_types") == 0
    assert "3 passed, 0 did not" in capsys.readouterr().out


def test_junit_xml_is_well_formed_whatever_the_messages_hold(
    project: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    ran = cli(
        "eval", "--graph", "desk.py:graph", "--scorer", "desk.py:rings_a_bell",
        "--junit", "eval.xml",
    )  # fmt: skip
    assert ran == 1
    suite = ElementTree.parse("eval.xml").getroot()
    (failure, *_) = suite.iter("failure")
    assert "a bell \\x07 and a null \\x00" in str(failure.get("message"))
