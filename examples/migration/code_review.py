"""The later dialect, migrated: a coder/reviewer loop per task, with a structured verdict.

    python -m examples.migration.code_review

The flow (``code_review.yaml``) plans a change as tasks (structured output, its
schema in ``schemas/tasks.json``), then a ``control.foreach`` runs a coder and a
reviewer for each task; a loop edge sends the code back until the reviewer's verdict
(``schemas/verdict.json``) says it passed. The model is scripted, so this runs
offline: the reviewer asks once for a test, then passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from migration import check_sync, harness_to_reactive
from reactor import ProviderRequest, ScriptedProvider

FLOW = Path(__file__).with_name("code_review.yaml")

TASKS = [
    {"id": "flag", "title": "parse the --json flag"},
    {"id": "writer", "title": "write the export as JSON"},
]


def code(request: ProviderRequest) -> str:
    """The coder: adds a test when the reviewer asked for one."""
    return "the code plus a test" if "Add a test" in request.prompt else "the code"


def review(request: ProviderRequest) -> dict[str, Any]:
    """The reviewer: code that writes files needs a test."""
    if "write" in request.prompt and "plus a test" not in request.prompt:
        return {"passed": False, "feedback": "Add a test for the file it writes."}
    return {"passed": True, "feedback": "Looks good."}


def provider() -> ScriptedProvider:
    """Offline answers for every LLM node, by node id (the same in both executors)."""
    return ScriptedProvider(
        {
            "plan": [{"tasks": TASKS}],
            "code": code,
            "review": review,
            "summary": ["Export can now write JSON (--json)."],
        }
    )


def main() -> int:
    scripted = provider()
    result = harness_to_reactive(FLOW).run_sync(provider=scripted)
    outputs = result.state["outputs"]
    print(f"Plan: {len(outputs['plan']['structuredOutput']['tasks'])} tasks")
    for iteration in outputs["tasks"]["iterations"]:
        task = iteration["item"]
        rounds = sum(
            1 for r in scripted.requests if r.agent == "review" and task["title"] in r.prompt
        )
        verdict = iteration["outputs"]["review"]["structuredOutput"]
        print(f"  {task['id']}: passed after {rounds} review(s): {verdict['feedback']}")
    print(f"Reviews kept in the flow state: {sorted(result.state['state']['reviews'])}")
    print(f"Summary: {outputs['summary']['text']}")
    verdict = check_sync(FLOW, provider=provider)
    print(f"Both executors agree: {verdict.agrees}")
    return 0 if result.ok and verdict.agrees else 1


if __name__ == "__main__":
    raise SystemExit(main())
