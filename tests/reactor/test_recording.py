from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from reactor import (
    AgentContext,
    MemorySignalStore,
    Reactive,
    Recording,
    RecordingError,
    RunNotFoundError,
    ScriptedProvider,
    Signal,
    SignalStore,
    SignalStoreBase,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor._recording.info import new_run_id
from stores import Store, action
from tests.reactor.databases import StorePlace


class Book(BaseModel):
    orders: list[str] = []
    total: int = 0


class BookStore(Store[Book]):
    @action
    def place(self, draft: Book, order: str) -> None:
        draft.orders.append(order)
        draft.total += 1


def book_graph(decision: str = "buy") -> Reactive:
    # Async handlers run on the loop, so two runs of this graph interleave the same way
    # (sync handlers run in threads, where a diff could see a different order first).
    async def first(ctx: AgentContext) -> None:
        ctx.store.place("a")

    async def second(ctx: AgentContext) -> None:
        ctx.store.place(decision)

    return reactive(
        {
            "first": agent(run=first),
            "second": agent(
                run=second,
                activate_on="state:total:changed",
                when="state.total == 1",
            ),
        },
        state=BookStore,
        name="book",
    )


async def test_every_store_satisfies_the_protocol(signal_store: SignalStoreBase) -> None:
    assert isinstance(signal_store, SignalStore)
    assert isinstance(MemorySignalStore(), SignalStore)


async def test_a_store_keeps_runs_with_graph_tags_and_status(store_place: StorePlace) -> None:
    with store_place.open() as store:
        first = await book_graph().run(record=store, tags=["nightly"])
        second = await book_graph().run(record=store, tags={"env": "prod"})
    with store_place.open() as store:
        runs = store.runs()
        assert [info.run_id for info in runs] == [second.run_id, first.run_id]
        info = runs[1]
        assert (info.graph, info.status, info.complete, info.signals, info.failures) == (
            "book",
            "completed",
            True,
            len(first.signals),
            0,
        )
        assert info.tags == {"nightly": ""}
        assert info.ended_at is not None
        assert info.started_at <= info.ended_at
        assert [i.run_id for i in store.runs(tag="env=prod")] == [second.run_id]
        assert [i.run_id for i in store.runs(tag="nightly")] == [first.run_id]
        assert store.runs(tag="env=dev") == []
        assert store.runs(graph="other") == []
        assert [i.run_id for i in store.runs(graph="book", limit=1)] == [second.run_id]
        loaded = store.load(first.run_id)
        assert loaded.info == info
        assert [s.name for s in loaded.signals] == [s.name for s in first.signals]
        assert [s.seq for s in loaded.signals] == [s.seq for s in first.signals]
        assert loaded.signals[-1].payload["status"] == "completed"
        assert store.delete(first.run_id)
        assert not store.delete(first.run_id)
        assert [i.run_id for i in store.runs()] == [second.run_id]
        missing = rf"^No run 'run_nope' in {re.escape(repr(store))} \(see `reactor runs`\)\.$"
        with pytest.raises(RunNotFoundError, match=missing):
            store.load("run_nope")


async def test_a_store_counts_the_failures_of_a_run(signal_store: SignalStoreBase) -> None:
    def fail(ctx: object) -> None:
        raise RuntimeError("boom")

    graph = reactive({"ok": agent(run=lambda ctx: None), "bad": agent(run=fail)}, name="f")
    result = await graph.run(record=signal_store, fail_fast=False)
    (info,) = signal_store.runs()
    assert (info.run_id, info.status, info.failures) == (result.run_id, result.status, 1)


def test_a_store_keeps_what_each_provider_call_was_asked(signal_store: SignalStoreBase) -> None:
    result = reactive({"a": agent(prompt="x")}, name="g").run_sync(
        provider=ScriptedProvider({"a": ["ok"]}), record=signal_store
    )
    (fingerprint,) = signal_store.load(result.run_id).requests.values()
    assert fingerprint["agent"] == "a"
    assert fingerprint["messages"] == [{"role": "user", "content": "x"}]


def test_a_store_gives_back_payloads_exactly(signal_store: SignalStoreBase) -> None:
    payload = {"z": 1, "a": 'nul \x00, tab \t, quote ", backslash \\', "m": [None, 2.5, True]}
    signals = [
        Signal("harness:start", {"input": None}, seq=1, run_id="run_exact"),
        Signal("note:x", payload, seq=2, run_id="run_exact", caused_by="sig_1", depth=1),
        Signal("note:y", None, seq=3, run_id="run_exact", source="user"),
    ]
    for each in signals:
        signal_store.append(each)
    loaded = signal_store.load("run_exact")
    assert loaded.signals == tuple(signals)
    assert list(loaded.signals[1].payload) == ["z", "a", "m"]  # the order it was written in


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    payloads=st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_what_a_store_keeps_loads_the_same_whatever_the_payloads(
    signal_store: SignalStoreBase, payloads: list[object]
) -> None:
    run_id = f"run_{uuid.uuid4().hex[:16]}"
    signals = [
        Signal("x", payload, seq=i + 1, run_id=run_id, timestamp=1.0 + i)
        for i, payload in enumerate(payloads)
    ]
    for each in signals:
        signal_store.append(each)
    assert signal_store.load(run_id).signals == tuple(signals)


def test_a_payload_that_cannot_be_written_fails_its_run_and_not_the_store(
    signal_store: SignalStoreBase,
) -> None:
    signal_store.append(Signal("note:a", None, seq=1, run_id="run_bad"))
    signal_store.append(Signal("note:x", "half a pair: \ud800", seq=2, run_id="run_bad"))
    signal_store.append(Signal("note:y", "after it", seq=3, run_id="run_bad"))
    signal_store.append(Signal("note:a", None, seq=1, run_id="run_good"))
    signal_store.flush()
    error = signal_store.recording_error("run_bad")
    assert isinstance(error, RecordingError)
    assert error.unwritten == 2
    assert str(error).startswith("Recording run run_bad to ")
    assert "2 of its signals were not written" in str(error)
    assert signal_store.recording_error("run_bad") is None  # told once
    assert signal_store.recording_error("run_good") is None
    # The log of the failed run stays a prefix; the store records the next run.
    assert [s.seq for s in signal_store.load("run_bad").signals] == [1]
    signal_store.append(Signal("note:a", None, seq=1, run_id="run_next"))
    assert [s.seq for s in signal_store.load("run_next").signals] == [1]


async def test_run_ids_resolve_from_prefixes_and_last(signal_store: SignalStoreBase) -> None:
    first = await book_graph().run(record=signal_store)
    second = await book_graph().run(record=signal_store)
    assert signal_store.resolve("last") == second.run_id
    assert signal_store.resolve(first.run_id[:-1]) == first.run_id
    assert signal_store.resolve(first.run_id) == first.run_id
    with pytest.raises(RunNotFoundError, match="ambiguous"):
        signal_store.resolve("run_")
    with pytest.raises(RunNotFoundError, match=r"^No run 'run%' in "):
        signal_store.resolve("run%")  # a prefix, not a LIKE pattern


async def test_a_failure_whose_message_no_log_holds_is_recorded_spelled_out(
    signal_store: SignalStoreBase,
) -> None:
    def boom(ctx: AgentContext) -> None:
        raise ValueError("bad\x00byte \ud800 here")

    result = await reactive({"boom": agent(run=boom)}).run(record=signal_store)
    assert result.status == "failed"
    assert signal_store.recording_error(result.run_id) is None  # every signal written
    log = signal_store.load(result.run_id)
    (failed,) = log.select("agent:boom:failed")
    assert failed.payload["error"]["message"] == "bad\\x00byte \\ud800 here"
    assert log.signals[-1].name == "harness:end"
    assert "bad\\x00byte \\ud800 here" in log.signals[-1].payload["reason"]


def test_run_ids_sort_by_when_they_were_made_and_never_repeat() -> None:
    """Time first (a store's index takes new runs at its end), then random digits."""
    earlier = [new_run_id() for _ in range(2_000)]
    made = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 == made:  # the next millisecond
        pass
    later = [new_run_id() for _ in range(2_000)]
    assert all(re.fullmatch(r"run_[0-9a-f]{28}", run_id) for run_id in earlier + later)
    assert len(set(earlier + later)) == 4_000
    assert max(earlier) < min(later)
    assert int(later[0][4:16], 16) >= made  # milliseconds since the epoch
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a forked child draws digits of its own, not its parent's next ones
        os.write(write, new_run_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = pipe.read()
    assert theirs[16:] != new_run_id()[16:]


def test_recording_state_at_rebuilds_the_state_from_changes() -> None:
    store = MemorySignalStore()
    result = book_graph().run_sync(record=store)
    recording = store.load(result.run_id)
    changes = recording.select("state:*:changed")
    assert recording.state_at(0) == {"orders": [], "total": 0}
    first_total = next(s for s in changes if s.payload["key"] == "total")
    assert recording.state_at(first_total.seq) == {"orders": ["a"], "total": 1}
    assert recording.state_at(recording.signals[-1].seq) == result.state == recording.state
    assert recording.input is None


def test_diff_shows_the_first_divergence_with_both_sides() -> None:
    store = MemorySignalStore()
    buy = store.load(book_graph("buy").run_sync(record=store).run_id)
    sell = store.load(book_graph("sell").run_sync(record=store).run_id)
    assert buy.diff(buy) is None
    divergence = buy.diff(sell)
    assert divergence is not None
    assert divergence.field == "payload.new.1"
    assert divergence.left is not None
    assert divergence.right is not None
    assert (divergence.left.name, divergence.right.name) == ("state:orders:changed",) * 2
    text = str(divergence)
    assert text.startswith("Runs diverge at step ")
    assert '"new": ["a", "buy"]' in text
    assert '"new": ["a", "sell"]' in text


def test_diff_reports_a_shorter_run() -> None:
    store = MemorySignalStore()
    full = store.load(book_graph().run_sync(record=store).run_id)
    cut = Recording(info=full.info, signals=full.signals[:-1])
    divergence = full.diff(cut)
    assert divergence is not None
    assert divergence.field == "length"
    assert divergence.right is None


def test_jsonl_round_trip_keeps_everything() -> None:
    store = MemorySignalStore()
    original = store.load(book_graph().run_sync(record=store, tags=["x"]).run_id)
    text = original.to_jsonl()
    assert text.count("\n") == len(original.signals) + 1
    back = Recording.from_jsonl(text)
    assert back.info.tags == {"x": ""}
    assert back.signals == original.signals
    assert back.diff(original) is None
    plain = "\n".join(line for line in text.splitlines()[1:])
    assert Recording.from_jsonl(plain).signals == original.signals
    with pytest.raises(ValueError, match=r"^Line 2 is not a recorded signal"):
        Recording.from_jsonl(text.splitlines()[0] + "\n{not json}\n")


@settings(max_examples=50, deadline=None)
@given(
    payloads=st.lists(
        st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=5), max_size=3),
        min_size=1,
        max_size=10,
    )
)
def test_recordings_survive_jsonl_whatever_the_payloads(payloads: list[dict[str, object]]) -> None:
    signals = [
        Signal("x", payload, id=f"sig_{i}", seq=i + 1, run_id="run_1", timestamp=1.0 + i)
        for i, payload in enumerate(payloads)
    ]
    recording = Recording.from_signals(signals)
    assert Recording.from_jsonl(recording.to_jsonl()).signals == recording.signals


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("hello, not sqlite" * 100)
    with pytest.raises(RecordingError, match=r"is not a reactor run database"):
        SQLiteSignalStore(path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteSignalStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(RecordingError, match=r"written by a newer reactor \(schema 99"):
        SQLiteSignalStore(path)


async def test_two_stores_on_one_database_record_concurrently(store_place: StorePlace) -> None:
    with store_place.open() as one, store_place.open() as two:
        a, b = await asyncio.gather(book_graph().run(record=one), book_graph().run(record=two))
        assert {i.run_id for i in one.runs()} == {a.run_id, b.run_id}
        assert {i.run_id for i in two.runs()} == {a.run_id, b.run_id}


KILLED_RUN = """
import asyncio, sys
from reactor import PostgresSignalStore, SQLiteSignalStore, agent, reactive

async def tick(ctx):
    await asyncio.sleep(0.01)
    return ctx.signal.name

graph = reactive(
    {"ticker": agent(run=tick, activate_on=["harness:start", "agent:ticker:completed"])},
    name="forever",
)

async def main():
    kind, where = sys.argv[1:3]
    store = SQLiteSignalStore(where) if kind == "sqlite" else PostgresSignalStore(where)
    await graph.run(record=store, max_depth=None, max_activations=None)

asyncio.run(main())
"""


def test_a_killed_run_leaves_a_loadable_incomplete_recording(
    store_place: StorePlace, tmp_path: Path
) -> None:
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED_RUN))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    with store_place.open() as store:
        process = subprocess.Popen(
            [sys.executable, "-W", "ignore", str(script), store_place.kind, store_place.where],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            count = 0
            while time.monotonic() < deadline and count < 40:
                time.sleep(0.05)
                count = sum(info.signals for info in store.runs())
            assert count >= 40, "the subprocess did not record in time"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    with store_place.open() as store:
        (info,) = store.runs()
        assert (info.graph, info.status, info.complete) == ("forever", "running", False)
        recording = store.load(info.run_id)
    assert not recording.complete
    assert recording.status is None
    assert len(recording.signals) >= 40
    assert recording.signals[0].name == "harness:start"
    seqs = [s.seq for s in recording.signals]
    assert seqs == list(range(1, len(seqs) + 1))  # a prefix: nothing lost in the middle
    assert info.signals == len(recording.signals)


def test_memory_store_lists_and_deletes() -> None:
    store = MemorySignalStore()
    result = reactive({"a": agent(prompt="x")}, name="g").run_sync(
        provider=ScriptedProvider({"a": ["ok"]}), record=store, tags={"k": "v"}
    )
    (info,) = store.runs(tag="k=v")
    assert (info.run_id, info.graph, info.status) == (result.run_id, "g", "completed")
    recording = store.load(result.run_id)
    assert recording.requests  # the rendered request is kept for replay diagnostics
    (fingerprint,) = recording.requests.values()
    assert fingerprint["messages"] == [{"role": "user", "content": "x"}]
    assert store.delete(result.run_id)
    with pytest.raises(RunNotFoundError):
        store.load(result.run_id)


def test_jsonl_keeps_unusual_line_breaks_inside_payloads() -> None:
    signal = Signal("x", {"text": "a\x85b\u2028c\rd"}, id="sig_1", seq=1, run_id="r")
    back = Recording.from_jsonl(Recording.from_signals([signal]).to_jsonl())
    assert back.signals[0].payload == {"text": "a\x85b\u2028c\rd"}
