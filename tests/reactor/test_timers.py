"""Durable timers (``ctx.sleep``, ``ctx.sleep_until``) and messages posted for later.

Recorded, replayed without waiting, resumed with only what remains to wait (also from a
snapshot, also in a new process after ``kill -9``), and posted messages delivered once
at or after their time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    PostgresSignalStore,
    Recording,
    SignalStoreBase,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor._backends.dialect import SCHEMA_VERSION
from reactor._recording.info import pending_timers
from tests.reactor.databases import POSTGRES_SINCE_5, SQLITE_SINCE_6, StorePlace, execute


async def _nap(ctx: AgentContext[Any]) -> float:
    await ctx.sleep(float(ctx.input or 0.2))
    return time.time()


NAPPER = reactive({"nap": agent(run=_nap, updates="woke")}, state={"woke": None}, name="napper")


def _timers(recording: Recording) -> list[tuple[str, Any]]:
    return [(s.name, dict(s.payload)) for s in recording.signals if s.name.startswith("timer:")]


def test_a_sleep_records_its_timer_and_fires_when_its_time_comes() -> None:
    store = MemorySignalStore()
    before = datetime.now(UTC)
    result = NAPPER.run_sync(input=0.3, record=store)
    assert result.status == "completed"
    (set_name, set_), (fired_name, fired) = _timers(store.load(result.run_id))
    assert (set_name, fired_name) == ("timer:set", "timer:fired")
    assert set(set_) == {"timer_id", "agent", "until"}
    assert fired == {"timer_id": set_["timer_id"], "agent": "nap"}
    until = datetime.fromisoformat(set_["until"])
    assert until.utcoffset() == timedelta(0)
    assert before + timedelta(seconds=0.3) <= until <= datetime.now(UTC)
    assert datetime.fromtimestamp(result.state["woke"], UTC) >= until


async def _until(ctx: AgentContext[Any]) -> str:
    await ctx.sleep_until(datetime.fromisoformat(ctx.input))
    return "on time"


def test_sleep_until_takes_an_aware_datetime_and_refuses_a_naive_one() -> None:
    graph = reactive({"wait": agent(run=_until, updates="out")}, state={"out": None})
    soon = (datetime.now(UTC) + timedelta(seconds=0.2)).isoformat()
    assert graph.run_sync(input=soon).state == {"out": "on time"}
    naive = datetime.now().isoformat()
    (failure,) = graph.run_sync(input=naive).failures
    assert isinstance(failure.error, ValueError)
    assert str(failure.error).startswith("ctx.sleep_until takes an aware datetime")


def test_a_negative_sleep_is_refused() -> None:
    (failure,) = NAPPER.run_sync(input=-1).failures
    assert str(failure.error) == "ctx.sleep takes a number of seconds >= 0, got -1.0."


async def _two_naps(ctx: AgentContext[Any]) -> str:
    await ctx.sleep(1.5)
    ctx.emit("halfway")
    await ctx.sleep(1.5)
    return ctx.agent


def test_a_replay_fires_each_timer_in_its_recorded_turn_without_waiting() -> None:
    graph = reactive(
        {
            "a": agent(run=_two_naps, emits=["halfway"], updates="a"),
            "b": agent(run=_two_naps, emits=["halfway"], updates="b"),
            "tally": agent(run=lambda ctx: ctx.agent, activate_on="halfway"),
        },
        state={"a": None, "b": None},
    )
    store = MemorySignalStore()
    recorded = graph.run_sync(record=store)
    started = time.monotonic()
    replayed = graph.run_sync(replay=store.load(recorded.run_id))
    assert time.monotonic() - started < 3.0  # the recording slept 3 s
    assert replayed.state == recorded.state
    assert store.load(recorded.run_id).diff(replayed) is None


def test_a_resumed_run_waits_only_for_what_remains(signal_store: SignalStoreBase) -> None:
    async def scenario() -> tuple[float, Recording]:
        handle = NAPPER.start(input=4.0, record=signal_store, keep_open=False)
        await asyncio.sleep(2.0)
        await handle.suspend()
        assert [info.status for info in signal_store.runs()] == ["waiting"]
        (wakeup,) = signal_store.wakeups()
        started = time.monotonic()
        await NAPPER.resume(handle.run_id, record=signal_store)
        assert signal_store.wakeups() == []
        assert wakeup.run_id == handle.run_id
        return time.monotonic() - started, signal_store.load(handle.run_id)

    took, recording = asyncio.run(scenario())
    assert took < 3.8  # two seconds or so, not 4 s again
    (_, set_), (_, fired) = _timers(recording)
    assert set_["timer_id"] == fired["timer_id"]
    woke = datetime.fromtimestamp(recording.state["woke"], UTC)
    assert woke >= datetime.fromisoformat(set_["until"])
    assert [s.name for s in recording.signals].count("harness:resumed") == 1


def test_a_deadline_that_passed_meanwhile_fires_at_once_on_resume() -> None:
    store = MemorySignalStore()

    async def scenario() -> Recording:
        handle = NAPPER.start(input=2.0, record=store, keep_open=False)
        await asyncio.sleep(0.2)
        await handle.suspend()
        await asyncio.sleep(2.0)  # its time passes while nobody runs it
        assert [(w.run_id, w.due_at < datetime.now(UTC)) for w in store.wakeups()] == [
            (handle.run_id, True)
        ]
        await NAPPER.resume(handle.run_id, record=store)
        return store.load(handle.run_id)

    recording = asyncio.run(scenario())
    assert [name for name, _ in _timers(recording)] == ["timer:set", "timer:fired"]
    resumed = next(s for s in recording.signals if s.name == "harness:resumed")
    fired = next(s for s in recording.signals if s.name == "timer:fired")
    assert fired.timestamp - resumed.timestamp < 1.5  # at once, never again the 2 s from zero


def test_a_resume_from_a_snapshot_knows_the_pending_timers() -> None:
    store = MemorySignalStore(snapshot_every=3)

    async def scenario() -> tuple[Recording, Recording]:
        handle = NAPPER.start(input=0.8, record=store, keep_open=False)
        await asyncio.sleep(0.3)
        await handle.suspend()
        tail = store.load_tail(handle.run_id)
        await NAPPER.resume(handle.run_id, record=store)
        return tail, store.load(handle.run_id)

    tail, recording = asyncio.run(scenario())
    snapshot = tail.signals[0]
    assert snapshot.name == "harness:snapshot"
    assert "timer:set" not in [s.name for s in tail.signals]  # it is in the snapshot
    (timer,) = snapshot.payload["progress"]["sections"]["timers"]
    set_ = next(s for s in recording.signals if s.name == "timer:set")
    assert timer[:4] == [set_.payload["timer_id"], "nap", set_.payload["until"], False]
    assert [name for name, _ in _timers(recording)] == ["timer:set", "timer:fired"]


async def _nap_then_ask(ctx: AgentContext[Any]) -> Any:
    await ctx.sleep(3.0)
    return await ctx.ask("Go on?", choices=["yes", "no"])


def test_a_timer_that_fired_before_the_stop_is_not_waited_for_again() -> None:
    graph = reactive({"desk": agent(run=_nap_then_ask, updates="answer")}, state={"answer": None})
    store = MemorySignalStore()

    async def scenario() -> tuple[float, Recording]:
        handle = graph.start(record=store, keep_open=False)
        await handle.next_prompt()
        await handle.suspend()
        started = time.monotonic()
        again = graph.start(resume=handle.run_id, record=store, keep_open=False)
        prompt = await again.next_prompt()
        took = time.monotonic() - started
        again.reply(prompt.prompt_id, "yes")
        await again.result()
        return took, store.load(handle.run_id)

    took, recording = asyncio.run(scenario())
    assert took < 2.5  # the 3 s timer fired before the stop: it is not slept again
    assert recording.state == {"answer": "yes"}
    assert [name for name, _ in _timers(recording)] == ["timer:set", "timer:fired"]


async def _noted(ctx: AgentContext[Any]) -> Any:
    return [ctx.signal.payload, ctx.signal.timestamp]


async def _warm_up(ctx: AgentContext[Any]) -> None:
    await asyncio.sleep(0.3)  # the run is live a moment: it learns of what is posted to it


PINGED = reactive(
    {"note": agent(run=_noted, activate_on="ping", updates="got"), "warm": agent(run=_warm_up)},
    state={"got": None},
    external=["ping"],
    name="pinged",
)


def test_a_message_posted_for_later_is_delivered_once_at_its_time(
    signal_store: SignalStoreBase,
) -> None:
    async def scenario() -> tuple[datetime, Any, Recording]:
        handle = PINGED.start(record=signal_store, keep_open=False)
        at = datetime.now(UTC) + timedelta(seconds=0.6)
        message_id = signal_store.post(handle.run_id, "ping", {"n": 1}, at=at)
        assert message_id.startswith("msg_")
        await asyncio.sleep(0.2)
        assert signal_store.undelivered([handle.run_id]) == []  # not due yet
        (scheduled,) = signal_store.scheduled([handle.run_id])
        assert scheduled.due_at == pytest.approx(at.timestamp(), abs=1e-3)
        assert [info.status for info in signal_store.runs()] == ["waiting"]
        assert [w.run_id for w in signal_store.wakeups()] == [handle.run_id]
        result = await handle.result()
        return at, result, signal_store.load(handle.run_id)

    at, result, recording = asyncio.run(scenario())
    assert result.status == "completed"
    payload, delivered = result.state["got"]
    assert payload == {"n": 1}
    assert delivered >= at.timestamp()
    assert [s.name for s in recording.signals].count("ping") == 1
    assert signal_store.scheduled([result.run_id]) == []
    assert signal_store.undelivered([result.run_id]) == []
    assert signal_store.wakeups() == []


def test_a_message_posted_for_later_to_a_suspended_run_comes_when_it_resumes(
    signal_store: SignalStoreBase,
) -> None:
    graph = reactive(
        {
            "nap": agent(run=_nap, updates="woke"),
            "note": agent(run=_noted, activate_on="ping", updates="got"),
        },
        state={"woke": None, "got": None},
        external=["ping"],
    )

    async def scenario() -> Any:
        handle = graph.start(input=0.3, record=signal_store, keep_open=False)
        await asyncio.sleep(0.1)
        await handle.suspend()
        at = datetime.now(UTC) + timedelta(seconds=0.8)
        signal_store.post(handle.run_id, "ping", "later", at=at)
        (wakeup,) = signal_store.wakeups()
        assert wakeup.due_at < at  # the timer comes first
        result = await graph.resume(handle.run_id, record=signal_store)
        return at, result

    at, result = asyncio.run(scenario())
    assert result.state["got"][0] == "later"
    assert result.state["got"][1] >= at.timestamp()
    assert result.state["woke"] is not None


def test_handle_send_at_schedules_through_the_store_and_the_run_waits() -> None:
    store = MemorySignalStore()

    async def scenario() -> tuple[datetime, Any]:
        handle = PINGED.start(record=store, keep_open=False)
        at = datetime.now(UTC) + timedelta(seconds=0.4)
        message_id = handle.send("ping", "later", at=at)
        assert [m.message_id for m in store.scheduled([handle.run_id])] == [message_id]
        return at, await handle.result()

    at, result = asyncio.run(scenario())
    assert result.state["got"][0] == "later"
    assert result.state["got"][1] >= at.timestamp()


def test_handle_send_at_needs_a_store_and_an_aware_time() -> None:
    async def scenario() -> None:
        handle = PINGED.start(keep_open=False)
        with pytest.raises(ValueError, match=r"^handle\.send\('ping', at=\.\.\.\) keeps"):
            handle.send("ping", at=datetime.now(UTC))
        await handle.result()
        recorded = PINGED.start(record=MemorySignalStore())
        with pytest.raises(ValueError, match=r"^at= takes an aware datetime"):
            recorded.send("ping", at=datetime.now())
        recorded.close()
        await recorded.result()

    asyncio.run(scenario())


def test_pending_timers_of_a_log_leave_with_their_activation() -> None:
    store = MemorySignalStore()

    async def scenario() -> tuple[list[Any], list[Any]]:
        handle = NAPPER.start(input=5, record=store)
        await asyncio.sleep(0.2)
        pending = pending_timers(store.load(handle.run_id).signals)
        handle.abort("enough")
        await handle.result()
        return pending, pending_timers(store.load(handle.run_id).signals)

    pending, after = asyncio.run(scenario())
    assert [(timer.agent, timer.until > datetime.now(UTC)) for timer in pending] == [("nap", True)]
    assert after == []
    assert store.wakeups() == []


SLEEPER = textwrap.dedent(
    """
    import asyncio, os, sys, time

    from reactor import PostgresSignalStore, SQLiteSignalStore, agent, reactive

    MARKS = os.environ["SLEEPER_MARKS"]


    async def sleeper(ctx):
        await ctx.sleep(float(os.environ["SLEEPER_SECONDS"]))
        with open(MARKS, "a") as marks:
            marks.write(f"woke {time.time()}\\n")
        if os.environ.get("SLEEPER_HANG") and not os.path.exists(MARKS + ".hung"):
            open(MARKS + ".hung", "w").close()
            await asyncio.sleep(120)  # busy after its timer fired: killed here
        return "done"


    graph = reactive({"sleeper": agent(run=sleeper, updates="out")}, state={"out": None})

    if __name__ == "__main__":
        kind, where = sys.argv[1], sys.argv[2]
        store = SQLiteSignalStore(where) if kind == "sqlite" else PostgresSignalStore(where)
        with store:
            graph.run_sync(record=store)
    """
)


def _killed(place: StorePlace, tmp_path: Path, seconds: float, hang: bool) -> Any:
    """The sleeper in a subprocess, ``kill -9``-ed mid-sleep (or mid-handler, after it)."""
    (tmp_path / "sleeper_app.py").write_text(SLEEPER)
    marks = tmp_path / "marks.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "SLEEPER_MARKS": str(marks),
        "SLEEPER_SECONDS": str(seconds),
        "SLEEPER_HANG": "1" if hang else "",
    }
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(tmp_path / "sleeper_app.py"), place.kind, place.where],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    hung = Path(str(marks) + ".hung")
    try:
        deadline = time.monotonic() + 120  # a new Python takes its time on a loaded machine
        with place.open() as store:
            while time.monotonic() < deadline:
                if hung.exists() if hang else store.runs(status="waiting"):
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"the sleeper never got there: {errors.read_text()}")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    os.environ.update({k: v for k, v in env.items() if k.startswith("SLEEPER_")})
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop("sleeper_app", None)
        import sleeper_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    return sleeper_app.graph, marks


def test_killed_mid_sleep_a_new_process_fires_the_timer_once_on_time(
    store_place: StorePlace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "environ", dict(os.environ))
    graph, marks = _killed(store_place, tmp_path, 2.0, hang=False)
    with store_place.open() as store:
        run_id = store.runs()[0].run_id
        until = datetime.fromisoformat(
            next(s for s in store.load(run_id).signals if s.name == "timer:set").payload["until"]
        )
        assert not marks.exists()  # killed before its time
        resumed = datetime.now(UTC)
        result = graph.resume_sync(run_id, record=store)
        recording = store.load(run_id)
    assert result.state == {"out": "done"}
    (line,) = marks.read_text().splitlines()
    woke = datetime.fromtimestamp(float(line.split()[1]), UTC)
    # On time: at its deadline, or at once if a loaded machine resumed it later; never
    # the 2 s again from the resume.
    assert until <= woke < max(until, resumed) + timedelta(seconds=2)
    names = [s.name for s in recording.signals]
    assert (names.count("timer:set"), names.count("timer:fired")) == (1, 1)
    assert (names.count("harness:start"), names.count("harness:end")) == (1, 1)


def test_killed_mid_handler_after_its_timer_fired_the_rerun_does_not_sleep_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "environ", dict(os.environ))
    place = StorePlace("sqlite", str(tmp_path / "runs.db"))
    graph, marks = _killed(place, tmp_path, 4.0, hang=True)
    with place.open() as store:
        run_id = store.runs()[0].run_id
        started = time.monotonic()
        result = graph.resume_sync(run_id, record=store)
        took = time.monotonic() - started
        recording = store.load(run_id)
    assert result.state == {"out": "done"}
    assert took < 4.0  # its 4 s timer is in the log as fired
    names = [s.name for s in recording.signals]
    assert (names.count("timer:set"), names.count("timer:fired")) == (1, 1)
    assert len(marks.read_text().splitlines()) == 2  # the handler ran again, without the wait


def test_a_version_5_sqlite_store_is_upgraded_and_keeps_its_runs_and_inbox(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    with SQLiteSignalStore(path) as store:
        done = NAPPER.run_sync(input=0, record=store)
        waiting = store.post("run_later", "ping", {"n": 1})
    with sqlite3.connect(path) as conn:  # back to what reactor wrote before timers
        for statement in SQLITE_SINCE_6:
            conn.execute(statement)
        conn.execute("DROP TABLE timers")
        conn.execute("DROP INDEX inbox_due")
        conn.execute("ALTER TABLE inbox DROP COLUMN due_at")
        conn.execute("PRAGMA user_version = 5")
    with SQLiteSignalStore(path) as store:
        assert [info.run_id for info in store.runs()] == [done.run_id]
        assert store.load(done.run_id).state == done.state
        assert [m.message_id for m in store.undelivered(["run_later"])] == [waiting]
        at = datetime.now(UTC) + timedelta(hours=1)
        later = store.post(done.run_id, "ping", at=at)
        assert [m.message_id for m in store.scheduled([done.run_id])] == [later]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_a_version_4_postgres_store_is_upgraded_and_keeps_its_runs_and_inbox(
    postgres_dsn: str,
) -> None:
    with PostgresSignalStore(postgres_dsn) as store:
        done = NAPPER.run_sync(input=0, record=store)
        waiting = store.post("run_later", "ping", {"n": 1})
    for statement in (  # back to what reactor wrote before timers
        *POSTGRES_SINCE_5,
        "DROP TABLE reactor_timers",
        "DROP INDEX reactor_inbox_due",
        "ALTER TABLE reactor_inbox DROP COLUMN due_at",
        "UPDATE reactor_schema SET version = 4",
    ):
        execute(postgres_dsn, statement)
    with PostgresSignalStore(postgres_dsn) as store:
        assert [info.run_id for info in store.runs()] == [done.run_id]
        assert store.load(done.run_id).state == done.state
        assert [m.message_id for m in store.undelivered(["run_later"])] == [waiting]
        at = datetime.now(UTC) + timedelta(hours=1)
        later = store.post(done.run_id, "ping", at=at)
        assert [m.message_id for m in store.scheduled([done.run_id])] == [later]
    assert execute(postgres_dsn, "SELECT version FROM reactor_schema") == [(SCHEMA_VERSION,)]


async def _gives_up(ctx: AgentContext[Any]) -> Any:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ctx.sleep(60), 0.2)
    return await ctx.ask("Go on?", choices=["yes"])


def test_a_sleep_the_code_stops_waiting_for_ends_its_timer(signal_store: SignalStoreBase) -> None:
    graph = reactive({"desk": agent(run=_gives_up, updates="answer")}, state={"answer": None})

    async def scenario() -> Recording:
        handle = graph.start(record=signal_store, keep_open=False)
        prompt = await handle.next_prompt()
        assert signal_store.wakeups() == []  # nothing to wake it for: it waits for a person
        handle.reply(prompt.prompt_id, "yes")
        await handle.result()
        return signal_store.load(handle.run_id)

    recording = asyncio.run(scenario())
    (_, set_), (_, fired) = _timers(recording)
    assert fired == {"timer_id": set_["timer_id"], "agent": "desk", "cancelled": True}
