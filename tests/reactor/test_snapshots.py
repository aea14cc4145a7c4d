"""Snapshots: a long run's resume, ``state_at`` and replay read from its latest snapshot."""

from __future__ import annotations

import time
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    ProviderRequest,
    Reactive,
    Recording,
    SignalStoreBase,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor.testing import ToolUse, fake_anthropic, turn
from tests.reactor.support import ticking


def stripped(recording: Recording) -> Recording:
    """The same log without its snapshots (what a store that takes none would hold)."""
    kept = tuple(s for s in recording.signals if s.name != "harness:snapshot")
    return Recording(info=recording.info, signals=kept, requests=recording.requests)


def cut(recording: Recording, last: int, *, snapshot_every: int | None) -> MemorySignalStore:
    """A store holding ``recording`` up to signal ``last``: the log of a process that died."""
    store = MemorySignalStore(snapshot_every=snapshot_every)
    store.start_run(recording.info)
    for signal in recording.signals:
        if signal.seq <= last:
            store.append(signal)
    return store


def test_a_recorded_run_writes_a_snapshot_every_snapshot_every_signals() -> None:
    store = MemorySignalStore(snapshot_every=100)
    result = ticking(250).run_sync(record=store, max_activations=None)
    recording = store.load(result.run_id)
    snapshots = recording.select("harness:snapshot")
    assert len(snapshots) == len(recording.signals) // 100
    covered = [s.payload["seq"] for s in snapshots]
    assert covered == [100 * n for n in range(1, len(snapshots) + 1)]
    assert all(s.seq > s.payload["seq"] for s in snapshots)  # each comes after what it holds
    assert snapshots[-1].payload["input"] is None
    assert set(snapshots[-1].payload) == {
        "seq",
        "needs",
        "input",
        "state",
        "fingerprints",
        "progress",
        "hash",
    }


def test_no_snapshot_is_taken_when_the_store_says_none() -> None:
    store = MemorySignalStore(snapshot_every=None)
    result = ticking(250).run_sync(record=store, max_activations=None)
    assert store.load(result.run_id).select("harness:snapshot") == []


@pytest.mark.parametrize("every", [0, -3, 2.5, True])
def test_snapshot_every_is_a_whole_number_of_signals(every: Any) -> None:
    message = r"^snapshot_every must be a whole number of signals >= 1 \(or None for no "
    with pytest.raises(ValueError, match=message):
        MemorySignalStore(snapshot_every=every)


def test_state_at_from_a_snapshot_is_the_state_the_whole_log_gives() -> None:
    store = MemorySignalStore(snapshot_every=37)
    result = ticking(120).run_sync(record=store, max_activations=None)
    recording = store.load(result.run_id)
    whole = stripped(recording)
    assert len(recording.select("harness:snapshot")) > 5
    for signal in recording.signals:
        assert recording.state_at(signal.seq) == whole.state_at(signal.seq), signal.seq
    assert recording.state == {"n": 120}


def test_a_replay_takes_its_snapshots_where_the_recording_did() -> None:
    store = MemorySignalStore(snapshot_every=50)
    graph = ticking(60)
    result = graph.run_sync(record=store, max_activations=None)
    recording = store.load(result.run_id)
    replayed = graph.run_sync(replay=recording, max_activations=None)  # no store at all
    assert recording.diff(replayed) is None
    assert [s.seq for s in replayed.select("harness:snapshot")] == [
        s.seq for s in recording.select("harness:snapshot")
    ]


# -- a resume from a snapshot does what a resume from the whole log does ------------

ORDERS: list[str] = []


def quote(symbol: str) -> str:
    """The price of a share."""
    return f"{symbol} at 101"


async def place(ctx: AgentContext[Any]) -> str:
    async with ctx.phase("placing"):
        for fill in range(3):
            ctx.emit("fill", fill)
        ctx.emit("inbox:clerk", {"note": "placed"})
        assert ctx.provider is not None
        request = ProviderRequest.build(agent="trader", system=None, prompt="risk?")
        reply = ""
        async for event in ctx.provider.stream(request):
            reply = getattr(event, "output", reply)
    ORDERS.append(ctx.state.analysis)
    return f"order {ctx.state.analysis} ({reply})"


async def book(ctx: AgentContext[Any]) -> int:
    return int(ctx.state.booked or 0) + 1


async def clerk(ctx: AgentContext[Any]) -> str:
    note = await ctx.receive()
    return str(note["note"])


def desk() -> Reactive:
    return reactive(
        {
            "analyst": agent(prompt="Analyse {{ input }}", tools=[quote], updates="analysis"),
            "trader": agent(
                run=place,
                activate_on="state:analysis:changed",
                emits=["fill", "inbox:clerk"],
                updates="order",
            ),
            "booker": agent(run=book, activate_on="fill", concurrency="serial", updates="booked"),
            "clerk": agent(run=clerk, activate_on="state:analysis:changed", updates="note"),
            "reviewer": agent(
                prompt="Review {{ state.order }}",
                activate_on="state:order:changed",
                updates="review",
            ),
        },
        state={"analysis": None, "order": None, "booked": None, "note": None, "review": None},
        name="desk",
    )


def brain(body: dict[str, Any]) -> Any:
    """The model: the analyst looks the price up first; everyone else just answers."""
    content = body["messages"][-1]["content"]
    if isinstance(content, list) and any(part.get("type") == "tool_result" for part in content):
        return turn("up")
    if "Analyse" in str(content):
        return turn(ToolUse("t1", "quote", {"symbol": "AAPL"}))
    return turn("fine")


def resume(store: MemorySignalStore, run_id: str) -> tuple[Any, list[str], int]:
    """Resume ``run_id``: its result, the names it emitted, how many calls it made."""
    calls: list[Any] = []

    def counting(body: dict[str, Any]) -> Any:
        calls.append(body)
        return brain(body)

    ORDERS.clear()
    result = desk().resume_sync(run_id, record=store, provider=fake_anthropic(counting))
    resumed = store.load(run_id)
    after = next(s.seq for s in resumed.signals if s.name == "harness:resumed")
    names = [s.name for s in resumed.signals if s.seq >= after and s.name != "harness:snapshot"]
    # What the resume did, not in which order its parallel agents interleaved it.
    return result, sorted(names), len(calls)


def test_a_resume_from_a_snapshot_does_what_a_resume_from_the_whole_log_does() -> None:
    store = MemorySignalStore(snapshot_every=4)
    full = desk().run_sync(record=store, provider=fake_anthropic(brain), input="AAPL")
    assert full.status == "completed", full.error
    recording = store.load(full.run_id)
    assert len(recording.select("harness:snapshot")) > 10
    whole = stripped(recording)
    ending = next(s.seq for s in recording.signals if s.name == "harness:end")
    for last in range(2, ending):
        from_snapshot = resume(cut(recording, last, snapshot_every=4), full.run_id)
        from_start = resume(cut(whole, last, snapshot_every=4), full.run_id)
        assert from_snapshot[0].state == from_start[0].state, last
        assert from_snapshot[0].status == from_start[0].status == "completed", last
        assert from_snapshot[1:] == from_start[1:], last


# -- long runs ---------------------------------------------------------------------


def test_a_300000_signal_run_resumes_from_its_last_snapshot(tmp_path: Any) -> None:
    graph = ticking(75_000)
    path = tmp_path / "runs.db"
    with SQLiteSignalStore(path) as store:
        handle_result = graph.run_sync(record=store, max_activations=None)
        assert handle_result.status == "completed"
        run_id = handle_result.run_id
        total = store.runs()[0].signals
    assert total > 300_000
    small = ticking(100).run_sync(max_activations=None)
    crashed = _without_its_end(path, run_id)
    with SQLiteSignalStore(path) as store:
        tail = store.load_tail(run_id)
        started = time.perf_counter()
        result = graph.resume_sync(run_id, record=store, max_activations=None)
        resume_time = time.perf_counter() - started
    assert result.status == "completed"
    assert result.state == {"n": 75_000}
    # What the resume read: the latest snapshot, what came after it, and the few ticks
    # it names as still queued; not the log.
    read = [s.seq for s in tail.signals]
    assert len(read) <= 10_100
    assert len([seq for seq in read if seq <= crashed - 10_100]) <= 10
    assert len(result.signals) < 10_100  # the resumed run holds its tail, and what it did
    # What it read is asserted above; this bound only catches a resume that replays the log.
    assert resume_time < 60, (resume_time, small.metrics.duration_ms)


def _without_its_end(path: Any, run_id: str) -> int:
    """Make a finished run look as if its process died before its end; its last seq."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute(
            "DELETE FROM signals WHERE run_id = ? AND name IN ('harness:end', 'harness:ending')",
            (run_id,),
        )
        conn.execute("UPDATE runs SET status = NULL, ended_at = NULL WHERE run_id = ?", (run_id,))
        (last,) = conn.execute(
            "SELECT max(seq) FROM signals WHERE run_id = ?", (run_id,)
        ).fetchone()
    return int(last)


# -- stores ------------------------------------------------------------------------


def _recorded(store: SignalStoreBase, every: int) -> str:
    store.snapshot_every = every
    result = ticking(40).run_sync(record=store, max_activations=None)
    store.flush()
    return result.run_id


def _tail_is_what_follows_the_latest_snapshot(store: SignalStoreBase) -> None:
    run_id = _recorded(store, 30)
    whole = store.load(run_id)
    tail = store.load_tail(run_id)
    latest = whole.select("harness:snapshot")[-1]
    after = latest.payload["seq"]
    needed = {
        first + step * n for first, step, count in latest.payload["needs"] for n in range(count)
    }
    assert needed  # the counter had ticks queued: the snapshot names them, not copies them
    assert [s.seq for s in tail.signals] == [
        s.seq for s in whole.signals if s.seq > after or s.seq in needed
    ]
    assert latest.id in {s.id for s in tail.signals}
    assert tail.info.run_id == run_id
    assert tail.input == whole.input
    assert tail.state == whole.state


def test_load_tail_reads_from_the_latest_snapshot(signal_store: SignalStoreBase) -> None:
    _tail_is_what_follows_the_latest_snapshot(signal_store)


def test_load_tail_reads_from_the_latest_snapshot_in_memory() -> None:
    _tail_is_what_follows_the_latest_snapshot(MemorySignalStore())


def test_load_tail_of_a_run_without_snapshots_is_the_whole_run(
    signal_store: SignalStoreBase,
) -> None:
    run_id = _recorded(signal_store, 10_000)
    assert signal_store.load_tail(run_id).signals == signal_store.load(run_id).signals
