"""The `reactor` command, run as a user runs it in a project folder (in this process)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from reactor import End, ProviderEvent, ProviderRequest, ScriptedProvider, SQLiteSignalStore
from reactor._cli._load import provider
from tests.reactor.cli_support import cli_env, reactor_cli, write_project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_project(tmp_path_factory.mktemp("project"))
    first = reactor_cli(folder, "run", "desk:graph", "--tag", "demo", "--quiet")
    assert first.returncode == 0, first.stderr
    return folder


def run_ids(project: Path) -> list[str]:
    listed = reactor_cli(project, "runs", "--json")
    return [json.loads(line)["run_id"] for line in listed.stdout.splitlines()]


def test_run_prints_a_summary_and_records(project: Path) -> None:
    result = reactor_cli(project, "run", "desk:graph", "--input", '{"symbol": "MSFT"}', "--quiet")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("run run_")
    assert ": completed - quiescence" in lines[0]
    assert lines[1] == (
        "provider: scripted answers from desk.scripted_provider "
        "(offline; --provider anthropic asks Claude)"
    )
    assert lines[2] == "state: analysis='up', risk='low', decision='buy'"
    assert lines[-1].startswith("inspect: reactor show run_")
    assert (project / ".reactor" / "runs.db").exists()


def test_runs_lists_newest_first_with_tags(project: Path) -> None:
    result = reactor_cli(project, "runs")
    assert result.returncode == 0
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["RUN", "GRAPH", "STATUS", "STARTED", "DURATION", "SIGNALS", "TAGS"]
    assert all(" desk " in row and " completed " in row for row in rows)
    assert rows[-1].rstrip().endswith("demo")
    filtered = reactor_cli(project, "runs", "--tag", "demo", "--json")
    assert [json.loads(line)["tags"] for line in filtered.stdout.splitlines()] == [{"demo": ""}]


def test_tables_show_local_times_with_their_zone(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        listed = reactor_cli(project, "runs", env={**cli_env(), "TZ": "America/New_York"})
        shown = reactor_cli(project, "show", "last", env={**cli_env(), "TZ": "America/New_York"})
    finally:
        monkeypatch.undo()
        time.tzset()
    newest = json.loads(reactor_cli(project, "runs", "--json").stdout.splitlines()[0])
    started = datetime.fromisoformat(newest["started_at"]).astimezone(ZoneInfo("America/New_York"))
    local = started.strftime("%Y-%m-%d %H:%M:%S %Z")
    assert local.endswith((" EST", " EDT"))
    assert local in listed.stdout.splitlines()[1]
    assert local in shown.stdout


def test_show_has_agents_timeline_and_tree(project: Path) -> None:
    result = reactor_cli(project, "show", "last")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("Run run_")
    for section in ("\nAgents\n", "\nTimeline\n", "\nCausal tree\n"):
        assert section in text
    assert "agent:trader:skipped  [harness]  reason=guard" in text
    # Under the branch of whichever of analyst and risk finished last (they run at once).
    assert "│   └── agent:trader:activated" in text


def test_show_json_is_a_recording(project: Path) -> None:
    from reactor import Recording

    result = reactor_cli(project, "show", run_ids(project)[-1], "--json")
    recording = Recording.from_jsonl(result.stdout)
    assert recording.complete
    assert recording.info.graph == "desk"


def test_replay_reproduces_the_recorded_run(project: Path) -> None:
    original = run_ids(project)[-1]
    result = reactor_cli(project, "replay", original, "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"Replay matches {original}: same signals, payloads and final state."
    )
    replayed = json.loads(reactor_cli(project, "runs", "--json").stdout.splitlines()[0])
    assert replayed["tags"] == {"replay_of": original}


def test_diff_of_two_runs(project: Path) -> None:
    ids = run_ids(project)
    same = reactor_cli(project, "diff", ids[-1], ids[-1])
    assert same.returncode == 0
    assert same.stdout.startswith(f"{ids[-1]} and {ids[-1]} match (")
    differ = reactor_cli(project, "run", "desk:graph", "--input", '{"symbol": "X"}', "--quiet")
    assert differ.returncode == 0
    latest = run_ids(project)[0]
    result = reactor_cli(project, "diff", ids[-1], latest)
    assert result.returncode == 1
    assert "Runs diverge at step 0 (start), in payload.input.symbol:" in result.stdout
    assert '"symbol": "AAPL"' in result.stdout


def test_graph_prints_mermaid(project: Path) -> None:
    result = reactor_cli(project, "graph", "desk:graph")
    assert result.returncode == 0
    assert result.stdout.startswith("flowchart LR\n")
    assert "a_trader" in result.stdout


def test_json_logs_stream_every_signal(project: Path) -> None:
    result = reactor_cli(project, "run", "desk:graph", "--json-logs", "--no-record", "--quiet")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["event"] == "harness:start"
    assert events[-1]["event"] == "harness:end"
    assert all(event["run_id"] == events[0]["run_id"] for event in events)
    assert result.stderr.startswith("run run_")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("show", "run_nope"), "reactor show: error: No run 'run_nope' in ", id="unknown-run"
        ),
        pytest.param(
            ("show", "last", "extra"),
            "reactor show: error: unrecognized arguments: extra",
            id="arity",
        ),
        pytest.param(
            ("run", "nope:graph"), "reactor run: error: cannot import 'nope'", id="module"
        ),
        pytest.param(("run", "desk"), "reactor run: error: expected MODULE:GRAPH", id="target"),
        pytest.param(
            ("run", "desk:graph", "--input", "{"),
            "reactor run: error: --input is not valid JSON",
            id="json",
        ),
        pytest.param(
            ("runs", "--db", "missing.db"),
            "reactor runs: error: no run database at missing.db",
            id="db",
        ),
        pytest.param(
            ("bogus",), "reactor: error: argument COMMAND: invalid choice: 'bogus'", id="command"
        ),
    ],
)
def test_bad_input_gives_one_line_and_a_failing_status(
    project: Path, args: tuple[str, ...], message: str
) -> None:
    result = reactor_cli(project, *args)
    assert result.returncode != 0
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1


def test_every_command_has_help_with_an_example(project: Path) -> None:
    for command in ("run", "runs", "show", "replay", "diff", "graph", "migrate"):
        result = reactor_cli(project, command, "--help")
        assert result.returncode == 0
        assert "Example:\n  reactor " in result.stdout


FLOWS = Path(__file__).parents[1] / "migration" / "data" / "flows"


def test_migrate_prints_python_that_runs_and_agrees(project: Path) -> None:
    result = reactor_cli(project, "migrate", str(FLOWS / "04-flow-bindings.yaml"))
    assert result.returncode == 0, result.stderr
    namespace: dict[str, object] = {}
    exec(compile(result.stdout, "migrated.py", "exec"), namespace)
    run = namespace["graph"].run_sync()  # type: ignore[attr-defined]
    assert run.state["outputs"]["say"] == {"text": "City: Lisbon, Country: Portugal"}


def test_migrate_check_compares_both_executors(project: Path) -> None:
    ok = reactor_cli(project, "migrate", str(FLOWS / "04-flow-bindings.yaml"), "--check")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("Flow 'flow-bindings': the edge-based and the reactive run agree")
    unknown = reactor_cli(project, "migrate", str(FLOWS / "05-flow-when-policy.yaml"), "--check")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("reactor migrate: error: Unknown node types: 'tutorial.flaky'")
    registry = reactor_cli(
        project,
        "migrate",
        str(FLOWS / "05-flow-when-policy.yaml"),
        "--check",
        "--registry",
        "tests.migration.nodes:registry",
    )
    assert registry.returncode == 0, registry.stdout + registry.stderr


def test_a_run_that_asks_no_model_names_no_provider(project: Path) -> None:
    (project / "handlers.py").write_text(
        "from reactor import agent, reactive\n\n"
        "graph = reactive({'double': agent(run=lambda ctx: 2 * (ctx.input or 1))}, name='h')\n"
    )
    result = reactor_cli(project, "run", "handlers:graph", "--input", "21", "--quiet")
    assert result.returncode == 0, result.stderr
    assert not [line for line in result.stdout.splitlines() if line.startswith("provider:")]


ASKING = (
    "from reactor import agent, reactive\n"
    "graph = reactive({'pick': agent(ask='Which side?', choices=['buy', 'sell'],"
    " updates='side')}, state={'side': None}, name='picker')\n"
)


def test_run_without_interactive_says_at_once_what_it_waits_for(tmp_path: Path) -> None:
    (tmp_path / "ask.py").write_text(ASKING)
    started = time.monotonic()
    done = reactor_cli(tmp_path, "run", "ask:graph")
    assert time.monotonic() - started < 30  # it does not wait in silence for an answer
    assert done.returncode == 1
    found = re.search(r"run (run_\w+) was suspended", done.stderr)
    assert found is not None, done.stderr
    run_id = found.group(1)
    assert done.stderr.strip() == (
        f"reactor run: error: run {run_id} was suspended while it waits for an answer "
        f"(pick: Which side? (buy, sell)); continue it with: reactor resume {run_id} "
        "--interactive"
    )
    with SQLiteSignalStore(tmp_path / ".reactor" / "runs.db") as store:
        log, info = store.load(run_id), store.info(run_id)
    assert (info.status, log.signals[-1].name) == ("waiting", "harness:suspended")
    answered = reactor_cli(tmp_path, "resume", run_id)  # still nobody to answer: said again
    assert "(pick: Which side? (buy, sell))" in answered.stderr


def test_an_unrecorded_run_without_interactive_is_aborted_naming_the_question(
    tmp_path: Path,
) -> None:
    (tmp_path / "ask.py").write_text(ASKING)
    done = reactor_cli(tmp_path, "run", "ask:graph", "--no-record")
    assert done.returncode == 1
    assert (
        "aborted - it asks (pick: Which side? (buy, sell)) and nobody can answer without "
        "--interactive"
    ) in done.stdout


class _DuckProvider:
    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield End(output="quack")


@pytest.mark.parametrize(
    ("given", "kind"),
    [
        pytest.param(ScriptedProvider, ScriptedProvider, id="a-provider-class"),
        pytest.param(lambda: ScriptedProvider(), ScriptedProvider, id="a-factory"),
        pytest.param(ScriptedProvider(), ScriptedProvider, id="a-provider"),
        pytest.param(_DuckProvider, _DuckProvider, id="a-duck-typed-class"),
        pytest.param(_DuckProvider(), _DuckProvider, id="a-duck-typed-provider"),
    ],
)
def test_scripted_provider_may_be_a_provider_a_class_or_a_factory(given: Any, kind: type) -> None:
    module = ModuleType("answers")
    module.scripted_provider = given  # type: ignore[attr-defined]  # a module made here
    made, _ = provider("scripted", module)
    assert isinstance(made, kind)
