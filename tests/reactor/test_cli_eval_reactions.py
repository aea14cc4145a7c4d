"""``reactor eval --app MODULE:SERVICE --agent NAME``: a reaction agent's recorded runs as cases."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor import SQLiteSignalStore
from reactor._cli import main
from reactor.service import ObjectStore

CRM = textwrap.dedent(
    """
    from reactor import ProviderRequest, ScriptedProvider, agent
    from reactor.service import (
        Capabilities, Changes, ObjectStore, Reaction, ReactionService, Update,
    )

    PROMPT = "Ticket {{ object.id }}: {{ object.data.title }}. Priority?"


    def answer(request: ProviderRequest) -> Changes:
        ticket = request.prompt.partition("Ticket ")[2].partition(":")[0]
        urgent = "crash" in request.prompt and "strict" not in request.prompt
        return Changes(
            reasoning="A crash is urgent." if urgent else "Nothing is on fire.",
            operations=(Update(ticket, {"priority": "high" if urgent else "low"}),),
        )


    def market() -> ScriptedProvider:
        return ScriptedProvider({"triage": answer})


    def crm(prompt: str) -> ReactionService:
        triage = agent(
            prompt=prompt,
            output=Changes,
            reaction=Reaction(types=["Ticket"], events=["created"]),
            execution_mode="execute",
            capabilities=Capabilities(can_delete=False, allowed_types=["Ticket"]),
        )
        return ReactionService(
            objects=ObjectStore("sqlite:///app.db"), agents={"triage": triage}, provider=market()
        )


    service = crm(PROMPT)
    stricter = crm("Be strict. " + PROMPT)
    """
)

TICKETS = ("The app crashes on login", "Typo on the pricing page")


def cli(*args: str) -> int:
    try:
        return main(list(args))
    except SystemExit as exit_:
        return int(exit_.code or 0)


async def record(module: Any) -> None:
    """The service reacts to two new tickets (each reaction a recorded run)."""
    async with module.service.objects, module.service as service:
        for title in TICKETS:
            await service.objects.create("Ticket", {"title": title, "priority": None})
        await service.idle(timeout=120)


async def objects_now() -> tuple[list[tuple[str, int, Any]], int]:
    """The live tickets (id, version, priority) and how many changes the store has."""
    store = ObjectStore("sqlite:///app.db")
    await store.open()
    try:
        tickets = [(t.id, t.version, t.data["priority"]) for t in await store.list("Ticket")]
        return sorted(tickets), len(await store.events())
    finally:
        await store.close()


@pytest.fixture
def crm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A service that triaged two tickets; the ids of its reaction runs, by title."""
    (tmp_path / "crm.py").write_text(CRM)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    for name in ("REACTOR_DB", "REACTOR_SERVICE_DB", "REACTOR_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    asyncio.run(record(importlib.import_module("crm")))
    with SQLiteSignalStore(tmp_path / "app.db") as store:
        runs = {info.input["data"]["title"]: info.run_id for info in _infos(store)}
    yield runs
    sys.modules.pop("crm", None)


def _infos(store: SQLiteSignalStore) -> list[Any]:
    return [store.load(info.run_id) for info in store.runs(tag="reaction=triage")]


def test_a_reaction_agent_evaluates_with_the_object_each_run_saw(
    crm: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = asyncio.run(objects_now())
    capsys.readouterr()
    assert cli("eval", "--app", "crm:service", "--agent", "triage", "--json", "eval.json") == 0
    out = capsys.readouterr().out
    assert out.startswith("Evaluating 2 runs of triage on crm:service --agent triage; ")
    assert "2 cases: 2 same" in out
    report = json.loads(Path("eval.json").read_text())
    seen = {case["run_id"]: case["object"] for case in report["cases"]}
    crash = seen[crm[TICKETS[0]]]
    assert (crash["type"], crash["version"], crash["data"]) == (
        "Ticket",
        1,
        {"title": TICKETS[0], "priority": None},
    )
    assert asyncio.run(objects_now()) == before  # the service's objects: read, never changed
    with SQLiteSignalStore(Path("app.db"), readonly=True) as live:
        assert len(live.runs()) == 2  # its runs: read, nothing recorded there
    with SQLiteSignalStore(Path("app-eval.db"), readonly=True) as scratch:
        assert len(scratch.runs(tag="eval")) == 2


def test_a_flipped_decision_is_a_changed_output_that_a_scorer_catches(
    crm: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    ran = cli(
        "eval", "--app", "crm:stricter", "--agent", "triage", "--provider", "crm:market",
        "--scorer", "decision_kept(output.operations)", "--plain",
    )  # fmt: skip
    assert ran == 1
    rows = {
        line.split()[0]: line for line in capsys.readouterr().out.splitlines() if "run_" in line
    }
    crash, typo = rows[crm[TICKETS[0]]], rows[crm[TICKETS[1]]]
    assert "changed output;" in crash
    assert "failed: decision_kept('output.operations')" in crash
    assert "same final state" in typo  # a changed prompt, the same decision
    assert "failed:" not in typo


def test_an_agent_that_is_not_a_reaction_of_the_app_is_a_usage_error(
    crm: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("eval", "--app", "crm:service", "--agent", "enrich") == 2
    assert capsys.readouterr().err == (
        "reactor eval: error: --agent 'enrich' is not a reaction agent of crm:service (its "
        "reaction agents: triage); evaluate another graph's runs with --graph\n"
    )
    assert cli("eval", "--app", "crm:service") == 2
    assert "--app MODULE:SERVICE and --agent NAME go together" in capsys.readouterr().err


def test_a_reaction_agent_given_as_a_graph_says_how_to_evaluate_it(
    crm: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    Path("agents.py").write_text("from crm import service\n\ntriage = service.agents['triage']\n")
    capsys.readouterr()
    assert cli("eval", "--graph", "agents:triage") == 2
    sys.modules.pop("agents", None)
    assert capsys.readouterr().err == (
        "reactor eval: error: agents:triage is Agent, not a graph built with reactive(); a "
        "service's reaction agent is evaluated with its service: --app MODULE:SERVICE --agent "
        "NAME\n"
    )
