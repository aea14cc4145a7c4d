"""The CLI's options and figures, as a new user meets them (each a reported stumble)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from tests.reactor.cli_support import cli_env, reactor_cli, write_project

MORE_GRAPHS = textwrap.dedent(
    """
    import asyncio
    import warnings

    from reactor import CycleWarning, agent, reactive


    def boom(ctx):
        raise ValueError("no quote for this symbol")


    shaky = reactive(
        {
            "quote": agent(run=boom, updates="price"),
            "news": agent(run=lambda ctx: "calm", updates="headline"),
        },
        state={"price": None, "headline": None},
        name="shaky",
        fail_fast=False,
    )


    async def slow(ctx):
        await asyncio.sleep(30)
        return "late"


    hasty = reactive(
        {
            "fast": agent(run=lambda ctx: True, updates="done"),
            "slow": agent(run=slow, updates="late"),
        },
        state={"done": False, "late": None},
        end_when=lambda run: run.state.done,
        on_end="cancel",
        name="hasty",
    )


    with warnings.catch_warnings():  # the loop is the point: it counts to 400
        warnings.simplefilter("ignore", CycleWarning)
        counter = reactive(
            {
                "count": agent(
                    run=lambda ctx: ctx.state.n + 1,
                    activate_on=["harness:start", "state:n:changed"],
                    when="state.n < 400",
                    updates="n",
                )
            },
            state={"n": 0},
            name="counter",
            max_depth=None,
        )
    """
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_project(tmp_path_factory.mktemp("options"))
    (folder / "more.py").write_text(MORE_GRAPHS)
    return folder


def test_tags_given_as_key_value_are_found_the_same_way(project: Path) -> None:
    ran = reactor_cli(project, "run", "desk:graph", "--tag", "env=prod", "--tag", "nightly")
    assert ran.returncode == 0, ran.stderr
    found = reactor_cli(project, "runs", "--tag", "env=prod", "--json")
    assert [json.loads(line)["tags"] for line in found.stdout.splitlines()] == [
        {"env": "prod", "nightly": ""}
    ]
    none = reactor_cli(project, "runs", "--tag", "env=dev", "--graph", "desk")
    assert none.stdout == (
        "No runs of graph 'desk' tagged 'env=dev' in .reactor/runs.db; "
        "`reactor runs` lists them all.\n"
    )


def test_the_database_is_an_option_or_the_environment(project: Path) -> None:
    ran = reactor_cli(project, "run", "desk:graph", "--db", "elsewhere.db", "--quiet")
    assert ran.returncode == 0, ran.stderr
    run_id = ran.stdout.split()[1]
    assert ran.stdout.splitlines()[-1] == (
        f"inspect: reactor show {run_id} --db elsewhere.db   "
        f"replay: reactor replay {run_id} --db elsewhere.db"
    )
    shown = reactor_cli(project, "show", "last", "--db", "elsewhere.db")
    assert shown.stdout.startswith(f"Run {run_id} of desk\n")
    listed = reactor_cli(project, "runs", "--json", env=cli_env(REACTOR_DB="elsewhere.db"))
    assert [json.loads(line)["run_id"] for line in listed.stdout.splitlines()] == [run_id]


@pytest.mark.parametrize("command", ["run", "runs", "show", "replay", "diff", "graph"])
def test_usage_lines_name_each_argument_once(project: Path, command: str) -> None:
    usage = reactor_cli(project, command, "--help").stdout.split("\n\n")[0]
    assert "..." not in usage
    assert "[PATH]" not in usage


def test_diff_usage_names_both_runs(project: Path) -> None:
    usage = reactor_cli(project, "diff", "--help").stdout.split("\n\n")[0]
    assert usage.split() == [
        "usage:",
        "reactor",
        "diff",
        "[-h]",
        "[--db",
        "PATH]",
        "[--plain]",
        "RUN_A",
        "RUN_B",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("run", "desk:graph", "--log-level", "verbose"),
            "reactor run: error: argument --log-level: invalid choice: 'verbose' (choose from "
            "'debug', 'info', 'warning', 'error', 'critical') (see `reactor run --help`)\n",
            id="log-level",
        ),
        pytest.param(
            ("runs", "--limit", "-1"),
            "reactor runs: error: argument --limit: must be a whole number of at least 1, "
            "got '-1' (see `reactor runs --help`)\n",
            id="limit",
        ),
        pytest.param(
            ("run", "desk:graph", "--timeout", "0"),
            "reactor run: error: argument --timeout: must be a number of seconds above 0, "
            "got '0' (see `reactor run --help`)\n",
            id="timeout",
        ),
        pytest.param(
            ("run", "desk:graph", "--input", "@missing.json"),
            "reactor run: error: --input @missing.json: cannot read missing.json "
            "(No such file or directory)\n",
            id="input-file",
        ),
    ],
)
def test_bad_options_are_one_line_errors(
    project: Path, args: tuple[str, ...], message: str
) -> None:
    result = reactor_cli(project, *args)
    assert result.returncode != 0
    assert result.stderr == message


def test_bare_reactor_shows_the_commands_and_fails(project: Path) -> None:
    result = reactor_cli(project)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: reactor ")
    assert "    replay " in result.stderr


def test_a_closed_pipe_ends_the_output_quietly(project: Path) -> None:
    ran = reactor_cli(project, "run", "more:counter", "--quiet")
    assert ran.returncode == 0, ran.stderr
    # A real process and a real pipe: what the reader's going away does to it is the point.
    process = subprocess.Popen(
        [sys.executable, "-W", "error", "-m", "reactor", "show", "last"],
        cwd=project,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()
        process.stdout.close()  # like `| head -1`
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()  # nothing if it ended; never left running for a later test to meet
        process.wait()
    assert stderr == b""
    assert process.returncode == 141


def test_run_prints_the_whole_state_only_when_asked(project: Path) -> None:
    brief = reactor_cli(project, "run", "more:counter", "--quiet", "--no-record")
    assert "state: n=400\n" in brief.stdout
    full = reactor_cli(project, "run", "desk:graph", "--quiet", "--no-record", "--state")
    start = full.stdout.index("state: {")
    end = full.stdout.index("\n}\n", start) + 2
    assert json.loads(full.stdout[start + len("state: ") : end]) == {
        "analysis": "up",
        "risk": "low",
        "decision": "buy",
    }


def test_a_long_state_is_cut_to_one_line(project: Path) -> None:
    (project / "wide.py").write_text(
        "from reactor import agent, reactive\n"
        "keys = {f'field_{i}': 'x' * 30 for i in range(12)}\n"
        "graph = reactive({'noop': agent(run=lambda ctx: 1, updates='field_0')}, state=keys)\n"
    )
    result = reactor_cli(project, "run", "wide:graph", "--quiet", "--no-record")
    line = next(line for line in result.stdout.splitlines() if line.startswith("state: "))
    assert line.startswith("state: field_0=1, field_1='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', ")
    assert line.endswith(" more (--state prints the whole state)")


def test_times_are_iso_8601_in_json(project: Path) -> None:
    reactor_cli(project, "run", "desk:graph", "--quiet")
    info = json.loads(reactor_cli(project, "runs", "--json", "--limit", "1").stdout)
    started = datetime.fromisoformat(info["started_at"])
    ended = datetime.fromisoformat(info["ended_at"])
    assert started.utcoffset() is not None
    assert started <= ended


def test_an_unknown_price_is_unknown_not_a_zero(project: Path) -> None:
    ran = reactor_cli(project, "run", "desk:graph", "--quiet")
    assert " · cost unknown · " in ran.stdout
    assert "$0.0000" not in ran.stdout
    shown = reactor_cli(project, "show", "last").stdout
    agents = shown.split("\nAgents\n")[1].split("\n\n")[0].splitlines()
    assert agents[0].split() == [
        "AGENT",
        "RUNS",
        "OK",
        "FAILED",
        "CANCELLED",
        "SKIPPED",
        "MEAN",
        "MS",
        "TOKENS",
        "COST",
    ]
    assert agents[1].split()[-2:] == ["3/1", "unknown"]
    assert agents[-1].split() == ["total", "3", "6/2", "unknown"]


def test_cancelled_activations_have_their_column(project: Path) -> None:
    ran = reactor_cli(project, "run", "more:hasty", "--quiet")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = reactor_cli(project, "show", "last").stdout
    slow = next(line for line in shown.splitlines() if line.split()[:1] == ["slow"])
    assert slow.split()[1:6] == ["1", "0", "0", "1", "0"]


def test_a_run_with_failures_says_so_and_fails(project: Path) -> None:
    ran = reactor_cli(project, "run", "more:shaky", "--quiet")
    assert ran.returncode == 1
    assert re.match(r"run run_\w+ \(shaky\): completed \(1 failed\) - ", ran.stdout)
    assert "failed: quote: ValueError: no quote for this symbol" in ran.stdout
    listed = reactor_cli(project, "runs", "--graph", "shaky").stdout.splitlines()
    assert "  completed (1 failed)  " in listed[1]
    shown = reactor_cli(project, "show", "last").stdout
    assert "  status:   completed (1 failed)\n" in shown


@pytest.mark.parametrize(
    ("format_", "start"),
    [
        pytest.param("mermaid", "flowchart LR\n", id="mermaid"),
        pytest.param("dot", "digraph reactor {\n", id="dot"),
        pytest.param("json", "{\n", id="json"),
    ],
)
def test_graph_formats(project: Path, format_: str, start: str) -> None:
    result = reactor_cli(project, "graph", "desk:graph", "--format", format_)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(start)


def test_graph_from_a_run_draws_what_was_observed(project: Path) -> None:
    (project / "sly.py").write_text(
        "from reactor import agent, reactive\n"
        "def sneak(ctx):\n"
        "    ctx.store.set('secret', 'seen')\n"
        "    return 'done'\n"
        "graph = reactive({'sly': agent(run=sneak, updates='status')},\n"
        "                 state={'status': None, 'secret': None}, name='sly')\n"
    )
    ran = reactor_cli(project, "run", "sly:graph", "--quiet")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    declared = json.loads(reactor_cli(project, "graph", "sly:graph", "--format", "json").stdout)
    observed = json.loads(
        reactor_cli(project, "graph", "sly:graph", "--format", "json", "--from-run", "last").stdout
    )
    edge = {"source": "agent:sly", "target": "signal:state:secret:changed", "kind": "observed"}
    assert edge not in declared["edges"]
    assert edge in observed["edges"]
