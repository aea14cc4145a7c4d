"""The service's lifetime, its agents' rows and runs, graphs started by name, its errors."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from reactor import (
    AgentConfigError,
    AgentContext,
    MemorySignalStore,
    PostgresSignalStore,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor.service import (
    Capabilities,
    Changes,
    IdleTimeoutError,
    ObjectStore,
    Reaction,
    ReactionService,
    ServiceConfigError,
    ServiceStateError,
)
from reactor.service._objects.schema import agent_runs, agents
from reactor.testing import capture_signals
from tests.service.support import TYPES, Gate, Recorder, running

ENRICH = agent(
    prompt="Find the employer of {{ object.data.name }}.",
    system="You research people.",
    output=Changes,
    reaction=Reaction(types=["Person"], events=["created", "updated"], concurrency="queue"),
    execution_mode="suggest",
    capabilities=Capabilities(can_delete=False, allowed_types=["Person", "Company"]),
)


async def rows(objects: ObjectStore, table: sa.Table) -> list[dict[str, Any]]:
    async with objects.db.read() as conn:
        return [dict(row._mapping) for row in await conn.execute(sa.select(table))]


async def test_the_service_writes_its_agents_as_rows(url: str) -> None:
    helper = agent(run=lambda ctx: None)
    async with running(url, {"enrich": ENRICH, "helper": helper}) as (objects, _):
        found = {row["name"]: row for row in await rows(objects, agents)}
    enrich = found["enrich"]
    assert enrich["prompt"] == "Find the employer of {{ object.data.name }}."
    assert enrich["role"] == "You research people."
    assert enrich["trigger_type"] == "reaction"
    assert enrich["cron_schedule"] is None
    assert enrich["reaction_config"] == {
        "types": ["Person"],
        "events": ["created", "updated"],
        "ignore_self": True,
        "concurrency": "queue",
        "admit": [],
        "depends_on": [],
    }
    assert enrich["execution_mode"] == "suggest"
    assert enrich["capabilities"] == {
        "can_create": True,
        "can_update": True,
        "can_delete": False,
        "allowed_types": ["Person", "Company"],
    }
    assert enrich["output_schema"]["title"] == "Changes"
    assert (enrich["enabled"], enrich["defined_in"]) == (True, "code")
    assert (found["helper"]["trigger_type"], found["helper"]["reaction_config"]) == ("manual", None)


async def test_a_disabled_agent_stays_disabled_and_does_not_react(url: str) -> None:
    seen = Recorder()
    agents_ = {"seen": agent(run=seen, reaction=Reaction())}
    async with running(url, agents_) as (objects, _), objects.db.write() as conn:
        await conn.execute(agents.update().values(enabled=False))
    async with running(url, agents_) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (row,) = await rows(objects, agents)
    assert seen.calls == []
    assert row["enabled"] is False


async def test_each_reaction_is_a_recorded_run_with_its_agent_run(url: str) -> None:
    seen = Recorder()
    record = MemorySignalStore()
    agents_ = {"seen": agent(run=seen, reaction=Reaction())}
    async with running(url, agents_, record=record) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        (run,) = await rows(objects, agent_runs)
        (event,) = await objects.events()
    assert entry.run_id is not None
    recording = record.load(entry.run_id)
    assert recording.info.graph == "seen"
    assert recording.info.tags == {
        "reaction": "seen",
        "object": ada.id,
        "event": "object:Person:created",
        "service": "reaction:seen",  # started as every run of the service is
        "trigger": "reaction",
    }
    assert recording.input == event.payload()
    assert [s.name for s in recording.signals][-2:] == ["agent:seen:completed", "harness:end"]
    # the agent run refers to the run: how it ended is its row's in the store, only
    assert set(run) == {"id", "agent", "run_id", "trigger", "started_at"}
    assert (run["agent"], run["run_id"], run["trigger"]) == ("seen", entry.run_id, "reaction")
    assert recording.info.status == "completed"
    assert recording.info.started_at is not None
    assert run["started_at"].timestamp() <= recording.info.started_at + 1


async def test_runs_are_recorded_in_the_same_database_by_default(url: str, tmp_path: Path) -> None:
    agents_ = {"seen": agent(run=Recorder(), reaction=Reaction())}
    async with running(url, agents_) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        store: SQLiteSignalStore | PostgresSignalStore
        if url.startswith("sqlite"):
            assert isinstance(service.record, SQLiteSignalStore)
            store = SQLiteSignalStore(tmp_path / "data" / "app.db")
        else:
            assert isinstance(service.record, PostgresSignalStore)
            store = PostgresSignalStore(url)
    with store:
        assert store.load(str(entry.run_id)).info.status == "completed"
    assert service.record is None  # the service closed the store it made


async def test_reaction_runs_are_seen_by_capture_signals(url: str) -> None:
    agents_ = {"seen": agent(run=Recorder(), reaction=Reaction())}
    with capture_signals() as captured:
        async with running(url, agents_) as (objects, service):
            await objects.create("Person", {"name": "Ada"})
            await service.idle(timeout=60)
    assert captured.names() == [
        "harness:start",
        "agent:seen:activated",
        "agent:seen:completed",
        "harness:end",
    ]


async def test_a_graph_is_started_by_name_as_a_recorded_run(url: str) -> None:
    async def count(ctx: AgentContext[Any]) -> int:
        return len(await ctx.objects.list()) if ctx.objects else int(ctx.input)

    graph = reactive({"count": agent(run=count)}, name="counting")
    record = MemorySignalStore()
    async with running(url, {}, graphs={"counting": graph}, record=record) as (_, service):
        run_id = await service.submit("counting", input=41)
        await service.idle(timeout=60)
        with pytest.raises(
            ServiceConfigError,
            match=r"^No graph named 'nope' \(the service has: counting\); register graphs with "
            r"ReactionService\(graphs=\{name: graph\}\)\.$",
        ):
            await service.submit("nope")
    recording = record.load(run_id)
    assert (recording.info.graph, recording.input, recording.status) == (
        "counting",
        41,
        "completed",
    )


async def test_stopping_puts_unfinished_work_back_for_the_next_start(url: str) -> None:
    gate = Gate()
    agents_ = {"slow": agent(run=gate, reaction=Reaction())}
    async with running(url, agents_) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await gate.waiting.wait()
    async with ObjectStore(url, types=TYPES) as objects, ReactionService(objects=objects) as bare:
        assert [e.status for e in await bare.processing_log()] == ["pending"]
    gate.open()
    async with running(url, agents_) as (objects, service):
        await service.idle(timeout=60)
        assert [e.status for e in await service.processing_log()] == ["completed"]
    assert len(gate.seen) == 2


async def test_cancelling_the_owner_stops_the_service_and_its_tasks(url: str) -> None:
    gate = Gate()
    agents_ = {"slow": agent(run=gate, reaction=Reaction())}
    entered = asyncio.Event()
    before = asyncio.all_tasks()

    async def owner() -> None:
        async with running(url, agents_) as (objects, _):
            await objects.create("Person", {"name": "Ada"})
            await gate.waiting.wait()
            entered.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(owner())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() - before == set()


async def test_the_service_must_run_for_live_operations(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        service = ReactionService(objects=objects)
        await objects.create("Person", {"name": "Ada"})
        (event,) = await objects.events()
        calls = {
            "dispatch": service.dispatch(event),
            "idle": service.idle(),
            "submit": service.submit("g"),
        }
        for name, call in calls.items():
            with pytest.raises(
                ServiceStateError,
                match=rf"^service\.{name}\(\) needs the service running: use `async with "
                r"service:`\.$",
            ):
                await call
        assert await service.processing_log() == []  # reading needs no running service
        async with service:
            with pytest.raises(ServiceStateError, match=r"^The service is running already"):
                await service.__aenter__()


async def test_idle_gives_up_after_its_timeout(url: str) -> None:
    gate = Gate()
    async with running(url, {"slow": agent(run=gate, reaction=Reaction())}) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await asyncio.wait_for(gate.waiting.wait(), 60)  # the reaction is in flight
        with pytest.raises(
            IdleTimeoutError,
            match=r"^The service was still busy after 0\.2 s: 1 reactions and 1 runs in flight, "
            r"events dispatched through 1 of 1\. Wait longer, or look at "
            r"service\.processing_log\(status='processing'\)\.$",
        ):
            await service.idle(timeout=0.2)
        gate.open()
        await service.idle(timeout=60)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"stuck_after": 0}, "stuck_after must be a positive number, got 0.", id="stuck"
        ),
        pytest.param(
            {"max_running": -1}, "max_running must be a positive number, got -1.", id="running"
        ),
        pytest.param(
            {"graphs": {"g": "not a graph"}},
            "graphs must map names to graphs built with reactor.reactive(...); 'g' is "
            "'not a graph'.",
            id="graphs",
        ),
        pytest.param(
            {"db": "mysql://localhost/app"},
            "Unsupported database URL 'mysql://localhost/app': use sqlite:///path/to/file.db "
            "(aiosqlite) or postgresql://user@host:5432/dbname (psycopg 3).",
            id="db",
        ),
    ],
)
def test_bad_options_are_refused_when_the_service_is_made(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ServiceConfigError, match=f"^{re.escape(message)}$"):
        ReactionService(objects=ObjectStore("sqlite://"), **options)


def test_a_reaction_agent_is_started_by_the_service_only() -> None:
    watcher = agent(run=lambda ctx: 1, activate_on="tick:*", reaction=Reaction())
    with pytest.raises(
        AgentConfigError,
        match=r"^Agent 'watcher' has reaction= and activate_on='tick:\*': a reaction agent "
        r"runs when its objects change, so leave activate_on out\.$",
    ):
        ReactionService(objects=ObjectStore("sqlite://"), agents={"watcher": watcher})


async def test_an_in_memory_database_works_for_scripts(tmp_path: Path) -> None:
    seen = Recorder()
    async with running("sqlite://", {"seen": agent(run=seen, reaction=Reaction())}) as (
        objects,
        service,
    ):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        assert isinstance(service.record, MemorySignalStore)
    assert len(seen.calls) == 1
