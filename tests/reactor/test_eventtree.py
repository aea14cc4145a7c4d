"""The event tree of runs, recordings and traces; steps; child runs started with spawn."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import reactor
from reactor import AgentContext, Prompt, SQLiteSignalStore, agent, reactive
from reactor._backends.dialect import SCHEMA_VERSION
from reactor.testing import FakeAnthropic, Hang, ScriptedProvider, ToolUse, turn
from tests.reactor.databases import SQLITE_SINCE_6


def quote(symbol: str) -> float:
    """The last price of a stock."""
    return 187.5


analyst = agent(name="analyst", tools=[quote])


async def desk(ctx: AgentContext) -> Any:
    async def research() -> Any:
        return await analyst.prompt(Prompt(user="Price of {{ s }}?", data={"s": ctx.input}))

    return await ctx.step("research", research)


def desk_graph() -> reactor.Reactive:
    return reactive(
        {
            "desk": agent(run=desk, updates="answer"),
            "writer": agent(
                prompt="Summarize {{ state.answer }}", activate_on="state:answer:changed"
            ),
        },
        state={"answer": None},
        name="desk",
    )


async def test_the_event_tree_of_a_recorded_run_nests_steps_prompts_models_and_tools(
    tmp_path: Path,
) -> None:
    fake = FakeAnthropic(
        turn(ToolUse("t1", "quote", {"symbol": "AAPL"})), "187.5", "AAPL is at 187.5."
    )
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        result = await desk_graph().run(input="AAPL", provider=fake.provider(), record=store)
        recording = store.load(result.run_id)
    tree = recording.event_tree()
    assert (tree.root.kind, tree.root.name, tree.root.status) == ("run", "desk", "completed")
    [tool] = tree.find(kind="tool")
    assert (tool.name, tool.status) == ("quote", "completed")
    assert tool.duration_ms is not None
    assert tool.duration_ms >= 0
    path = [(node.kind, node.name) for node in tree.get_ancestors(tool.id)]
    assert path == [
        ("run", "desk"),
        ("activation", "desk"),
        ("task", "research"),
        ("prompt", "analyst"),
        ("model", "analyst"),
    ]
    model = tree.get_node(tool.parent_id or "")
    assert model is not None
    assert model.usage == {"input_tokens": 20, "output_tokens": 10}
    [prompt] = tree.find(kind="prompt")
    assert prompt.usage == {"input_tokens": 20, "output_tokens": 10}
    assert prompt.duration_ms is not None
    [writer] = [n for n in tree.find(kind="activation") if n.name == "writer"]
    [changed] = [n for n in tree.get_ancestors(writer.id) if n.kind == "signal"]
    assert changed.name == "state:answer:changed"
    assert [n.name for n in tree.get_children(tree.root.id)] == ["desk"]
    assert tree.get_node("sig_nope") is None
    assert tree.get_children("sig_nope") == []
    data = json.loads(tree.to_json())
    assert data["id"] == tree.root.id
    assert data["children"][0]["kind"] == "activation"
    live = result.event_tree()
    assert [(n.id, n.kind) for n in live] == [(n.id, n.kind) for n in tree]


async def test_a_failed_step_is_recorded_and_its_error_raised() -> None:
    async def handler(ctx: AgentContext) -> Any:
        def explode() -> None:
            raise ValueError("no data")

        return await ctx.step("load", explode)

    result = await reactive({"h": agent(run=handler)}).run()
    assert result.status == "failed"
    [end] = result.select("task:failed")
    assert end.payload["error"] == {"type": "ValueError", "message": "no data"}
    [step] = result.event_tree().find(kind="task")
    assert (step.name, step.status) == ("load", "failed")


async def test_a_trace_collects_prompts_made_outside_a_run() -> None:
    provider = ScriptedProvider({"a": ["one"], "b": ["two"]})
    async with reactor.trace() as trace:
        await agent(name="a", provider=provider).prompt("1?")
        await agent(name="b", provider=provider).prompt("2?")
    tree = trace.event_tree()
    assert [node.name for node in tree.get_children(tree.root.id)] == ["a", "b"]
    assert [s.name for s in trace.signals if s.name.startswith("prompt:")] == [
        "prompt:start",
        "prompt:end",
        "prompt:start",
        "prompt:end",
    ]
    assert trace.input_tokens > 0


def child_graph() -> reactor.Reactive:
    return reactive(
        {"worker": agent(prompt="Work on {{ input }}", updates="work")},
        state={"work": None},
        name="child",
    )


async def test_a_spawned_child_run_is_linked_to_its_parent(tmp_path: Path) -> None:
    async def boss(ctx: AgentContext) -> Any:
        child = await ctx.spawn(child_graph(), input="the report")
        return child.state["work"]

    parent = reactive({"boss": agent(run=boss, updates="result")}, state={"result": None})
    provider = ScriptedProvider({"worker": ["done"]})
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        result = await parent.run(provider=provider, record=store)
        assert result.state["result"] == "done"
        [child_id] = result.children
        child_info = next(info for info in store.runs() if info.run_id == child_id)
        assert child_info.parent_run_id == result.run_id
        assert store.load(result.run_id).info.parent_run_id is None
        recorded_tree = store.load(result.run_id).event_tree(store=store)
    for tree in (result.event_tree(), recorded_tree):
        [spawn] = tree.find(kind="spawn")
        assert spawn.status == "completed"
        [child_root] = tree.get_children(spawn.id)
        assert (child_root.kind, child_root.run_id) == ("run", child_id)
        [worker] = [n for n in tree.find(kind="activation") if n.name == "worker"]
        assert worker.id.startswith(f"{child_id}/")
        assert [n.kind for n in tree.get_ancestors(worker.id)] == [
            "run",
            "activation",
            "spawn",
            "run",
        ]


async def test_a_child_run_is_cancelled_with_its_parent() -> None:
    started = asyncio.Event()

    def brain(body: dict[str, Any]) -> Any:
        started.set()
        return Hang(turn("working"))

    async def boss(ctx: AgentContext) -> Any:
        return await ctx.spawn(child_graph(), input="x")

    captured: list[reactor.Signal] = []
    with reactor.testing.capture_signals() as signals:
        handle = reactive({"boss": agent(run=boss)}).start(
            provider=FakeAnthropic(brain=brain).provider()
        )
        await started.wait()
        handle.abort()
        result = await handle.result()
        captured = list(signals.signals)
    assert result.status == "aborted"
    ends = [s for s in captured if s.name == "harness:end"]
    assert {s.payload["status"] for s in ends} == {"aborted"}
    assert len({s.run_id for s in ends}) == 2


def test_a_version_3_sqlite_store_is_upgraded_to_keep_parent_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteSignalStore(path).close()
    with sqlite3.connect(path) as conn:
        for statement in SQLITE_SINCE_6:
            conn.execute(statement)
        conn.execute("DROP TABLE timers")
        conn.execute("DROP INDEX inbox_due")
        conn.execute("ALTER TABLE inbox DROP COLUMN due_at")
        conn.execute("DROP INDEX signals_snapshots")
        conn.execute("DROP INDEX runs_ended_at")
        conn.execute("ALTER TABLE runs DROP COLUMN forked_from")
        conn.execute("ALTER TABLE runs DROP COLUMN parent_run_id")
        conn.execute("PRAGMA user_version = 3")
    with SQLiteSignalStore(path) as store:
        store.start_run(reactor.RunInfo(run_id="run_child", parent_run_id="run_parent"))
        store.append(reactor.Signal("harness:start", seq=1, run_id="run_child"))
        store.flush()
        [info] = store.runs()
    assert info.parent_run_id == "run_parent"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


@pytest.mark.parametrize("kind", ["task", "phase"])
def test_tasks_and_phases_are_nodes_closed_by_their_end(kind: str) -> None:
    start = reactor.Signal(f"{kind}:start", {"name": "fetch", "agent": "a"}, id="s1", seq=1)
    end = reactor.Signal(
        f"{kind}:complete",
        {"name": "fetch", "agent": "a", "duration_ms": 4.0, "error": None},
        id="s2",
        seq=2,
        caused_by="s1",
    )
    tree = reactor.EventTree.build([start, end])
    node = tree.get_node("s1")
    assert node is not None
    assert (node.kind, node.name, node.status, node.duration_ms) == (
        kind,
        "fetch",
        "completed",
        4.0,
    )
