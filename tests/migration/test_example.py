"""The later-dialect example: a coder/reviewer loop per task, migrated and checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from examples.migration.code_review import FLOW, provider
from migration import FlowSpec, NodeRegistry, check, harness_to_reactive, to_python
from migration._edge.edge import execute
from tests.reactor.cli_support import reactor_cli

ROOT = Path(__file__).parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_example_runs_and_both_executors_agree() -> None:
    result = run("-m", "examples.migration.code_review")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Plan: 2 tasks",
        "  flag: passed after 1 review(s): Looks good.",
        "  writer: passed after 2 review(s): Looks good.",
        "Reviews kept in the flow state: ['flag', 'writer']",
        "Summary: Export can now write JSON (--json).",
        "Both executors agree: True",
    ]


def test_the_example_uses_each_part_of_the_dialect() -> None:
    spec = FlowSpec.load(FLOW)
    assert spec.node_packs == ("core", "claude")
    assert spec.scopes.bodies == {"tasks": ("code", "review", "record")}
    review = spec.node("review").input["options"]["outputSchema"]
    assert review["required"] == ["passed", "feedback"]
    assert [e.when for e in spec.edges if e.type == "loop"] == [
        "$not(review.structuredOutput.passed)"
    ]


async def test_the_loop_ends_when_the_reviewer_passes_the_code() -> None:
    result = await harness_to_reactive(FLOW).run(provider=provider())
    writer = result.state["outputs"]["tasks"]["iterations"][1]["outputs"]
    assert writer["code"]["text"] == "the code plus a test"
    assert writer["review"]["structuredOutput"] == {"passed": True, "feedback": "Looks good."}
    assert result.state["state"]["reviews"]["writer"]["passed"] is True
    verdict = await check(FLOW, provider=provider)
    assert verdict.agrees, verdict.report()


async def test_the_generated_python_runs_the_same_flow(tmp_path: Path) -> None:
    module = tmp_path / "code_review_graph.py"  # saved away from the flow and its schemas
    module.write_text(to_python(FLOW, saved_as=module))
    namespace: dict[str, object] = {"__file__": str(module)}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    result = await namespace["graph"].run(provider=provider())  # type: ignore[attr-defined]
    edge = await execute(FlowSpec.load(FLOW), None, NodeRegistry(), provider())
    assert result.state["outputs"] == edge.outputs
    assert result.state["state"] == edge.state


def test_reactor_migrate_checks_it_with_default_answers() -> None:
    result = reactor_cli(ROOT, "migrate", str(FLOW), "--check", env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Flow 'code-review': the edge-based and the reactive run agree")
    assert result.stderr == ""
