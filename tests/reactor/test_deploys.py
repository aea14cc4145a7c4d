"""Deploying new code while runs wait: kill -9 mid-handler, change the code, resume.

A project's graph runs under ``reactor run`` in a real subprocess, which is killed
(SIGKILL) while a handler works. Then the project's code changes, as a deploy would
change it, and ``reactor resume`` (``--check``, ``--force``) decides what the log allows.
Also ``reactor fork`` and ``reactor db prune`` from the command line.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reactor import RecordingError, RunInfo, SQLiteSignalStore
from tests.reactor.cli_support import cli_env, reactor_cli

DESK = textwrap.dedent(
    """
    import os
    import time

    from reactor import ScriptedProvider, agent, reactive


    def place(ctx):
        if os.environ.get("DESK_HANG"):
            time.sleep(600)  # killed here: the analyst is done, the trader is not
        return f"order for {ctx.state.analysis}"


    graph = reactive(
        {
            "analyst": agent(prompt="ANALYST_PROMPT", updates="analysis"),
            "trader": agent(run=place, activate_on="state:analysis:changed", updates="order"),
            # MORE AGENTS
        },
        state={"analysis": None, "order": None, "audit": None},
        name="desk",
    )


    def scripted_provider():
        return ScriptedProvider({"analyst": ["up"]}, default=["noted"])
    """
)

AUDITOR = (
    '"auditor": agent(run=lambda ctx: "ok", activate_on="state:order:changed", updates="audit"),'
)


def write_desk(project: Path, prompt: str = "Analyse {{ input }}", more: str = "") -> None:
    text = DESK.replace("ANALYST_PROMPT", prompt).replace("# MORE AGENTS", more)
    (project / "desk.py").write_text(text)


@pytest.fixture
def killed(tmp_path: Path) -> tuple[Path, str]:
    """A project whose run was killed (SIGKILL) in the trader's handler; its run id."""
    write_desk(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "reactor", "run", "desk:graph", "--provider", "scripted"],
        cwd=tmp_path,
        env=cli_env(DESK_HANG="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    database = tmp_path / ".reactor" / "runs.db"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with SQLiteSignalStore(database, readonly=True) as store:
                    runs = store.runs()
                    names = [s.name for s in store.load(runs[0].run_id).signals] if runs else []
            except RecordingError:  # not there yet, or its tables are being made
                names = []
            if "agent:trader:activated" in names:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the run never got to the trader")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    return tmp_path, runs[0].run_id


def test_a_changed_prompt_is_refused_and_an_added_agent_resumes(
    killed: tuple[Path, str],
) -> None:
    project, run_id = killed
    write_desk(project, prompt="Analyse {{ input }} with care")
    check = reactor_cli(project, "resume", "last", "--check", "--plain")
    assert check.returncode == 1, check.stderr
    assert check.stdout.splitlines() == [
        f"Run {run_id} cannot resume on this graph:",
        "  agent 'analyst': its prompt templates changed, and it has 1 recorded activation",
    ]
    refused = reactor_cli(project, "resume", "last", "--provider", "scripted", "--quiet")
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        f"reactor resume: error: Run {run_id} cannot resume on this graph: its code changed "
        "what the run's log says was done (agent 'analyst': its prompt templates changed"
    )
    with SQLiteSignalStore(project / ".reactor" / "runs.db", readonly=True) as store:
        assert store.runs()[0].status == "running"  # refused: nothing was recorded

    write_desk(project, more=AUDITOR)  # the prompt as it was, and a new agent
    check = reactor_cli(project, "resume", "last", "--check", "--plain")
    assert check.returncode == 0, check.stderr
    assert check.stdout.splitlines() == [
        f"Run {run_id} can resume on this graph.",
        "  (compatible) agent 'auditor' was added",
    ]
    resumed = reactor_cli(project, "resume", "last", "--provider", "scripted", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run_id} (desk): completed" in resumed.stdout
    with SQLiteSignalStore(project / ".reactor" / "runs.db", readonly=True) as store:
        state = store.load(run_id).state
    assert state == {"analysis": "up", "order": "order for up", "audit": "ok"}


def test_force_resumes_on_the_changed_code(killed: tuple[Path, str]) -> None:
    project, run_id = killed
    write_desk(project, prompt="Analyse {{ input }} with care")
    forced = reactor_cli(project, "resume", "last", "--provider", "scripted", "--quiet", "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"run {run_id} (desk): completed" in forced.stdout


def test_reactor_fork_starts_a_new_run_from_a_signal(killed: tuple[Path, str]) -> None:
    project, run_id = killed
    with SQLiteSignalStore(project / ".reactor" / "runs.db", readonly=True) as store:
        signals = store.load(run_id).signals
    changed = next(s.seq for s in signals if s.name == "agent:analyst:completed")
    forked = reactor_cli(
        project,
        "fork",
        run_id,
        "--at",
        str(changed),
        "--set",
        'analysis="down"',
        "--provider",
        "scripted",
        "--quiet",
        "--plain",
        "--state",
    )
    assert forked.returncode == 0, forked.stderr
    lines = forked.stdout.splitlines()
    assert lines[1] == f"forked from {run_id} at signal {changed}"
    new_id = lines[0].split()[1]
    with SQLiteSignalStore(project / ".reactor" / "runs.db", readonly=True) as store:
        fork = store.load(new_id)
        source = store.load(run_id)
    assert fork.info.forked_from == run_id
    assert [s.name for s in fork.signals[:changed]] == [s.name for s in source.signals[:changed]]
    assert fork.signals[changed].name == "harness:forked"
    assert fork.signals[changed].payload["from_run_id"] == run_id
    assert fork.state["order"] == "order for down"
    bad = reactor_cli(project, "fork", run_id, "--at", "9999", "--provider", "scripted")
    assert bad.returncode == 1
    assert f"Run {run_id} has signals 1 to {len(signals)}: fork it at one of them" in bad.stderr


def test_reactor_db_prune_deletes_old_ended_runs_only(tmp_path: Path) -> None:
    write_desk(tmp_path)
    for _ in range(3):
        done = reactor_cli(tmp_path, "run", "desk:graph", "--provider", "scripted", "--quiet")
        assert done.returncode == 0, done.stderr
    database = tmp_path / ".reactor" / "runs.db"
    with SQLiteSignalStore(database) as store:
        store.start_run(RunInfo(run_id="run_waiting", graph="desk", started_at=time.time()))
    dry = reactor_cli(
        tmp_path, "db", "prune", "--db", str(database), "--older-than", "0s", "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == f"{database}: 3 runs (completed) ended more than 0 seconds ago would go.\n"
    kept = reactor_cli(
        tmp_path, "db", "prune", "--db", str(database), "--older-than", "1d", "--status", "all"
    )
    assert (
        kept.stdout == f"{database}: deleted 0 runs (any status) that ended more than 1 day ago.\n"
    )
    gone = reactor_cli(
        tmp_path, "db", "prune", "--db", str(database), "--older-than", "0s", "--keep-last", "1"
    )
    assert gone.returncode == 0, gone.stderr
    with SQLiteSignalStore(database, readonly=True) as store:
        statuses = sorted(str(info.status) for info in store.runs())
    assert statuses == ["completed", "running"]  # the newest kept, the unfinished never
    wrong = reactor_cli(tmp_path, "db", "prune", "--db", str(database), "--older-than", "soon")
    assert wrong.returncode == 2
    assert "'soon' is not a duration; write a whole number and a unit: 30d (days)" in wrong.stderr
