"""The store contract: pages of a log, counters kept as it is written, the door, backpressure."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    RunInfo,
    RunNotFoundError,
    ScriptedProvider,
    Signal,
    SignalStoreBase,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor._recording.inbox import Posted
from reactor._recording.recording import Recording
from tests.reactor.databases import SQLITE_SINCE_6, StorePlace, create_database, drop_database


async def _ticker(ctx: AgentContext[Any]) -> int:
    count = int(ctx.input or 0)
    for i in range(count):
        ctx.emit("tick", {"i": i})
        if i % 100 == 99:
            await asyncio.sleep(0)
    return count


TICKER = reactive(
    {"ticker": agent(run=_ticker, emits=["tick"], updates="count")},
    state={"count": 0},
    name="ticker",
)


async def test_pages_forward_and_back_give_every_signal_once_in_order(
    any_store: SignalStoreBase,
) -> None:
    result = await TICKER.run(input=250, record=any_store)
    every = [s.seq for s in any_store.load(result.run_id).signals]
    forward: list[int] = []
    after = 0
    while page := any_store.signals(result.run_id, after=after, limit=64):
        assert len(page) <= 64
        forward += [s.seq for s in page]
        after = page[-1].seq
    assert forward == every
    backward: list[int] = []
    before = any_store.info(result.run_id).last_seq + 1
    while page := any_store.signals(result.run_id, before=before, limit=64):
        backward = [s.seq for s in page] + backward
        before = page[0].seq
    assert backward == every


async def test_a_page_between_two_seqs_and_the_tail(any_store: SignalStoreBase) -> None:
    result = await TICKER.run(input=30, record=any_store)
    last = result.signals[-1].seq
    assert [s.seq for s in any_store.signals(result.run_id, after=5, before=9)] == [6, 7, 8]
    tail = any_store.signals(result.run_id, before=last + 1, limit=3)
    assert [s.seq for s in tail] == [last - 2, last - 1, last]
    assert tail[-1].name == "harness:end"
    assert any_store.signals(result.run_id, after=last) == []


async def test_a_page_holds_only_the_names_asked_for(any_store: SignalStoreBase) -> None:
    result = await TICKER.run(input=120, record=any_store)
    ticks = any_store.signals(result.run_id, names=["tick"], limit=50)
    assert [s.payload["i"] for s in ticks] == list(range(50))
    later = any_store.signals(result.run_id, names=["tick"], after=ticks[-1].seq)
    assert [s.payload["i"] for s in later] == list(range(50, 120))
    done = any_store.signals(result.run_id, names=["agent:*:completed", "harness:**"])
    assert [s.name for s in done] == ["harness:start", "agent:ticker:completed", "harness:end"]
    pattern = re.compile(r"agent:ticker:(activated|completed)")
    assert [s.name for s in any_store.signals(result.run_id, names=[pattern])] == [
        "agent:ticker:activated",
        "agent:ticker:completed",
    ]
    last_ticks = any_store.signals(result.run_id, names=["t*"], before=10**9, limit=2)
    assert [s.payload["i"] for s in last_ticks] == [118, 119]
    assert any_store.signals(result.run_id, names=[]) == []


async def test_pages_refuse_bounds_that_are_not_seqs(any_store: SignalStoreBase) -> None:
    result = await TICKER.run(input=1, record=any_store)
    with pytest.raises(ValueError, match=r"^limit must be a whole number >= 1, got 0\.$"):
        any_store.signals(result.run_id, limit=0)
    with pytest.raises(ValueError, match=r"^after must be a seq >= 0, got -1\.$"):
        any_store.signals(result.run_id, after=-1)
    with pytest.raises(RunNotFoundError):
        any_store.signals("run_nope")
    with pytest.raises(RunNotFoundError):
        any_store.info("run_nope")


async def test_info_counts_as_the_run_is_written(any_store: SignalStoreBase) -> None:
    graph = reactive(
        {
            "a": agent(prompt="hello there", updates="a"),
            "b": agent(prompt="and {{ state.a }}", activate_on="state:a:changed", updates="b"),
        },
        state={"a": None, "b": None},
        name="talk",
    )
    provider = ScriptedProvider(default=["one answer"], pricing=(3.0, 15.0))
    result = await graph.run(provider=provider, record=any_store)
    info = any_store.info(result.run_id)
    assert (info.signals, info.last_seq) == (len(result.signals), result.signals[-1].seq)
    assert (info.input_tokens, info.output_tokens) == (
        result.metrics.input_tokens,
        result.metrics.output_tokens,
    )
    assert info.input_tokens > 0
    assert info.cost_usd == pytest.approx(result.metrics.cost_usd)
    assert (info.status, info.prompts) == ("completed", 0)
    unpriced = await graph.run(provider=ScriptedProvider(default=["x"]), record=any_store)
    assert any_store.info(unpriced.run_id).cost_usd is None


async def test_a_waiting_run_counts_its_pending_question(any_store: SignalStoreBase) -> None:
    graph = reactive({"ask": agent(ask="Ship it?", choices=["yes", "no"])}, name="asker")
    handle = graph.start(record=any_store)
    prompt = await handle.next_prompt(timeout=30)
    await handle.suspend()
    info = any_store.info(handle.run_id)
    assert (info.status, info.prompts, info.complete) == ("waiting", 1, False)
    asked = any_store.signals(handle.run_id, names=["session:prompt"])
    assert [s.payload["prompt_id"] for s in asked] == [prompt.prompt_id]


async def test_the_state_is_the_latest_without_reading_the_log(any_store: SignalStoreBase) -> None:
    result = await TICKER.run(input=40, record=any_store)
    assert any_store.state(result.run_id) == result.state == {"count": 40}
    with pytest.raises(RunNotFoundError):
        any_store.state("run_nope")


async def test_tags_are_set_and_dropped_on_a_recorded_run(any_store: SignalStoreBase) -> None:
    first = await TICKER.run(input=3, record=any_store, tags={"env": "prod"})
    second = await TICKER.run(input=4, record=any_store)
    info = any_store.tag(first.run_id, {"dataset": "golden", "env": "staging"})
    assert info.tags == {"env": "staging", "dataset": "golden"}
    any_store.tag(second.run_id, {"dataset": "golden"})
    golden = any_store.runs(tag="dataset=golden")
    assert [run.run_id for run in golden] == [second.run_id, first.run_id]
    assert any_store.tag(first.run_id, remove=["dataset", "absent"]).tags == {"env": "staging"}
    assert [run.run_id for run in any_store.runs(tag="dataset")] == [second.run_id]
    assert any_store.info(first.run_id).tags == {"env": "staging"}
    with pytest.raises(RunNotFoundError):
        any_store.tag("run_nope", {"dataset": "golden"})
    with pytest.raises(ValueError, match="non-empty text key"):
        any_store.tag(first.run_id, {"": "x"})
    with pytest.raises(ValueError, match="NUL"):
        any_store.tag(first.run_id, {"dataset": "gol\x00den"})
    assert any_store.info(first.run_id).tags == {"env": "staging"}  # nothing was written


def test_a_run_recorded_before_states_were_kept_has_its_state_from_its_log(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    with SQLiteSignalStore(path) as store:
        result = TICKER.run_sync(input=7, record=store)
    with sqlite3.connect(path) as conn:  # the file as schema 6 left it
        for statement in SQLITE_SINCE_6:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 6")
    with SQLiteSignalStore(path) as store:
        info = store.info(result.run_id)
        assert (info.last_seq, info.signals) == (result.signals[-1].seq, len(result.signals))
        assert store.state(result.run_id) == {"count": 7}


class _Minimal:
    """A store written against section 9 alone: append, load, runs, delete."""

    def append(self, signal: Signal) -> None: ...

    def load(self, run_id: str) -> Recording:
        raise RunNotFoundError(run_id)

    def runs(self, **filters: Any) -> list[RunInfo]:
        return []

    def delete(self, run_id: str) -> bool:
        return False


def test_a_store_lacking_part_of_the_contract_is_refused_at_record() -> None:
    with pytest.raises(TypeError, match=r"^record= takes a signal store, and .* lacks ") as error:
        TICKER.run_sync(input=1, record=_Minimal())  # type: ignore[arg-type]  # the point
    assert "room, scheduled, signals, snapshot_every, start_run, state" in str(error.value)
    assert str(error.value).endswith(
        "subclass reactor.SignalStoreBase, which gives every optional member a default."
    )


class _Listing(SignalStoreBase):
    """A third party's store: the four methods, and every default of the base."""

    def __init__(self) -> None:
        self.kept: dict[str, list[Signal]] = {}

    def append(self, signal: Signal) -> None:
        self.kept.setdefault(signal.run_id or "", []).append(signal)

    def load(self, run_id: str) -> Recording:
        if run_id not in self.kept:
            raise RunNotFoundError(run_id)
        return Recording.from_signals(self.kept[run_id], info=RunInfo(run_id=run_id))

    def runs(self, **filters: Any) -> list[RunInfo]:
        return [RunInfo(run_id=run_id) for run_id in self.kept]

    def delete(self, run_id: str) -> bool:
        return self.kept.pop(run_id, None) is not None


def test_a_store_on_the_base_works_with_its_defaults() -> None:
    store = _Listing()
    result = TICKER.run_sync(input=12, record=store)
    assert result.status == "completed"
    assert [s.seq for s in store.signals(result.run_id, after=3, limit=2)] == [4, 5]
    assert store.state(result.run_id) == {"count": 12}
    assert store.info(result.run_id).run_id == result.run_id


def test_a_reporter_without_hooks_is_taken_and_one_with_hooks_is_called() -> None:
    class Plain:
        patterns = ("harness:*",)

        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_signal(self, signal: Signal) -> None:
            self.seen.append(signal.name)

    class Hooked(Plain):
        def __init__(self) -> None:
            super().__init__()
            self.started: list[str] = []

        def start(self, info: RunInfo) -> None:
            self.started.append(info.run_id)

        def on_request(self, run_id: str, request: Any) -> None:
            self.seen.append("request")

    plain, hooked = Plain(), Hooked()
    graph = reactive({"a": agent(prompt="x")}, name="g")
    result = graph.run_sync(provider=ScriptedProvider(default=["y"]), reporters=[plain, hooked])
    assert plain.seen == ["harness:start", "harness:end"]
    assert hooked.seen == ["harness:start", "request", "harness:end"]
    assert hooked.started == [result.run_id]


def test_a_reporter_is_checked_against_the_members_its_protocol_declares() -> None:
    class Started:
        patterns = ("harness:end",)

        def __init__(self) -> None:
            self.started: list[str] = []

        def on_signal(self, signal: Signal) -> None:
            pass

        def start(self, info: RunInfo) -> None:  # one hook of two: on_request does nothing
            self.started.append(info.run_id)

    class Deaf:
        patterns = ("**",)

    started = Started()
    graph = reactive({"a": agent(prompt="x")}, name="g")
    result = graph.run_sync(provider=ScriptedProvider(default=["y"]), reporters=[started])
    assert started.started == [result.run_id]
    with pytest.raises(TypeError, match=r"is not a reporter: it has no on_signal\(signal\)\."):
        graph.run_sync(provider=ScriptedProvider(default=["y"]), reporters=[Deaf()])  # type: ignore[list-item]


def _lock(path: Path) -> sqlite3.Connection:
    """Hold the database's write lock from another connection (as another process would)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    return conn


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_run_waits_for_its_store_while_the_loop_goes_on(tmp_path: Path, kind: str) -> None:
    def sync_ticker(ctx: AgentContext[Any]) -> int:
        for i in range(3_000):
            ctx.emit("tick", {"i": i})
        return 3_000

    run = _ticker if kind == "async" else sync_ticker
    graph = reactive({"ticker": agent(run=run, emits=["tick"])}, name="t")
    path = tmp_path / "runs.db"
    with SQLiteSignalStore(path, max_backlog=200, timeout=0.05) as store:
        store.flush()  # the schema is there before the lock is taken
        lock = _lock(path)
        running = asyncio.create_task(graph.run(input=3_000, record=store))
        beats, started = 0, time.monotonic()
        while time.monotonic() - started < 1.0:  # the loop answers while the run waits
            await asyncio.sleep(0.01)
            beats += 1
        assert beats > 20
        assert not running.done()
        queued = len(store._backlog)
        assert queued < 3_000  # the run waits for room: the backlog stays bounded
        lock.execute("ROLLBACK")
        result = await asyncio.wait_for(running, 60)
        assert result.status == "completed"
        assert store.info(result.run_id).signals == len(result.signals)
        lock.close()


class _Watched(MemorySignalStore):
    """A store that notes the thread of each read a run makes before it begins."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: dict[str, set[int]] = {}

    def _note(self, what: str) -> None:
        self.threads.setdefault(what, set()).add(threading.get_ident())

    def load_tail(self, run_id: str) -> Recording:
        self._note("load_tail")
        return super().load_tail(run_id)

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        self._note("waiting_messages")
        return super().waiting_messages(run_ids)


async def test_a_resumed_run_reads_its_store_off_the_event_loop() -> None:
    store = _Watched()
    graph = reactive({"ask": agent(ask="Ship it?", choices=["yes", "no"])}, name="asker")
    handle = graph.start(record=store)
    prompt = await handle.next_prompt(timeout=30)
    await handle.suspend()
    store.post(handle.run_id, "session:reply", {"prompt_id": prompt.prompt_id, "answer": "yes"})
    store.threads.clear()
    result = await graph.resume(handle.run_id, record=store)
    assert result.status == "completed"
    assert set(store.threads) == {"load_tail", "waiting_messages"}
    loop_thread = threading.get_ident()
    assert all(loop_thread not in threads for threads in store.threads.values()), store.threads


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_the_stores_reactor_ships_keep_the_contract(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from reactor.testing import check_store_contract

    made = iter(range(1000))

    def make_store() -> SignalStoreBase:
        if kind == "memory":
            return MemorySignalStore()
        if kind == "sqlite":
            return SQLiteSignalStore(tmp_path / f"contract{next(made)}.db")
        url = create_database()
        request.addfinalizer(lambda: drop_database(url))
        return StorePlace("postgres", url).open()

    report = check_store_contract(make_store)
    assert report.skipped == {}
    assert len(report.ran) == 12
