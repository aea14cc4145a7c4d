"""Idempotency keys: the same for one activation however often it runs, unique otherwise."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    SQLiteSignalStore,
    ToolContext,
    agent,
    reactive,
    tool,
)
from reactor.testing import ToolUse, fake_anthropic, turn

KEYS: list[tuple[str, str]] = []


@pytest.fixture(autouse=True)
def no_keys() -> None:
    KEYS.clear()


async def note_keys(ctx: AgentContext[Any]) -> str:
    KEYS.append((ctx.agent, ctx.idempotency_key()))
    KEYS.append((ctx.agent, ctx.idempotency_key("hedge")))
    KEYS.append((ctx.agent, ctx.idempotency_key()))
    return "noted"


def test_a_key_is_the_same_within_an_activation_and_unique_across_them() -> None:
    graph = reactive(
        {
            "ticker": agent(run=_two_ticks, emits=["tick"]),
            "buyer": agent(run=note_keys, activate_on="tick"),
            "seller": agent(run=note_keys, activate_on="tick"),
        }
    )
    first = graph.run_sync()
    assert first.status == "completed"
    by_agent: dict[str, list[str]] = {}
    for name, key in KEYS:
        by_agent.setdefault(name, []).append(key)
    for keys in by_agent.values():
        assert len(keys) == 6  # two activations, three keys each
        assert keys[0] == keys[2]
        assert keys[3] == keys[5]
        assert len({keys[0], keys[1], keys[3], keys[4]}) == 4  # other label or activation
        assert all(len(key) == 32 and int(key, 16) >= 0 for key in keys)
    assert not set(by_agent["buyer"]) & set(by_agent["seller"])
    KEYS.clear()
    graph.run_sync()
    assert not {key for _, key in KEYS} & {k for keys in by_agent.values() for k in keys}


async def _two_ticks(ctx: AgentContext[Any]) -> None:
    ctx.emit("tick", 1)
    ctx.emit("tick", 2)


def test_an_activation_run_again_on_resume_gets_the_same_key() -> None:
    graph = reactive({"buyer": agent(run=note_keys)})
    store = MemorySignalStore()
    full = graph.run_sync(record=store)
    recorded = store.load(full.run_id)
    cut = MemorySignalStore()
    cut.start_run(recorded.info)
    for signal_ in recorded.signals:
        if signal_.name == "agent:buyer:completed":
            break
        cut.append(signal_)
    first = list(KEYS)
    KEYS.clear()
    graph.resume_sync(full.run_id, record=cut)
    assert first == KEYS


def test_a_replay_has_the_recorded_keys_and_a_fork_its_own() -> None:
    graph = reactive({"buyer": agent(run=note_keys)})
    store = MemorySignalStore()
    full = graph.run_sync(record=store)
    recorded = list(KEYS)
    KEYS.clear()
    graph.run_sync(replay=store.load(full.run_id))
    assert recorded == KEYS  # a replay re-runs handlers: the broker dedupes their orders
    KEYS.clear()
    asyncio.run(graph.fork(full.run_id, at=1, record=store))
    assert len(KEYS) == 3
    assert not set(KEYS) & set(recorded)


BROKER: dict[str, str] = {}
CONTEXTS: list[ToolContext] = []


@tool
def place_order(symbol: str, call: ToolContext) -> str:
    """Buy one share of a stock."""
    CONTEXTS.append(call)
    return BROKER.setdefault(call.idempotency_key, f"order {len(BROKER) + 1} for {symbol}")


def test_a_tool_gets_a_context_the_model_never_sees() -> None:
    BROKER.clear()
    CONTEXTS.clear()
    assert set(place_order.input_schema["properties"]) == {"symbol"}
    graph = reactive({"broker": agent(prompt="Buy AAPL", tools=[place_order], updates="done")})
    provider = fake_anthropic([turn(ToolUse("t1", "place_order", {"symbol": "AAPL"})), "Done."])
    result = graph.run_sync(provider=provider)
    assert result.state["done"] == "Done."
    [call] = CONTEXTS
    assert (call.tool, call.call_id, call.run_id, call.agent) == (
        "place_order",
        "t1",
        result.run_id,
        "broker",
    )
    assert len(call.idempotency_key) == 32


def test_a_tool_call_made_again_after_a_crash_has_the_same_key() -> None:
    BROKER.clear()
    CONTEXTS.clear()
    graph = reactive({"broker": agent(prompt="Buy AAPL", tools=[place_order], updates="done")})
    twice = [turn(ToolUse("t1", "place_order", {"symbol": "AAPL"}))] * 2
    provider = fake_anthropic([*twice, "Done."])
    store = MemorySignalStore()
    full = graph.run_sync(record=store, provider=provider)
    recorded = store.load(full.run_id)
    cut = MemorySignalStore()  # the process died while the first call was out
    cut.start_run(recorded.info)
    for signal_ in recorded.signals:
        if signal_.name == "tool:result":
            break
        cut.append(signal_)
    again = fake_anthropic([turn(ToolUse("t7", "place_order", {"symbol": "AAPL"}))] * 2 + ["Ok."])
    graph.resume_sync(full.run_id, record=cut, provider=again)
    keys = [call.idempotency_key for call in CONTEXTS]
    assert keys[0] == keys[2]  # the first order, asked for again after the crash
    assert keys[1] == keys[3]  # the second one too
    assert keys[0] != keys[1]
    assert len(BROKER) == 2  # the broker placed each order once


DESK = textwrap.dedent(
    """
    import os
    import sys
    import time

    from reactor import SQLiteSignalStore, agent, reactive

    ORDERS = os.environ["DESK_ORDERS"]


    def place(ctx):
        key = ctx.idempotency_key("order")
        with open(ORDERS, "a") as orders:  # the broker sees the order, with its key
            orders.write(key + "\\n")
        if os.environ.get("DESK_HANG"):
            time.sleep(600)  # killed here: the order is out, the activation is not done
        return key


    graph = reactive({"trader": agent(run=place, updates="order")}, state={"order": None})

    if __name__ == "__main__":
        with SQLiteSignalStore(sys.argv[1]) as runs:
            graph.run_sync(record=runs)
    """
)


def test_killed_mid_handler_the_order_goes_out_again_with_the_same_key(tmp_path: Path) -> None:
    (tmp_path / "desk_keys.py").write_text(DESK)
    orders = tmp_path / "orders.txt"
    database = tmp_path / "runs.db"
    env = {**os.environ, "DESK_ORDERS": str(orders), "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, str(tmp_path / "desk_keys.py"), str(database)],
        env={**env, "DESK_HANG": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (orders.exists() and orders.read_text() and _started(database)):
            assert time.monotonic() < deadline, "the order never went out"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    resumed = subprocess.run(
        [sys.executable, "-c", _RESUME, str(database)],
        env={**env, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    first, again = orders.read_text().splitlines()
    assert first == again  # the broker gets the same client_order_id: it places one order
    with SQLiteSignalStore(database, readonly=True) as store:
        run = store.runs()[0]
        assert store.load(run.run_id).state == {"order": first}
    assert run.status == "completed"


def _started(database: Path) -> bool:
    """Whether the trader's activation has reached the database (the run can resume it)."""
    if not database.exists():
        return False
    with SQLiteSignalStore(database, readonly=True) as store:
        runs = store.runs()
        return bool(runs) and bool(store.load(runs[0].run_id).select("agent:trader:activated"))


_RESUME = textwrap.dedent(
    """
    import sys
    from desk_keys import graph
    from reactor import SQLiteSignalStore

    with SQLiteSignalStore(sys.argv[1]) as runs:
        result = graph.resume_sync(runs.runs()[0].run_id, record=runs)
    assert result.status == "completed", result.error
    """
)
