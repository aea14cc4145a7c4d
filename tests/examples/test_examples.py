"""The smaller examples run as documented."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples.human_approval import handle_ticket
from reactor import SQLiteSignalStore


def run_example(
    module: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=60,
    )


def test_structured_logging_prints_json_lines_and_metrics() -> None:
    result = run_example("examples.structured_logging", "--level", "debug")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["event"] == "harness:start"
    assert lines[-1]["event"] == "harness:end"
    assert {line["tags"]["service"] for line in lines} == {"trading-bot"}
    assert len({line["run_id"] for line in lines}) == 1
    assert any(line["event"] == "provider:end" and line["level"] == "debug" for line in lines)
    assert result.stderr.splitlines()[0].split()[:2] == ["agent", "runs"]


def test_structured_logging_survives_a_closed_pipe() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.structured_logging", "--level", "debug"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert process.stdout is not None
    process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr


@pytest.mark.parametrize(
    ("ticket", "answer", "reply", "activations"),
    [
        pytest.param(
            {"complaint": "arrived broken", "order_total": 120.0},
            "yes",
            "120.00 is on its way back",
            6,
            id="large-approved-by-a-person",
        ),
        pytest.param(
            {"complaint": "arrived broken", "order_total": 120.0},
            "no",
            "cannot offer a refund",
            5,
            id="large-refused-by-a-person",
        ),
        pytest.param(
            {"complaint": "it came late", "order_total": 40.0},
            None,
            "8.00 is on its way back",
            6,
            id="small-approved-by-policy",
        ),
        pytest.param(
            {"complaint": "wrong colour", "order_total": 40.0},
            None,
            "passed this on to the team",
            3,
            id="no-refund-for-other",
        ),
    ],
)
async def test_the_refund_desk_routes_by_guards(
    ticket: dict[str, object],
    answer: str | None,
    reply: str,
    activations: int,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "runs.db")
    status = await handle_ticket({"customer": "Ana", **ticket}, answer or "yes", db=db)
    out = capsys.readouterr().out
    assert status == 0
    assert reply in out
    assert f"Run ended: {activations} activations." in out
    asked = "? Refund 120.00 to Ana (damaged: 100% back)?" in out
    assert asked == (answer is not None)
    with SQLiteSignalStore(db, readonly=True) as store:
        recorded = [s.name for s in store.load(store.resolve("last")).signals]
    assert recorded.count("session:prompt") == recorded.count("session:reply") == int(asked)


def test_the_refund_desk_asks_on_the_terminal(tmp_path: Path) -> None:
    result = run_example("examples.human_approval", "--db", str(tmp_path / "runs.db"), stdin="y\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("? Refund 120.00 to Ana (damaged: 100% back)?") == 1
    assert "approval <- {'approved': True, 'by': 'you', 'note': 'asked'}" in result.stdout
    assert "120.00 is on its way back" in result.stdout


def test_the_refund_desk_suspends_at_the_end_of_input_and_resumes(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    stopped = run_example("examples.human_approval", "--db", db, stdin="")
    assert stopped.returncode == 1, stopped.stderr
    assert "end of input: nobody is left to answer" in stopped.stdout
    assert "Traceback" not in stopped.stderr
    with SQLiteSignalStore(db, readonly=True) as store:
        assert [run.status for run in store.runs()] == ["waiting"]
    resumed = run_example(
        "reactor",
        "resume",
        "last",
        "--db",
        db,
        "-i",
        "--graph",
        "examples.human_approval:graph",
        stdin="no\n",
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "cannot offer a refund" in resumed.stdout
    with SQLiteSignalStore(db, readonly=True) as store:
        assert [run.status for run in store.runs()] == ["ended"]


def test_the_bus_demo_runs() -> None:
    result = run_example("examples.bus_demo")
    assert result.returncode == 0, result.stderr
    assert "Streamed to async code: ['trade:proposed', 'trade:closed']" in result.stdout


def test_the_migration_example_converts_runs_and_agrees() -> None:
    result = run_example("examples.migration")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Edge-based executor: ")
    assert lines[1] == "Verdict: go: every service is healthy"
    assert lines[2] == "Same node outputs: True"
    assert "the edge-based and the reactive run agree on all 6 nodes" in result.stdout


def test_migrated_branches_run_concurrently() -> None:
    from examples.migration.__main__ import FLOW, provider, registry
    from migration import harness_to_reactive

    result = harness_to_reactive(FLOW, registry=registry()).run_sync(provider=provider())
    names = [s.name for s in result.signals]
    started = [names.index(f"agent:check_{s}:activated") for s in ("auth", "payments", "search")]
    first_done = min(names.index(f"agent:check_{s}:completed") for s in ("auth", "search"))
    assert max(started) < first_done  # all three probes were running at once
